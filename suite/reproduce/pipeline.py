"""`reproduce`: regenerate `results/<arch>/` end to end, or, without the right GPU, do what can
still be done and say plainly what was not.

With the GPU (natively, or inside the pinned container, which runs this same code natively):
  1. the bf16 GEMM ceiling, in a child process;
  2. `bench` of the architecture's kernel (the reference kernel stands in while it does not exist)
     over the 182 scenarios and the extended set, beside the baselines;
  3. the GEMM ceiling again, in a child started during the sweep that waits for its end; the higher
     median is the ceiling the report divides by;
  4. the head-to-head table and plots, where agent traces exist and the `compare` command is here;
  5. REPORT.md, tables and plots, rendered from the raw data.
Without it: the static checks of every architecture's kernels (rule and nvcc build), and the
shipped results rendered into a separate folder, marked "shipped, not re-measured".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import config
from .. import scenarios as _scenarios
from ..contracts import exitcodes
from ..reports.data import CEILING, MEASURED, RECORD, SHIPPED, NoResults
from . import kernels as _kernels
from .outcome import IMAGE_ENV, Outcome

if TYPE_CHECKING:
    from .gemm import GatedChild, GemmCeiling

RUNTIMES = ("auto", "docker", "native")
# how long the second ceiling's child, started during the sweep, waits for the sweep to end: only a
# backstop, for the parent ends it itself (and it dies with the parent); past it, a fresh child measures
CEILING_GATE_TIMEOUT_S = 4 * 3600.0
# reproduce.json's `phases`: seconds from the run's start to the end of each step (None where a step
# did not happen in this run: no FA4 warm-up, no row, or the sweep on a Dask cluster). `fa4_warm_s` is
# the warm-up's own length (provenance.json's fa4_warm.seconds)
PHASES = (
    "ceiling_before_done",
    "build_done",
    "fa4_warm_done",
    "fa4_warm_s",
    "worker_ready",
    "first_row",
    "last_row",
    "ceiling_after_done",
    "report_done",
)


@dataclass
class ReproduceRequest:
    arch: str = "sm90"
    runtime: str = "auto"
    root: Path = config.REPO_ROOT
    out: Path | None = None  # default: results/<arch>, or build/reproduce/<arch> for a partial run
    gpu_index: int = 0
    seed: int | None = None
    scenario_filter: str | None = None  # for a quick partial sweep; the full run uses every scenario
    extended: bool = True
    ceiling_reps: int = config.GEMM_CEILING_REPS
    rebuild_image: bool = False
    resume: bool = False  # continue an interrupted run in `out` (rows already measured are kept)
    # where the sweep runs (run.Executor, chosen by the command line): None is this GPU (run.LOCAL);
    # scaleout.bench.Dask shards it over a cluster's GPUs (native only)
    executor: Any = None

    def results_dir(self) -> Path:
        return Path(self.out) if self.out else Path(self.root) / "results" / self.arch

    def partial_dir(self) -> Path:
        return Path(self.out) if self.out else Path(self.root) / "build" / "reproduce" / self.arch


Notify = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


def _now() -> str:
    from ..provenance import now_utc

    return now_utc()


def head_to_head(root: Path, notify: Notify = _quiet) -> dict:
    """Regenerate the head-to-head table and plots from agent traces, where they exist, with the
    `compare` command in a process of its own."""
    traces = Path(root) / "results" / "compare"
    if not traces.is_dir() or not any(p.is_file() for p in traces.rglob("*")):
        return {"status": f"skipped: no agent traces in {traces.relative_to(root)}"}
    notify(f"head-to-head: regenerating from the traces in {traces}")
    p = subprocess.run(
        [sys.executable, "-m", "kernelseek_suite.cli", "compare", "--from-traces", str(traces)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
    return {
        "status": "ok" if p.returncode == 0 else f"failed (exit {p.returncode})",
        "dir": str(traces),
        "output": tail,
    }


def _ceiling(
    req: ReproduceRequest, notify: Notify, when: str, measure: Callable[[], GemmCeiling] | None = None
) -> dict:
    """A ceiling measured by `measure` (a fresh child by default); its failure is recorded, not raised."""
    from .gemm import CeilingError, measure_in_child

    notify(f"GEMM ceiling ({when} the sweep): bf16 {config.GEMM_CEILING_N}^3, {req.ceiling_reps} runs")
    try:
        if measure is None:
            return measure_in_child(req.gpu_index, reps=req.ceiling_reps).to_dict()
        return measure().to_dict()
    except CeilingError as e:
        notify(f"GEMM ceiling not measured: {e}")
        return {"error": str(e)}


class CeilingAfter:
    """The second ceiling. Its child starts once the sweep's worker is ready, so that its imports
    overlap the sweep and not the worker's own start; it waits at a gate, off the GPU, until
    `measure` opens it after the sweep. Without a worker (nothing left to measure) a fresh child
    measures, as it does after a sweep on a Dask cluster. `kill` ends the child if the sweep fails."""

    def __init__(self, req: ReproduceRequest, notify: Notify):
        self.req, self.notify = req, notify
        self.child: GatedChild | None = None

    def on_phase(self, name: str) -> None:
        """Called from the sweep's loop, in the thread of the run: the child dies with that thread."""
        if name != "worker_ready" or self.child is not None:
            return
        from . import gemm

        try:
            self.child = gemm.GatedChild(
                self.req.gpu_index, reps=self.req.ceiling_reps, gate_timeout_s=CEILING_GATE_TIMEOUT_S
            )
        except OSError as e:  # the sweep goes on; a fresh child measures after it
            self.notify(f"GEMM ceiling child not started early: {e}")

    def measure(self) -> dict:
        from .gemm import GateTimedOut

        child, self.child = self.child, None
        if child is None:
            return _ceiling(self.req, self.notify, "after")
        try:
            return _ceiling(self.req, self.notify, "after", child.measure)
        except GateTimedOut as e:
            self.notify(f"{e}; measuring in a fresh child")
            return _ceiling(self.req, self.notify, "after")
        finally:
            child.kill()

    def kill(self) -> None:
        child, self.child = self.child, None
        if child is not None:
            child.kill()


def _read(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


class Phases:
    """When each step of a run ended, in seconds from `t0`; a step seen again keeps its first time,
    except the last row. Marked from the sweep's threads too (one dict item set at a time)."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.seconds: dict[str, float | None] = dict.fromkeys(PHASES)

    def mark(self, name: str) -> None:
        if self.seconds.get(name) is None or name == "last_row":
            self.seconds[name] = round(time.time() - self.t0, 1)

    def to_dict(self) -> dict:
        return dict(self.seconds)


def ceiling_record(before: dict, after: dict) -> dict:
    """The ceiling the report divides by is the higher of the two medians: what the GPU showed it
    can do in this run."""
    vals = [c["tflops"] for c in (before, after) if c.get("tflops")]
    base = before if before.get("tflops") else after
    return {
        **{k: v for k, v in base.items() if k != "tflops"},
        "tflops": max(vals) if vals else None,
        "before_tflops": before.get("tflops"),
        "after_tflops": after.get("tflops"),
        "errors": [c["error"] for c in (before, after) if c.get("error")],
    }


def run_native(req: ReproduceRequest, notify: Notify = _quiet, on_row=None, on_start=None) -> Outcome:
    """The measured run, on this machine's GPU (or the executor's cluster). Raises NoGPUError without
    a suitable one and BuildError when the kernel does not build."""
    from ..bench import BenchRequest, rerender
    from ..gpu import require_gpu
    from ..run import Hooks

    require_gpu(req.arch, req.gpu_index)
    out = req.results_dir()
    out.mkdir(parents=True, exist_ok=True)
    plan = _kernels.plan(req.arch, req.root)
    if plan.stand_in:
        notify(plan.stand_in)
    baselines = list(config.REPRODUCE[req.arch]["baselines"])
    image = json.loads(os.environ[IMAGE_ENV]) if os.environ.get(IMAGE_ENV) else None
    t0 = time.time()
    phases = Phases(t0)
    record = _started_record(req, plan, baselines, image, out)
    run_dir = out / plan.kernel.stem
    bench = BenchRequest(
        kernel=plan.kernel,
        arch=req.arch,
        baselines=baselines,
        scenario_filter=req.scenario_filter,
        extended=req.extended,
        out_dir=run_dir,
        seed=req.seed,
        gpu_index=req.gpu_index,
        resume=req.resume and (run_dir / "bench.jsonl").exists(),
    )
    ceilings: dict = {}

    def ceiling_before() -> None:
        # FA4's compilations and the kernel's build were started first by the local executor, so
        # that they overlap this ceiling (the warm-up took 40.2 s in the run of 2026-12-03T18:52). Its
        # processes spend their first seconds importing (11-14 s each, measured on the H200), and the
        # report divides by the higher of the two ceilings, so the one measured meanwhile loses nothing
        ceilings["before"] = _ceiling_before(req, out, notify)
        phases.mark("ceiling_before_done")
        notify(f"bench: {record['kernel']} on {req.arch} beside {', '.join(baselines)} -> {run_dir}")

    def row_done(row) -> None:
        phases.mark("first_row")
        phases.mark("last_row")
        if on_row is not None:
            on_row(row)

    ceiling_after = CeilingAfter(req, notify)

    def on_phase(name: str) -> None:
        phases.mark(name)
        ceiling_after.on_phase(name)

    try:
        hooks = Hooks(on_row=row_done, on_start=on_start, on_phase=on_phase, before_sweep=ceiling_before)
        summary = _executor(req).run(bench, hooks).summary
        after = ceiling_after.measure()
    finally:  # a sweep that fails or is interrupted leaves no ceiling child behind
        ceiling_after.kill()
    phases.mark("ceiling_after_done")
    (out / CEILING).write_text(json.dumps(ceiling_record(ceilings["before"], after), indent=1))
    if image:  # the image is part of the provenance of every number in the run
        prov_path = run_dir / "provenance.json"
        prov = json.loads(prov_path.read_text())
        prov["container"] = image
        prov_path.write_text(json.dumps(prov, indent=1))
        summary = rerender(run_dir)
    return _finished(req, out, run_dir, record, phases, summary, notify)


def _executor(req: ReproduceRequest):
    from ..run import LOCAL

    return req.executor if req.executor is not None else LOCAL


def _started_record(req: ReproduceRequest, plan, baselines: list[str], image: dict | None, out: Path) -> dict:
    """reproduce.json as the run starts (resuming: the first start counts, each restart is noted)."""
    previous = _read(out / RECORD) if req.resume else {}
    record = {
        "arch": req.arch,
        "status": "running",
        "runtime": "docker" if image else "native",
        "command": f"kernelseek-suite reproduce --arch {req.arch}",
        "date_start": _now(),
        "kernel": str(plan.kernel.relative_to(req.root)),
        "stand_in": plan.stand_in,
        "missing_kernels": plan.missing,
        "run": plan.kernel.stem,
        "baselines": baselines,
        "scenario_filter": req.scenario_filter,
        "image": image,
        "resumed": [],
    }
    if previous.get("run") == record["run"]:
        record.update(date_start=previous.get("date_start"), resumed=previous.get("resumed", []) + [_now()])
    (out / RECORD).write_text(json.dumps(record, indent=1))
    return record


def _ceiling_before(req: ReproduceRequest, out: Path, notify: Notify) -> dict:
    """The first GEMM ceiling (a resumed run keeps the one it measured), written at once."""
    before = _read(out / CEILING).get("before") if req.resume else None
    if not before:
        before = _ceiling(req, notify, "before")
        (out / CEILING).write_text(json.dumps({"before": before}, indent=1))
    return before


def _finished(req, out: Path, run_dir: Path, record: dict, phases: Phases, summary: dict, notify) -> Outcome:
    """The head-to-head's section, reproduce.json completed, the report rendered: the Outcome."""
    from ..reports import render
    from ..results import read_jsonl

    record["head_to_head"] = head_to_head(req.root, notify)
    sweep_s = sum(r.wall_s for r in read_jsonl(run_dir / "bench.jsonl"))
    warm = _read(run_dir / "provenance.json").get("fa4_warm") if phases.seconds["fa4_warm_done"] is not None else None
    phases.seconds["fa4_warm_s"] = warm.get("seconds") if isinstance(warm, dict) else None
    record.update(
        status=MEASURED,
        date_end=_now(),
        wall_s=round(time.time() - phases.t0, 1),
        sweep_s=round(sweep_s, 1),
        phases=phases.to_dict(),
    )
    (out / RECORD).write_text(json.dumps(record, indent=1))
    rendered = render(out, html=True)
    phases.mark("report_done")
    record["phases"] = phases.to_dict()
    (out / RECORD).write_text(json.dumps(record, indent=1))
    ok = (
        summary["scenarios_correct"] == summary["scenarios_total"]
        and summary["extended_correct"] == summary["extended_total"]
    )
    return Outcome(
        req.arch,
        MEASURED,
        exitcodes.OK if ok else exitcodes.FAIL,
        out,
        record["runtime"],
        [f"report: {rendered.report}"] + ([f"report page: {rendered.html}"] if rendered.html else []),
        report=rendered.report,
        summary=summary,
    )


def static_section(checks: list[_kernels.StaticCheck]) -> list[str]:
    from tabulate import tabulate

    rows = [
        [
            c.kernel,
            c.arch,
            "ok" if c.rule == "ok" else "broken",
            c.build if len(c.build) < 60 else c.build[:57] + "...",
            c.registers,
            c.shared_bytes,
            c.spill_bytes,
        ]
        for c in checks
    ]
    return [
        "## Static checks on this machine (no GPU needed)",
        tabulate(
            rows,
            headers=["kernel", "arch", "rule", "build", "registers", "static smem B", "spill B"],
            tablefmt="github",
        ),
        "",
    ]


def run_partial(req: ReproduceRequest, why: str, notify: Notify = _quiet) -> Outcome:
    """Without the right GPU: static checks of every architecture's kernels, and the shipped results
    rendered into a folder of their own, never over them. Exit 3, or 2 when a kernel fails."""
    from ..reports import render

    out = req.partial_dir()
    out.mkdir(parents=True, exist_ok=True)
    notify(f"cannot measure {req.arch} here: {why}")
    notify(
        "running what needs no GPU: the static checks of every architecture's kernels and the shipped "
        'results, rendered and marked "shipped, not re-measured"; nothing is measured'
    )
    msgs = [f"not measured: {why}"]
    missing = _kernels.missing_kernels(req.root)
    if missing:
        msgs.append("kernels not in this checkout: " + ", ".join(missing))
    checks = _kernels.static_checks(req.root, notify)
    (out / "static.json").write_text(json.dumps([c.to_dict() for c in checks], indent=1))
    extra = static_section(checks)
    (out / "static.md").write_text("\n".join(extra))
    bad = [c for c in checks if not c.ok]
    for c in bad:
        msgs.append(f"static check failed: {c.kernel} ({c.arch}): {c.rule if c.rule != 'ok' else c.build}")
    shipped = Path(req.root) / "results" / req.arch
    report = None
    try:
        report = render(shipped, out, status=SHIPPED, extra=extra, html=True).report
        msgs.append(f"shipped results rendered (not re-measured): {report}")
    except NoResults as e:
        msgs.append(f"no shipped results to render: {e}")
    msgs.append(f"static checks: {len(checks) - len(bad)}/{len(checks)} passed ({out / 'static.md'})")
    record = {
        "arch": req.arch,
        "status": "partial",
        "why": why,
        "date": _now(),
        "missing_kernels": missing,
        "static": [c.to_dict() for c in checks],
        "report": str(report) if report else None,
    }
    (out / RECORD.replace(".json", "-partial.json")).write_text(json.dumps(record, indent=1))
    return Outcome(req.arch, "partial", exitcodes.BUILD if bad else exitcodes.NO_GPU, out, "none", msgs, checks, report)


def reproduce(req: ReproduceRequest, notify: Notify = _quiet, on_row=None, on_start=None) -> Outcome:
    """Choose the runtime, run, and fall back to the partial run when the GPU is not there."""
    from ..build import BuildError
    from ..gpu import NoGPUError, require_gpu
    from ..rules import DependencyRuleError
    from . import containers

    if req.arch not in config.REPRODUCE:
        return Outcome(
            req.arch,
            "failed",
            exitcodes.USAGE,
            messages=[f"unknown arch {req.arch!r}; reproducible: {', '.join(config.REPRODUCE)}"],
        )
    if req.scenario_filter and not _scenarios.select(
        _scenarios.grid(req.arch) + (_scenarios.extended(req.arch) if req.extended else []), req.scenario_filter
    ):  # as bench: checked before the GPU, which it needs none to find out
        return Outcome(req.arch, "failed", exitcodes.USAGE, messages=[f"no scenario matches {req.scenario_filter!r}"])
    try:
        require_gpu(req.arch, req.gpu_index)
    except NoGPUError as e:
        return run_partial(req, str(e), notify)

    runtime = "native" if _executor(req).kind != "local" else req.runtime
    if runtime in ("auto", "docker"):
        ready, why = containers.docker_ready()
        if runtime == "docker" and not ready:
            return Outcome(
                req.arch,
                "failed",
                exitcodes.RUNTIME,
                runtime="docker",
                messages=[
                    f"--runtime docker: {why}",
                    "run `kernelseek-suite doctor --runtime docker` for the fix, or use --runtime native",
                ],
            )
        runtime = "docker" if ready else "native"
        notify(f"runtime: {runtime}" + ("" if ready else f" (Docker with GPU support is not usable here: {why})"))
    else:
        notify("runtime: native (selected)")
    try:
        if runtime == "docker":
            return containers.run_in_container(req, notify)
        return run_native(req, notify, on_row, on_start)
    except (BuildError, DependencyRuleError) as e:
        return Outcome(req.arch, "failed", exitcodes.BUILD, runtime=runtime, messages=[f"build failed: {e}"])
    except containers.ContainerError as e:
        return Outcome(req.arch, "failed", exitcodes.RUNTIME, runtime=runtime, messages=[str(e)])
