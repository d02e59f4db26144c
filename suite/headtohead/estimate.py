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
    llm_arms = len(p.arms) - len(cmd_arms)
    llm_runs = llm_arms * len(p.seeds)
    out_tok = p.max_output_tokens
    per_run_tokens = None
    if lim.get("max_tokens"):
        per_run_tokens = (lim["max_tokens"], None)
        how = "budget: max_tokens"
    elif steps and p.context_tokens:
        prompt = steps * p.context_tokens
        completion = steps * (out_tok or 0)
        per_run_tokens = (prompt + completion, (prompt, completion))
        how = (
            f"{steps} steps x a context window of {p.context_tokens:,} tokens"
            + (f" + {out_tok:,} output tokens" if out_tok else " (output tokens not bounded: set max_output_tokens)")
            + "; compaction keeps a full conversation between 60 and 85 % of the window"
        )
    else:
        how = "give --context-tokens (the model's window) or a max_tokens budget for a bound"
    if per_run_tokens and llm_runs:
        rows.append(("tokens", f"at most {llm_runs * per_run_tokens[0]:,} ({per_run_tokens[0]:,} per run)", how))
    else:
        rows.append(("tokens", "not bounded" if llm_runs else "-", how if llm_runs else "no arm calls a model here"))
    if lim.get("max_cost"):
        rows.append(("cost", f"at most ${llm_runs * lim['max_cost']:,.2f}", "budget: max_cost per run"))
    elif p.price and per_run_tokens and llm_runs:
        pin, pout = p.price
        split = per_run_tokens[1]
        if split:
            cost = llm_runs * (split[0] * pin + split[1] * pout) / 1e6
            rows.append(("cost", f"at most ${cost:,.2f}", f"at ${pin:g} in / ${pout:g} out per million tokens"))
        else:
            cost = llm_runs * per_run_tokens[0] * max(pin, pout) / 1e6
            rows.append(
                ("cost", f"at most ${cost:,.2f}", f"every token at the dearer price, ${max(pin, pout):g} per million")
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
    if cmd_arms:
        notes.append(f"{', '.join(cmd_arms)}: an agent command's own model use is not seen here (no tokens, no cost).")
    if not p.final_bench:
        notes.append("no final full-grid bench (final_bench.enabled: false)")
    notes.append("Nothing was sent to a model to make this plan.")
    return Plan(rows, notes)
