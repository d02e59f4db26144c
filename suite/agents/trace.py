"""Run traces: JSONL, one event per line, written and flushed as it happens.

The schema (version 2; version 1 traces are still read and validated) is `schemas/trace-v2.schema.json`,
described in docs/trace-schema.md. Big
artifacts live beside the trace in `<trace>.d/`: `blobs/<sha256>` (candidate kernels and workspace
files, content-addressed) and `evals/<n>/` (the evaluator's own outputs).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from jsonschema import Draft202012Validator

from ..provenance import now_utc

TRACE_SCHEMA_VERSION = 2
SCHEMA_VERSIONS = (1, 2)
REDACTED = "[redacted]"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj) -> str:
    return sha256_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def artifacts_dir(trace_path: Path) -> Path:
    return Path(trace_path).with_suffix(".d")


class TraceWriter:
    """Appends events to a trace file. Every string that equals or contains one of `secrets` is
    redacted before it is written; listeners see the event as written."""

    def __init__(self, path: Path, secrets: tuple[str, ...] = (), seq_start: int = 0, elapsed_offset: float = 0.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.artifacts = artifacts_dir(self.path)
        (self.artifacts / "blobs").mkdir(parents=True, exist_ok=True)
        self._secrets = tuple(s for s in secrets if s and len(s) >= 4)
        self._seq = seq_start
        self._t0 = time.monotonic() - elapsed_offset
        self._file = open(self.path, "a", encoding="utf-8")
        self.listeners: list[Callable[[dict], None]] = []
        self.step = 0
        self._stored: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> sha256 of files stored

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _redact_line(self, line: str) -> str:
        for s in self._secrets:
            line = line.replace(json.dumps(s)[1:-1], REDACTED)
        return line

    def messages_sha256(self, messages: list[dict]) -> str:
        """The hash of a conversation as the trace holds it (secrets redacted), so that the one rebuilt
        from the trace on resume matches it."""
        if not self._secrets:
            return sha256_json(messages)
        return sha256_json(json.loads(self._redact_line(json.dumps(messages))))

    def emit(self, type_: str, **fields) -> dict:
        event = {
            "type": type_,
            "seq": self._seq,
            "time": now_utc(),
            "elapsed_s": round(self.elapsed(), 3),
            "step": self.step,
            **fields,
        }
        line = self._redact_line(json.dumps(event, default=_jsonable))
        self._file.write(line + "\n")
        self._file.flush()
        self._seq += 1
        event = json.loads(line)
        for listener in self.listeners:
            listener(event)
        return event

    def redact(self, text: str) -> str:
        """`text` with every secret replaced (what a tool returns goes through here to the model)."""
        for s in self._secrets:
            text = text.replace(s, REDACTED)
        return text

    def redact_tree(self, root: Path) -> list[str]:
        """Rewrites every file under `root` (or `root` itself, a file) that holds a secret (what an
        evaluator, a profiler or an agent command left in the trace's folder); returns those it rewrote."""
        done = []
        root = Path(root)
        files = sorted(root.rglob("*")) if root.is_dir() else [root] if root.is_file() else []
        for p in files:
            if p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                clean = data
                for s in self._secrets:
                    clean = clean.replace(s.encode(), REDACTED.encode())
                if clean != data:
                    p.write_bytes(clean)
                    done.append(str(p.relative_to(root)) if p != root else p.name)
        return done

    def sync(self) -> None:
        os.fsync(self._file.fileno())

    def put_blob(self, data: bytes) -> str:
        """Stores `data` (secrets redacted, like events) under its sha256 and returns it."""
        for secret in self._secrets:
            data = data.replace(secret.encode(), REDACTED.encode())
        digest = sha256_bytes(data)
        p = self.artifacts / "blobs" / digest
        if not p.exists():
            tmp = p.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(p)
        return digest

    def put_file(self, path: Path) -> str:
        """Stores a file of any size (secrets redacted, streamed) under its sha256 and returns it. A file
        unchanged since it was last stored (same size, mtime and inode) is not read again."""
        path = Path(path)
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
        known = self._stored.get(key)
        if known and (self.artifacts / "blobs" / known).exists():
            return known
        h = hashlib.sha256()
        tmp = self.artifacts / "blobs" / f".incoming-{os.getpid()}-{secrets_token()}"
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            for chunk in redacted_chunks(src, self._secrets):
                h.update(chunk)
                dst.write(chunk)
        digest = h.hexdigest()
        final = self.artifacts / "blobs" / digest
        if final.exists():
            tmp.unlink()
        else:
            tmp.replace(final)
        self._stored[key] = digest
        return digest

    def blob_path(self, digest: str) -> Path:
        return self.artifacts / "blobs" / digest

    def get_blob(self, digest: str) -> bytes:
        return (self.artifacts / "blobs" / digest).read_bytes()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def secrets_token() -> str:
    import secrets

    return secrets.token_hex(6)


def redacted_chunks(f, secrets: tuple[str, ...], size: int = 1 << 20):
    """The bytes of an open file in chunks, every occurrence of a secret replaced by REDACTED (also one
    that straddles two chunks: the last len(secret) - 1 bytes are held back until the next chunk)."""
    needles = [s.encode() for s in secrets]
    keep = max((len(n) for n in needles), default=1) - 1
    carry = b""
    while True:
        chunk = f.read(size)
        buf = carry + chunk
        for n in needles:
            buf = buf.replace(n, REDACTED.encode())
        if not chunk:
            if buf:
                yield buf
            return
        if keep and len(buf) > keep:
            buf, carry = buf[:-keep], buf[-keep:]
        elif keep:
            buf, carry = b"", buf
        if buf:
            yield buf


def _jsonable(o):
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, tuple)):
        return list(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


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
    errors, notes = [], []
    version = TRACE_SCHEMA_VERSION
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


def _fmt_num(x, fmt="{:.3f}x") -> str:
    return "-" if x is None else fmt.format(x)


def _args_short(args: dict, width: int = 60) -> str:
    parts = []
    for k, v in args.items():
        s = v if isinstance(v, str) else json.dumps(v)
        s = " ".join(str(s).split())
        parts.append(f"{k}={s[:40] + '...' if len(s) > 40 else s}")
    out = ", ".join(parts)
    return out[:width] + ("..." if len(out) > width else "")


def timeline_lines(events: list[dict]) -> list[str]:
    lines = []
    for ev in events:
        t, head = ev.get("type"), f"[{ev.get('elapsed_s', 0):8.1f}s] step {ev.get('step', 0):>3}  "
        if t == "run_start":
            task = ev.get("task", {})
            lines.append(
                f"run {ev.get('run_id')}: arm {ev.get('arm')}, task {task.get('name')} "
                f"({task.get('kernel')}), model {ev.get('model', {}).get('name')}, seed {ev.get('seed')}, "
                f"sandbox {ev.get('sandbox', {}).get('sandbox')}, protections "
                f"{'complete' if (ev.get('protections') or {}).get('complete') else 'incomplete'}"
            )
            lines.append(f"  goal: {task.get('goal', {}).get('text', task.get('goal'))}")
        elif t == "llm_call":
            u, r = ev.get("usage", {}), ev.get("response", {})
            calls = ", ".join(
                f"{c['name']}({_args_short(c.get('arguments', {}), 50)})" for c in r.get("tool_calls", [])
            )
            text = " ".join((r.get("content") or "").split())
            lines.append(
                head + f"model  {u.get('prompt_tokens')}+{u.get('completion_tokens')} tok "
                f"{ev.get('latency_s', 0):.1f}s  " + (f"-> {calls}" if calls else f"says: {text[:100]}")
            )
            if calls and text:
                lines.append(" " * len(head) + f"       says: {text[:100]}")
        elif t == "tool_result":
            first = next((l for l in ev.get("output", "").splitlines() if l.strip()), "")
            lines.append(head + f"tool   {ev.get('tool')}{' ERROR' if ev.get('is_error') else ''}: {first[:100]}")
        elif t == "harness_eval":
            best = ev.get("best") or {}
            lines.append(
                head + f"eval   #{ev.get('index')} {ev.get('status')} "
                f"{ev.get('scenarios_correct')}/{ev.get('scenarios_total')} correct, geomean "
                f"{_fmt_num(ev.get('geomean'))} vs {ev.get('baseline')}"
                f"{'  NEW BEST' if ev.get('new_best') else ''}  (best {_fmt_num(best.get('geomean'))})"
                f"{'  goal met' if ev.get('goal_met') else ''}"
            )
        elif t == "decision":
            lines.append(head + f"decision point {ev.get('trigger')} (not asked: {ev.get('reason', '')})")
        elif t == "classification":
            u = ev.get("usage") or {}
            lines.append(
                head + f"classify {ev.get('purpose')}: {ev.get('verdict')}"
                f"{' ' + repr(ev['quote'][:80]) if ev.get('quote') else ''} "
                f"({u.get('prompt_tokens', 0)}+{u.get('completion_tokens', 0)} tok)"
                f"{': ' + ev['error'][:80] if ev.get('error') else ''}"
            )
        elif t == "question":
            src = ev.get("source") + (f" {ev.get('bank_id')}" if ev.get("bank_id") else "")
            lines.append(
                head + f"QUESTION [{ev.get('trigger')}; {src}; {ev.get('category') or 'typed'}]: {ev.get('text')}"
            )
        elif t == "retry":
            lines.append(
                head + f"retry  attempt {ev.get('attempt')} {ev.get('kind')}"
                f"{' ' + str(ev.get('status_code')) if ev.get('status_code') else ''}, wait "
                f"{ev.get('wait_s', 0):.1f}s: {ev.get('error', '')[:80]}"
            )
        elif t == "resume":
            lines.append(head + f"RESUMED (session {ev.get('session')}) from step {ev.get('from_step')}")
        elif t == "context":
            el = ev.get("elided") or {}
            lines.append(
                head + f"context compacted ({ev.get('reason')}): {ev.get('tokens_before')} -> "
                f"{ev.get('tokens_after')} tokens, window {ev.get('window_tokens')} "
                f"({ev.get('window_source')}); elided " + ", ".join(f"{k} {v}" for k, v in el.items() if v)
            )
        elif t == "invocation":
            first = next((l for l in (ev.get("output") or "").splitlines() if l.strip()), "")
            lines.append(
                head + f"agent  session {ev.get('session')} ({ev.get('mode')}): {ev.get('stopped')}"
                f"{'' if ev.get('exit_code') is None else ', exit ' + str(ev.get('exit_code'))} after "
                f"{ev.get('duration_s', 0):.0f}s: {first[:100]}"
            )
        elif t == "exit":
            lines.append(
                head + f"exit: {ev.get('reason')}"
                f"{' (' + ev['limit'] + ')' if ev.get('limit') else ''}: {ev.get('message', '')[:120]}"
            )
        elif t == "run_end":
            tot, best = ev.get("totals", {}), ev.get("best") or {}
            cost = tot.get("cost")
            lines.append(
                f"end: {tot.get('steps')} steps, {tot.get('total_tokens')} tokens, cost "
                f"{'-' if cost is None else f'${cost:.4f}'}, {tot.get('wall_s', 0):.1f}s, "
                f"{tot.get('evals')} evaluations, {tot.get('retries')} retries, "
                f"{tot.get('questions', 0)} questions; best {_fmt_num(best.get('geomean'))}; goal "
                f"{'met' if ev.get('goal_met') else 'not met'}"
            )
        elif isinstance(t, str) and t.startswith("x-"):
            lines.append(head + f"{t}")
    return lines
