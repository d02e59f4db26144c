"""SIGTERM for the suite's commands: a Python handler that unwinds the command (its cleanup runs,
what was measured is on disk), and a watcher for the case the handler cannot run.

Python runs a signal's handler only on the main thread, between bytecodes: while that thread waits
in a call into C that never returns (a GPU kernel that does not finish, the CUDA call that waits for
it), `timeout` or a job scheduler's SIGTERM does nothing at all. The C-level part of Python's signal
handling still writes the signal's number to the wakeup file descriptor, on any thread, so a thread
reading it learns of the SIGTERM; if the handler has not started GRACE seconds later, the watcher
says why on stderr and ends the process with the code a shell reports for SIGTERM (143). Once the
handler has started, the watcher leaves the process alone: its cleanup takes the time it takes.
The watcher needs the held call to have released the GIL, as CUDA calls through torch and ctypes
do; a C loop that holds it is not covered."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from .. import config
from ..contracts import exitcodes

_started = threading.Event()  # a SIGTERM handler installed here began to run on the main thread
_watching = False


def on_sigterm(handler: Callable, grace_s: float | None = None) -> None:
    """Install `handler` for SIGTERM on the main thread, and (once per process) the watcher that ends
    the process `grace_s` (default `config.SIGTERM_GRACE_S`) after a SIGTERM the handler never took."""

    def marked(signum, frame):
        _started.set()
        return handler(signum, frame)

    signal.signal(signal.SIGTERM, marked)
    _watch(config.SIGTERM_GRACE_S if grace_s is None else grace_s)


def _watch(grace_s: float) -> None:
    global _watching
    if _watching or threading.current_thread() is not threading.main_thread():
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:
        previous = None
    if previous != -1:  # someone else reads the wakeup fd (an event loop): theirs stays
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(r)
        os.close(w)
        return
    _watching = True
    threading.Thread(target=_wait_for_sigterm, args=(r, grace_s), name="sigterm-watch", daemon=True).start()


def _wait_for_sigterm(r: int, grace_s: float) -> None:
    while signal.SIGTERM not in os.read(r, 64):
        pass
    if _started.wait(grace_s):
        return  # the command is unwinding on its own
    os.write(
        2,
        (
            f"error: SIGTERM: the command did not return from a call into C (a GPU kernel that does not "
            f"finish?) within {grace_s:g} s: ending it without its cleanup\n"
        ).encode(),
    )
    os._exit(exitcodes.signalled(signal.SIGTERM))
