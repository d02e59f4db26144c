"""Reading run traces: the trace format is a contract between the runs that write it (agents/trace.py)
and everything that reads it (`traces`, the reports, the head-to-head), so that no reader needs the
agents.

A trace is JSONL, one event per line. The schema (version 2; version 1 traces are still read and
validated) is `schemas/trace-v2.schema.json`, described in docs/trace-schema.md. Big artifacts live
beside the trace in `<trace>.d/` (`artifacts_dir`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

TRACE_SCHEMA_VERSION = 2
SCHEMA_VERSIONS = (1, 2)


def artifacts_dir(trace_path: Path) -> Path:
    return Path(trace_path).with_suffix(".d")


# ---------------------------------------------------------------- reading and validating


@dataclass
class TraceFile:
    events: list[dict]
    problems: list[str] = field(default_factory=list)  # lines that are not JSON objects
    cut_short: bool = False  # the last line was cut off mid-write


def read_trace(path: Path) -> TraceFile:
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    out = TraceFile([])
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
            if not isinstance(ev, dict):
                raise ValueError("not an object")
            out.events.append(ev)
        except ValueError:
            last = i == len(lines) or (i == len(lines) - 1 and not lines[-1])
            if last and not text.endswith("\n"):
                out.cut_short = True
                out.problems.append(f"line {i}: cut short (the writer stopped mid-line)")
            else:
                out.problems.append(f"line {i}: not a JSON object")
    return out


@lru_cache(None)
def trace_schema(version: int = TRACE_SCHEMA_VERSION) -> dict:
    return json.loads(resources.files(__package__).joinpath(f"schemas/trace-v{version}.schema.json").read_text())


@lru_cache(None)
def _validator(type_: str, version: int = TRACE_SCHEMA_VERSION) -> Draft202012Validator:
    schema = trace_schema(version)
    return Draft202012Validator({"$ref": f"#/$defs/{type_}", "$defs": schema["$defs"]})


@dataclass
class Validation:
    errors: list[str]
    notes: list[str]
    events: int

    @property
    def ok(self) -> bool:
        return not self.errors


def validate_events(events: list[dict]) -> tuple[list[str], list[str]]:
    """Errors and notes of a trace, against the schema version its run_start names."""
    errors: list[str] = []
    notes: list[str] = []
    version: Any = TRACE_SCHEMA_VERSION
    if events and events[0].get("type") == "run_start":
        version = events[0].get("schema_version")
    if version not in SCHEMA_VERSIONS:
        return [f"event 0: schema_version {version!r} is not one of {list(SCHEMA_VERSIONS)}"], notes
    defs = trace_schema(version)["$defs"]
    ended = False
    for n, ev in enumerate(events):
        where = f"event {n} (seq {ev.get('seq')}, {ev.get('type')})"
        type_ = ev.get("type")
        if not isinstance(type_, str):
            errors.append(f"event {n}: no 'type'")
            continue
        name = "extension" if type_.startswith("x-") else type_
        if name not in defs or name in (
            "envelope",
            "message",
            "usage",
            "totals",
            "best",
            "sha256",
            "num_or_null",
            "protections",
        ):
            errors.append(f"{where}: unknown event type {type_!r}")
            continue
        for err in sorted(_validator(name, version).iter_errors(ev), key=lambda e: list(e.absolute_path))[:5]:
            loc = "/".join(map(str, err.absolute_path)) or "(event)"
            errors.append(f"{where}: {loc}: {err.message}")
        if n == 0 and type_ != "run_start":
            errors.append(f"{where}: a trace starts with run_start")
        if n > 0 and type_ == "run_start":
            errors.append(f"{where}: run_start may only come first")
        if n > 0 and ev.get("seq") != events[n - 1].get("seq", -2) + 1:
            errors.append(f"{where}: seq {ev.get('seq')} does not follow {events[n - 1].get('seq')}")
        if ended and type_ != "resume":
            errors.append(f"{where}: only a resume may follow run_end")
        ended = type_ == "run_end" or (ended and type_ != "resume")
    if events and not ended:
        notes.append("the run has no run_end: it is still going, or was interrupted (it can be resumed)")
    return errors, notes


def validate_trace(path: Path) -> Validation:
    tf = read_trace(path)
    errors, notes = validate_events(tf.events)
    if not tf.events:
        errors.insert(0, "no events")
    return Validation(tf.problems + errors, notes, len(tf.events))


def question_category(ev: dict) -> str:
    """A question event's category; a typed question has none: `human`."""
    return ev.get("category") or ("human" if ev.get("source") == "human" else "uncategorized")


# ---------------------------------------------------------------- a readable timeline


def ratio_text(x) -> str:
    """A geometric mean or ratio as the timeline and the trace viewer write it ("-" for none)."""
    return "-" if x is None else f"{x:.3f}x"


def first_line(text: str) -> str:
    """The first line of `text` that is not blank ("" when there is none)."""
    return next((line for line in text.splitlines() if line.strip()), "")


def _args_short(args: dict, width: int = 60) -> str:
    parts = []
    for k, v in args.items():
        s = v if isinstance(v, str) else json.dumps(v)
        s = " ".join(str(s).split())
        parts.append(f"{k}={s[:40] + '...' if len(s) > 40 else s}")
    out = ", ".join(parts)
    return out[:width] + ("..." if len(out) > width else "")


def _run_start(ev: dict) -> list[str]:
    task = ev.get("task", {})
    protections = "complete" if (ev.get("protections") or {}).get("complete") else "incomplete"
    return [
        f"run {ev.get('run_id')}: arm {ev.get('arm')}, task {task.get('name')} ({task.get('kernel')}), "
        f"model {ev.get('model', {}).get('name')}, seed {ev.get('seed')}, "
        f"sandbox {ev.get('sandbox', {}).get('sandbox')}, protections {protections}",
        f"  goal: {task.get('goal', {}).get('text', task.get('goal'))}",
    ]


def _run_end(ev: dict) -> list[str]:
    tot, best = ev.get("totals", {}), ev.get("best") or {}
    cost = "-" if tot.get("cost") is None else f"${tot.get('cost'):.4f}"
    done = f"{tot.get('steps')} steps, {tot.get('total_tokens')} tokens, cost {cost}, {tot.get('wall_s', 0):.1f}s"
    counts = f"{tot.get('evals')} evaluations, {tot.get('retries')} retries, {tot.get('questions', 0)} questions"
    goal = "met" if ev.get("goal_met") else "not met"
    return [f"end: {done}, {counts}; best {ratio_text(best.get('geomean'))}; goal {goal}"]


def _llm_call(ev: dict) -> list[str]:
    u, r = ev.get("usage", {}), ev.get("response", {})
    calls = ", ".join(f"{c['name']}({_args_short(c.get('arguments', {}), 50)})" for c in r.get("tool_calls", []))
    text = " ".join((r.get("content") or "").split())
    tokens = f"{u.get('prompt_tokens')}+{u.get('completion_tokens')} tok {ev.get('latency_s', 0):.1f}s"
    first = f"model  {tokens}  " + (f"-> {calls}" if calls else f"says: {text[:100]}")
    return [first, f"       says: {text[:100]}"] if calls and text else [first]


def _tool_result(ev: dict) -> list[str]:
    error = " ERROR" if ev.get("is_error") else ""
    return [f"tool   {ev.get('tool')}{error}: {first_line(ev.get('output', ''))[:100]}"]


def _harness_eval(ev: dict) -> list[str]:
    best = ev.get("best") or {}
    counts = f"{ev.get('scenarios_correct')}/{ev.get('scenarios_total')} correct"
    new = "  NEW BEST" if ev.get("new_best") else ""
    goal = "  goal met" if ev.get("goal_met") else ""
    vs = f"geomean {ratio_text(ev.get('geomean'))} vs {ev.get('baseline')}{new}"
    return [
        f"eval   #{ev.get('index')} {ev.get('status')} {counts}, {vs}  (best {ratio_text(best.get('geomean'))}){goal}"
    ]


def _classification(ev: dict) -> list[str]:
    u = ev.get("usage") or {}
    quote = " " + repr(ev["quote"][:80]) if ev.get("quote") else ""
    error = ": " + ev["error"][:80] if ev.get("error") else ""
    tokens = f"{u.get('prompt_tokens', 0)}+{u.get('completion_tokens', 0)} tok"
    return [f"classify {ev.get('purpose')}: {ev.get('verdict')}{quote} ({tokens}){error}"]


def _decision(ev: dict) -> list[str]:
    return [f"decision point {ev.get('trigger')} (not asked: {ev.get('reason', '')})"]


def _question(ev: dict) -> list[str]:
    src = f"{ev.get('source')}" + (f" {ev.get('bank_id')}" if ev.get("bank_id") else "")
    return [f"QUESTION [{ev.get('trigger')}; {src}; {ev.get('category') or 'typed'}]: {ev.get('text')}"]


def _retry(ev: dict) -> list[str]:
    code = " " + str(ev.get("status_code")) if ev.get("status_code") else ""
    wait = f"wait {ev.get('wait_s', 0):.1f}s: {ev.get('error', '')[:80]}"
    return [f"retry  attempt {ev.get('attempt')} {ev.get('kind')}{code}, {wait}"]


def _resume(ev: dict) -> list[str]:
    return [f"RESUMED (session {ev.get('session')}) from step {ev.get('from_step')}"]


def _context(ev: dict) -> list[str]:
    elided = ", ".join(f"{k} {v}" for k, v in (ev.get("elided") or {}).items() if v)
    window = f"window {ev.get('window_tokens')} ({ev.get('window_source')})"
    return [
        f"context compacted ({ev.get('reason')}): {ev.get('tokens_before')} -> {ev.get('tokens_after')} tokens, "
        f"{window}; elided {elided}"
    ]


def _invocation(ev: dict) -> list[str]:
    first = first_line(ev.get("output") or "")
    code = "" if ev.get("exit_code") is None else ", exit " + str(ev.get("exit_code"))
    return [
        f"agent  session {ev.get('session')} ({ev.get('mode')}): {ev.get('stopped')}{code} after "
        f"{ev.get('duration_s', 0):.0f}s: {first[:100]}"
    ]


def _exit(ev: dict) -> list[str]:
    limit = " (" + ev["limit"] + ")" if ev.get("limit") else ""
    return [f"exit: {ev.get('reason')}{limit}: {ev.get('message', '')[:120]}"]


# the run's first and last events stand on lines of their own; every other event's lines follow
# its time and step (its further lines indented to match)
_WHOLE_LINES = {"run_start": _run_start, "run_end": _run_end}
_TIMED_LINES = {
    "llm_call": _llm_call,
    "tool_result": _tool_result,
    "harness_eval": _harness_eval,
    "decision": _decision,
    "classification": _classification,
    "question": _question,
    "retry": _retry,
    "resume": _resume,
    "context": _context,
    "invocation": _invocation,
    "exit": _exit,
}


def event_lines(ev: dict) -> list[str]:
    """One event's lines of the timeline (none for an event type it does not know)."""
    t, head = ev.get("type"), f"[{ev.get('elapsed_s', 0):8.1f}s] step {ev.get('step', 0):>3}  "
    if not isinstance(t, str):
        return []
    if t in _WHOLE_LINES:
        return _WHOLE_LINES[t](ev)
    if t in _TIMED_LINES:
        first, *more = _TIMED_LINES[t](ev)
    elif t.startswith("x-"):
        first, more = t, []
    else:
        return []
    return [head + first, *(" " * len(head) + line for line in more)]


def timeline_lines(events: list[dict]) -> list[str]:
    return [line for ev in events for line in event_lines(ev)]
