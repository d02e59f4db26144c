"""A stand-in for a coding-agent command line (as `codex exec`, `claude -p` or aider would be used),
for testing the agent-cmd arm without one:

    python standin_agent.py start PROMPT      a first session
    python standin_agent.py resume PROMPT     a later one, continuing the same conversation

It works on attn.c in the current directory and keeps its conversation in .standin/ there (as a real
CLI keeps its sessions). The first session marks the kernel, claims a limit and, with
STANDIN_HANG=1 in its environment, then hangs until it is stopped. A resumed session writes the
faster kernel of tests/agent_runs.py if its prompt asks a question, and says what it did."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from agent_runs import FASTER_KERNEL  # noqa: E402


def main(argv: list[str]) -> int:
    mode, prompt = argv[1], argv[2]
    state = Path(".standin")
    state.mkdir(exist_ok=True)
    log = state / "conversation.jsonl"
    if mode == "resume" and not log.exists():
        print("error: no session to resume", file=sys.stderr)
        return 2
    with open(log, "a") as f:
        f.write(json.dumps({"mode": mode, "prompt": prompt}) + "\n")
    kernel = Path("attn.c")
    if mode == "start":
        kernel.write_text(kernel.read_text() + "\n/* looked at by the stand-in */\n")
        print("I read the kernel and tidied it. It is memory-bound now; it cannot be improved further.", flush=True)
        if "STANDIN_HANG" in __import__("os").environ:
            time.sleep(3600)
        return 0
    if "?" in prompt:
        kernel.write_text(FASTER_KERNEL)
        print("Turned the P.V loop inside out: contiguous rows of v.", flush=True)
    else:
        print("Nothing more to do.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
