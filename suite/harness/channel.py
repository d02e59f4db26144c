"""The private channel between the sweep (parent) and a worker (child).

The kernel runs inside the worker, so the worker's stdout is not trusted: a kernel's host code can
print whatever it likes there. Results travel instead over a pipe inherited by the worker, one line
per message, each signed with an HMAC under a key the parent sends on the worker's stdin (never on
its command line, environment or in a file), with a sequence number so no line can be replayed.
The parent drops every line that does not verify. The worker's stdout and stderr go to a log file.

Worker side: `job, chan = WorkerChannel.open(sys.argv)` (the channel's fd is the last argument),
then `chan.emit(kind, **payload)`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sys
from dataclasses import dataclass

MARK = "@@KS "


def _sign(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


@dataclass
class Message:
    kind: str
    payload: dict


class ParentChannel:
    """Created by the parent for one worker: a pipe, a fresh key, and the verifier."""

    def __init__(self):
        self.key = secrets.token_bytes(32)
        self.read_fd, self.write_fd = os.pipe()
        self.next_seq = 0
        self.rejected = 0

    def handshake(self, job: dict) -> bytes:
        """What the parent writes to the worker's stdin."""
        return json.dumps({"key": self.key.hex(), "job": job}).encode()

    def after_spawn(self) -> None:
        os.close(self.write_fd)  # the worker holds the only write end: EOF when it exits

    def verify(self, line: str) -> Message | None:
        at = line.rfind(MARK)
        if at < 0:
            self.rejected += 1
            return None
        rest = line[at + len(MARK) :].rstrip("\n")
        mac, _, body = rest.partition(" ")
        if not body or not hmac.compare_digest(mac, _sign(self.key, body)):
            self.rejected += 1
            return None
        try:
            msg = json.loads(body)
        except json.JSONDecodeError:
            self.rejected += 1
            return None
        if msg.get("seq") != self.next_seq:
            self.rejected += 1
            return None
        self.next_seq += 1
        msg.pop("seq")
        return Message(msg.pop("kind"), msg)

    def lines(self):
        with os.fdopen(self.read_fd, "r", errors="replace") as f:
            yield from f


class WorkerChannel:
    def __init__(self, key: bytes, fd: int):
        self.key = key
        self.stream = os.fdopen(fd, "w")
        self.seq = 0

    @classmethod
    def open(cls, argv: list[str] | None = None) -> tuple[dict, WorkerChannel]:
        argv = sys.argv if argv is None else argv
        fd = int(argv[-1])
        hello = json.loads(sys.stdin.buffer.read())
        sys.stdin.close()
        return hello["job"], cls(bytes.fromhex(hello["key"]), fd)

    def emit(self, kind: str, **payload) -> None:
        body = json.dumps({"seq": self.seq, "kind": kind, **payload})
        self.seq += 1
        self.stream.write(MARK + _sign(self.key, body) + " " + body + "\n")
        self.stream.flush()
