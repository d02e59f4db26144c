"""Putting a run together: task, sealed evaluator, workspace, trace, arm, model, agent; and taking one
up again from its trace. The protections the run has are recorded in `run_start` (and `resume`)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..contracts.traces import TRACE_SCHEMA_VERSION, read_trace
from ..gpu import default_gpu_index
from ..provenance import git_sha, host_provenance, package_version
from .agent import Agent
from .arms import build_arm, check_options
from .bank import DEFAULT_BANK
from .childenv import ancestors_holding, make_non_dumpable, take_api_key
from .config import RunConfig
from .context import Best, RunContext, Totals, record_retry
from .model import OpenAIChatModel
from .protocols import Driver
from .seal import SealedEvaluator
from .tasks import make_task
from .tools import tools_digest
from .trace import TraceWriter, sha256_bytes, sha256_json
from .workspace import Workspace

API_KEY_ENV = "OPENAI_API_KEY"


class RunSetupError(ValueError):
    """The run cannot start: a bad option, an existing trace, a trace that cannot be resumed."""


NO_PRICE = (
    "--max-cost needs a known price: give --price IN OUT (USD per million input and output tokens; a cost "
    "the endpoint reports itself is still used where it reports one). Without a price the cost of a call "
    "is unknown and the limit would not bind"
)


def unpriced_cost_limit(config: RunConfig) -> str | None:
    """Why the run's cost limit could not bind, or None: a max_cost without a price, unless the arm is
    an agent command whose own report gives each session's cost (external.COST_REPORTING)."""
    if config.limits.max_cost is None:
        return None
    m = config.model
    if m.price_input_per_mtok is not None or m.price_output_per_mtok is not None:
        return None
    if config.arm == "agent-cmd":
        from .external import COST_REPORTING, adapter_for

        opts = config.arm_options
        try:
            if adapter_for(str(opts.get("command") or ""), opts.get("adapter")) in COST_REPORTING:
                return None
        except ValueError:  # an unknown adapter: check_options says so
            pass
    return NO_PRICE


def api_key_from_env() -> str | None:
    """The key, taken out of this process's environment (childenv.take_api_key)."""
    return take_api_key(API_KEY_ENV)


def _versions() -> dict:
    return {
        name: package_version(name)
        for name in ("kernelseek-suite", "openai", "tenacity", "jsonschema", "pyyaml", "rich", "click")
    } | {"python": platform.python_version(), "landlock_abi": _landlock_abi()}


def _landlock_abi() -> int | None:
    from .sandbox import abi_version

    try:
        return abi_version()
    except OSError:
        return None


def _hardware() -> dict:
    prov = host_provenance(default_gpu_index())
    keep = ("host", "platform", "gpu_name", "gpu_uuid", "driver", "compute_capability", "nvcc", "clocks_start")
    return {k: prov.get(k) for k in keep} | {"cpu_count": os.cpu_count()}


def _confined(task, config: RunConfig, trace_path: Path) -> tuple[SealedEvaluator, Workspace]:
    """The sealed evaluator and the workspace; neither may read this run's trace or the bank."""
    bank = Path(config.questions.bank_path) if config.questions.bank_path else DEFAULT_BANK
    deny = [Path(trace_path).resolve().parent, bank.resolve()]
    seal = SealedEvaluator.create(task, sandbox=config.tools.sandbox, deny=deny)
    try:
        ws = Workspace.create(sandbox=config.tools.sandbox, deny=deny)
    except BaseException:
        seal.close()
        raise
    return seal, ws


def protections(
    config: RunConfig, ws: Workspace, seal: SealedEvaluator, api_key: str | None, non_dumpable: bool
) -> dict:
    """What guards this run (docs/threat-model.md); `complete` when every protection is in force."""
    boxed = ws.sandboxed
    holders = ancestors_holding(api_key)
    out = {
        "shell": {
            "sandbox": "landlock" if boxed else "none",
            "detail": ws.sandbox_detail,
            "writes": "workspace and scratch folder" if boxed else "anywhere the user can",
            "reads": "workspace, system folders, toolchain, documents" if boxed else "anywhere the user can",
            "documents": [str(p) for p in ws.docs],
            "capabilities": "none" if boxed else "the user's",
        },
        "evaluator": seal.describe(),
        "candidates": {
            "sandbox": "landlock" if seal.sandboxed else "none",
            "writes": "their scratch folder" if seal.sandboxed else "anywhere the user can",
        },
        "secrets": {
            "child_environment": "allow-list",
            "agent_non_dumpable": non_dumpable,
            "key": "given" if api_key else "none",
            "ancestors_holding_key": holders,
        },
    }
    command_boxed = True
    if config.arm == "agent-cmd":  # the command brings its own credentials, in the user's environment
        from .external import command_sandbox

        command_boxed, detail = command_sandbox(config)
        out["agent_command"] = {
            "sandbox": "landlock" if command_boxed else "none",
            "detail": detail,
            "environment": "the user's",
            "writes": "workspace, scratch folder, its state folder and the paths given (write=)"
            if command_boxed
            else "anywhere the user can",
            "reads": "those, system folders, toolchain, its own installation and the paths given (read=)"
            if command_boxed
            else "anywhere the user can",
            "network": "not limited",
        }
    out["complete"] = bool(boxed and seal.sandboxed and non_dumpable and not holders and command_boxed)
    return out


def _close_on_failure(seal, ws):
    seal.close()
    ws.cleanup()


def _secrets(config: RunConfig, api_key: str | None) -> tuple[str, ...]:
    """What the trace redacts: the key, and for an agent command (which gets the user's environment)
    the values of every secret-looking variable."""
    found = (api_key,) if api_key else ()
    if config.arm == "agent-cmd":
        from .external import env_secrets

        found += env_secrets()
    return found


def _model(config: RunConfig, ctx: RunContext, api_key: str | None, model=None):
    return model or OpenAIChatModel(
        config.model, api_key, on_retry=lambda info: record_retry(ctx, info), time_left=ctx.wall_left
    )


def new_run(
    config: RunConfig,
    trace_path: Path | None = None,
    api_key: str | None = None,
    ask_human: Callable | None = None,
    model=None,
) -> Driver:
    """A fresh run, ready for its run(): the model loop (Agent), or the arm's own driver (any
    protocols.Driver). `model` replaces the OpenAI client (any Model)."""
    check_options(config.arm, dict(config.arm_options))  # an unknown arm or option: nothing written yet
    problem = unpriced_cost_limit(config)
    if problem:
        raise RunSetupError(problem)
    if config.seed is None:
        config.seed = secrets.randbits(31)
    task = make_task(config.task, **config.task_options)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_id = f"{stamp}-{config.arm}-{config.task}-{secrets.token_hex(2)}"
    trace_path = Path(trace_path) if trace_path else Path("runs") / run_id / "trace.jsonl"
    if trace_path.exists() and trace_path.stat().st_size:
        raise RunSetupError(f"{trace_path} already holds a trace; resume it with --resume or choose another --trace")
    non_dumpable = make_non_dumpable()
    seal, ws = _confined(task, config, trace_path)
    try:
        task.setup(ws)
        trace = TraceWriter(trace_path, secrets=_secrets(config, api_key))
        ctx = RunContext(config, task, ws, trace, seal, ask_human=ask_human)
        ctx.finalizers.append(seal.close)
        parts = build_arm(config.arm, ctx)
    except BaseException:
        _close_on_failure(seal, ws)
        raise
    if parts.driver:  # an arm with its own loop (an agent command): no model client here
        agent = parts.driver(ctx)
        described = {"name": config.model.name or "(the agent command's own)", "base_url": None, "sampling": {}}
        window = {"window_tokens": None, "window_source": "unknown", "room_tokens": None}
    else:
        mdl = ctx.model = _model(config, ctx, api_key, model)
        agent = Agent(ctx, mdl, parts.tools, parts.supervisor)
        if config.context.window_tokens is None and hasattr(mdl, "context_window"):
            agent.window.set_window(mdl.context_window(), "endpoint")
        described = mdl.describe()
        window = {
            "window_tokens": agent.window.state.window_tokens,
            "window_source": agent.window.state.window_source,
            "room_tokens": agent.window.room,
        }
    system = config.system_prompt
    task_text = config.task_prompt.format(
        description=task.description(), goal=task.goal.text(), kernel=task.kernel, budget=ctx.budget_text()
    )
    files = {rel: trace.put_file(p) for rel, p in ws.files().items()}
    run_start = {
        "schema_version": TRACE_SCHEMA_VERSION,
        "run_id": run_id,
        "arm": config.arm,
        "task": task.to_dict(),
        "model": described,
        "config": config.to_dict(),
        "suite": {"version": __version__, "git_sha": git_sha()},
        "prompts": {
            "system_sha256": sha256_bytes(system.encode()),
            "task_sha256": sha256_bytes(task_text.encode()),
            "tools_sha256": tools_digest(parts.tools),
        },
        "hardware": _hardware(),
        "versions": _versions(),
        "seed": config.seed,
        "sandbox": ws.describe(),
        "protections": protections(config, ws, seal, api_key, non_dumpable),
        "tools": parts.tools.names(),
        "workspace": files,
        "guard": {"paths": [str(seal.snapshot)], "files": len(seal.manifest)},
        "context": window,
        **parts.info,
    }
    agent.start(run_start, system, task_text)
    return agent


# ---------------------------------------------------------------- resume


@dataclass
class ResumeState:
    config: RunConfig
    messages: list[dict]
    totals: Totals
    best: Best | None
    goal_met: bool
    files: dict[str, str]  # workspace: relative path -> blob sha256
    supervisor: dict
    from_step: int
    next_seq: int
    elapsed_s: float
    session: int
    discarded: int  # events after the last checkpoint (a step cut short)
    context: dict  # the context window's state (compaction.ContextState)


def load_resume_state(trace_path: Path) -> ResumeState:
    tf = read_trace(trace_path)
    events = tf.events
    if not events or events[0].get("type") != "run_start":
        raise RunSetupError(f"{trace_path}: not a trace (no run_start)")
    start = events[0]
    if start.get("schema_version") != TRACE_SCHEMA_VERSION:
        raise RunSetupError(
            f"{trace_path}: trace schema {start.get('schema_version')} cannot be resumed by this "
            f"version (it writes schema {TRACE_SCHEMA_VERSION}); start a new run"
        )
    last_step = max((i for i, e in enumerate(events) if e["type"] == "step"), default=None)
    upto = events[: last_step + 1] if last_step is not None else events[:1]
    messages: list[dict] = []
    context = dict(start.get("context") or {})
    for e in upto:
        if e["type"] in ("llm_call", "step"):
            messages.extend(e["messages_delta"])
        if e["type"] == "context":  # a compaction: the conversation from here on is the one it holds
            messages = list(e["messages"])
            context = dict(e["state"])
        elif e["type"] == "step" and e.get("context"):
            context.update(e["context"])
    files = start.get("workspace", {})
    totals, supervisor, best = Totals(), {}, None
    if last_step is not None:
        ck = events[last_step]
        if sha256_json(messages) != ck["messages_sha256"]:
            raise RunSetupError(f"{trace_path}: the conversation rebuilt from the trace does not match its checkpoint")
        files, supervisor = ck["workspace"], ck["supervisor"]
        totals = Totals(**{k: v for k, v in ck["totals"].items() if k in Totals.__dataclass_fields__})
    else:
        # no step finished: start over with the opening messages the first call would have sent
        first = next((e for e in events if e["type"] == "llm_call"), None)
        if first is None:
            raise RunSetupError(f"{trace_path}: the run made no model call; start a new run instead")
        opening = next(e for e in events if e["type"] in ("llm_call", "context"))
        messages = (opening["messages_delta"] if opening["type"] == "llm_call" else opening["messages"])[:2]
    # what was spent after the last checkpoint still counts against the budget
    tail = events[(last_step + 1) if last_step is not None else 1 :]
    for e in tail:
        if e["type"] in ("llm_call", "classification"):
            totals.add_usage(e["usage"])
        elif e["type"] == "harness_eval":
            totals.evals = max(totals.evals, e["index"])
        elif e["type"] == "retry":
            totals.retries += 1
    evals = [e for e in events if e["type"] == "harness_eval"]
    goal_met = any(e["goal_met"] for e in evals)
    if evals and evals[-1].get("best"):
        b = evals[-1]["best"]
        best = Best(b["geomean"], b["eval_index"], b["candidate_sha256"])
    session = 1 + sum(e["type"] == "resume" for e in events) + 1
    config = RunConfig.from_dict(start["config"])
    # a window learnt after the checkpoint (the endpoint refused a request) still holds
    for e in tail:
        if e["type"] == "context" and e["state"].get("window_source") == "refusal":
            context.update(window_tokens=e["state"]["window_tokens"], window_source="refusal")
    return ResumeState(
        config,
        messages,
        totals,
        best,
        goal_met,
        files,
        supervisor,
        events[last_step]["step"] if last_step is not None else 0,
        events[-1]["seq"] + 1,
        float(events[-1]["elapsed_s"]),
        session,
        len(events) - (last_step + 1 if last_step is not None else 1),
        context,
    )


def resume_run(
    trace_path: Path,
    api_key: str | None = None,
    limits: dict | None = None,
    model_overrides: dict | None = None,
    ask_human: Callable | None = None,
    model=None,
    context_overrides: dict | None = None,
) -> Driver:
    """Takes a run up again from its last checkpoint, appending to the same trace. `limits`,
    `model_overrides` and `context_overrides` replace recorded settings (e.g. a larger budget, another
    base URL, the context window of another model)."""
    trace_path = Path(trace_path)
    st = load_resume_state(trace_path)
    config = st.config
    config.human = ask_human is not None  # whoever resumes decides who asks
    for k, v in (limits or {}).items():
        setattr(config.limits, k, v)
    for k, v in (model_overrides or {}).items():
        setattr(config.model, k, v)
    for k, v in (context_overrides or {}).items():
        setattr(config.context, k, v)
    problem = unpriced_cost_limit(config)
    if problem:
        raise RunSetupError(problem)
    if (context_overrides or {}).get("window_tokens"):  # a window given now replaces the one learnt
        st.context.update(window_tokens=context_overrides["window_tokens"], window_source="option")
    task = make_task(config.task, **config.task_options)
    non_dumpable = make_non_dumpable()
    seal, ws = _confined(task, config, trace_path)
    data = trace_path.read_bytes()
    cut = not data.endswith(b"\n")
    if cut:  # a line cut off when the writer died: drop it so the trace stays valid JSONL
        with open(trace_path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
    trace = TraceWriter(
        trace_path, secrets=_secrets(config, api_key), seq_start=st.next_seq, elapsed_offset=st.elapsed_s
    )
    try:
        ws.restore_files({rel: trace.blob_path(sha) for rel, sha in st.files.items()})
        ctx = RunContext(
            config, task, ws, trace, seal, totals=st.totals, best=st.best, goal_met=st.goal_met, ask_human=ask_human
        )
        ctx.finalizers.append(seal.close)
        parts = build_arm(config.arm, ctx)
    except BaseException:
        _close_on_failure(seal, ws)
        raise
    if parts.supervisor:
        parts.supervisor.load_state(st.supervisor)
    if parts.driver:
        agent = parts.driver(ctx)
    else:
        ctx.model = _model(config, ctx, api_key, model)
        agent = Agent(ctx, ctx.model, parts.tools, parts.supervisor)
    trace.step = st.from_step
    trace.emit(
        "resume",
        from_step=st.from_step,
        session=st.session,
        limits=json.loads(json.dumps(config.limits.__dict__)),
        discarded_events=st.discarded,
        dropped_partial_line=cut,
        sandbox=ws.describe(),
        protections=protections(config, ws, seal, api_key, non_dumpable),
    )
    agent.restore(st.messages, st.context)
    return agent
