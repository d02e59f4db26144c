"""A model endpoint on loopback for the real coding-agent CLIs (codex, Claude Code, aider), speaking
each one's wire API over real HTTP, with a scripted model that makes one small edit to the kernel and
then finishes. It decides from the conversation it is sent, not from a counter, so a CLI's side
requests (Claude Code's title, a retried request) do not shift the script:

  POST /v1/responses          OpenAI Responses API, streamed (codex): a `function_call` of codex's
                              `exec_command` tool that inserts a comment line at the top of the
                              kernel, then, once the call's output comes back, a closing message
  POST /v1/messages           Anthropic Messages API, streamed (Claude Code): `Read` the kernel, `Edit`
                              it (the comment line before its first line, taken from what Read
                              returned), then a closing text; a request without tools (its title
                              request) gets a short JSON text
  POST /v1/chat/completions   OpenAI chat completions (aider, through litellm), streamed or not: the
                              kernel as aider sent it, whole, with the comment line at the top
                              (aider's `whole` edit format)
  HEAD or GET anything else   200, an empty model list

Every answer reports USAGE (prompt, completion) tokens in the API's own fields, so a test can check
what the CLI reported of its session. Every request is kept in `requests` ({path, body}).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler

from chat_server import LocalServer

USAGE = (1200, 30)  # prompt, completion tokens of every answer
DONE = "Done: the kernel has the comment line at its top."


def marker(cli: str) -> str:
    """The comment line the scripted model puts at the top of the kernel for this CLI."""
    return f"/* edited through the {cli} CLI against the local stub */"


class CLIStubServer(LocalServer):
    def __init__(self, kernel: str = "attn.c"):
        self.kernel = kernel
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._n = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                server._json(self, 200, {"object": "list", "data": []})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                body = json.loads(raw or b"{}")
                path = self.path.split("?")[0].rstrip("/")
                with server._lock:
                    server.requests.append({"path": path, "body": body})
                    server._n += 1
                    n = server._n
                route = {
                    "/v1/responses": server._responses,
                    "/v1/messages": server._messages,
                    "/v1/chat/completions": server._chat,
                }.get(path)
                if route is None:
                    server._json(self, 404, {"error": {"message": f"no route {path}", "type": "not_found"}})
                    return
                try:
                    route(self, body, n)
                except OSError:
                    pass  # the client went away

        self._serve(Handler)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        return [r["path"] for r in self.requests]

    # ---------------------------------------------------------------- codex: the Responses API
    def _responses(self, h, body: dict, n: int) -> None:
        items = body.get("input") or []
        answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
        if answered:
            item = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": DONE, "annotations": []}],
            }
        else:
            cmd = f"sed -i '1i {marker('codex')}' {self.kernel}"
            item = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": cmd}),
                "status": "completed",
            }
        rid = f"resp_{n}"
        p, c = USAGE
        usage = {
            "input_tokens": p,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": c,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": p + c,
        }
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": body.get("model")}
        events = [
            ("response.created", {"response": {**base, "status": "in_progress", "output": []}}),
            ("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress"}}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            ("response.completed", {"response": {**base, "status": "completed", "output": [item], "usage": usage}}),
        ]
        self._events(h, [(name, {"type": name, **data}) for name, data in events])

    # ---------------------------------------------------------------- Claude Code: the Messages API
    def _messages(self, h, body: dict, n: int) -> None:
        if not body.get("tools"):  # a side request (the session's title): not a step of the script
            blocks = [{"type": "text", "text": json.dumps({"title": "Edit the kernel"})}]
        else:
            blocks = self._claude_next(body)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        p, c = USAGE
        start = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": p,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        events = [("message_start", {"message": start})]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                events.append(("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": b["text"]}}))
            else:
                head = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                events.append(("content_block_start", {"index": i, "content_block": head}))
                delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
                events.append(("content_block_delta", {"index": i, "delta": delta}))
            events.append(("content_block_stop", {"index": i}))
        events.append(
            ("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": c}})
        )
        events.append(("message_stop", {}))
        self._events(h, [(name, {"type": name, **data}) for name, data in events])

    def _claude_next(self, body: dict) -> list[dict]:
        """Read the kernel, Edit it, then say it is done: the next of these after the last tool result."""
        names: dict[str, str] = {}
        last: tuple[str, str] | None = None  # (tool name, its result's text)
        for m in body.get("messages") or []:
            content = m.get("content")
            if not isinstance(content, list):
                continue
            for b in content:
                if b.get("type") == "tool_use":
                    names[b["id"]] = b["name"]
                elif b.get("type") == "tool_result":
                    text = b.get("content")
                    if isinstance(text, list):
                        text = "".join(x.get("text", "") for x in text if isinstance(x, dict))
                    last = (names.get(b.get("tool_use_id"), "?"), str(text or ""))
        system = json.dumps(body.get("system"))
        found = re.search(r"Primary working directory: ([^\\\"]+)", system)
        path = f"{found.group(1).strip() if found else '.'}/{self.kernel}"
        step = len(names) + 1
        if last is None:
            return [{"type": "tool_use", "id": f"toolu_{step}", "name": "Read", "input": {"file_path": path}}]
        if last[0] == "Read":
            first = next((_unnumbered(line) for line in last[1].splitlines() if _unnumbered(line).strip()), None)
            if first is not None:
                edit = {"file_path": path, "old_string": first, "new_string": f"{marker('claude')}\n{first}"}
                return [{"type": "tool_use", "id": f"toolu_{step}", "name": "Edit", "input": edit}]
        return [{"type": "text", "text": DONE}]

    # ---------------------------------------------------------------- aider: chat completions
    def _chat(self, h, body: dict, n: int) -> None:
        current = None
        for m in body.get("messages") or []:
            content = m.get("content")
            if isinstance(content, str):
                found = re.search(rf"(?:^|\n){re.escape(self.kernel)}\n```[^\n]*\n(.*?)```", content, re.S)
                if found:
                    current = found.group(1)
        if current is None:
            text = "I do not see the kernel in the chat."
        else:
            text = f"{self.kernel}\n```c\n{marker('aider')}\n{current}```\n"
        p, c = USAGE
        usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        base = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": body.get("model")}
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._json(h, 200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage})
            return

        def chunk(delta, finish=None, **extra):
            choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
            return {**base, "object": "chat.completion.chunk", "choices": choices, **extra}

        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [chunk({"content": text[i : i + 40]}) for i in range(0, len(text), 40)]
        chunks.append(chunk({}, "stop"))
        chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        self._events(h, [(None, c) for c in chunks], done=True)

    # ---------------------------------------------------------------- the wire
    @staticmethod
    def _events(h, events: list[tuple[str | None, dict]], done: bool = False) -> None:
        """Server-sent events (`event:` lines where named), then the connection closes."""
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        out = [(f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n" for name, data in events]
        if done:
            out.append("data: [DONE]\n\n")
        h.wfile.write("".join(out).encode())
        h.wfile.flush()

    @staticmethod
    def _json(h, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def _unnumbered(line: str) -> str:
    """A line of Claude Code's Read result without its number prefix (`   1\\t` or `1→`)."""
    return re.sub(r"^\s*\d+(?:\t|\u2192)", "", line)
