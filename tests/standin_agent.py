"""A stand-in for a coding-agent command line (as `codex exec`, `claude -p` or aider would be used),
for testing the agent-cmd arm without one:

    python standin_agent.py start PROMPT      a first session
    python standin_agent.py resume PROMPT     a later one, continuing the same conversation

It works on attn.c in the current directory and keeps its conversation in .standin/ there (as a real
CLI keeps its sessions). The first session marks the kernel, claims a limit and, with
STANDIN_HANG=1 in its environment, then hangs until it is stopped. A resumed session writes the
faster kernel of tests/agent_runs.py if its prompt asks a question, and says what it did.

    python standin_agent.py --as claude|codex|aider ARGS...

takes the arguments of that CLI as the agent-cmd adapter of the same name gives them, and answers
with the CLI's recorded output (tests/fixtures/agent_cli/), as the real tool does at the end of a
session: Claude Code's `--output-format json` result, codex's `exec --json` events, aider's
`Tokens:` lines. Its conversation goes to $STANDIN_HOME (as the real CLIs keep theirs outside the
workspace), aider's chat history to the file named by --chat-history-file; as aider does, the
aider stand-in leaves a `.aider.tags.cache.v4/` folder in the workspace. A Claude stand-in without
`Bash(gcc:*)` in --allowedTools cannot build, and answers with the recorded permission denial."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from agent_runs import FASTER_KERNEL  # noqa: E402

RECORDED = Path(__file__).parent / "fixtures" / "agent_cli"


def main(argv: list[str]) -> int:
    if argv[1] == "--as":
        return emulate(argv[2], argv[3:])
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
        if "STANDIN_HANG" in os.environ:
            time.sleep(3600)
        return 0
    if "?" in prompt:
        kernel.write_text(FASTER_KERNEL)
        print("Turned the P.V loop inside out: contiguous rows of v.", flush=True)
    else:
        print("Nothing more to do.", flush=True)
    return 0


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


# options that take a value, per CLI (the prompt is the first argument that is neither one nor a flag)
VALUED = {
    "claude": {"--output-format", "--allowedTools", "--permission-mode", "--model"},
    "codex": {"--sandbox", "--model", "-m", "-s"},
    "aider": {"--message", "--chat-history-file", "--input-history-file", "--model"},
}


def _prompt(cli: str, args: list[str]) -> str:
    if cli == "aider":
        return _option(args, "--message") or ""
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in VALUED[cli]:
            skip = True
        elif not a.startswith("-") and a not in ("resume", "exec", "-p"):
            return a
    return ""


def emulate(cli: str, args: list[str]) -> int:
    home = Path(os.environ.get("STANDIN_HOME", ".standin"))
    home.mkdir(parents=True, exist_ok=True)
    resume = {"claude": "--continue" in args, "codex": "resume" in args, "aider": "--restore-chat-history" in args}[cli]
    prompt = _prompt(cli, args)
    with open(home / f"{cli}.jsonl", "a") as f:
        f.write(json.dumps({"argv": args, "resume": resume, "prompt": prompt}) + "\n")
    kernel = Path("attn.c")
    if cli == "aider":
        history = Path(_option(args, "--chat-history-file") or ".aider.chat.history.md")
        if resume and not history.exists():
            print("error: no chat history to restore", file=sys.stderr)
            return 2
        with open(history, "a") as f:
            f.write(f"#### {prompt}\n")
        Path(".aider.tags.cache.v4").mkdir(exist_ok=True)
        (Path(".aider.tags.cache.v4") / "cache.db").write_bytes(b"tags")
    if resume:
        kernel.write_text(FASTER_KERNEL)
    else:
        kernel.write_text(kernel.read_text() + "\n/* looked at by the stand-in */\n")
    name = {"claude": "claude-print-json.txt", "codex": "codex-exec-json.jsonl", "aider": "aider-message.txt"}[cli]
    if cli == "claude" and "Bash(gcc:*)" not in (_option(args, "--allowedTools") or "").split(","):
        name = "claude-print-json-denied.txt"
    text = (RECORDED / name).read_text()
    if cli == "codex":  # `exec resume` reports the thread's usage so far, as codex-cli 0.171 does
        text = _codex_thread_usage(text, sum(1 for _ in open(home / "codex.jsonl")) if resume else 1)
    sys.stdout.write(text)
    return 0


def _codex_thread_usage(text: str, sessions: int) -> str:
    """The recorded session's events, each turn.completed's usage counted `sessions` times over."""
    out = []
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(ev, dict) and ev.get("type") == "turn.completed" and isinstance(ev.get("usage"), dict):
            ev["usage"] = {k: v * sessions if isinstance(v, int) else v for k, v in ev["usage"].items()}
            line = json.dumps(ev)
        out.append(line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
