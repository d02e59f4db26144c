"""`kernelseek-suite compare`: the arms head-to-head, a thin layer over the headtohead package
(and scaleout/agent_runs.py with --executor dask)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..contracts.exitcodes import ENDPOINT, EVALUATOR, FAIL, NO_GPU, OK, USAGE
from .common import FILE, FromParams, Groups, RunOptions, fail, key_values, out_dir_option, say, shared_options
from .scaleout import executor_options

NO_ENDPOINT = """\
No model endpoint is configured, and there are no traces under {traces} to regenerate from.
Point compare at an OpenAI-compatible endpoint with tool calling:
  export OPENAI_API_KEY=...        # a hosted API (the key is read from the environment only)
  kernelseek-suite compare --agents kernelseek,toolrich --task {task} --model MODEL [--base-url URL]
or, for a local server that needs no key:
  kernelseek-suite compare ... --model MODEL --base-url http://localhost:8000/v1
To see what a comparison would take first: --plan. To rebuild the table and plot from traces you
already have: --from-traces DIR."""

# the help `compare` gives the shared options where it differs from `run`'s
COMPARE_HELP = {
    "--max-wall": "minutes per run",
    "--max-cost": "USD per run",
    "--categories": "question categories, comma-separated (arms that ask questions)",
}
CONTROL_OPTIONS = ("aa_arm", "aa_repeats", "rebench", "min_runs")


def _count_option(name: str, at_least: int, help: str):
    """A whole number of at least `at_least`; None where not given (the default its help names)."""
    return click.option(name, type=click.IntRange(min=at_least), default=None, help=help)


@dataclass(frozen=True)
class CompareOptions(FromParams):
    """compare's own options (beside the shared groups)."""

    protocol_path: Path | None
    plan_only: bool
    arms: str | None
    task: str | None
    seeds: int | None
    agent_opts: tuple[str, ...]
    sandbox: str | None
    aa_arm: str | None
    aa_repeats: int | None
    rebench: int | None
    min_runs: int | None
    final_bench: bool | None
    out_dir: Path
    from_traces: Path | None
    remeasure: bool
    allow_unsandboxed: bool
    scaleout: Any

    def control(self) -> dict:
        """The A/A control and the statistics' minimum given, the defaults filled in."""
        from ..headtohead.protocol import CONTROL_DEFAULTS

        given = {k: getattr(self, k) for k in CONTROL_OPTIONS}
        return {**CONTROL_DEFAULTS, **{k: v for k, v in given.items() if v is not None}}


@click.command("compare")
@click.option(
    "--protocol",
    "protocol_path",
    type=FILE,
    default=None,
    help="a protocol file that fixes the comparison (protocols/paper.yaml, protocols/smoke.yaml)",
)
@click.option(
    "--plan",
    "plan_only",
    is_flag=True,
    help="print the runs, evaluations, GPU-hours, tokens and cost expected, and exit (no model is called)",
)
@click.option(
    "--agents",
    "arms",
    default=None,
    help="comma-separated arms, LABEL=AGENT to name one [default: kernelseek,toolrich]",
)
@click.option("--task", default=None, help="[default: fa-fwd-sm90]")
@shared_options(Groups.MODEL_ENDPOINT)
@_count_option("--seeds", 1, "runs per arm (seeds 1..N) [default: 1]")
@shared_options(Groups.LIMITS, COMPARE_HELP)
@shared_options(Groups.MODEL_PRICING)
@shared_options(Groups.MODEL_CALLS)
@shared_options(Groups.TASK_INPUTS)
@click.option("--agent-opt", "agent_opts", multiple=True, metavar="ARM:KEY=VALUE", help="an option for one arm")
@shared_options(Groups.QUESTIONS, COMPARE_HELP)
@shared_options(Groups.SANDBOX)
@click.option("--aa", "aa_arm", default=None, help="an A/A control: run this arm a second time per seed (as ARM-aa)")
@_count_option("--aa-repeats", 3, "the A/A control: the starting kernel evaluated N times as in a run [default: 5]")
@_count_option("--rebench", 3, "final bench: each best kernel K times [default: 3]")
@_count_option(
    "--min-runs", 2, "runs with a value per arm below which no interval is given (insufficient runs) [default: 3]"
)
@click.option(
    "--final-bench/--no-final-bench",
    default=None,
    help="bench each run's best kernel on the task's full grid at the end [default: on]",
)
@out_dir_option(Path("results/compare"))
@click.option(
    "--from-traces",
    type=click.Path(exists=True, path_type=Path),
    help="regenerate the table and plot from the traces in DIR, without a model",
)
@click.option("--remeasure", is_flag=True, help="re-evaluate every recorded candidate on this machine first")
@click.option(
    "--allow-unsandboxed",
    is_flag=True,
    help="run (or re-measure) even without the sandbox; the table says so (docs/threat-model.md)",
)
@executor_options
def compare_cmd(**params):
    """Run the arms head-to-head on one task, model and budget; table, interval and plot in --out.
    With --protocol the comparison is the protocol's; --plan prints what it takes and calls no model.
    With --executor dask the runs (arm x seed) are spread over the cluster's GPUs, one per GPU at a
    time. Every run must have the sandbox (and every protection of docs/threat-model.md) unless
    --allow-unsandboxed is given."""
    from ..agents.runner import api_key_from_env
    from ..headtohead.estimate import request_plan
    from ..headtohead.runstats import find_traces
    from ..headtohead.sandbox_policy import sandbox_refusal

    opts = CompareOptions.of(params)
    refusal = sandbox_refusal("re-measuring" if opts.remeasure else "compare", opts.sandbox, opts.allow_unsandboxed)
    if opts.remeasure and refusal:
        fail(refusal, USAGE)
    if opts.from_traces:
        traces = find_traces(opts.from_traces)
        if not traces:
            fail(f"no traces under {opts.from_traces}", USAGE)
        _render(traces, opts, {"enabled": bool(opts.final_bench), "timeout_s": 3600.0}, opts.control())
        return
    req, proto = _request(opts, params)
    if opts.plan_only:
        click.echo(request_plan(req, proto))
        return
    needs_model = any(req.agent(label) != "agent-cmd" for label in req.arms)
    api_key = api_key_from_env()
    if needs_model and not api_key and not req.model.get("base_url"):
        _regenerate(req, opts)
        return
    _check_runs(req, proto, opts, needs_model)
    records = _run_all(req, proto, opts, api_key)
    note = f"Protocol {proto.name} ({proto.path}, sha256 {proto.sha256[:12]})." if proto else ""
    _render([Path(r["trace"]) for r in records], opts, req.final_bench, req.control, note)
    sys.exit(compare_exit_code(records))


def compare_exit_code(records: list[dict]) -> int:
    """The comparison's exit code: FAIL when a run's evaluator was tampered with, NO_GPU or EVALUATOR
    when a run was stopped by the evaluator's own failure (no verdict on its kernel), ENDPOINT when the
    model endpoint failed, FAIL for a run's error, else OK."""
    reasons = {r.get("exit_reason") for r in records}
    statuses = {r.get("evaluator_status") for r in records} - {None}
    if "harness_tampered" in reasons:
        return FAIL
    if statuses:
        return NO_GPU if statuses == {"no_gpu"} else EVALUATOR
    if "model_error" in reasons:
        return ENDPOINT
    return FAIL if "error" in reasons else OK


def _request(opts: CompareOptions, params: dict):
    """The comparison asked for (from the protocol, or from the command line), and its protocol."""
    shared = RunOptions.of(params)
    if opts.protocol_path:
        req, proto = _from_protocol(opts.protocol_path, opts, shared, params)
    else:
        req, proto = _from_options(opts, shared), None
    req.model.update(shared.model.call_settings())
    return req, proto


def _from_protocol(path: Path, opts: CompareOptions, shared: RunOptions, params: dict):
    from ..headtohead.arms import ArmError
    from ..headtohead.protocol import ProtocolError, load_protocol
    from ..headtohead.request import protocol_request

    try:
        proto = load_protocol(path)
        req = protocol_request(
            proto,
            params,
            model_name=shared.model.model_name,
            base_url=shared.model.base_url,
            price=shared.model.price,
            context_tokens=shared.model.context_tokens,
            out_dir=opts.out_dir,
            final_bench=opts.final_bench,
            allow_unsandboxed=opts.allow_unsandboxed,
        )
    except ProtocolError as e:
        fail(str(e), USAGE)
    except ArmError as e:
        fail(f"{proto.path}: {_invalid(e)}", USAGE)
    return req, proto


def _from_options(opts: CompareOptions, shared: RunOptions):
    from ..headtohead.arms import ArmError, parse_arms, settle_arms
    from ..headtohead.compare import CompareRequest
    from ..headtohead.sandbox_policy import runs_sandbox

    try:
        arms = parse_arms(opts.arms or "kernelseek,toolrich")
        arms.options = _arm_options(opts.agent_opts)
        settle_arms(arms, opts.aa_arm, shared.questions.arm_options())
    except click.BadParameter as e:
        fail(e.format_message(), USAGE)
    except ArmError as e:
        fail(_invalid(e), USAGE)
    return CompareRequest(
        arms=arms.labels,
        task=opts.task or "fa-fwd-sm90",
        model=shared.model.request_model(),
        seeds=list(range(1, (opts.seeds or 1) + 1)),
        limits=shared.limits.limits(),
        task_options=shared.task.options(),
        arm_options=arms.options,
        tools={"sandbox": runs_sandbox(opts.sandbox, opts.allow_unsandboxed)},
        out_dir=str(opts.out_dir),
        allow_unsandboxed=opts.allow_unsandboxed,
        agents=arms.agents,
        context={"window_tokens": shared.model.context_tokens} if shared.model.context_tokens else {},
        final_bench={"enabled": opts.final_bench is not False, "timeout_s": 3600.0},
        control=opts.control(),
    )


def _arm_options(items) -> dict[str, dict]:
    """--agent-opt ARM:KEY=VALUE, repeated: each arm's options."""
    out: dict[str, dict] = {}
    for item in items:
        arm, sep, kv = item.partition(":")
        if not sep or "=" not in kv:
            raise click.BadParameter(f"{item!r}: expected ARM:KEY=VALUE", param_hint="--agent-opt")
        out.setdefault(arm.strip(), {}).update(key_values([kv], "--agent-opt"))
    return out


def _invalid(e) -> str:
    """An ArmError as click says a bad value (`Invalid value for --agents: ...`)."""
    return click.BadParameter(str(e), param_hint=e.option).format_message()


def _regenerate(req, opts: CompareOptions) -> None:
    """No endpoint to run the arms against: the outputs again from the traces under --out, if any."""
    from ..headtohead.runstats import find_traces

    folder = opts.out_dir / "traces"
    traces = find_traces(folder) if folder.is_dir() else []
    if not traces:
        click.echo(NO_ENDPOINT.format(traces=folder, task=req.task), err=True)
        sys.exit(USAGE)
    say(
        f"no model endpoint configured (OPENAI_API_KEY or --base-url): regenerating from the "
        f"{len(traces)} trace(s) under {folder}"
    )
    _render(traces, opts, None, req.control)


def _check_runs(req, proto, opts: CompareOptions, needs_model: bool) -> None:
    """Everything the runs need, checked before the first starts."""
    from ..agents.config import RunConfig
    from ..agents.runner import unpriced_cost_limit
    from ..headtohead.compare import plan as plan_runs
    from ..headtohead.sandbox_policy import agent_commands_refusal, sandbox_refusal

    if needs_model and not req.model.get("name"):
        fail(
            "--model is required to run the arms"
            + (" (the protocol leaves the model open)" if proto else " (or use --from-traces)"),
            USAGE,
        )
    sandbox = (proto.data.get("sandbox") if proto else None) or opts.sandbox
    refusal = sandbox_refusal("compare", sandbox, opts.allow_unsandboxed)
    if refusal:
        fail(refusal, USAGE)
    configs = [RunConfig.from_dict(spec.config) for spec in plan_runs(req)]
    problem = next((p for c in configs if (p := unpriced_cost_limit(c))), None)
    if problem:
        fail(problem, USAGE)
    try:
        outside = agent_commands_refusal(configs)
    except (ValueError, RuntimeError) as e:
        fail(str(e), USAGE)
    if outside and not opts.allow_unsandboxed:
        fail(outside, USAGE)


def _run_all(req, proto, opts: CompareOptions, api_key: str | None) -> list[dict]:
    """Every run (arm x seed), on this machine or on the cluster; their records."""
    from functools import partial

    from ..headtohead.compare import run_compare, run_spec

    run: Callable[..., list[dict]] = partial(run_compare, runner=partial(run_spec, api_key=api_key))
    no_gpu: tuple[type[Exception], ...] = ()  # what ends the runs for want of a GPU, or of the cluster
    lost: tuple[type[Exception], ...] = ()
    if opts.scaleout is not None:
        from ..gpu import NoGPUError
        from ..scaleout.agent_runs import RunsLost, run_compare_distributed

        run, no_gpu, lost = partial(run_compare_distributed, scaleout=opts.scaleout), (NoGPUError,), (RunsLost,)
    if proto:
        say(
            f"protocol {proto.name} ({proto.path}, sha256 {proto.sha256[:12]}): {len(req.arms)} arms x "
            f"{len(req.seeds)} seeds"
        )
    try:
        return run(req, on_run=_said_run)
    except no_gpu as e:
        fail(str(e), NO_GPU)
    except lost as e:
        fail(str(e), FAIL)
    except (ValueError, KeyError, FileNotFoundError, ImportError, RuntimeError) as e:
        fail(e.args[0] if isinstance(e, KeyError) and e.args else str(e), USAGE)


def _said_run(spec, rec: dict) -> None:
    if not rec["ran"]:
        what = "already finished, kept"
    else:
        best = f"{rec['best']['geomean']:.3f}x" if rec.get("best") else "-"
        what = f"{rec['state']}: exit {rec['exit_reason']}, best {best}"
    gpu = rec.get("gpu")
    where = ""
    if gpu:
        where = f" on {gpu['worker'] or gpu['host']}" + (
            f" (GPU {gpu['index']}, {gpu['host']})" if gpu["index"] is not None else ""
        )
    say(f"{spec.arm} seed {spec.seed}: {what}{where} ({spec.trace_path})")


def _render(traces: list[Path], opts: CompareOptions, final_bench: dict | None, control: dict, note: str = "") -> None:
    """The tables, plot and pages of the runs of `traces` in --out (re-measured first with --remeasure)."""
    from ..agents.exceptions import EvaluatorFailed, HarnessTampered
    from ..headtohead.outputs import ComparisonOutputs
    from ..headtohead.sandbox_policy import unsandboxed_runs_refusal

    refusal = None if opts.allow_unsandboxed else unsandboxed_runs_refusal(traces)
    if refusal:
        fail(refusal, USAGE)
    outputs = ComparisonOutputs(traces, opts.out_dir, opts.sandbox or "auto", control, note, say)
    if opts.remeasure:
        try:
            outputs.remeasure()
        except HarnessTampered as e:
            fail(str(e), FAIL)
        except EvaluatorFailed as e:
            fail(str(e), EVALUATOR)
    written = outputs.write(final_bench)
    outs = written.outputs
    click.echo(outs.markdown.read_text())
    say(f"wrote {outs.markdown}, {outs.csv}, {outs.stats}, {outs.png}, {outs.svg}, {outs.runs_jsonl}, {written.page}")


COMMANDS = (compare_cmd,)
