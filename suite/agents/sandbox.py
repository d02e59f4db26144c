"""The sandbox launcher: applies a Landlock ruleset (Linux 5.13+, unprivileged) and drops every
capability, then execs the command, so that the command and everything it starts can read only the
paths given with --read, write only those given with --write (and /dev), and, even as root, cannot
override file permissions or read the memory and environment of a process that made itself
non-dumpable (the agent's). Applied in a small wrapper process, so the caller never restricts itself:

    python -I -B sandbox.py --read DIR ... --write DIR ... [--keep-cap N ...] -- COMMAND...

This file runs as a script (from the sealed copy of the suite, see seal.py): it imports nothing of
the package. Which paths a process gets is decided in policy.py. Where Landlock is missing (another
OS, an old kernel, a container that blocks it, or the `landlock` package not installed) nothing is
applied and the trace records it (see docs/threat-model.md).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from dataclasses import dataclass, field

PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_LAST_FALLBACK = 40


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


@dataclass(frozen=True)
class Policy:
    """What a sandboxed process may touch: `read` paths (read and execute), `write` paths (everything),
    /dev always; capabilities dropped except `keep_caps` (numbers, e.g. 21 for CAP_SYS_ADMIN)."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    keep_caps: tuple[int, ...] = field(default=())

    def argv(self) -> list[str]:
        out = []
        for p in self.read:
            out += ["--read", p]
        for p in self.write:
            out += ["--write", p]
        for c in self.keep_caps:
            out += ["--keep-cap", str(c)]
        return out


def wrap(argv: list[str], policy: Policy, launcher: str | None = None) -> list[str]:
    """The command line that runs `argv` under `policy` (`launcher`: this file, by default the copy
    the caller imported; the sealed evaluator passes its own copy)."""
    return [sys.executable, "-I", "-B", launcher or os.path.abspath(__file__), *policy.argv(), "--", *argv]


def apply(policy: Policy) -> None:
    """Restricts the calling process, and everything it execs, to `policy`."""
    import landlock
    from landlock import FSAccess

    ruleset = landlock.Ruleset()  # handles every access right the kernel's ABI knows
    read_only = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    file_rights = FSAccess.all_file()
    for p in policy.read:
        if os.path.isdir(p):
            ruleset.allow(p, rules=read_only)
        elif os.path.exists(p):
            ruleset.allow(p, rules=FSAccess.READ_FILE | FSAccess.EXECUTE)
    ruleset.allow("/dev")
    for p in policy.write:
        ruleset.allow(p, rules=None if os.path.isdir(p) else file_rights)
    drop_capabilities(policy.keep_caps)
    ruleset.apply()


def drop_capabilities(keep: tuple[int, ...] = ()) -> None:
    """Empties the bounding, ambient and inheritable sets (a root process then gets no capability
    across exec). Without CAP_SETPCAP (not root) there is nothing to drop."""
    libc = ctypes.CDLL(None, use_errno=True)
    last = _cap_last()
    for cap in range(last + 1):
        if cap not in keep:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) == 0:
        for d in data:
            d.inheritable = 0
        libc.capset(ctypes.byref(header), data)


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return CAP_LAST_FALLBACK


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    read, write, keep = [], [], []
    while len(args) >= 2 and args[0] in ("--read", "--write", "--keep-cap"):
        {"--read": read, "--write": write, "--keep-cap": keep}[args[0]].append(args[1])
        args = args[2:]
    if not args or args[0] != "--" or len(args) < 2:
        sys.stderr.write("usage: sandbox.py --read DIR ... --write DIR ... [--keep-cap N] -- COMMAND...\n")
        return 2
    apply(Policy(tuple(read), tuple(write), tuple(int(c) for c in keep)))
    os.execvp(args[1], args[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
