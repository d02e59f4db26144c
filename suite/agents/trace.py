"""Writing run traces: JSONL, one event per line, written and flushed as it happens.

The format and its reader are a contract (`contracts/traces.py`, `contracts/schemas/trace-v2.schema.json`,
docs/trace-schema.md): what reads a trace needs nothing from here. Big artifacts live beside the trace
in `<trace>.d/`: `blobs/<sha256>` (candidate kernels and workspace files, content-addressed) and
`evals/<n>/` (the evaluator's own outputs).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..contracts.traces import artifacts_dir
from ..provenance import now_utc

REDACTED = "[redacted]"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj) -> str:
    return sha256_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


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
