"""FA4 compiled before the sweep, in parallel, into FA4's own disk cache.

FlashAttention-4 (CuTe DSL) compiles a kernel on its first call for each configuration it derives
from a call's shapes (head dims, heads per KV head, causal, and choices that depend on the sequence
length and batch). In the sweep those compilations run one after another inside the worker, before
the timing of the first scenario of each configuration: about a minute of the sm90 grid's wall time
on the H200 (2026-12-03). Here several processes call FA4 once on every timed scenario's exact
shapes before the sweep measures anything (`bench` starts them before it builds the kernel: the two
overlap; the sweep's worker starts meanwhile and waits at a gate, harness/gate.py, until they have
ended), with FA4's disk cache (`FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED`) pointed at one folder; the
worker's FA4 adapter points at the same folder, so it loads what was compiled instead of compiling.
Nothing is timed here and nothing here decides a result: a failure only means the worker compiles
as before.

The parent never imports torch or FA4 (the harness's own process makes no CUDA context): each
process is `python -m kernelseek_suite.baselines.fa4_warm`, given its scenarios as JSON on stdin
(a file, so that every process starts at once).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from ..scenarios import Scenario

CACHE_ENABLED_ENV = "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"
CACHE_DIR_ENV = "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR"


def cache_folder() -> Path:
    return config.cache_dir() / "fa4-cute-dsl"


def enable_disk_cache(env: MutableMapping[str, str] | None = None) -> None:
    """FA4 reads these when `flash_attn.cute` is first imported; a value already set wins."""
    target: MutableMapping[str, str] = os.environ if env is None else env
    target.setdefault(CACHE_ENABLED_ENV, "1")
    target.setdefault(CACHE_DIR_ENV, str(cache_folder()))


def compile_groups(scns: list[Scenario], jobs: int) -> list[list[Scenario]]:
    """At most `jobs` lists: the scenarios of one (d_qk, d_v, heads per KV head, causal) stay in one
    list (they share most of their compilations, which a second process would only repeat), the
    lists balanced by their number of scenarios, largest groups placed first."""
    by_key: dict[tuple, list[Scenario]] = {}
    for s in scns:
        by_key.setdefault((s.d_qk, s.d_v, s.heads_q // s.heads_kv, s.causal), []).append(s)
    bins: list[list[Scenario]] = [[] for _ in range(max(1, min(jobs, len(by_key))))]
    for group in sorted(by_key.values(), key=len, reverse=True):
        min(bins, key=len).extend(group)
    return [b for b in bins if b]


@dataclass
class WarmResult:
    scenarios: int = 0
    called: int = 0
    failed: list = field(default_factory=list)  # "scenario: why"
    seconds: float = 0.0
    jobs: int = 0

    def to_dict(self) -> dict:
        return {
            "scenarios": self.scenarios,
            "called": self.called,
            "failed": self.failed[:10],
            "seconds": round(self.seconds, 1),
            "jobs": self.jobs,
        }


class Warming:
    """The warm-up processes `start` launched. `finish` waits for them (until `timeout_s` after the
    start) and returns what they did; `stop` ends them at once (a build that fails meanwhile)."""

    def __init__(self, procs: list[subprocess.Popen], res: WarmResult, timeout_s: float, t0: float, log: Path | None):
        self.procs, self.res, self.timeout_s, self.t0, self.log = procs, res, timeout_s, t0, log

    def finish(self) -> WarmResult:
        res = self.res
        for p in self.procs:
            try:
                stdout, _ = p.communicate(timeout=max(1.0, self.timeout_s - (time.time() - self.t0)))
            except subprocess.TimeoutExpired:
                _kill(p)
                res.failed.append(f"a warm-up process ran past {self.timeout_s:.0f} s")
                continue
            try:
                done = json.loads(stdout.strip().splitlines()[-1])
                res.called += int(done["called"])
                res.failed += [str(f) for f in done["failed"]]
            except (IndexError, ValueError, KeyError, TypeError):
                res.failed.append(f"a warm-up process exited {p.returncode} without its report")
        res.seconds = time.time() - self.t0
        return res

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                _kill(p)

    def kill(self) -> None:
        """Kills the processes without waiting for them: for a `finish` running in another thread,
        which then returns (with the processes' failures) instead of waiting for them."""
        for p in self.procs:
            if p.returncode is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)  # its own session: whatever it started goes too
    except (ProcessLookupError, PermissionError):
        p.kill()
    p.communicate()


def start(
    scns: list[Scenario],
    env: dict,
    jobs: int = config.SweepConfig.fa4_warm_jobs,
    timeout_s: float = config.SweepConfig.fa4_warm_timeout_s,
    log: Path | None = None,
    command: list[str] | None = None,
) -> Warming:
    """Starts the processes that call FA4 on every scenario's shapes, up to `jobs` of them (env: the
    GPU's, as the worker's), and returns at once; `command` replaces the child's command (tests)."""
    t0 = time.time()
    res = WarmResult(scenarios=len(scns))
    groups = compile_groups(scns, jobs)
    res.jobs = len(groups)
    child_env = dict(env)
    enable_disk_cache(child_env)
    Path(child_env[CACHE_DIR_ENV]).mkdir(parents=True, exist_ok=True)
    cmd = command or [sys.executable, "-m", "kernelseek_suite.baselines.fa4_warm"]
    procs = []
    with open(log, "a") if log else contextlib.nullcontext() as out:
        for g in groups:
            # each process reads its scenarios from a file of its own, there from the start: through
            # a pipe, a process would wait for its input until the parent got round to it, i.e. until
            # the processes before it had finished (measured: 8 processes one after another, 169 s)
            with tempfile.TemporaryFile("w+") as job:
                json.dump([s.to_dict() for s in g], job)
                job.seek(0)
                procs.append(
                    subprocess.Popen(
                        cmd,
                        stdin=job,
                        stdout=subprocess.PIPE,
                        stderr=out if out is not None else subprocess.DEVNULL,
                        env=child_env,
                        text=True,
                        start_new_session=True,
                    )
                )
    return Warming(procs, res, timeout_s, t0, log)


def _child() -> int:
    enable_disk_cache()
    scns = [Scenario(**d) for d in json.loads(sys.stdin.read())]
    called, failed = 0, []
    try:
        import torch
        from flash_attn.cute import flash_attn_func
    except Exception as e:  # not installed here: nothing to warm
        print(json.dumps({"called": 0, "failed": [f"import: {type(e).__name__}: {e}"]}))
        return 0
    for s in scns:
        try:
            q = torch.empty(s.batch, s.seqlen_q, s.heads_q, s.d_qk, device="cuda", dtype=torch.bfloat16).normal_()
            k = torch.empty(s.batch, s.seqlen_k, s.heads_kv, s.d_qk, device="cuda", dtype=torch.bfloat16).normal_()
            v = torch.empty(s.batch, s.seqlen_k, s.heads_kv, s.d_v, device="cuda", dtype=torch.bfloat16).normal_()
            flash_attn_func(q, k, v, softmax_scale=s.softmax_scale, causal=s.causal)
            torch.cuda.synchronize()
            called += 1
            del q, k, v
        except Exception as e:
            failed.append(f"{s.id}: {type(e).__name__}: {str(e)[:200]}")
    print(json.dumps({"called": called, "failed": failed}))
    return 0


if __name__ == "__main__":
    sys.exit(_child())
