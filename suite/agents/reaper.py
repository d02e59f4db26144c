"""Nothing a run starts outlives the process that runs it, however that process ends (SIGKILL too).

Each process a run starts in a group of its own (a shell command, an evaluation, an agent command)
dies with the process that started it (containment.py, `die_with_parent`), and its group is
registered here; so is each temporary folder the run makes (its workspace, its sealed copy). A small
watcher process, started once per process that runs agents, holds the read end of a pipe whose only
write end that process holds: when the pipe closes (the process ended, whatever ended it) the watcher
kills every group still registered and removes every folder still registered, then exits. What the
run ends or removes itself it unregisters first, so a run that ends normally leaves the watcher
nothing to do, and a folder kept on purpose (--keep-workspace) is unregistered, not removed.

The watcher ignores SIGINT, SIGTERM and SIGHUP and runs in a session of its own, so a Ctrl-C or a
job scheduler's SIGTERM to the run's process group does not stop it before it has cleaned up. It can
be killed like any process of the user's (a sandboxed process cannot signal it where Landlock scopes
signals, see sandbox.py). This file also runs as that watcher: `python -I -S -B reaper.py`, the pipe
on its standard input, one line per change: `+group PGID`, `-group PGID`, `+dir PATH`, `-dir PATH`.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

_lock = threading.Lock()
_pipe: int | None = None
_owner: int | None = None  # the pid that started the watcher (a forked child must start its own)
_watcher: subprocess.Popen | None = None


def _send(line: str) -> None:
    global _pipe, _owner, _watcher
    with _lock:
        if _pipe is None or _owner != os.getpid():
            read, write = os.pipe()  # the write end is not inherited by anything we start
            try:
                _watcher = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-B", os.path.abspath(__file__)],
                    stdin=read,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError:
                os.close(write)
                return  # no watcher: the run still cleans up after itself when it ends normally
            finally:
                os.close(read)
            _pipe, _owner = write, os.getpid()
        try:
            os.write(_pipe, (line.replace("\n", " ") + "\n").encode())
        except OSError:
            pass


def watch_group(pgid: int) -> None:
    """Kill this process group if we die before `release_group`."""
    _send(f"+group {pgid}")


def release_group(pgid: int) -> None:
    _send(f"-group {pgid}")


def watch_dir(path) -> None:
    """Remove this folder if we die before `release_dir`."""
    _send(f"+dir {os.path.abspath(path)}")


def release_dir(path) -> None:
    _send(f"-dir {os.path.abspath(path)}")


def watcher_pid() -> int | None:
    """The watcher's process id, once one is started (for tests)."""
    return _watcher.pid if _watcher is not None and _owner == os.getpid() else None


def _remove(path: str) -> None:
    for dirpath, _dirnames, _files in os.walk(path):
        try:
            os.chmod(dirpath, stat.S_IRWXU)  # the sealed copy has no write bits
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    dirs: set[str] = set()
    for raw in sys.stdin.buffer:
        what, _, arg = raw.decode("utf-8", "replace").rstrip("\n").partition(" ")
        try:
            if what == "+group":
                groups.add(int(arg))
            elif what == "-group":
                groups.discard(int(arg))
            elif what == "+dir":
                dirs.add(arg)
            elif what == "-dir":
                dirs.discard(arg)
        except ValueError:
            continue
    # the pipe closed: the process that ran the runs is gone
    for attempt in range(3):
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if attempt < 2:
            time.sleep(0.2)
    for d in dirs:
        _remove(d)


if __name__ == "__main__":
    main()
