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
from pathlib import Path

from ..contracts.traces import artifacts_dir, question_category, read_trace
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


def _x(v, fmt="{:.3f}x") -> str:
    return "-" if v is None else fmt.format(v)


# ---------------------------------------------------------------- one event, one timeline row


def _row(ev: dict) -> tuple[str, str, str]:
    """(kind, group for the filters, label) of an event."""
    t = ev.get("type")
    if t == "llm_call":
        u, r = ev.get("usage") or {}, ev.get("response") or {}
        calls = ", ".join(c.get("name", "?") for c in r.get("tool_calls") or [])
        what = f"-> {calls}" if calls else f"says: {_one_line(r.get('content'), 100)}"
        retried = f", {ev['attempts']} attempts" if (ev.get("attempts") or 1) > 1 else ""
        return (
            "model",
            "model",
            (
                f"model call {ev.get('call', '')}: {u.get('prompt_tokens', 0)}+"
                f"{u.get('completion_tokens', 0)} tokens, {ev.get('latency_s') or 0:.1f} s{retried} {what}"
            ),
        )
    if t == "classification":  # a side call to the run's model (the claimed-limit classification)
        u = ev.get("usage") or {}
        quote = f": {ev['quote']}" if ev.get("quote") else ""
        return (
            "model",
            "classification",
            _one_line(
                f"classification ({ev.get('purpose')}): {ev.get('verdict')}, {u.get('prompt_tokens', 0)}+"
                f"{u.get('completion_tokens', 0)} tokens{quote}"
            ),
        )
    if t == "tool_result":
        tool = ev.get("tool", "?")
        first = next((ln for ln in (ev.get("output") or "").splitlines() if ln.strip()), "")
        err = " ERROR" if ev.get("is_error") else ""
        return "tool", f"tool:{tool}", _one_line(f"{tool}({_args(ev.get('arguments'))}){err}: {first}")
    if t == "harness_eval":
        best = (ev.get("best") or {}).get("geomean")
        new = " NEW BEST" if ev.get("new_best") else ""
        goal = ", goal met" if ev.get("goal_met") else ""
        return (
            "eval",
            "eval",
            (
                f"evaluation {ev.get('index')}: {ev.get('status')}, {ev.get('scenarios_correct')}/"
                f"{ev.get('scenarios_total')} correct, geomean {_x(ev.get('geomean'))} vs "
                f"{ev.get('baseline')}{new} (best {_x(best)}){goal}"
            ),
        )
    if t == "question":
        if ev.get("source") == "human":
            return "human", "human", _one_line(f"human [{ev.get('trigger')}]: {ev.get('text')}", 400)
        return (
            "question",
            "question",
            _one_line(
                f"question [{ev.get('trigger')}; {question_category(ev)}; "
                f"{ev.get('bank_id') or 'bank'}]: {ev.get('text')}",
                400,
            ),
        )
    if t == "decision":
        return (
            "decision",
            "decision",
            _one_line(f"decision point {ev.get('trigger')}, not asked: {ev.get('reason', '')}"),
        )
    if t == "retry":
        code = f" {ev['status_code']}" if ev.get("status_code") else ""
        return (
            "retry",
            "retry",
            _one_line(
                f"retry, attempt {ev.get('attempt')}: {ev.get('kind')}{code}, wait "
                f"{ev.get('wait_s') or 0:.1f} s: {ev.get('error', '')}"
            ),
        )
    if t == "resume":
        return (
            "resume",
            "resume",
            (
                f"resumed (session {ev.get('session')}) from step {ev.get('from_step')}; "
                f"{ev.get('discarded_events', 0)} events after that checkpoint discarded"
            ),
        )
    if t == "context":
        elided = ", ".join(f"{k} {v}" for k, v in (ev.get("elided") or {}).items() if v)
        return (
            "context",
            "context",
            _one_line(
                f"context compacted ({ev.get('reason')}): {ev.get('tokens_before')} -> {ev.get('tokens_after')} "
                f"tokens, window {ev.get('window_tokens')} ({ev.get('window_source')})"
                + (f"; elided {elided}" if elided else "")
            ),
        )
    if t == "invocation":
        first = next((ln for ln in (ev.get("output") or "").splitlines() if ln.strip()), "")
        code = "" if ev.get("exit_code") is None else f", exit {ev.get('exit_code')}"
        return (
            "agent",
            "agent",
            _one_line(
                f"agent session {ev.get('session')} ({ev.get('mode')}): {ev.get('stopped')}{code} after "
                f"{ev.get('duration_s') or 0:.0f} s: {first}"
            ),
        )
    if t == "exit":
        limit = f" ({ev['limit']} limit)" if ev.get("limit") else ""
        return "exit", "exit", _one_line(f"exit: {ev.get('reason')}{limit}: {ev.get('message', '')}")
    if t == "step":
        tot = ev.get("totals") or {}
        return (
            "step",
            "step",
            (
                f"step {ev.get('step')} done: {tot.get('total_tokens', 0)} tokens, "
                f"{tot.get('evals', 0)} evaluations, best {_x((ev.get('best') or {}).get('geomean'))}"
                + (f", layer {ev['dominant_layer']}" if ev.get("dominant_layer") else "")
            ),
        )
    if t == "run_start":
        return (
            "run",
            "run",
            _one_line(
                f"run {ev.get('run_id')} started: arm {ev.get('arm')}, task "
                f"{(ev.get('task') or {}).get('name')}, model {(ev.get('model') or {}).get('name')}"
            ),
        )
    if t == "run_end":
        tot = ev.get("totals") or {}
        return (
            "run",
            "run",
            (
                f"run ended: {ev.get('exit_reason')}, {tot.get('steps')} steps, best "
                f"{_x((ev.get('best') or {}).get('geomean'))}, goal "
                f"{'met' if ev.get('goal_met') else 'not met'}"
            ),
        )
    return "extension", "extension", _one_line(f"{t}")


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


def run_model(path: Path) -> dict:
    """Everything the page shows of one trace."""
    path = Path(path)
    tf = read_trace(path)
    events = tf.events
    start = events[0] if events and events[0].get("type") == "run_start" else {}
    task = start.get("task") or {}
    kernel = task.get("kernel")
    start_sha = (start.get("workspace") or {}).get(kernel) if kernel else None

    rows: list[dict] = []
    convo: list[dict] = []
    evals: list[dict] = []
    questions: list[dict] = []
    curve: list[dict] = []
    groups: dict[str, int] = {}
    best: float | None = None
    best_sha: str | None = None
    best_label = "the starting kernel"
    checkpoint_at = 0  # messages in the conversation at the last finished step
    end = exit_ev = None
    totals: dict = {}
    resumes = 0
    for ev in events:
        t, seq, step = ev.get("type"), ev.get("seq"), ev.get("step", 0)
        kind, group, label = _row(ev)
        groups[group] = groups.get(group, 0) + 1
        row = {"q": seq, "s": step, "t": ev.get("elapsed_s", 0), "k": kind, "g": group, "l": label}
        if t in ("llm_call", "step"):
            if ev.get("messages_delta"):
                row["m"] = len(convo)
            convo.extend(_message(m, seq, step) for m in ev.get("messages_delta") or [])
            if t == "step":
                checkpoint_at = len(convo)
                totals = ev.get("totals") or totals
        elif t == "resume":
            resumes += 1
            for m in convo[checkpoint_at:]:
                m["discarded"] = True
            convo.append(
                {"role": "resume", "content": label, "calls": [], "seq": seq, "step": step, "discarded": False}
            )
        elif t == "harness_eval":
            sha = ev.get("candidate_sha256")
            base_sha = best_sha or start_sha
            e = {
                "index": ev.get("index"),
                "step": step,
                "seq": seq,
                "status": ev.get("status"),
                "correct": bool(ev.get("correct")),
                "geomean": ev.get("geomean"),
                "baseline": ev.get("baseline"),
                "new_best": bool(ev.get("new_best")),
                "goal_met": bool(ev.get("goal_met")),
                "scenarios": f"{ev.get('scenarios_correct')}/{ev.get('scenarios_total')}",
                "extended": (
                    f"{ev.get('extended_correct')}/{ev.get('extended_total')}" if ev.get("extended_total") else None
                ),
                "min_ratio": ev.get("min_ratio"),
                "min_ratio_scenario": ev.get("min_ratio_scenario"),
                "error": _cut(ev.get("error"), 2000) if ev.get("error") else None,
                "failing": [p for p in ev.get("per_scenario") or [] if p.get("status") != "ok"][:20],
                "sha": sha,
                "diff": candidate_diff(path, base_sha, best_label if best_sha else "the starting kernel", sha),
            }
            g = ev.get("geomean")
            if ev.get("correct") and g is not None and (best is None or g > best):
                best, best_sha, best_label = g, sha, f"evaluation {ev.get('index')} (the best before)"
            e["best_after"] = best
            evals.append(e)
            curve.append(
                {
                    "step": step,
                    "geomean": g if ev.get("correct") else None,
                    "best": best,
                    "index": ev.get("index"),
                    "status": ev.get("status"),
                }
            )
        elif t == "question":
            questions.append(
                {
                    "step": step,
                    "seq": seq,
                    "trigger": ev.get("trigger"),
                    "category": question_category(ev),
                    "source": ev.get("source"),
                    "bank_id": ev.get("bank_id"),
                    "text": _cut(ev.get("text"), 1000),
                    "best": best,
                }
            )
        elif t == "exit":
            exit_ev = ev
        elif t == "run_end":
            end = ev
            totals = ev.get("totals") or totals
        rows.append(row)

    tools = {g.split(":", 1)[1]: n for g, n in groups.items() if g.startswith("tool:")}
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
        "finished": end is not None,
        "exit": (end or {}).get("exit_reason") or (exit_ev or {}).get("reason"),
        "limit": (exit_ev or {}).get("limit"),
        "goal_met": bool((end or {}).get("goal_met")),
        "best": best,
        "totals": totals,
        "resumes": resumes,
        "events": len(events),
        "problems": tf.problems[:20],
        "groups": groups,
        "tools": tools,
        "questions": questions,
        "evals": evals,
        "curve": curve,
        "rows": rows,
        "messages": convo,
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
