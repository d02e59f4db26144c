"""The head-to-head: every arm on the same task, evaluator, hardware, model and budget, once per seed,
each run writing its own trace under `<out>/traces/`; and re-measuring the candidates of recorded
traces on this machine.

`run_spec` (one arm, one seed) is a plain function of plain data, so that an executor can ship it
to another process or machine; `run_compare` runs the specs one after another on this machine, and
`kernelseek_suite.scaleout.agent_runs.run_compare_distributed` one per GPU of a Dask cluster.
A spec whose trace already ended is not run again; one that was cut off is resumed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..agents.config import RunConfig
from ..agents.runner import API_KEY_ENV
from ..contracts.traces import artifacts_dir, read_trace
from ..provenance import host_provenance, now_utc
from .protocol import CONTROL_DEFAULTS

DEFAULT_OUT = Path("results") / "compare"


@dataclass
class CompareRequest:
    arms: list[str]  # the arms' labels, in order
    task: str
    model: dict  # ModelConfig fields (name, base_url, temperature ...)
    seeds: list[int]
    limits: dict = field(default_factory=dict)  # Limits fields
    task_options: dict = field(default_factory=dict)
    arm_options: dict[str, dict] = field(default_factory=dict)  # label -> its options
    tools: dict = field(default_factory=dict)  # ToolsConfig fields
    out_dir: str = str(DEFAULT_OUT)
    allow_unsandboxed: bool = False  # runs without every protection (docs/threat-model.md) allowed
    agents: dict[str, str] = field(default_factory=dict)  # label -> agent, where they differ
    context: dict = field(default_factory=dict)  # ContextConfig fields
    final_bench: dict = field(default_factory=lambda: {"enabled": True, "timeout_s": 3600.0})
    protocol: dict | None = None  # {name, path, sha256} of the protocol file
    control: dict = field(default_factory=lambda: dict(CONTROL_DEFAULTS))  # the A/A control, min_runs

    def agent(self, label: str) -> str:
        return self.agents.get(label, label)


@dataclass
class RunSpec:
    arm: str
    seed: int
    config: dict  # RunConfig.to_dict()
    trace_path: str

    @property
    def key(self) -> str:
        """Unique within a comparison, stable across resumes (an executor's item key)."""
        return f"{self.arm}/seed-{self.seed}"


def plan(req: CompareRequest) -> list[RunSpec]:
    """One spec per (seed, arm). The arms take turns going first, seed by seed, so that a drift of the
    machine over the session does not favour one of them."""
    specs = []
    for n, seed in enumerate(req.seeds):
        order = req.arms if n % 2 == 0 else list(reversed(req.arms))
        for arm in order:
            agent = req.agent(arm)
            cfg = RunConfig(
                arm=agent,
                label=arm if arm != agent else None,
                arm_options=dict(req.arm_options.get(arm, {})),
                task=req.task,
                task_options=dict(req.task_options),
                seed=seed,
            )
            for part, values in (
                (cfg.model, req.model),
                (cfg.limits, req.limits),
                (cfg.tools, req.tools),
                (cfg.context, req.context),
            ):
                for k, v in values.items():
                    setattr(part, k, v)
            if cfg.model.seed is None:
                cfg.model.seed = seed  # sent to endpoints that take one
            trace = Path(req.out_dir) / "traces" / f"{arm}-seed{seed}.jsonl"
            specs.append(RunSpec(arm, seed, cfg.to_dict(), str(trace)))
    return specs


# a run that ended this way is taken up again rather than kept
RESUMABLE = ("interrupted", "model_error")


def trace_state(path: Path) -> str:
    """'absent' (no trace, or one cut off before its first model call: nothing to resume), 'finished'
    (it ended, and not by an interruption or an endpoint that stayed down) or 'unfinished' (it can be
    resumed)."""
    path = Path(path)
    if not path.exists() or not path.stat().st_size:
        return "absent"
    events = read_trace(path).events
    if events and events[-1]["type"] == "run_end" and events[-1].get("exit_reason") not in RESUMABLE:
        return "finished"
    return "unfinished" if any(e["type"] in ("llm_call", "step") for e in events) else "absent"


def run_spec(spec: RunSpec, api_key: str | None = None, model=None) -> dict:
    """Runs (or resumes, or skips when finished) one arm with one seed. The key is read from
    OPENAI_API_KEY when not given (and then kept out of the environment, childenv.py). Returns a
    small JSON-able record of the outcome."""
    from ..agents.childenv import held_api_key
    from ..agents.runner import new_run, resume_run

    key = api_key if api_key is not None else held_api_key(API_KEY_ENV)
    path = Path(spec.trace_path)
    state = trace_state(path)
    if state == "finished":
        return {"arm": spec.arm, "seed": spec.seed, "trace": str(path), "ran": False, "state": state}
    if state == "unfinished":  # with this request's endpoint, which may have moved since
        agent = resume_run(path, key, model=model, model_overrides={"base_url": spec.config["model"]["base_url"]})
    else:
        if path.exists():
            path.unlink()  # a run_start and nothing to take up: start over
        agent = new_run(RunConfig.from_dict(spec.config), path, key, model=model)
    result = agent.run()
    return {
        "arm": spec.arm,
        "seed": spec.seed,
        "trace": str(path),
        "ran": True,
        "state": "resumed" if state == "unfinished" else "new",
        "exit_reason": result.exit_reason,
        "goal_met": result.goal_met,
        "best": result.best,
        "evaluator_status": (result.details or {}).get("evaluator_status"),
    }


def prepare(req: CompareRequest) -> list[RunSpec]:
    """The output folder with the request in it; the specs to run."""
    out = Path(req.out_dir)
    (out / "traces").mkdir(parents=True, exist_ok=True)
    (out / "request.json").write_text(json.dumps(_public(asdict(req)), indent=1))
    return plan(req)


def run_compare(
    req: CompareRequest,
    on_run: Callable[[RunSpec, dict], None] | None = None,
    runner: Callable[[RunSpec], dict] = run_spec,
) -> list[dict]:
    """Every spec, one after another, on this machine."""
    records = []
    for spec in prepare(req):
        rec = runner(spec)
        records.append(rec)
        if on_run:
            on_run(spec, rec)
    return records


def _sessions(traces: list[Path]):
    """(`<trace name>` or `<trace name> (resumed)`, its run_start or resume event) for each session of
    each run."""
    for path in traces:
        for ev in read_trace(path).events:
            if ev["type"] in ("run_start", "resume"):
                yield f"{Path(path).name}{'' if ev['type'] == 'run_start' else ' (resumed)'}", ev


def unprotected(traces: list[Path]) -> list[str]:
    """'<trace name>: what was missing' for each run (and resumed session) that lacked a protection
    (run_start/resume `protections`, absent in traces written before they were recorded)."""
    out = []
    for name, ev in _sessions(traces):
        prot = ev.get("protections")
        if prot is None:
            why = "no protections recorded"
        elif prot.get("complete"):
            continue
        else:
            why = ", ".join(missing(prot)) or "incomplete"
        out.append(f"{name}: {why}")
    return out


def interpreter_changes(traces: list[Path]) -> list[str]:
    """'<trace name>: ...' for each run whose interpreter start-up state (the `.pth`, `sitecustomize`
    and `usercustomize` files and the import folders' listings, recorded at sealing) differs from the
    first run's: the environment changed between runs (a change during a run ends that run as
    tampered). Traces that recorded none are left out."""
    first: tuple[str, str] | None = None
    out = []
    for name, ev in _sessions(traces):
        sha = (((ev.get("protections") or {}).get("evaluator") or {}).get("interpreter") or {}).get("sha256")
        if not sha:
            continue
        if first is None:
            first = (name, sha)
        elif sha != first[1]:
            out.append(f"{name}: the interpreter's start-up files differ from those of {first[0]}")
    return out


def unsandboxed(traces: list[Path]) -> list[str]:
    """'<trace name>: what was missing' for each run (and resumed session) that ran without the sandbox
    (its shell, its candidates or its agent command), or that recorded no protections: `compare`
    takes those only with --allow-unsandboxed."""
    from ..agents.protections import SANDBOX

    out = []
    for name, ev in _sessions(traces):
        lacking = [w for w in missing(ev.get("protections")) if w in SANDBOX]
        if lacking:
            out.append(f"{name}: {', '.join(lacking)}")
    return out


def missing(prot: dict | None) -> list[str]:
    """What a `protections` record lacks, in words (agents/protections.py)."""
    from ..agents.protections import missing as lacking

    return [m.what for m in lacking(prot)]


def _public(d: dict) -> dict:
    model = dict(d.get("model") or {})
    model.pop("api_key", None)
    return {**d, "model": model}


# ---------------------------------------------------------------- re-measuring


@dataclass
class Remeasurement:
    trace: str
    run_id: str
    eval_index: int
    candidate_sha256: str
    recorded_status: str
    recorded_geomean: float | None
    status: str
    correct: bool
    geomean: float | None
    error: str | None


@dataclass(frozen=True)
class _Remeasuring:
    """What every trace's re-measuring shares."""

    out_dir: Path
    work: Path  # the temporary folder the candidates are copied into
    timeout_s: float | None
    on_result: Callable[[Remeasurement], None] | None
    sandbox: str


def remeasure(
    traces: list[Path],
    out_dir: Path,
    timeout_s: float | None = None,
    on_result: Callable[[Remeasurement], None] | None = None,
    sandbox: str = "auto",
) -> list[Remeasurement]:
    """Evaluates every candidate recorded in `traces` again, with each run's own task and options, on
    this machine; each distinct candidate of a run once. Every evaluation goes through a sealed
    evaluator made for that run's task, in the sandbox (`sandbox`: auto, landlock or none), as in a
    run. Rows go to `<out_dir>/remeasure.jsonl`. An evaluation that the evaluator's own machinery
    failed (`error`) stops it with EvaluatorFailed: no candidate is counted wrong for it."""
    from ..agents import reaper
    from ..agents.childenv import make_non_dumpable

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    make_non_dumpable()
    rows: list[Remeasurement] = []
    sandboxes: set[str] = set()
    work = Path(tempfile.mkdtemp(prefix="ks-remeasure-"))
    reaper.watch_dir(work)  # removed even if this process is killed
    try:
        job = _Remeasuring(out_dir, work, timeout_s, on_result, sandbox)
        for path in traces:
            rows += _remeasure_trace(path, job, sandboxes)
    finally:
        reaper.release_dir(work)
        shutil.rmtree(work, ignore_errors=True)
    with open(out_dir / "remeasure.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps({"remeasured_at": now_utc(), "host": _machine(), "sandbox": sorted(sandboxes)}) + "\n")
        for r in rows:
            f.write(json.dumps(asdict(r)) + "\n")
    return rows


def _remeasure_trace(path: Path, job: _Remeasuring, sandboxes: set[str]) -> list[Remeasurement]:
    """A row for each evaluation of one trace; each distinct candidate evaluated once, through a sealed
    evaluator made for the run's task (its sandbox, landlock or none, added to `sandboxes`)."""
    from ..agents.seal import SealedEvaluator
    from ..agents.tasks import make_task

    events = read_trace(path).events
    start = events[0]
    cfg = RunConfig.from_dict(start["config"])
    task = make_task(cfg.task, **portable_options(cfg.task_options, start, path, job.work))
    seal = SealedEvaluator.create(task, sandbox=job.sandbox, deny=[Path(path).resolve().parent, job.out_dir.resolve()])
    sandboxes.add("landlock" if seal.sandboxed else "none")
    done: dict[str, Remeasurement] = {}
    rows = []
    try:
        for ev in (e for e in events if e["type"] == "harness_eval"):
            sha = ev["candidate_sha256"]
            if sha not in done:
                res = _evaluate_again(
                    path, start["run_id"], ev, task, seal, job.work, job.timeout_s or cfg.tools.eval_timeout_s
                )
                done[sha] = Remeasurement(
                    str(path),
                    start["run_id"],
                    ev["index"],
                    sha,
                    ev["status"],
                    ev.get("geomean"),
                    res.status,
                    res.correct,
                    res.geomean,
                    res.error,
                )
                if job.on_result:
                    job.on_result(done[sha])
            rows.append(_for_evaluation(done[sha], ev))
    finally:
        seal.close()
    return rows


def _evaluate_again(path: Path, run_id: str, ev: dict, task, seal, work: Path, timeout_s: float):
    """The candidate of evaluation `ev` (from the trace's blobs) through the sealed evaluator; an
    evaluation that the evaluator itself failed raises EvaluatorFailed."""
    from ..agents.exceptions import EvaluatorFailed

    blob = artifacts_dir(path) / "blobs" / ev["candidate_sha256"]
    run_dir = work / run_id / f"{ev['index']:04d}"
    run_dir.mkdir(parents=True)
    kernel = run_dir / Path(task.kernel).name
    shutil.copyfile(blob, kernel)
    seal.check("before re-measuring")
    res = task.evaluate(kernel, run_dir / "eval", timeout_s, seal)
    seal.check(f"while re-measuring evaluation {ev['index']} of {path}")
    if res.status == "error":  # the evaluator's own failure: no verdict, stop here
        raise EvaluatorFailed(
            f"the evaluator failed while re-measuring evaluation {ev['index']} of {path} "
            f"(not the candidate's fault): {(res.error or '').strip()[:1500]}",
            evaluator_status=res.status,
        )
    return res


def _for_evaluation(row: Remeasurement, ev: dict) -> Remeasurement:
    """The re-measurement of a candidate, as the row of evaluation `ev` of the same candidate."""
    if row.eval_index == ev["index"]:
        return row
    return Remeasurement(
        **{
            **asdict(row),
            "eval_index": ev["index"],
            "recorded_status": ev["status"],
            "recorded_geomean": ev.get("geomean"),
        }
    )


def portable_options(options: dict, start: dict, trace: Path, work: Path) -> dict:
    """The task's options, with a starting kernel that is not on this machine replaced by the copy of
    it that the trace keeps (the task needs one to be made; candidates come from the blobs)."""
    kernel = options.get("kernel")
    if not kernel or Path(kernel).is_file():
        return options
    rel = (start.get("task") or {}).get("kernel") or Path(kernel).name
    sha = (start.get("workspace") or {}).get(rel)
    if not sha:
        return options
    copy = work / "start" / start["run_id"] / Path(rel).name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(artifacts_dir(trace) / "blobs" / sha, copy)
    return {**options, "kernel": str(copy)}


def _machine() -> dict:
    prov = host_provenance()
    return {k: prov.get(k) for k in ("host", "gpu_name", "driver", "nvcc")}


def remeasured_by_trace(rows: list[Remeasurement]) -> dict[str, dict[str, dict]]:
    """trace -> candidate sha256 -> the new numbers (the form runstats takes)."""
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r.trace, {})[r.candidate_sha256] = {
            "status": r.status,
            "correct": r.correct,
            "geomean": r.geomean,
        }
    return out
