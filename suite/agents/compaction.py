"""Keeping the conversation inside the model's context window.

The window comes from `--context-tokens`, else from the endpoint's model list where it says it, else
from the first request the endpoint refuses as too long. Before each model call the request is
estimated (characters per token, calibrated on the prompt tokens the endpoint reports); past
`compact_at` of the room left for the prompt it is compacted down to `compact_to`, in this order,
oldest first, until it fits:

1. file contents kept only at their latest version: a view or a write of a file that a later whole
   view or whole write of the same file supersedes is elided;
2. tool outputs of older turns (all but the last `keep_recent_turns`) are cut to their first lines;
3. long arguments of older tool calls (code written, long commands) are cut likewise;
4. older turns are taken out whole; a summary of what they did (steps, edits, commands, evaluations,
   questions) stands in for them, right after the task;
5. the recent turns get steps 2 and 3 too, the latest last.

The system prompt and the task are never touched; every tool call keeps its result, so the
conversation stays well formed. The result is deterministic (no model writes the summary), so a
resumed run rebuilds exactly the conversation the trace's `context` event holds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from .config import ContextConfig

SUMMARY_HEAD = "[Context summary]"
ELIDED = "[elided"
MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN = 1.5, 6.0
SHORT = 300  # tool outputs and arguments up to this many characters are never cut


def _chars(messages: list[dict], tools: list[dict] | None = None) -> int:
    return len(json.dumps(messages)) + (len(json.dumps(tools)) if tools else 0)


@dataclass
class Estimator:
    """Tokens of a request from its characters, calibrated on what the endpoint reports."""

    chars_per_token: float

    def tokens(self, messages: list[dict], tools: list[dict] | None = None) -> int:
        return math.ceil(_chars(messages, tools) / self.chars_per_token)

    def calibrate(self, messages: list[dict], tools: list[dict] | None, prompt_tokens: int) -> None:
        if prompt_tokens > 0:
            ratio = _chars(messages, tools) / prompt_tokens
            self.chars_per_token = round(min(MAX_CHARS_PER_TOKEN, max(MIN_CHARS_PER_TOKEN, ratio)), 4)


# ---------------------------------------------------------------- the conversation as turns


@dataclass
class Turn:
    """One step: the assistant message, the results of its tool calls, and what the harness said after
    it (questions, refusals)."""

    step: int
    messages: list[dict]

    @property
    def assistant(self) -> dict:
        return self.messages[0]

    def calls(self) -> list[tuple[dict, dict | None]]:
        """(tool call, its result message) pairs."""
        results = {m.get("tool_call_id"): m for m in self.messages if m["role"] == "tool"}
        return [(c, results.get(c.get("id"))) for c in self.assistant.get("tool_calls") or []]


def split(messages: list[dict], first_step: int) -> tuple[list[dict], dict | None, list[dict], list[Turn]]:
    """(head: system and task, the summary message or None, messages before the first turn, turns)."""
    head, rest = messages[:2], messages[2:]
    summary = None
    if rest and rest[0]["role"] == "user" and str(rest[0].get("content") or "").startswith(SUMMARY_HEAD):
        summary, rest = rest[0], rest[1:]
    lead: list[dict] = []
    turns: list[Turn] = []
    for m in rest:
        if m["role"] == "assistant":
            turns.append(Turn(first_step + len(turns), [m]))
        elif turns:
            turns[-1].messages.append(m)
        else:
            lead.append(m)
    return head, summary, lead, turns


def join(head, summary, lead, turns) -> list[dict]:
    out = list(head) + ([summary] if summary else []) + list(lead)
    for t in turns:
        out.extend(t.messages)
    return out


def _args(call: dict) -> dict:
    try:
        a = json.loads(call["function"].get("arguments") or "{}")
        return a if isinstance(a, dict) else {}
    except (ValueError, KeyError, TypeError):
        return {}


def _set_args(call: dict, args: dict) -> None:
    call["function"] = {**call["function"], "arguments": json.dumps(args)}


def _path(p) -> str:
    p = str(p or "")
    return p[2:] if p.startswith("./") else p


def _elided(text) -> bool:
    return isinstance(text, str) and text.startswith(ELIDED)


def _cut(text: str, what: str) -> str:
    first = next((l for l in text.splitlines() if l.strip()), "")[:160]
    return f"{ELIDED}: {what}, {len(text)} characters; it began: {first!r}]"


# ---------------------------------------------------------------- the stages


def _file_items(turns: list[Turn]) -> list[tuple[int, str, str, dict, dict | None, bool]]:
    """Every view or write of a file, in order: (turn index, path, kind, call, result, whole)."""
    items = []
    for ti, t in enumerate(turns):
        for call, result in t.calls():
            name, args = call.get("function", {}).get("name"), _args(call)
            if name == "view_file" and result is not None:
                whole = not args.get("start_line") and not args.get("end_line")
                items.append((ti, _path(args.get("path")), "view", call, result, whole))
            elif name == "edit_file":
                items.append((ti, _path(args.get("path")), "write", call, result, not args.get("old_text")))
    return items


def elide_superseded(turns: list[Turn], upto: int) -> int:
    """Stage 1: views and writes (in turns before `upto`) of a file that a later whole version replaces."""
    items = _file_items(turns)
    latest_whole: dict[str, int] = {}
    for n, (_, path, _, _, _, whole) in enumerate(items):
        if whole:
            latest_whole[path] = n
    count = 0
    for n, (ti, path, kind, call, result, _) in enumerate(items):
        if ti >= upto or latest_whole.get(path, -1) <= n:
            continue
        step = turns[ti].step
        if kind == "view" and not _elided(result.get("content")) and len(result.get("content") or "") > SHORT:
            result["content"] = (
                f"{ELIDED}: the content of {path} as viewed at step {step}; a later version of the "
                "file is further down]"
            )
            count += 1
        elif kind == "write":
            args = _args(call)
            changed = False
            for key in ("new_text", "old_text"):
                v = args.get(key)
                if isinstance(v, str) and len(v) > SHORT and not _elided(v):
                    args[key] = (
                        f"{ELIDED}: {len(v)} characters of {path} written at step {step}; a later version "
                        "of the file is further down]"
                    )
                    changed = True
            if changed:
                _set_args(call, args)
                count += 1
    return count


def elide_outputs(turns: list[Turn], over, lo: int, hi: int) -> int:
    """Stage 2: tool outputs of turns lo..hi-1, oldest first, while `over()`."""
    count = 0
    for t in turns[lo:hi]:
        for m in t.messages:
            if not over():
                return count
            if m["role"] == "tool" and len(m.get("content") or "") > SHORT and not _elided(m["content"]):
                m["content"] = _cut(m["content"], f"tool output of step {t.step}")
                count += 1
    return count


def elide_arguments(turns: list[Turn], over, lo: int, hi: int) -> int:
    """Stage 3: long string arguments of tool calls of turns lo..hi-1, oldest first, while `over()`."""
    count = 0
    for t in turns[lo:hi]:
        for call in t.assistant.get("tool_calls") or []:
            if not over():
                return count
            args = _args(call)
            long = [k for k, v in args.items() if isinstance(v, str) and len(v) > SHORT and not _elided(v)]
            for k in long:
                args[k] = _cut(args[k], f"argument {k} of step {t.step}")
            if long:
                _set_args(call, args)
                count += 1
    return count


# ---------------------------------------------------------------- the summary of turns taken out


def turn_line(t: Turn) -> str:
    parts = []
    for call, result in t.calls():
        name, args = call.get("function", {}).get("name", "?"), _args(call)
        out = (result or {}).get("content") or ""
        if name == "edit_file":
            what = "replaced text in" if args.get("old_text") else "wrote"
            parts.append(f"{what} {_path(args.get('path'))}")
        elif name == "view_file":
            parts.append(f"viewed {_path(args.get('path'))}")
        elif name == "shell":
            cmd = " ".join(str(args.get("command", "")).split())[:80]
            first = out.splitlines()[0] if out else ""
            parts.append(f"ran `{cmd}` ({first[:40]})" if not _elided(cmd) else "ran a command")
        elif name == "evaluate":
            lines = [l for l in out.splitlines() if l.strip()]
            keep = [l for l in lines if l.startswith(("status:", "speed vs"))][:2] or lines[:1]
            parts.append("evaluated: " + "; ".join(k[:120] for k in keep))
        else:
            parts.append(name)
    said = " ".join((t.assistant.get("content") or "").split())[:120]
    asked = [" ".join(str(m.get("content") or "").split())[:160] for m in t.messages if m["role"] == "user"]
    line = f"- step {t.step}: " + ("; ".join(parts) or "no tool call") + (f"; said: {said!r}" if said else "")
    if asked:
        line += "; then the harness said: " + " / ".join(repr(a) for a in asked)
    return line


def summary_text(lines: list[str], first: int, last: int, max_chars: int) -> str:
    """The summary message: one line per step taken out; the oldest lines folded into a count when it
    grows past `max_chars` (lines about evaluations are kept longest)."""
    head = (
        f"{SUMMARY_HEAD} Steps {first}-{last} of this run were taken out of the conversation to keep it inside "
        "the model's context window. What they did:"
    )
    body = list(lines)
    folded = 0
    while body and len(head) + sum(len(l) + 1 for l in body) > max_chars:
        i = next((n for n, l in enumerate(body) if "evaluated:" not in l), 0)
        body.pop(i)
        folded += 1
    fold = [f"- ({folded} earlier step(s) without evaluations not listed)"] if folded else []
    return "\n".join([head, *fold, *body])


@dataclass
class CompactionResult:
    messages: list[dict]
    tokens_before: int
    tokens_after: int
    elided: dict[str, int]
    summary_lines: list[str]
    dropped_through_step: int
    fits: bool
    turn_lines: dict[str, str]


@dataclass
class ContextState:
    """What the run knows about its window, kept across compactions and resumes."""

    window_tokens: int | None = None
    window_source: str = "unknown"  # option | endpoint | refusal | unknown
    chars_per_token: float = 3.5
    dropped_through_step: int = 0  # steps 1..this are in the summary, not the conversation
    summary_lines: list[str] = field(default_factory=list)
    # the summary line of each step still in the conversation, written while the step was whole
    turn_lines: dict[str, str] = field(default_factory=dict)
    compactions: int = 0

    def to_dict(self) -> dict:
        return {
            "window_tokens": self.window_tokens,
            "window_source": self.window_source,
            "chars_per_token": self.chars_per_token,
            "dropped_through_step": self.dropped_through_step,
            "summary_lines": list(self.summary_lines),
            "turn_lines": dict(self.turn_lines),
            "compactions": self.compactions,
        }


class ContextManager:
    def __init__(self, config: ContextConfig, reserve_tokens: int | None = None):
        self.config = config
        self.state = ContextState(
            config.window_tokens, "option" if config.window_tokens else "unknown", config.chars_per_token
        )
        self.estimator = Estimator(self.state.chars_per_token)
        self.reserve = reserve_tokens if reserve_tokens is not None else config.reserve_tokens

    def load(self, state: dict) -> None:
        self.state = ContextState(**{k: v for k, v in state.items() if k in ContextState.__dataclass_fields__})
        if self.config.window_tokens and self.state.window_source != "refusal":
            self.state.window_tokens, self.state.window_source = self.config.window_tokens, "option"
        self.estimator.chars_per_token = self.state.chars_per_token

    def set_window(self, tokens: int | None, source: str) -> None:
        if tokens and (self.state.window_tokens is None or tokens < self.state.window_tokens):
            self.state.window_tokens, self.state.window_source = int(tokens), source

    @property
    def room(self) -> int | None:
        """Tokens the prompt may take (the window less what the answer needs)."""
        w = self.state.window_tokens
        return None if w is None else max(256, w - min(self.reserve, w // 4))

    def tokens(self, messages, tools) -> int:
        return self.estimator.tokens(messages, tools)

    def calibrate(self, messages, tools, prompt_tokens: int) -> None:
        self.estimator.calibrate(messages, tools, prompt_tokens)
        self.state.chars_per_token = self.estimator.chars_per_token

    def needs_compaction(self, messages, tools) -> bool:
        room = self.room
        return room is not None and self.tokens(messages, tools) > self.config.compact_at * room

    def compact(self, messages: list[dict], tools: list[dict], target: int, first_step: int) -> CompactionResult:
        """The conversation elided down to `target` tokens or as near as it goes. `first_step`: the step
        of the first turn in `messages` (steps before it are already in the summary)."""
        msgs = json.loads(json.dumps(messages))  # never edit the caller's messages
        before = self.tokens(msgs, tools)
        head, summary, lead, turns = split(msgs, first_step)
        elided = {"superseded_files": 0, "tool_outputs": 0, "arguments": 0, "turns_dropped": 0}
        lines = list(self.state.summary_lines)
        # a step is summed up while it is whole: before this compaction (or an earlier one) cuts it
        turn_lines = {str(t.step): self.state.turn_lines.get(str(t.step)) or turn_line(t) for t in turns}
        dropped_through = first_step - 1

        def current():
            s = summary
            if lines:
                s = {"role": "user", "content": summary_text(lines, 1, dropped_through, self._summary_room(target))}
            return join(head, s, lead, turns)

        def over():
            return self.tokens(current(), tools) > target

        keep = max(1, self.config.keep_recent_turns)
        old = max(0, len(turns) - keep)
        elided["superseded_files"] += elide_superseded(turns, len(turns) - 1)
        if over():
            elided["tool_outputs"] += elide_outputs(turns, over, 0, old)
        if over():
            elided["arguments"] += elide_arguments(turns, over, 0, old)
        while over() and len(turns) > keep:
            t = turns.pop(0)
            lines.append(turn_lines.pop(str(t.step)))
            dropped_through = t.step
            elided["turns_dropped"] += 1
        if lead and over():  # messages from before the first turn still here (a resume notice)
            lead = []
        for lo in range(len(turns) - keep, len(turns)):  # the recent turns, the latest last
            if over() and lo >= 0:
                elided["tool_outputs"] += elide_outputs(turns, over, lo, lo + 1)
                elided["arguments"] += elide_arguments(turns, over, lo, lo + 1)
        out = current()
        after = self.tokens(out, tools)
        return CompactionResult(out, before, after, elided, lines, dropped_through, after <= target, turn_lines)

    def _summary_room(self, target: int) -> int:
        return max(2000, int(target * self.estimator.chars_per_token * 0.2))

    def accept(self, result: CompactionResult) -> None:
        self.state.summary_lines = result.summary_lines
        self.state.turn_lines = result.turn_lines
        self.state.dropped_through_step = result.dropped_through_step
        self.state.compactions += 1
