"""SIGTERM to a suite command (cli/termination.py): the handler unwinds the command where Python gets
control; where the main thread is held in a call into C (a GPU kernel that never finishes), the
watcher ends the process after the grace with 143. The held main thread is made real here: it
blocks SIGTERM at the OS level and sleeps in libc's `sleep` (GIL released, as in a CUDA call), so
the signal is taken on another thread and the Python handler can never run."""

from __future__ import annotations

import platform
import signal
import subprocess
import sys
import time

import pytest

CHILD = """
import ctypes, signal, sys, threading
from kernelseek_suite.cli import termination
def handler(signum, frame):
    print("handler ran", flush=True)
    raise SystemExit(143)
termination.on_sigterm(handler, grace_s={grace})
if {held}:
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGTERM}})
try:
    print("ready", flush=True)  # inside the try: a SIGTERM from here on finds the cleanup below
    if {held}:
        ctypes.CDLL(None).sleep(600)
    else:
        threading.Event().wait(600)
finally:
    print("cleanup ran", flush=True)
"""


# nanosleep and clock_nanosleep, as /proc/PID/task/TID/syscall numbers them on this machine
_SLEEP_SYSCALLS = {"x86_64": ("35", "230"), "aarch64": ("101", "115")}.get(platform.machine(), ())


def _wait_until_asleep_in_c(pid: int, timeout: float = 20.0) -> None:
    """Until the main thread of `pid` waits in (clock_)nanosleep: a SIGTERM sent before it got there
    would be taken by the Python handler between bytecodes (the race this waits out)."""
    if not _SLEEP_SYSCALLS:
        pytest.skip(f"the sleep syscalls' numbers on {platform.machine()} are not listed here")
    deadline = time.monotonic() + timeout
    path = f"/proc/{pid}/task/{pid}/syscall"
    while time.monotonic() < deadline:
        try:
            nr = open(path).read().split()[0]
        except (OSError, IndexError):
            nr = ""
        if nr in _SLEEP_SYSCALLS:
            return
        time.sleep(0.01)
    raise AssertionError(f"the child's main thread never slept in C ({path}: {nr!r})")


def _start(held: bool, grace: float) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(grace=grace, held=held)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "ready"
    if held:
        _wait_until_asleep_in_c(p.pid)
    return p


def test_held_in_c_the_watcher_ends_the_process_after_the_grace():
    p = _start(held=True, grace=1.0)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    waited = time.monotonic() - t0
    assert p.returncode == 143
    assert 1.0 <= waited < 10, waited
    assert "did not return from a call into C" in err
    assert "handler ran" not in out and "cleanup ran" not in out


def test_where_python_gets_control_the_handler_unwinds_and_the_watcher_stays_out():
    p = _start(held=False, grace=1.0)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 143
    assert out.splitlines() == ["handler ran", "cleanup ran"]
    assert "call into C" not in err


def test_a_slow_cleanup_is_not_cut_short_by_the_watcher():
    code = """
import signal, threading, time
from kernelseek_suite.cli import termination
def handler(signum, frame):
    raise SystemExit(143)
termination.on_sigterm(handler, grace_s=0.5)
try:
    print("ready", flush=True)
    threading.Event().wait(600)
finally:
    time.sleep(2)  # longer than the grace
    print("cleanup done", flush=True)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 143
    assert "cleanup done" in out, err
    assert "call into C" not in err


def test_the_cli_installs_it(tmp_path):
    """`kernelseek-suite` itself: a command held in C under `timeout` ends (the group installs the watcher)."""
    code = """
import ctypes, signal, sys
import click
from kernelseek_suite.cli import main
from kernelseek_suite import config
config.SIGTERM_GRACE_S = 1.0
@main.command("hold")
def hold():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    print("ready", flush=True)
    ctypes.CDLL(None).sleep(600)
sys.argv = ["kernelseek-suite", "hold"]
main()
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    _wait_until_asleep_in_c(p.pid)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143
    assert "did not return from a call into C" in err
