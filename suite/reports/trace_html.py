"""The trace viewer: one self-contained HTML page for one or more agent runs, read through the trace
reader (`contracts.traces.read_trace`). Per run: the timeline of its events (model calls, tool calls by
tool, evaluations with their geomean, questions with their trigger and category, human messages,
retries, resumes, context compactions, sessions of an external agent, limits), the best-so-far
curve with the questions marked, the conversation with tool outputs folded, and each evaluated
candidate's diff against the best before it. Two runs (the arms of a head-to-head) show side by
side. The page renders lazily: rows are drawn as they scroll into view, diffs when opened, so
traces of 10k+ events stay responsive.

Long texts are cut for the page (the trace keeps them whole): a message beyond `MESSAGE_CHARS`
keeps its head and tail, a diff beyond `DIFF_LINES` its first lines."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..contracts.traces import artifacts_dir, first_line, question_category, ratio_text, read_trace
from .page import render_page, write_page

VENDOR = ["chart.umd.min.js"]
MESSAGE_CHARS = 6000
LABEL_CHARS = 160
DIFF_LINES = 2000


def _cut(text: str | None, limit: int = MESSAGE_CHARS) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return (
        f"{text[:head]}\n[... {len(text) - head - tail} characters not shown here; the trace has them ...]\n"
        f"{text[-tail:]}"
    )


def _one_line(text, limit: int = LABEL_CHARS) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _args(args) -> str:
    if not isinstance(args, dict):
        return _one_line(args)
    return _one_line(", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in args.items()))


# ---------------------------------------------------------------- one event, one timeline row

Row = tuple[str, str, str]  # (kind, group for the filters, label)


def _usage(u: dict) -> str:
    return f"{u.get('prompt_tokens', 0)}+{u.get('completion_tokens', 0)} tokens"


def _best(ev: dict) -> str:
    return ratio_text((ev.get("best") or {}).get("geomean"))


def _llm_call(ev: dict) -> Row:
    u, r = ev.get("usage") or {}, ev.get("response") or {}
    calls = ", ".join(c.get("name", "?") for c in r.get("tool_calls") or [])
    what = f"-> {calls}" if calls else f"says: {_one_line(r.get('content'), 100)}"
    retried = f", {ev['attempts']} attempts" if (ev.get("attempts") or 1) > 1 else ""
    label = f"model call {ev.get('call', '')}: {_usage(u)}, {ev.get('latency_s') or 0:.1f} s{retried} {what}"
    return "model", "model", label


def _classification(ev: dict) -> Row:  # a side call to the run's model (the claimed-limit classification)
    quote = f": {ev['quote']}" if ev.get("quote") else ""
    label = f"classification ({ev.get('purpose')}): {ev.get('verdict')}, {_usage(ev.get('usage') or {})}{quote}"
    return "model", "classification", _one_line(label)


def _tool_result(ev: dict) -> Row:
    tool = ev.get("tool", "?")
    first = first_line(ev.get("output") or "")
    err = " ERROR" if ev.get("is_error") else ""
    return "tool", f"tool:{tool}", _one_line(f"{tool}({_args(ev.get('arguments'))}){err}: {first}")


def _harness_eval(ev: dict) -> Row:
    new = " NEW BEST" if ev.get("new_best") else ""
    goal = ", goal met" if ev.get("goal_met") else ""
    label = (
        f"evaluation {ev.get('index')}: {ev.get('status')}, {ev.get('scenarios_correct')}/"
        f"{ev.get('scenarios_total')} correct, geomean {ratio_text(ev.get('geomean'))} vs "
        f"{ev.get('baseline')}{new} (best {_best(ev)}){goal}"
    )
    return "eval", "eval", label


def _question(ev: dict) -> Row:
    if ev.get("source") == "human":
        return "human", "human", _one_line(f"human [{ev.get('trigger')}]: {ev.get('text')}", 400)
    label = f"question [{ev.get('trigger')}; {question_category(ev)}; {ev.get('bank_id') or 'bank'}]: {ev.get('text')}"
    return "question", "question", _one_line(label, 400)


def _decision(ev: dict) -> Row:
    return "decision", "decision", _one_line(f"decision point {ev.get('trigger')}, not asked: {ev.get('reason', '')}")


def _retry(ev: dict) -> Row:
    code = f" {ev['status_code']}" if ev.get("status_code") else ""
    label = (
        f"retry, attempt {ev.get('attempt')}: {ev.get('kind')}{code}, wait "
        f"{ev.get('wait_s') or 0:.1f} s: {ev.get('error', '')}"
    )
    return "retry", "retry", _one_line(label)


def _resume(ev: dict) -> Row:
    label = (
        f"resumed (session {ev.get('session')}) from step {ev.get('from_step')}; "
        f"{ev.get('discarded_events', 0)} events after that checkpoint discarded"
    )
    return "resume", "resume", label


def _context(ev: dict) -> Row:
    elided = ", ".join(f"{k} {v}" for k, v in (ev.get("elided") or {}).items() if v)
    label = (
        f"context compacted ({ev.get('reason')}): {ev.get('tokens_before')} -> {ev.get('tokens_after')} "
        f"tokens, window {ev.get('window_tokens')} ({ev.get('window_source')})"
        + (f"; elided {elided}" if elided else "")
    )
    return "context", "context", _one_line(label)


def _invocation(ev: dict) -> Row:
    first = first_line(ev.get("output") or "")
    code = "" if ev.get("exit_code") is None else f", exit {ev.get('exit_code')}"
    label = (
        f"agent session {ev.get('session')} ({ev.get('mode')}): {ev.get('stopped')}{code} after "
        f"{ev.get('duration_s') or 0:.0f} s: {first}"
    )
    return "agent", "agent", _one_line(label)


def _exit(ev: dict) -> Row:
    limit = f" ({ev['limit']} limit)" if ev.get("limit") else ""
    return "exit", "exit", _one_line(f"exit: {ev.get('reason')}{limit}: {ev.get('message', '')}")


def _step(ev: dict) -> Row:
    tot = ev.get("totals") or {}
    label = (
        f"step {ev.get('step')} done: {tot.get('total_tokens', 0)} tokens, "
        f"{tot.get('evals', 0)} evaluations, best {_best(ev)}"
        + (f", layer {ev['dominant_layer']}" if ev.get("dominant_layer") else "")
    )
    return "step", "step", label


def _run_start(ev: dict) -> Row:
    label = (
        f"run {ev.get('run_id')} started: arm {ev.get('arm')}, task "
        f"{(ev.get('task') or {}).get('name')}, model {(ev.get('model') or {}).get('name')}"
    )
    return "run", "run", _one_line(label)


def _run_end(ev: dict) -> Row:
    tot = ev.get("totals") or {}
    label = (
        f"run ended: {ev.get('exit_reason')}, {tot.get('steps')} steps, best {_best(ev)}, goal "
        f"{'met' if ev.get('goal_met') else 'not met'}"
    )
    return "run", "run", label


ROWS: dict[str, Callable[[dict], Row]] = {
    "llm_call": _llm_call,
    "classification": _classification,
    "tool_result": _tool_result,
    "harness_eval": _harness_eval,
    "question": _question,
    "decision": _decision,
    "retry": _retry,
    "resume": _resume,
    "context": _context,
    "invocation": _invocation,
    "exit": _exit,
    "step": _step,
    "run_start": _run_start,
    "run_end": _run_end,
}


def _row(ev: dict) -> Row:
    """(kind, group for the filters, label) of an event; a type without a row of its own is an extension."""
    t = ev.get("type")
    make = ROWS.get(t) if isinstance(t, str) else None
    return make(ev) if make else ("extension", "extension", _one_line(f"{t}"))


# ---------------------------------------------------------------- the conversation


def _message(m: dict, seq: int | None, step: int) -> dict:
    calls = [
        {
            "name": (c.get("function") or {}).get("name") or c.get("name", "?"),
            "arguments": _cut(
                (c.get("function") or {}).get("arguments") if c.get("function") else json.dumps(c.get("arguments")),
                2000,
            ),
        }
        for c in m.get("tool_calls") or []
    ]
    return {
        "role": m.get("role", "?"),
        "content": _cut(m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))),
        "calls": calls,
        "seq": seq,
        "step": step,
        "discarded": False,
    }


# ---------------------------------------------------------------- candidates and their diffs


def _blob(trace: Path, sha: str | None) -> str | None:
    if not sha:
        return None
    p = artifacts_dir(trace) / "blobs" / sha
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


def candidate_diff(trace: Path, base_sha: str | None, base_label: str, sha: str | None) -> dict:
    """The unified diff of an evaluated candidate against `base_sha`, or why there is none."""
    if base_sha and base_sha == sha:
        return {"against": base_label, "same": True}
    new, old = _blob(trace, sha), _blob(trace, base_sha)
    if new is None or old is None:
        missing = "candidate" if new is None else base_label
        return {
            "against": base_label,
            "missing": f"the {missing} is not stored beside the trace ({artifacts_dir(trace).name}/blobs/)",
        }
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), base_label, "this candidate", lineterm=""))
    added = sum(ln.startswith("+") and not ln.startswith("+++") for ln in lines)
    removed = sum(ln.startswith("-") and not ln.startswith("---") for ln in lines)
    cut = max(0, len(lines) - DIFF_LINES)
    return {"against": base_label, "added": added, "removed": removed, "lines": lines[:DIFF_LINES], "cut": cut}


# ---------------------------------------------------------------- a run

START_LABEL = "the starting kernel"


def _eval_entry(ev: dict, diff: dict) -> dict:
    """What the page shows of one evaluation (`best_after` is added once the best is known)."""
    return {
        "index": ev.get("index"),
        "step": ev.get("step", 0),
        "seq": ev.get("seq"),
        "status": ev.get("status"),
        "correct": bool(ev.get("correct")),
        "geomean": ev.get("geomean"),
        "baseline": ev.get("baseline"),
        "new_best": bool(ev.get("new_best")),
        "goal_met": bool(ev.get("goal_met")),
        "scenarios": f"{ev.get('scenarios_correct')}/{ev.get('scenarios_total')}",
        "extended": f"{ev.get('extended_correct')}/{ev.get('extended_total')}" if ev.get("extended_total") else None,
        "min_ratio": ev.get("min_ratio"),
        "min_ratio_scenario": ev.get("min_ratio_scenario"),
        "error": _cut(ev.get("error"), 2000) if ev.get("error") else None,
        "failing": [p for p in ev.get("per_scenario") or [] if p.get("status") != "ok"][:20],
        "sha": ev.get("candidate_sha256"),
        "diff": diff,
    }


def _question_entry(ev: dict, best: float | None) -> dict:
    return {
        "step": ev.get("step", 0),
        "seq": ev.get("seq"),
        "trigger": ev.get("trigger"),
        "category": question_category(ev),
        "source": ev.get("source"),
        "bank_id": ev.get("bank_id"),
        "text": _cut(ev.get("text"), 1000),
        "best": best,
    }


@dataclass
class _Run:
    """One trace read event by event: the timeline's rows, the conversation, the evaluations (each
    diffed against the best candidate before it), the questions and the best-so-far curve."""

    path: Path
    start_sha: str | None  # the starting kernel's, the first evaluation's diff base
    rows: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    questions: list[dict] = field(default_factory=list)
    curve: list[dict] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)
    best: float | None = None
    best_sha: str | None = None
    best_label: str = START_LABEL
    checkpoint_at: int = 0  # messages in the conversation at the last finished step
    end_event: dict | None = None  # run_end
    exit_event: dict | None = None
    totals: dict = field(default_factory=dict)
    resumes: int = 0

    def add(self, ev: dict) -> None:
        kind, group, label = _row(ev)
        self.groups[group] = self.groups.get(group, 0) + 1
        row = {
            "q": ev.get("seq"),
            "s": ev.get("step", 0),
            "t": ev.get("elapsed_s", 0),
            "k": kind,
            "g": group,
            "l": label,
        }
        t = ev.get("type")
        on = _ON_EVENT.get(t) if isinstance(t, str) else None
        if on:
            on(self, ev, row)
        self.rows.append(row)

    def on_messages(self, ev: dict, row: dict) -> None:
        if ev.get("messages_delta"):
            row["m"] = len(self.messages)
        self.messages.extend(_message(m, ev.get("seq"), ev.get("step", 0)) for m in ev.get("messages_delta") or [])
        if ev.get("type") == "step":
            self.checkpoint_at = len(self.messages)
            self.totals = ev.get("totals") or self.totals

    def on_resume(self, ev: dict, row: dict) -> None:
        self.resumes += 1
        for m in self.messages[self.checkpoint_at :]:
            m["discarded"] = True
        self.messages.append(
            {
                "role": "resume",
                "content": row["l"],
                "calls": [],
                "seq": ev.get("seq"),
                "step": ev.get("step", 0),
                "discarded": False,
            }
        )

    def on_eval(self, ev: dict, row: dict) -> None:
        sha = ev.get("candidate_sha256")
        base_label = self.best_label if self.best_sha else START_LABEL
        e = _eval_entry(ev, candidate_diff(self.path, self.best_sha or self.start_sha, base_label, sha))
        g = ev.get("geomean")
        if ev.get("correct") and g is not None and (self.best is None or g > self.best):
            self.best, self.best_sha, self.best_label = g, sha, f"evaluation {ev.get('index')} (the best before)"
        e["best_after"] = self.best
        self.evals.append(e)
        self.curve.append(
            {
                "step": ev.get("step", 0),
                "geomean": g if ev.get("correct") else None,
                "best": self.best,
                "index": ev.get("index"),
                "status": ev.get("status"),
            }
        )

    def on_question(self, ev: dict, row: dict) -> None:
        self.questions.append(_question_entry(ev, self.best))

    def on_exit(self, ev: dict, row: dict) -> None:
        self.exit_event = ev

    def on_end(self, ev: dict, row: dict) -> None:
        self.end_event = ev
        self.totals = ev.get("totals") or self.totals


# what an event adds to the run beyond its row
_ON_EVENT: dict[str, Callable[[_Run, dict, dict], None]] = {
    "llm_call": _Run.on_messages,
    "step": _Run.on_messages,
    "resume": _Run.on_resume,
    "harness_eval": _Run.on_eval,
    "question": _Run.on_question,
    "exit": _Run.on_exit,
    "run_end": _Run.on_end,
}


def run_model(path: Path) -> dict:
    """Everything the page shows of one trace."""
    path = Path(path)
    tf = read_trace(path)
    start = tf.events[0] if tf.events and tf.events[0].get("type") == "run_start" else {}
    task = start.get("task") or {}
    kernel = task.get("kernel")
    run = _Run(path, (start.get("workspace") or {}).get(kernel) if kernel else None)
    for ev in tf.events:
        run.add(ev)
    end, exit_ev = run.end_event or {}, run.exit_event or {}
    return {
        "file": path.name,
        "path": str(path),
        "run_id": start.get("run_id") or path.stem,
        "arm": start.get("arm"),
        "task": task.get("name"),
        "kernel": kernel,
        "goal": (task.get("goal") or {}).get("text") if isinstance(task.get("goal"), dict) else task.get("goal"),
        "model": (start.get("model") or {}).get("name"),
        "seed": start.get("seed"),
        "sandbox": (start.get("sandbox") or {}).get("sandbox"),
        "started": start.get("time"),
        "git_sha": (start.get("suite") or {}).get("git_sha"),
        "finished": run.end_event is not None,
        "exit": end.get("exit_reason") or exit_ev.get("reason"),
        "limit": exit_ev.get("limit"),
        "goal_met": bool(end.get("goal_met")),
        "best": run.best,
        "totals": run.totals,
        "resumes": run.resumes,
        "events": len(tf.events),
        "problems": tf.problems[:20],
        "groups": run.groups,
        "tools": {g.split(":", 1)[1]: n for g, n in run.groups.items() if g.startswith("tool:")},
        "questions": run.questions,
        "evals": run.evals,
        "curve": run.curve,
        "rows": run.rows,
        "messages": run.messages,
    }


def default_output(traces: list[Path], out_dir: Path | None = None) -> Path:
    """`<trace stem>.html` beside one trace (or in `out_dir`); `traces.html` for several."""
    traces = [Path(t) for t in traces]
    folder = Path(out_dir) if out_dir else traces[0].parent
    return folder / (f"{traces[0].stem}.html" if len(traces) == 1 else "traces.html")


def render_traces(traces: list[Path], out: Path, title: str | None = None) -> Path:
    """Write the viewer of `traces` to the file `out`."""
    runs = [run_model(t) for t in traces]
    for run, trace in zip(runs, traces, strict=True):  # the page names its traces from its own folder
        run["path"] = os.path.relpath(Path(trace).resolve(), Path(out).resolve().parent)
    if title is None:
        title = (
            f"Agent run {runs[0]['run_id']}"
            if len(runs) == 1
            else f"Agent runs: {len(runs)} ({', '.join(sorted({str(r['arm']) for r in runs}))})"
        )
    html = render_page(
        "trace.html.j2",
        title=title,
        data={"runs": runs},
        vendor=VENDOR,
        scripts=["trace.js"],
        styles=["common.css", "trace.css"],
        runs=runs,
    )
    return write_page(out, html)
