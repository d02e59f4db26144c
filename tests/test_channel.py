"""The private result channel: only signed lines, in order, from the worker that holds the key."""

import json

from kernelseek_suite.harness.channel import MARK, ParentChannel, _sign


def line(key: bytes, seq: int, kind="result", **payload) -> str:
    body = json.dumps({"seq": seq, "kind": kind, **payload})
    return MARK + _sign(key, body) + " " + body + "\n"


def test_signed_lines_in_order_are_accepted():
    ch = ParentChannel()
    m = ch.verify(line(ch.key, 0, "hello", device="x"))
    assert m.kind == "hello" and m.payload == {"device": "x"}
    assert ch.verify(line(ch.key, 1, "done")).kind == "done"


def test_forged_replayed_and_garbled_lines_are_dropped():
    ch = ParentChannel()
    assert ch.verify(line(b"another key" * 3, 0)) is None  # without the key
    assert ch.verify(line(ch.key, 5)) is None  # out of order
    assert ch.verify("@@KS " + json.dumps({"kind": "result"}) + "\n") is None
    assert ch.verify("hello world\n") is None
    good = line(ch.key, 0)
    assert ch.verify(good) is not None
    assert ch.verify(good) is None  # replayed
    assert ch.verify("garbage printed without a newline" + line(ch.key, 1)) is not None
    assert ch.rejected == 5


def test_the_handshake_carries_the_key_and_the_job():
    ch = ParentChannel()
    hello = json.loads(ch.handshake({"seed": 3}))
    assert bytes.fromhex(hello["key"]) == ch.key and hello["job"] == {"seed": 3}
    assert ParentChannel().key != ch.key
