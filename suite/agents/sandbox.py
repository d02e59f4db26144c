"""The sandbox launcher: applies a Landlock ruleset (Linux 5.13+, unprivileged) and drops every
capability, then execs the command, so that the command and everything it starts can read only the
paths given with --read, write only those given with --write, use only the device files given with
--dev (by default every entry of /dev but the shared writable ones: /dev/shm, /dev/mqueue,
/dev/hugepages), signal and reach (abstract UNIX sockets) no process outside its sandbox where the
kernel's Landlock has scopes (ABI 6+), and, even as root, cannot override file permissions or read
the memory and environment of a process that made itself non-dumpable (the agent's). Applied in a
small wrapper process, so the caller never restricts itself:

    python -I -S -B sandbox.py --read DIR ... --write DIR ... [--dev PATH ...] [--keep-cap N ...] [--uid N]
        -- COMMAND...

This file runs as a script (from the sealed copy of the suite, see seal.py), with `-S`: no site
folder, so no `.pth` file or `sitecustomize` runs before the ruleset is applied. It imports nothing
but the standard library: Landlock is reached through its three system calls, so no package has to
be installed for it. Which paths a process gets is decided in policy.py. Where Landlock is missing
(another OS, a kernel without it or with it disabled, a container whose seccomp filter blocks its
calls) nothing is applied and the trace records it (see docs/threat-model.md).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
import sys
from dataclasses import dataclass, field
from typing import NoReturn

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE, PR_CAP_AMBIENT_CLEAR_ALL = 2, 4
PR_SET_KEEPCAPS = 8
CAP_LAST_FALLBACK = 40

# Landlock's system calls (the same numbers on x86_64 and arm64) and constants (linux/landlock.h)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3 and 5
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

# under /dev: writable by every user and kept across runs, so never granted (a run could leave a
# file there for a later one); everything else of /dev is (the GPU's device files among it)
DEV_SHARED = ("shm", "mqueue", "hugepages")

WHY_NOT = {
    errno.ENOSYS: "this kernel has no Landlock (it needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)",
    errno.EOPNOTSUPP: "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)",
    errno.EPERM: "a seccomp filter (a container's) refuses the Landlock system calls (Docker 20.10+ and Podman allow "
    "them by default)",
}


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version; OSError (with its errno) where there is none."""
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, f"Landlock is Linux-only (this is {sys.platform})")
    libc = _libc()
    abi = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if abi < 0:
        e = ctypes.get_errno()
        raise OSError(e, WHY_NOT.get(e, os.strerror(e)))
    return int(abi)


@functools.lru_cache(1)
def landlock_status() -> tuple[bool, str]:
    """(available, detail): whether a Landlock sandbox can be applied here, and why not."""
    try:
        return True, f"landlock ABI {abi_version()}"
    except OSError as e:
        return False, e.strerror or str(e)


@dataclass(frozen=True)
class Policy:
    """What a sandboxed process may touch: `read` paths (read and execute), `write` paths (everything),
    `dev` device files and folders (read, write and ioctl; None: every entry of /dev but DEV_SHARED);
    capabilities dropped except `keep_caps` (numbers, e.g. 21 for CAP_SYS_ADMIN); `uid`: the user it
    runs as, switched to after the ruleset (from root only; its group too, no supplementary groups)."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    keep_caps: tuple[int, ...] = field(default=())
    dev: tuple[str, ...] | None = None
    uid: int | None = None

    def argv(self) -> list[str]:
        out = []
        for p in self.read:
            out += ["--read", p]
        for p in self.write:
            out += ["--write", p]
        for p in self.dev or ():
            out += ["--dev", p]
        for c in self.keep_caps:
            out += ["--keep-cap", str(c)]
        if self.uid is not None:
            out += ["--uid", str(self.uid)]
        return out


def wrap(argv: list[str], policy: Policy, launcher: str | None = None) -> list[str]:
    """The command line that runs `argv` under `policy` (`launcher`: this file, by default the copy
    the caller imported; the sealed evaluator passes its own copy)."""
    return [sys.executable, "-I", "-S", "-B", launcher or os.path.abspath(__file__), *policy.argv(), "--", *argv]


def default_dev(root: str = "/dev") -> list[str]:
    """Every entry of /dev but the shared writable folders (DEV_SHARED) and the links (which point
    into /proc, whose rules are the read rules)."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [os.path.join(root, n) for n in names if n not in DEV_SHARED and not os.path.islink(os.path.join(root, n))]


def handled(abi: int) -> int:
    """Every filesystem access right the kernel's ABI knows (all of them are restricted)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def apply(policy: Policy) -> None:
    """Restricts the calling process, and everything it execs, to `policy`."""
    abi = abi_version()
    fs = handled(abi)
    file_rights = fs & (EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV)
    libc = _libc()
    attr = _RulesetAttr(fs, 0, (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else ctypes.sizeof(ctypes.c_uint64)
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")

    def allow(path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # gone, or not reachable: nothing to grant
        try:
            is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
            rule = _PathBeneath(rights if is_dir else rights & file_rights, fd)
            if libc.syscall(
                SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), 0
            ):
                raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        finally:
            os.close(fd)

    try:
        for p in policy.read:
            allow(p, READ_FILE | READ_DIR | EXECUTE)
        for p in default_dev() if policy.dev is None else policy.dev:
            allow(p, fs)
        for p in policy.write:
            allow(p, fs)
        drop_capabilities(policy.keep_caps)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    switch_user(policy.uid, policy.keep_caps)


def switch_user(uid: int | None, keep_caps: tuple[int, ...] = ()) -> None:
    """From root, become `uid` (its group too, no supplementary groups): every capability goes with
    it but `keep_caps` (kept as ambient capabilities, so the command it execs has them too), and files
    that root owns (/proc/sys, /proc/sysrq-trigger) are out of reach even where the ruleset lets the
    process write under /proc. Nothing to do for None, or when not root."""
    if uid is None or os.geteuid() != 0:
        return
    libc = _libc()
    if keep_caps:
        libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if keep_caps:
        header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
        for c in keep_caps:
            bit = 1 << (c % 32)
            data[c // 32].effective |= bit
            data[c // 32].permitted |= bit
            data[c // 32].inheritable |= bit
        if libc.capset(ctypes.byref(header), data):
            raise OSError(ctypes.get_errno(), "capset")
        for c in keep_caps:
            if libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0):
                raise OSError(ctypes.get_errno(), f"raising ambient capability {c}")


def drop_capabilities(keep: tuple[int, ...] = ()) -> None:
    """Empties the bounding, ambient and inheritable sets (a root process then gets no capability
    across exec). Without CAP_SETPCAP (not root) there is nothing to drop."""
    libc = ctypes.CDLL(None, use_errno=True)
    last = _cap_last()
    for cap in range(last + 1):
        if cap not in keep:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) == 0:
        for d in data:
            d.inheritable = 0
        libc.capset(ctypes.byref(header), data)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAP_VERSION_3 = 0x20080522


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return CAP_LAST_FALLBACK


def main(argv: list[str] | None = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    read: list[str] = []
    write: list[str] = []
    dev: list[str] = []
    keep: list[str] = []
    uid: list[str] = []
    while len(args) >= 2 and args[0] in ("--read", "--write", "--dev", "--keep-cap", "--uid"):
        {"--read": read, "--write": write, "--dev": dev, "--keep-cap": keep, "--uid": uid}[args[0]].append(args[1])
        args = args[2:]
    if not args or args[0] != "--" or len(args) < 2:
        sys.exit("usage: sandbox.py --read DIR ... --write DIR ... [--dev PATH] [--keep-cap N] [--uid N] -- COMMAND...")
    apply(
        Policy(
            tuple(read),
            tuple(write),
            tuple(int(c) for c in keep),
            tuple(dev) if dev else None,
            int(uid[-1]) if uid else None,
        )
    )
    os.execvp(args[1], args[1:])  # never returns


if __name__ == "__main__":
    main()
