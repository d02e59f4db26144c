"""A child in a process group of its own, as every process a run starts is (a shell command, an
evaluation, an agent command): it dies with the process that started it (containment.py,
`die_with_parent`), its group is registered with the reaper while it runs, and the whole group is
killed when the block that started it ends, so that nothing it left running in the background
outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..containment import die_with_parent
from . import reaper


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@contextmanager
def process_group(argv: list[str], cwd: Path, env: dict[str, str], stdout, stderr) -> Iterator[subprocess.Popen]:
    """`argv` started from `cwd` with `env` (no standard input); its group is killed when the block
    ends, however it ends."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    reaper.watch_group(proc.pid)
    try:
        yield proc
    finally:
        kill_group(proc.pid)
        proc.wait()
        reaper.release_group(proc.pid)


def run_in_group(argv: list[str], cwd: Path, env: dict[str, str], stdout, stderr, timeout_s: float) -> int | None:
    """`argv` in a process group of its own until it exits or `timeout_s` has passed; its exit code,
    None when it was killed at the timeout."""
    with process_group(argv, cwd, env, stdout, stderr) as proc:
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
