"""Keeping the API key to the agent's own process.

- Every process the agent starts (the shell, the evaluator, the candidates, the profiler) gets an
  environment built from an allow-list (`child_env`), never a copy of ours.
- The key is taken out of our environment as soon as it is read (`take_api_key`): removed from
  os.environ, so nothing started later inherits it, and blanked in the environment block the process
  was started with, which is what /proc/<pid>/environ shows.
- The agent's process is made non-dumpable (`make_non_dumpable`): its /proc/<pid>/ files (environ,
  mem, fd, ...) then need CAP_SYS_PTRACE, which the sandbox drops even for root.
- What the key's holder cannot change: a process above it (a shell, a container's init) started
  with the key in its environment keeps it there; `ancestors_holding` finds them for the trace.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

API_KEY_ENV = "OPENAI_API_KEY"
PR_SET_DUMPABLE = 4

# variables a child may inherit; anything whose name looks like a secret is dropped regardless
ENV_KEEP = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "LD_LIBRARY_PATH",
    "KERNELSEEK_GPU",
)
ENV_KEEP_PREFIXES = ("LC_", "NVIDIA_")
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)

_held: dict[str, str] = {}


def child_env(extra: dict[str, str] | None = None, secrets: tuple[str, ...] = ()) -> dict[str, str]:
    """An environment for a child: the allow-listed variables of ours (none named like a secret,
    none holding one of `secrets`), plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES))
        and not SECRET_NAME.search(k)
        and not any(s and s in v for s in secrets)
    }
    env.update(extra or {})
    return env


def take_api_key(name: str = API_KEY_ENV) -> str | None:
    """The key from the environment, which then no longer holds it (see the module's notes)."""
    value = os.environ.get(name) or None
    if value is None:
        return None
    blank_initial_environ(name)
    os.environ.pop(name, None)
    _held[name] = value
    return value


def held_api_key(name: str = API_KEY_ENV) -> str | None:
    """The key as the environment has it, or as it had it before `take_api_key` (a long-lived
    process that runs several agents, e.g. a Dask worker)."""
    return take_api_key(name) or _held.get(name)


def user_environment() -> dict[str, str]:
    """Our environment as it was given, keys taken out of it included: for the one child that needs
    the user's own credentials, an agent command of the agent-cmd arm (which is not sandboxed)."""
    return {**os.environ, **_held}


def _environ_block() -> tuple[int, int] | None:
    """The address range of the environment block the process was started with (env_start,
    env_end in /proc/self/stat)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[47]), int(fields[48])
    except (OSError, ValueError, IndexError):
        return None


def blank_initial_environ(name: str) -> bool:
    """Zeroes the value of `name` where it lies in the process's initial environment block, so that
    /proc/<pid>/environ no longer shows it. False when it is not there (set later, or not Linux)."""
    block = _environ_block()
    if block is None:
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        ptr = libc.getenv(name.encode())
    except (OSError, AttributeError):
        return False
    if not ptr or not block[0] <= ptr < block[1]:
        return False
    size = len(ctypes.string_at(ptr))
    ctypes.memset(ptr, 0, size)
    return True


def make_non_dumpable() -> bool:
    """Our /proc/<pid>/ files become readable only with CAP_SYS_PTRACE. False where it failed."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def ancestors_holding(value: str | None) -> list[str]:
    """'name (pid)' of each process above ours whose /proc/<pid>/environ holds `value`."""
    if not value:
        return []
    found, pid, needle = [], os.getppid(), value.encode()
    while pid >= 1:
        proc = Path(f"/proc/{pid}")
        try:
            status = (proc / "status").read_text()
            if needle in (proc / "environ").read_bytes():
                name = next((l.split(None, 1)[1] for l in status.splitlines() if l.startswith("Name:")), "?")
                found.append(f"{name.strip()} ({pid})")
            pid = int(next(l.split()[1] for l in status.splitlines() if l.startswith("PPid:")))
        except (OSError, StopIteration, ValueError):
            break
    return found
