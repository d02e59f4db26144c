"""Run items (scenario shards, arm x seed agent runs) on a Dask cluster, one per worker at a time.

Each worker runs one item at a time (one thread per worker: one GPU, one item). While an item runs
it may report progress through its Channel: each report has a mark (a scenario id, say) and small
data; the client records it at once, so a worker that dies loses only what it had not reported.
Dask reschedules an item whose worker died on another worker; the retry asks its channel what was
already recorded and skips it. An item whose workers keep dying (Dask's allowed-failures) or that
raises is handed to `on_failure`, which by default raises.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import Any

from .cluster import ClusterError


@dataclass(frozen=True)
class WorkItem:
    key: str  # unique within a run, stable across resumes
    payload: Any
    workers: tuple[str, ...] | None = None  # run only on these worker addresses


class WorkersGone(ClusterError):
    """An item's workers are all gone: it cannot run until they are back (resume then)."""


@dataclass
class ItemFailure:
    key: str
    error: str
    worker_died: bool  # Dask gave up after its workers died running it (KilledWorker)
    exception: BaseException


class Channel:
    """What an item's function holds on the worker: report progress, read what earlier attempts of
    the same item reported. Both live on the scheduler, so they outlive a worker that dies."""

    def __init__(self, queue_name: str, marks_name: str, key: str):
        self.queue_name, self.marks_name, self.key = queue_name, marks_name, key
        self._marks: list[str] | None = None

    def recorded(self) -> set[str]:
        """Marks reported by earlier attempts of this item (an attempt whose worker died)."""
        return set(self._load())

    def emit(self, mark: str, data: Any = None) -> None:
        """Report `data` (JSON-serializable) under `mark`."""
        from distributed import Queue, Variable

        # as JSON text: the queue's msgpack would hand lists back as tuples
        Queue(self.queue_name).put({"key": self.key, "mark": mark, "data": json.dumps(data)})
        marks = self._load()
        marks.append(mark)
        Variable(self.marks_name).set(list(marks))  # after the data: a listed mark is never lost

    def _load(self) -> list[str]:
        if self._marks is None:
            from distributed import Variable

            try:
                # set before the item was submitted; gone only when the run no longer wants this item
                self._marks = list(Variable(self.marks_name).get(timeout=2) or [])
            except (TimeoutError, OSError):
                self._marks = []
        return self._marks


class NullChannel(Channel):
    """A channel for running an item's function in this process (serial runs, tests)."""

    def __init__(self, on_emit: Callable[[str, Any], None] | None = None):
        super().__init__("", "", "")
        self.on_emit = on_emit
        self._marks = []

    def emit(self, mark, data=None):
        self._marks.append(mark)
        if self.on_emit:
            self.on_emit(mark, data)


def _call(fn: Callable[[Any, Channel], Any], payload: Any, queue_name: str, marks_name: str, key: str):
    return fn(payload, Channel(queue_name, marks_name, key))


def worker_slots(client) -> dict[str, int]:
    """Threads of each worker: one item runs per thread, so each must be 1 (one per GPU)."""
    return {addr: w.get("nthreads", 1) for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()}


def check_one_item_per_worker(client) -> list[str]:
    slots = worker_slots(client)
    if not slots:
        raise ClusterError("the cluster has no workers")
    multi = {a: n for a, n in slots.items() if n != 1}
    if multi:
        raise ClusterError(
            "each worker must run one item at a time (one per GPU), but these have more threads: "
            + ", ".join(f"{a} ({n})" for a, n in sorted(multi.items()))
            + "; start workers with `--nthreads 1` (dask-cuda's worker does)"
        )
    return sorted(slots)


def run_items(
    client,
    items: list[WorkItem],
    fn: Callable[[Any, Channel], Any],
    *,
    on_emit: Callable[[WorkItem, str, Any], None] | None = None,
    on_result: Callable[[WorkItem, Any], None] | None = None,
    on_failure: Callable[[WorkItem, ItemFailure], list[WorkItem] | None] | None = None,
    poll_s: float = 0.1,
) -> dict[str, Any]:
    """Run `fn(item.payload, channel)` for every item on the cluster; returns {key: result} of the
    items that finished. Callbacks run in the calling thread, in the order things arrive; on_failure
    may return new items to run (the rest of a shard whose worker kept dying, say)."""
    if len({i.key for i in items}) != len(items):
        raise ValueError("work item keys must be unique")
    check_one_item_per_worker(client)
    run = _ItemsRun(client, items, fn, on_emit, on_result, on_failure)
    try:
        run.loop(poll_s)
    finally:
        run.close()
    return run.results


class _ItemsRun:
    """The state of one run_items call: the items waiting, the futures running, the marks each item
    reported, and the results."""

    def __init__(self, client, items, fn, on_emit, on_result, on_failure):
        from distributed import Queue, Variable, as_completed

        self.client, self.fn = client, fn
        self.on_emit, self.on_result, self.on_failure = on_emit, on_result, on_failure
        self.run = f"ks-{secrets.token_hex(6)}"
        self.queue = Queue(f"{self.run}-progress", client=client)
        self.marks: dict[str, list[str]] = {i.key: [] for i in items}
        self.variables = {i.key: Variable(f"{self.run}-marks-{i.key}", client=client) for i in items}
        for v in self.variables.values():
            v.set([])
        self.by_key = {i.key: i for i in items}
        self.results: dict[str, Any] = {}
        self.futures: dict = {}
        self.pending = as_completed()
        self.waiting = deque(items)

    def live_workers(self) -> set[str]:
        return set(self.client.scheduler_info(n_workers=-1)["workers"])

    def fill(self) -> None:
        """Hand out items while a worker is free: an item waits here, not queued behind a busy
        worker, so a worker that dies takes only its running item with it. Pools (per-class runs)
        are disjoint sets of workers."""
        live = self.live_workers()
        in_pool: dict = {}
        for it in self.futures.values():
            in_pool[it.workers] = in_pool.get(it.workers, 0) + 1
        for _ in range(len(self.waiting)):
            item = self.waiting.popleft()
            free = max(1, len(live)) - len(self.futures)
            if item.workers:
                free = min(free, len(live & set(item.workers)) - in_pool.get(item.workers, 0))
            if free <= 0:
                self.waiting.append(item)
                continue
            in_pool[item.workers] = in_pool.get(item.workers, 0) + 1
            self.submit(item)

    def submit(self, item: WorkItem) -> None:
        from distributed import Variable

        if item.key not in self.variables:
            self.by_key[item.key], self.marks[item.key] = item, []
            self.variables[item.key] = Variable(f"{self.run}-marks-{item.key}", client=self.client)
            self.variables[item.key].set([])
        fut = self.client.submit(
            _call,
            self.fn,
            item.payload,
            self.queue.name,
            self.variables[item.key].name,
            item.key,
            key=f"{self.run}-{item.key}",
            pure=False,
            retries=0,
            workers=list(item.workers) if item.workers else None,
            allow_other_workers=False,
        )
        self.futures[fut] = item
        self.pending.add(fut)

    def fail(self, item: WorkItem, exc: BaseException, worker_died: bool) -> None:
        if self.on_failure is None:
            raise exc
        failure = ItemFailure(item.key, f"{type(exc).__name__}: {exc}", worker_died, exc)
        for extra in self.on_failure(item, failure) or ():
            if extra.key in self.by_key:
                raise ValueError(f"work item key {extra.key!r} used twice")
            self.waiting.append(extra)

    def orphans(self) -> None:
        """Items bound to a pool none of whose workers is alive any more (a restarted worker comes
        back under a new address): they would wait for ever."""
        live = self.live_workers()
        stranded = [(f, i) for f, i in self.futures.items() if i.workers and not live & set(i.workers)]
        stranded += [(None, i) for i in self.waiting if i.workers and not live & set(i.workers)]
        for fut, item in stranded:
            if fut is not None:
                self.futures.pop(fut)
                fut.cancel()
            else:
                self.waiting.remove(item)
            _forget(self.variables.pop(item.key, None))
            gone = WorkersGone(f"none of the workers item {item.key} may run on is alive ({', '.join(item.workers)})")
            self.fail(item, gone, False)

    def drain(self) -> None:
        for msg in self.queue.get(batch=True) or ():
            key, mark = msg["key"], msg["mark"]
            if key not in self.marks or mark in self.marks[key]:
                continue  # reported again by a retry whose predecessor died before noting it
            self.marks[key].append(mark)
            if self.on_emit:
                self.on_emit(self.by_key[key], mark, json.loads(msg["data"]))

    def loop(self, poll_s: float) -> None:
        self.fill()
        last_check = time.monotonic()
        while self.futures or self.waiting:
            batch = self.pending.next_batch(block=False)
            self.drain()
            if not batch:
                if time.monotonic() - last_check > 2.0:
                    self.orphans()
                    self.fill()
                    last_check = time.monotonic()
                time.sleep(poll_s)
                continue
            for fut in batch:
                self.done(fut)
            self.fill()
        self.drain()

    def done(self, fut) -> None:
        """A future that completed: its result kept, or its failure handled."""
        from distributed.scheduler import KilledWorker

        if fut not in self.futures:
            return  # cancelled as stranded
        if fut.status not in ("finished", "error", "cancelled"):
            # its result lived on a worker that died before it was fetched: Dask runs it again
            self.pending.add(fut)
            return
        item = self.futures.pop(fut)
        if fut.status == "finished":
            self.results[item.key] = res = fut.result()
            if self.on_result:
                self.on_result(item, res)
        else:
            exc = fut.exception() if fut.status == "error" else CancelledError(item.key)
            self.fail(item, exc, isinstance(exc, KilledWorker))
        fut.release()
        _forget(self.variables.pop(item.key, None))

    def close(self) -> None:
        for fut in self.futures:
            fut.cancel()
        try:
            self.queue.close()  # not in every version; the queue is dropped with the client anyway
        except Exception:
            pass
        for v in self.variables.values():
            _forget(v)


def _forget(variable) -> None:
    if variable is None:
        return
    try:
        variable.delete()
    except Exception:
        pass
