"""Write protection for the agent's shell: a Landlock ruleset (Linux 5.13+, unprivileged) that lets
the command read and execute everything but write only inside the workspace, its scratch folder and
/dev. Applied in a small wrapper process that then execs the command, so the agent's process never
restricts itself:

    python -m kernelseek_suite.agents.sandbox --write DIR [--write DIR ...] -- COMMAND...

Where Landlock is missing (another OS, an old kernel, a container that blocks it, or the `landlock`
package not installed) the shell runs unrestricted; the evaluator's file guard (guard.py) still
detects any change to the harness before an evaluation.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path


@functools.lru_cache(1)
def landlock_status() -> tuple[bool, str]:
    """(available, detail): whether a Landlock sandbox can be applied here, and why not."""
    if not sys.platform.startswith("linux"):
        return False, f"Landlock is Linux-only (this is {sys.platform})"
    try:
        import landlock
    except ImportError:
        return False, "the 'landlock' package is not installed (pip install 'kernelseek-suite[agents]')"
    try:
        abi = landlock.landlock_abi_version()
    except OSError as e:
        return False, f"the kernel refuses Landlock: {e}"
    return True, f"landlock ABI {abi}"


def wrap(argv: list[str], writable: list[Path]) -> list[str]:
    """The command line that runs `argv` under the ruleset."""
    out = [sys.executable, "-m", "kernelseek_suite.agents.sandbox"]
    for p in writable:
        out += ["--write", str(p)]
    return out + ["--", *argv]


def apply(writable: list[str]) -> None:
    """Restrict the calling process (and everything it execs) to writing inside `writable` and /dev."""
    import landlock
    from landlock import FSAccess

    ruleset = landlock.Ruleset()
    read_only = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    ruleset.allow("/", rules=read_only)
    ruleset.allow("/dev")
    for p in writable:
        ruleset.allow(p)
    ruleset.apply()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    writable = []
    while args and args[0] == "--write":
        writable.append(args[1])
        args = args[2:]
    if not args or args[0] != "--" or len(args) < 2:
        sys.stderr.write("usage: python -m kernelseek_suite.agents.sandbox --write DIR ... -- COMMAND...\n")
        return 2
    apply(writable)
    os.execvp(args[1], args[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
