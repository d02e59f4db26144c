"""The plan of a comparison, before any model is called: how many runs and evaluations it holds,
how much GPU time, how many tokens and what they cost, and how long it takes.

Every number comes from the protocol's budget and from times measured on the hardware (the
protocol's `plan` section says where each was measured); what cannot be known in advance is said
so rather than guessed. The arms hold the model to the goal while budget remains, so a run that does
not meet its goal spends its budget: the budget is the expected use, not a loose bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tabulate import tabulate

from ..agents.decisions import CLASSIFY_INSTRUCTIONS, CLASSIFY_MAX_CHARS

if TYPE_CHECKING:
    from .compare import CompareRequest
    from .protocol import Protocol


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


def request_plan(req: CompareRequest, proto: Protocol | None = None) -> str:
    """The plan of a comparison as text: its table and notes, then what the protocol (where there is
    one) says the setup being reproduced discloses and what was chosen here."""
    measured = (proto.data.get("plan") or {}) if proto else {}
    price = None
    if req.model.get("price_input_per_mtok") is not None:
        price = (req.model["price_input_per_mtok"], req.model.get("price_output_per_mtok") or 0.0)
    inputs = PlanInputs(
        proto.name if proto else "command line",
        {label: req.agent(label) for label in req.arms},
        req.seeds,
        req.task,
        req.limits,
        measured.get("eval_seconds") or [],
        measured.get("final_bench_seconds"),
        bool(req.final_bench.get("enabled")),
        measured.get("gpu"),
        req.context.get("window_tokens"),
        req.model.get("max_output_tokens"),
        price,
        req.model.get("name"),
        rebench=req.control["rebench"],
        aa_repeats=req.control["aa_repeats"],
        classifying=[
            label
            for label in req.arms
            if req.agent(label) == "kernelseek" and req.arm_options.get(label, {}).get("classify_claims", True)
        ],
    )
    title = f"{inputs.name}" + (f" ({proto.path}, sha256 {proto.sha256[:12]})" if proto else "")
    lines = [make_plan(inputs).text(title)]
    if proto:
        lines += [f"disclosed: {item}" for item in proto.data.get("disclosed") or []]
        lines += [f"chosen here ({key}): {why}" for key, why in (proto.data.get("choices") or {}).items()]
    return "\n".join(lines)


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


# a classification call (at most one per step): its prompt is the instructions and at most
# CLASSIFY_MAX_CHARS characters of text, so at most that many tokens (a token holds a character or more)
CLASSIFY_PROMPT_TOKENS = len(CLASSIFY_INSTRUCTIONS) + CLASSIFY_MAX_CHARS + 16

Row = tuple[str, str, str]
NOT_ESTIMATED: Row = ("cost", "not estimated", "give --price IN OUT (USD per million tokens), or a max_cost budget")


def make_plan(p: PlanInputs) -> Plan:
    runs = len(p.arms) * len(p.seeds)
    cmd_arms = [label for label, agent in p.arms.items() if agent == "agent-cmd"]
    tokens = _token_bound(p, cmd_arms)
    rows = [
        *_count_rows(p, runs),
        *_time_rows(p, runs),
        _tokens_row(p, tokens),
        _cost_row(p, tokens),
        _wall_row(p, runs),
    ]
    notes = [*_measured_notes(p), *equal_budget_notes(p, cmd_arms)]
    if not p.final_bench:
        notes.append("no final full-grid bench (final_bench.enabled: false)")
    notes.append("Nothing was sent to a model to make this plan.")
    return Plan(rows, notes)


def _count_rows(p: PlanInputs, runs: int) -> list[Row]:
    steps, evals = p.limits.get("max_steps"), p.limits.get("max_evals")
    return [
        ("runs", f"{runs}", f"{len(p.arms)} arms ({', '.join(p.arms)}) x {len(p.seeds)} seeds"),
        (
            "steps per run",
            f"{steps}" if steps else "no limit",
            "budget: max_steps (model calls; sessions for an agent command)",
        ),
        ("evaluations", f"{runs * evals} ({evals} per run)", "budget: max_evals")
        if evals
        else ("evaluations", "no limit", "set max_evals: a step may evaluate any number of times"),
    ]


def _measured_notes(p: PlanInputs) -> list[str]:
    notes = [f"measured: one evaluation, {e['seconds']:g} s: {e['what']} ({e['measured']})" for e in p.eval_seconds]
    fb = p.final_bench_seconds
    if p.final_bench and fb:
        notes.append(f"measured: one full-grid bench, {fb['seconds']:g} s: {fb['what']} ({fb['measured']})")
    return notes


def _time_rows(p: PlanInputs, runs: int) -> list[Row]:
    """The evaluations' time, the final bench's and the A/A control's, and the GPU-hours they add up to."""
    evals = p.limits.get("max_evals")
    secs = [e["seconds"] for e in p.eval_seconds]
    device = p.gpu or "CPU"
    rows: list[Row] = []
    eval_time = None
    if evals and secs:
        lo, hi = min(secs), max(secs)
        eval_time = (runs * evals * lo, runs * evals * hi)
        span = _h(eval_time[1]) if lo == hi else f"{_h(eval_time[0])} to {_h(eval_time[1])}"
        rows.append((f"evaluation time ({device})", span, f"{runs * evals} evaluations x {lo:g}-{hi:g} s (measured)"))
    elif not secs:
        rows.append((f"evaluation time ({device})", "not measured", "no measured evaluation time in the protocol"))
    final_time = 0.0
    if p.final_bench:
        final_rows, final_time = _final_rows(p, runs, device, max(secs) if secs else None)
        rows += final_rows
    if eval_time and p.gpu:
        low, high = ((t + final_time) / 3600 for t in eval_time)
        rows.append(
            (
                "GPU-hours",
                f"{low:.1f} to {high:.1f}" if eval_time[0] != eval_time[1] else f"{high:.1f}",
                "evaluations and the final bench on one GPU; model calls and the agent's own commands add to it",
            )
        )
    return rows


def _final_rows(p: PlanInputs, runs: int, device: str, eval_s: float | None) -> tuple[list[Row], float]:
    """The final full-grid bench and the A/A control (at `eval_s` an evaluation): their rows and seconds."""
    rows: list[Row] = []
    seconds = 0.0
    fb = p.final_bench_seconds
    if fb:
        seconds = runs * p.rebench * fb["seconds"]
        rows.append(
            (
                f"final full-grid bench ({device})",
                _h(seconds),
                f"{runs} runs' best kernels x {p.rebench} benches x {fb['seconds']:g} s (measured)",
            )
        )
    else:
        rows.append((f"final full-grid bench ({device})", "not measured", "no measured bench time in the protocol"))
    if eval_s is not None:
        aa_time = p.aa_repeats * eval_s
        seconds += aa_time
        rows.append(
            (
                f"A/A control ({device})",
                _h(aa_time),
                f"the starting kernel evaluated {p.aa_repeats} times as in a run x {eval_s:g} s (measured)",
            )
        )
    return rows, seconds


@dataclass
class _Tokens:
    """What the arms that call a model may spend: their runs, each one's bound where the window gives
    one, and how the bound was reached."""

    llm_runs: int
    per_run: dict[str, tuple[int, int | None]]  # label -> (prompt tokens, output tokens or None)
    how: str
    bounded: bool


def _token_bound(p: PlanInputs, cmd_arms: list[str]) -> _Tokens:
    llm_labels = [label for label in p.arms if label not in cmd_arms]
    steps, out_tok = p.limits.get("max_steps"), p.max_output_tokens
    per_run: dict[str, tuple[int, int | None]] = {}
    if p.limits.get("max_tokens"):
        how = "budget: max_tokens (every model call of a run, classification calls included)"
    elif steps and p.context_tokens:
        for label in llm_labels:
            classifies = label in p.classifying
            calls = steps * (2 if classifies else 1)
            prompt = steps * p.context_tokens + (steps * CLASSIFY_PROMPT_TOKENS if classifies else 0)
            per_run[label] = (prompt, None if out_tok is None else calls * out_tok)
        how = _window_bound(p, steps, p.context_tokens)
    else:
        how = "give --context-tokens (the model's window) or a max_tokens budget for a bound"
    bounded = bool(p.limits.get("max_tokens")) or bool(per_run and all(o is not None for _, o in per_run.values()))
    return _Tokens(len(llm_labels) * len(p.seeds), per_run, how, bounded)


def _window_bound(p: PlanInputs, steps: int, window: int) -> str:
    out_tok = p.max_output_tokens
    classifying = ""
    if p.classifying:
        classifying = (
            f"; {', '.join(p.classifying)}: a classification call per step at most, {CLASSIFY_PROMPT_TOKENS:,} "
            "prompt tokens" + (f" + {out_tok:,} output" if out_tok else "")
        )
    return (
        f"{steps} steps x a context window of {window:,} tokens"
        + (f" + {out_tok:,} output tokens" if out_tok else "")
        + classifying
        + "; compaction keeps a full conversation between 60 and 85 % of the window"
    )


def _tokens_row(p: PlanInputs, t: _Tokens) -> Row:
    max_tokens, seeds = p.limits.get("max_tokens"), len(p.seeds)
    if not t.llm_runs:
        return ("tokens", "-", "no arm calls a model here")
    if max_tokens:
        return ("tokens", f"at most {t.llm_runs * max_tokens:,} ({max_tokens:,} per run)", t.how)
    if t.per_run and t.bounded:
        total = seeds * sum(i + (o or 0) for i, o in t.per_run.values())
        each = sorted({i + (o or 0) for i, o in t.per_run.values()})
        return ("tokens", f"at most {total:,} ({' or '.join(f'{n:,}' for n in each)} per run)", t.how)
    if t.per_run:
        prompts = seeds * sum(i for i, _ in t.per_run.values())
        return (
            "tokens",
            "not bounded",
            f"output tokens not bounded: set max_output_tokens, or a max_tokens or max_cost budget; "
            f"the prompts alone come to up to {prompts:,} ({t.how})",
        )
    return ("tokens", "not bounded", t.how)


def _cost_row(p: PlanInputs, t: _Tokens) -> Row:
    max_tokens, seeds = p.limits.get("max_tokens"), len(p.seeds)
    if p.limits.get("max_cost"):
        return ("cost", f"at most ${t.llm_runs * p.limits['max_cost']:,.2f}", "budget: max_cost per run")
    if not p.price:
        return NOT_ESTIMATED
    pin, pout = p.price
    if t.llm_runs and max_tokens:
        cost = t.llm_runs * max_tokens * max(pin, pout) / 1e6
        return ("cost", f"at most ${cost:,.2f}", f"every token at the dearer price, ${max(pin, pout):g} per million")
    if t.per_run and t.bounded:
        cost = seeds * sum(i * pin + (o or 0) * pout for i, o in t.per_run.values()) / 1e6
        return ("cost", f"at most ${cost:,.2f}", f"at ${pin:g} in / ${pout:g} out per million tokens")
    if t.per_run:
        prompt_cost = seeds * sum(i for i, _ in t.per_run.values()) * pin / 1e6
        return (
            "cost",
            "not bounded",
            f"output tokens not bounded (set max_output_tokens, or a max_tokens or max_cost budget), so "
            f"neither is the cost; the prompts alone come to up to ${prompt_cost:,.2f} at ${pin:g} per million",
        )
    return NOT_ESTIMATED


def _wall_row(p: PlanInputs, runs: int) -> Row:
    wall = p.limits.get("max_wall_s")
    if not wall:
        return ("wall time", "no limit", "set max_wall_min")
    return (
        "wall time",
        f"at most {_h(runs * wall)} one run at a time",
        f"budget: max_wall {wall / 60:g} min per run; --executor dask runs one per GPU",
    )
