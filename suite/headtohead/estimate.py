"""The plan of a comparison, before any model is called: how many runs and evaluations it holds,
how much GPU time, how many tokens and what they cost, and how long it takes.

Every number comes from the protocol's budget and from times measured on the hardware (the
protocol's `plan` section says where each was measured); what cannot be known in advance is said
so rather than guessed. The arms hold the model to the goal while budget remains, so a run that does
not meet its goal spends its budget: the budget is the expected use, not a loose bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tabulate import tabulate

from ..agents.decisions import CLASSIFY_INSTRUCTIONS, CLASSIFY_MAX_CHARS


@dataclass
class PlanInputs:
    name: str
    arms: dict[str, str]  # label -> agent
    seeds: list[int]
    task: str
    limits: dict  # Limits fields
    eval_seconds: list[dict] = field(default_factory=list)  # [{seconds, what, measured}]
    final_bench_seconds: dict | None = None  # {seconds, what, measured}
    final_bench: bool = True
    gpu: str | None = None  # what an evaluation occupies; None: a CPU task
    context_tokens: int | None = None  # the model's window (None: not known)
    max_output_tokens: int | None = None
    price: tuple[float, float] | None = None  # USD per million input and output tokens
    model: str | None = None
    rebench: int = 3  # the final bench benches each best kernel this many times
    aa_repeats: int = 5  # the A/A control: the starting kernel evaluated this many times
    classifying: list[str] = field(default_factory=list)  # arms that classify claimed limits with the model


@dataclass
class Plan:
    rows: list[tuple[str, str, str]]  # (what, how much, from what)
    notes: list[str]

    def table(self) -> str:
        return tabulate(self.rows, ["", "planned", "from"], tablefmt="github", disable_numparse=True)

    def text(self, title: str) -> str:
        return "\n".join([f"# Plan: {title}", "", self.table(), "", *[f"- {n}" for n in self.notes], ""])


def _h(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def equal_budget_notes(p: PlanInputs, cmd_arms: list[str]) -> list[str]:
    """How the budget is held equal for the arms of this plan, in words."""
    out = [
        "Equal budgets: every arm gets the same max_steps, max_evals, max_wall, max_tokens and max_cost. A step is "
        "one call of the agent loop to the model, whatever tools it asks for; an evaluation is one call of the "
        "task's evaluator, the only thing max_evals counts."
    ]
    rich = [label for label, agent in p.arms.items() if agent == "toolrich"]
    if rich:
        out.append(
            f"{', '.join(rich)}: profile and disassemble are tool calls, not evaluations: they do not count against "
            "max_evals; each is paid for in its step (a model call) and in wall time (a profile also in GPU time, "
            "not in the GPU-hours above). The arms without them spend the same steps and wall time otherwise."
        )
    if p.classifying:
        out.append(
            f"{', '.join(p.classifying)}: a claimed-limit classification call (at most one per step) is not a step; "
            "its tokens and cost count against max_tokens and max_cost and are in the token bound above."
        )
    if cmd_arms:
        out.append(
            f"{', '.join(cmd_arms)}: an agent command's step is a whole session (its own model calls within it are "
            "not steps), so max_steps counts sessions, each bounded by invocation_timeout_s and max_wall. Its tokens "
            "and cost are read from the command's own usage report after each session and count against "
            "max_tokens and max_cost from then on (a session is not cut by them); they are not in the bound above. "
            "Against the other arms it is held equal by evaluations and wall time."
        )
    return out


def make_plan(p: PlanInputs) -> Plan:
    rows: list[tuple[str, str, str]] = []
    notes: list[str] = []
    lim = p.limits
    runs = len(p.arms) * len(p.seeds)
    cmd_arms = [label for label, agent in p.arms.items() if agent == "agent-cmd"]
    rows.append(("runs", f"{runs}", f"{len(p.arms)} arms ({', '.join(p.arms)}) x {len(p.seeds)} seeds"))
    steps, evals = lim.get("max_steps"), lim.get("max_evals")
    rows.append(
        (
            "steps per run",
            f"{steps}" if steps else "no limit",
            "budget: max_steps (model calls; sessions for an agent command)",
        )
    )
    if evals:
        rows.append(("evaluations", f"{runs * evals} ({evals} per run)", "budget: max_evals"))
    else:
        rows.append(("evaluations", "no limit", "set max_evals: a step may evaluate any number of times"))
    # GPU time
    secs = [e["seconds"] for e in p.eval_seconds]
    lo, hi = (min(secs), max(secs)) if secs else (None, None)
    for e in p.eval_seconds:
        notes.append(f"measured: one evaluation, {e['seconds']:g} s: {e['what']} ({e['measured']})")
    if p.final_bench and p.final_bench_seconds:
        fb = p.final_bench_seconds
        notes.append(f"measured: one full-grid bench, {fb['seconds']:g} s: {fb['what']} ({fb['measured']})")
    device = p.gpu or "CPU"
    eval_time = None
    if evals and secs:
        eval_time = (runs * evals * lo, runs * evals * hi)
        span = _h(eval_time[1]) if lo == hi else f"{_h(eval_time[0])} to {_h(eval_time[1])}"
        rows.append((f"evaluation time ({device})", span, f"{runs * evals} evaluations x {lo:g}-{hi:g} s (measured)"))
    elif not secs:
        rows.append((f"evaluation time ({device})", "not measured", "no measured evaluation time in the protocol"))
    final_time = 0.0
    if p.final_bench:
        fb = p.final_bench_seconds
        if fb:
            final_time = runs * p.rebench * fb["seconds"]
            rows.append(
                (
                    f"final full-grid bench ({device})",
                    _h(final_time),
                    f"{runs} runs' best kernels x {p.rebench} benches x {fb['seconds']:g} s (measured)",
                )
            )
        else:
            rows.append((f"final full-grid bench ({device})", "not measured", "no measured bench time in the protocol"))
        if hi is not None:
            aa_time = p.aa_repeats * hi
            final_time += aa_time
            rows.append(
                (
                    f"A/A control ({device})",
                    _h(aa_time),
                    f"the starting kernel evaluated {p.aa_repeats} times as in a run x {hi:g} s (measured)",
                )
            )
    if eval_time and p.gpu:
        rows.append(
            (
                "GPU-hours",
                f"{(eval_time[0] + final_time) / 3600:.1f} to {(eval_time[1] + final_time) / 3600:.1f}"
                if eval_time[0] != eval_time[1]
                else f"{(eval_time[1] + final_time) / 3600:.1f}",
                "evaluations and the final bench on one GPU; model calls and the agent's own commands add to it",
            )
        )
    # tokens and cost
    llm_labels = [label for label in p.arms if label not in cmd_arms]
    llm_runs = len(llm_labels) * len(p.seeds)
    out_tok = p.max_output_tokens
    # a classification call (at most one per step): its prompt is the instructions and at most
    # CLASSIFY_MAX_CHARS characters of text, so at most that many tokens (a token holds a character or more)
    classify_in = len(CLASSIFY_INSTRUCTIONS) + CLASSIFY_MAX_CHARS + 16
    per_run: dict[str, tuple[int, int | None]] = {}  # label -> (prompt tokens, output tokens or None)
    how = ""
    if lim.get("max_tokens"):
        how = "budget: max_tokens (every model call of a run, classification calls included)"
    elif steps and p.context_tokens:
        for label in llm_labels:
            calls = steps * (2 if label in p.classifying else 1)
            prompt = steps * p.context_tokens + (steps * classify_in if label in p.classifying else 0)
            per_run[label] = (prompt, None if out_tok is None else calls * out_tok)
        how = (
            f"{steps} steps x a context window of {p.context_tokens:,} tokens"
            + (f" + {out_tok:,} output tokens" if out_tok else "")
            + (
                f"; {', '.join(p.classifying)}: a classification call per step at most, {classify_in:,} prompt tokens"
                + (f" + {out_tok:,} output" if out_tok else "")
                if p.classifying
                else ""
            )
            + "; compaction keeps a full conversation between 60 and 85 % of the window"
        )
    else:
        how = "give --context-tokens (the model's window) or a max_tokens budget for a bound"
    bounded = bool(lim.get("max_tokens")) or (per_run and all(o is not None for _, o in per_run.values()))
    seeds = len(p.seeds)
    if not llm_runs:
        rows.append(("tokens", "-", "no arm calls a model here"))
    elif lim.get("max_tokens"):
        rows.append(("tokens", f"at most {llm_runs * lim['max_tokens']:,} ({lim['max_tokens']:,} per run)", how))
    elif per_run and bounded:
        total = seeds * sum(i + (o or 0) for i, o in per_run.values())
        each = sorted({i + (o or 0) for i, o in per_run.values()})
        rows.append(("tokens", f"at most {total:,} ({' or '.join(f'{n:,}' for n in each)} per run)", how))
    elif per_run:
        prompts = seeds * sum(i for i, _ in per_run.values())
        rows.append(
            (
                "tokens",
                "not bounded",
                f"output tokens not bounded: set max_output_tokens, or a max_tokens or max_cost budget; "
                f"the prompts alone come to up to {prompts:,} ({how})",
            )
        )
    else:
        rows.append(("tokens", "not bounded", how))
    if lim.get("max_cost"):
        rows.append(("cost", f"at most ${llm_runs * lim['max_cost']:,.2f}", "budget: max_cost per run"))
    elif p.price and llm_runs and lim.get("max_tokens"):
        pin, pout = p.price
        cost = llm_runs * lim["max_tokens"] * max(pin, pout) / 1e6
        rows.append(
            ("cost", f"at most ${cost:,.2f}", f"every token at the dearer price, ${max(pin, pout):g} per million")
        )
    elif p.price and per_run and bounded:
        pin, pout = p.price
        cost = seeds * sum(i * pin + (o or 0) * pout for i, o in per_run.values()) / 1e6
        rows.append(("cost", f"at most ${cost:,.2f}", f"at ${pin:g} in / ${pout:g} out per million tokens"))
    elif p.price and per_run:
        pin, _ = p.price
        prompt_cost = seeds * sum(i for i, _ in per_run.values()) * pin / 1e6
        rows.append(
            (
                "cost",
                "not bounded",
                f"output tokens not bounded (set max_output_tokens, or a max_tokens or max_cost budget), so "
                f"neither is the cost; the prompts alone come to up to ${prompt_cost:,.2f} at ${pin:g} per million",
            )
        )
    else:
        rows.append(("cost", "not estimated", "give --price IN OUT (USD per million tokens), or a max_cost budget"))
    if lim.get("max_wall_s"):
        rows.append(
            (
                "wall time",
                f"at most {_h(runs * lim['max_wall_s'])} one run at a time",
                f"budget: max_wall {lim['max_wall_s'] / 60:g} min per run; --executor dask runs one per GPU",
            )
        )
    else:
        rows.append(("wall time", "no limit", "set max_wall_min"))
    notes += equal_budget_notes(p, cmd_arms)
    if not p.final_bench:
        notes.append("no final full-grid bench (final_bench.enabled: false)")
    notes.append("Nothing was sent to a model to make this plan.")
    return Plan(rows, notes)
