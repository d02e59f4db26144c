"""A chat-completions endpoint on loopback whose answers follow a script, for driving complete agent
runs in tests. It speaks the OpenAI wire format (tool calls included) over real HTTP.

Script items (consumed one per request):
  reply(content, calls=[(name, args), ...], usage=(prompt, completion), cost=None, pace_s=0)
      args is a dict (sent as JSON) or a str (sent as is: malformed JSON on purpose)
  fault(status, retry_after=None)   an HTTP error status
  hang(seconds)                     answer only after `seconds` (the client times out first)
  reset()                           close the connection with a TCP reset, no answer
  recorded(name, pace_s=0)          a provider's answer as recorded in tests/fixtures/wire/: a JSON
                                    file {status, body} sent as is, or an .sse file of server-sent
                                    events sent one by one, `pace_s` apart
  a callable(request_json) -> item  decided when the request arrives
When the script is used up every request gets reply("nothing more to do"). A request with
`"stream": true` gets its reply as server-sent events (chat.completion.chunk: the content in pieces,
each tool call's arguments in pieces, the finish, and the usage when stream_options asks for it).

With `context_window=N` the server counts a request's tokens as a real one would (here: 4 characters
of its messages and tools to a token), refuses one over N with vLLM's 400 and message, and reports
the count as the prompt tokens of its answers; with `advertise_window=True` its model list (GET
/v1/models) says N as vLLM does (`max_model_len`).

A claimed-limit classification request (the KernelSeek arm's side call, decisions.py) does not take
a script item: `classifier(text) -> answer` answers it (default: the suite's patterns, "CLAIM" and
the sentence, or "NO"), with usage CLASSIFY_USAGE; it is kept in `classifications`, not `requests`.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WIRE = Path(__file__).parent / "fixtures" / "wire"


def reply(content=None, calls=(), usage=(100, 20), cost=None, pace_s=0.0):
    """`pace_s`: when the request streams, the seconds between its chunks."""
    return {"kind": "reply", "content": content, "calls": list(calls), "usage": usage, "cost": cost, "pace_s": pace_s}


def fault(status, retry_after=None):
    return {"kind": "fault", "status": status, "retry_after": retry_after}


def hang(seconds):
    return {"kind": "hang", "seconds": seconds}


def reset():
    return {"kind": "reset"}


def recorded(name: str, pace_s: float = 0.0):
    return {"kind": "recorded", "name": name, "pace_s": pace_s}


CLASSIFY_USAGE = (50, 3)


def rules_classifier(text: str) -> str:
    """The classification a model would give, decided here by the suite's own patterns."""
    from kernelseek_suite.agents.config import DEFAULT_CLAIMED_LIMIT_PATTERNS
    from kernelseek_suite.agents.decisions import claimed_limit

    found = claimed_limit(text, DEFAULT_CLAIMED_LIMIT_PATTERNS)
    return f"CLAIM\n{found['sentence']}" if found else "NO"


def is_classification(body: dict) -> bool:
    from kernelseek_suite.agents.decisions import CLASSIFY_INSTRUCTIONS

    msgs = body.get("messages") or []
    return bool(msgs) and msgs[0].get("role") == "system" and msgs[0].get("content") == CLASSIFY_INSTRUCTIONS


def request_tokens(body: dict) -> int:
    return (len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("tools", [])))) // 4


class LocalServer:
    """A real HTTP server on 127.0.0.1 (a free port), its requests handled in daemon threads, for a
    `with` block: the base of the tests' model endpoints (this module's and cli_stub_server.py's)."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class ScriptedChatServer(LocalServer):
    def __init__(
        self, script=(), context_window: int | None = None, advertise_window: bool = False, classifier=rules_classifier
    ):
        self.script = list(script)
        self.classifier = classifier
        self.classifications: list[dict] = []  # bodies of claimed-limit classification requests
        self.context_window, self.advertise_window = context_window, advertise_window
        self.refused: list[int] = []  # token counts of requests refused as too long
        self.requests: list[dict] = []  # {"path", "headers", "body"}
        self._lock = threading.Lock()
        self._n = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    entry = {"id": "scripted-model", "object": "model", "owned_by": "tests"}
                    if server.advertise_window and server.context_window:
                        entry["max_model_len"] = server.context_window
                    server._send_json(self, 200, {"object": "list", "data": [entry]})
                else:
                    server._send_json(self, 404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                tokens = request_tokens(body)
                if server.context_window and tokens > server.context_window:
                    with server._lock:
                        server.refused.append(tokens)
                    server._send_json(
                        self,
                        400,
                        {
                            "object": "error",
                            "type": "BadRequestError",
                            "code": 400,
                            "message": f"This model's maximum context length is "
                            f"{server.context_window} tokens. However, you requested "
                            f"{tokens} tokens in the messages, Please reduce the "
                            "length of the messages.",
                        },
                    )
                    return
                if is_classification(body):
                    with server._lock:
                        server.classifications.append(body)
                        server._n += 1
                        n = server._n
                    answer = server.classifier(body["messages"][-1]["content"])
                    server._answer(
                        self, answer if isinstance(answer, dict) else reply(answer, usage=CLASSIFY_USAGE), body, n
                    )
                    return
                with server._lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    item = server.script.pop(0) if server.script else reply("nothing more to do")
                    server._n += 1
                    n = server._n
                if callable(item):
                    item = item(body)
                try:
                    server._answer(self, item, body, n)
                except OSError:
                    pass  # the client gave up (a scripted hang)

            def finish(self):
                try:
                    super().finish()
                except OSError:
                    pass

        self._serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]

    def _answer(self, h: BaseHTTPRequestHandler, item: dict, body: dict, n: int) -> None:
        kind = item["kind"]
        if kind == "reset":
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
            h.close_connection = True
            return
        if kind == "hang":
            time.sleep(item["seconds"])
            item = fault(500)
        if kind == "recorded":
            path = WIRE / item["name"]
            if path.suffix == ".sse":
                events = [e for e in path.read_text().split("\n\n") if e.strip()]
                self._send_events(h, events, item["pace_s"])
            else:
                rec = json.loads(path.read_text())
                h.send_response(rec["status"])
                self._send(h, json.dumps(rec["body"]))
            return
        if item["kind"] == "fault":
            payload = json.dumps({"error": {"message": f"scripted status {item['status']}", "type": "scripted"}})
            h.send_response(item["status"])
            if item.get("retry_after") is not None:
                h.send_header("Retry-After", str(item["retry_after"]))
            self._send(h, payload)
            return
        calls = []
        for i, (name, args) in enumerate(item["calls"]):
            calls.append(
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
                }
            )
        message = {"role": "assistant", "content": item["content"]}
        if calls:
            message["tool_calls"] = calls
        p, c = item["usage"]
        if self.context_window:
            p = request_tokens(body)
        usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        if item.get("cost") is not None:
            usage["cost"] = item["cost"]
        finish = "tool_calls" if calls else "stop"
        if body.get("stream"):
            self._send_events(h, self._chunks(n, body, message, finish, usage), item.get("pace_s", 0.0))
            return
        payload = json.dumps(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )
        h.send_response(200)
        self._send(h, payload)

    @staticmethod
    def _chunks(n: int, body: dict, message: dict, finish: str, usage: dict) -> list[str]:
        """A reply as the chunks of a stream."""
        base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = body.get("model", "scripted")

        def chunk(delta, finish_reason=None):
            return "data: " + json.dumps(
                {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            )

        out = [chunk({"role": "assistant", "content": ""})]
        text = message.get("content") or ""
        for i in range(0, len(text), 16):
            out.append(chunk({"content": text[i : i + 16]}))
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call["function"]
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            args = fn["arguments"]
            for j in range(0, len(args), 24):
                out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j : j + 24]}}]}))
        out.append(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append("data: " + json.dumps({**base, "choices": [], "usage": usage}))
        return [*out, "data: [DONE]"]

    @staticmethod
    def _send_events(h, events: list[str], pace_s: float = 0.0) -> None:
        """Server-sent events, one write each (`pace_s` apart), then the connection closes."""
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        for event in events:
            if pace_s:
                time.sleep(pace_s)
            h.wfile.write((event.strip() + "\n\n").encode())
            h.wfile.flush()

    def _send_json(self, h, status: int, obj: dict) -> None:
        h.send_response(status)
        self._send(h, json.dumps(obj))

    @staticmethod
    def _send(h, payload: str) -> None:
        data = payload.encode()
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
