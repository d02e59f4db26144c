"""The evaluator's commands: `scenarios`, `build`, `bench`, `eval`, `env` and `report`."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click
from tabulate import tabulate

from .. import config
from ..contracts.exitcodes import BUILD, EVALUATOR, FAIL, NO_GPU, OK, USAGE
from ..gpu import GPU_ENV
from ..scenarios import SHAPE_HELP
from .common import arch_option, fail, run_with_progress
from .scaleout import make_executor, scaleout_options


@click.command("scenarios")
@arch_option
@click.option("--extended", is_flag=True, help="list the extended correctness set instead of the grid")
@click.option("--scenarios", "pattern", default=None, help="comma-separated glob filter on ids")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
def scenarios_cmd(arch, extended, pattern, as_json):
    """List the scenarios (182 timed per architecture, or the extended set)."""
    from .. import scenarios as sc

    rows = sc.select(sc.extended(arch) if extended else sc.grid(arch), pattern)
    if not rows:  # as bench: a filter that matches nothing is a usage error
        fail(f"no scenario matches {pattern!r}", USAGE)
    if as_json:
        for s in rows:
            click.echo(json.dumps({**s.to_dict(), "flops": s.flops}))
        return
    table = [
        [
            s.id,
            s.batch,
            s.seqlen_q,
            s.seqlen_k,
            f"{s.heads_q}/{s.heads_kv}",
            f"{s.d_qk}/{s.d_v}",
            "yes" if s.causal else "no",
            f"{s.flops / 1e12:.3f}",
        ]
        for s in rows
    ]
    click.echo(
        tabulate(table, headers=["id", "batch", "seqlen_q", "seqlen_k", "heads q/kv", "d qk/v", "causal", "TFLOP"])
    )
    click.echo(f"\n{len(rows)} scenarios ({arch}{', extended set' if extended else ''})")


@click.command("build")
@click.argument("kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@arch_option
@click.option("--force", is_flag=True, help="rebuild even if cached")
@click.option("--json", "as_json", is_flag=True)
def build_cmd(kernel, arch, force, as_json):
    """Compile KERNEL (no GPU needed) and print the resource report."""
    from ..build import BuildError, build, resource_table
    from ..rules import DependencyRuleError

    try:
        r = build(kernel, arch, force=force)
    except (BuildError, DependencyRuleError) as e:
        fail(f"build failed: {e}", BUILD)
    if as_json:
        click.echo(json.dumps(r.to_dict(), indent=1))
        return
    click.echo(f"built {kernel} for {arch} with nvcc {r.nvcc_version}{' (cached)' if r.cached else ''}")
    click.echo(f"library: {r.library}")
    click.echo(tabulate(resource_table(r), headers=["function", "registers", "static smem B", "stack B", "spill B"]))
    for w in r.warnings:
        click.echo(f"warning: {w}")


def _sanitize_option(f):
    return click.option(
        "--sanitize", is_flag=True, help="also run compute-sanitizer (memcheck, racecheck, initcheck) on a small subset"
    )(f)


def _previous_option(f):
    return click.option(
        "--previous",
        type=click.Path(exists=True, path_type=Path),
        default=None,
        help="a previous run's folder: a ratio that jumps past it is flagged",
    )(f)


def _shapes(specs: tuple[str, ...]) -> list:
    """--shape's scenarios; a spec that describes none is a usage error that says why."""
    from ..scenarios import ShapeError, parse_shape

    try:
        return [parse_shape(s) for s in specs]
    except ShapeError as e:
        raise click.BadParameter(str(e), param_hint="--shape") from None


_TIMING, _SWEEP = config.TimingConfig(), config.SweepConfig()
_SAMPLING = (  # (option, its parameter, type, help)
    ("--warmup", "warmup", click.IntRange(min=0), "untimed calls of each implementation before the timed ones "
     f"[default: {_TIMING.warmup}]"),
    ("--min-samples", "min_samples", click.IntRange(min=1), "counted calls of each implementation, at least (on each "
     f"input distribution) [default: {_TIMING.min_reps_per_distribution}]"),
    ("--max-samples", "max_samples", click.IntRange(min=1), "counted calls of each implementation, at most (on each "
     f"input distribution) [default: {_TIMING.max_reps_per_distribution}; {_TIMING.max_reps} on one]"),
    ("--min-time", "min_time", click.FloatRange(min=0), "seconds each implementation is timed for per scenario, once "
     f"it has --min-samples, unless it reaches --max-samples first [default: {_TIMING.budget_s}]"),
    ("--timeout", "scenario_timeout", click.FloatRange(min=0, min_open=True), "seconds a scenario may take; a longer "
     f"one is a hang [default: {_SWEEP.scenario_timeout_s:g}]"),
    ("--max-noise", "max_noise", click.FloatRange(min=0, min_open=True), "a noise target in percent: timing goes on "
     "past --min-time until each implementation's spread (IQR / median) is at most this, or it has --max-samples "
     "[default: none, the time alone decides]"),
)  # fmt: skip


def _sampling_options(f):
    for name, param, type_, help_ in reversed(_SAMPLING):
        f = click.option(name, param, type=type_, default=None, help=help_)(f)
    return f


def _sampling_config(
    warmup, min_samples, max_samples, min_time, scenario_timeout, max_noise=None
) -> config.HarnessConfig:
    """The harness settings with the sampling options; contradicting ones end the command (USAGE)."""
    try:
        noise = None if max_noise is None else max_noise / 100.0  # given in percent, as nvbench's
        return config.with_sampling(
            config.HarnessConfig(), warmup, min_samples, max_samples, min_time, scenario_timeout, noise
        )
    except config.SamplingError as e:
        fail(str(e), USAGE)


@click.command("bench")
@arch_option
@click.option("--kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--baseline", "baselines", multiple=True, help="fa3, fa4, cudnn, sdpa-flash (repeatable)")
@click.option("--scenarios", "pattern", default=None, help="comma-separated glob filter on ids")
@click.option("--extended", is_flag=True, help="also run the extended correctness set")
@click.option("--extended-only", is_flag=True, help="run only the extended correctness set")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--resume", is_flag=True, help="continue an interrupted sweep in --out")
@click.option("--seed", type=int, default=None, help="input seed (default: a fresh secret one, recorded)")
@click.option("--gpu", "gpu_index", type=int, default=0, show_default=True)
@click.option(
    "--inputs",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="a safetensors file of q, k, v captured from a model (batch, seqlen, heads, head_dim): time its one "
    "scenario on those inputs instead of the grid (docs/judging.md)",
)
@click.option("--causal/--no-causal", default=None, help="with --inputs: the mask (default: the file's metadata)")
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    callback=lambda ctx, param, value: _shapes(value),
    metavar="SPEC",
    help="time a scenario of this shape instead of the grid (repeatable): " + SHAPE_HELP,
)
@_sampling_options
@_sanitize_option
@_previous_option
@scaleout_options
def bench_cmd(
    arch,
    kernel,
    baselines,
    pattern,
    extended,
    extended_only,
    out_dir,
    resume,
    seed,
    gpu_index,
    inputs,
    causal,
    shapes,
    warmup,
    min_samples,
    max_samples,
    min_time,
    scenario_timeout,
    max_noise,
    sanitize,
    previous,
    scaleout,
):
    """Run KERNEL over the scenario grid beside the baselines; write results with provenance. With
    --executor dask the scenarios are sharded over a cluster's GPUs. What needs no GPU (the filter,
    the baselines, the rules, the build) is checked first."""
    from ..bench import BenchRequest
    from ..evaluate import machinery_failure, passed
    from ..report import summary_lines
    from ..run import Hooks

    _one_input_source(inputs, causal, shapes, pattern, extended or extended_only)
    stem = kernel.stem if inputs is None else f"{kernel.stem}-{inputs.stem}"
    out_dir = out_dir or Path("results") / arch / (f"{stem}-shapes" if shapes else stem)
    req = BenchRequest(
        kernel=kernel,
        arch=arch,
        baselines=list(baselines) or [config.ARCHES[arch]["baseline"]],
        scenario_filter=pattern,
        extended=extended or extended_only,
        grid=not extended_only,
        out_dir=out_dir,
        resume=resume,
        seed=seed,
        gpu_index=gpu_index,
        sanitize=sanitize,
        previous=previous,
        inputs=inputs,
        causal=causal,
        shapes=list(shapes),
        config=_sampling_config(warmup, min_samples, max_samples, min_time, scenario_timeout, max_noise),
    )
    executor = make_executor(scaleout)
    with _failures_as_exit_codes(executor.usage_errors):
        summary = run_with_progress(lambda **kw: executor.run(req, Hooks(**kw)).summary, f"bench {kernel.name}")
    ok = True
    for name, one in (summary.get("per_class") or {"": summary}).items():  # per_class: one per GPU class
        for line in ([f"GPU class {name}:"] if name else []) + summary_lines(one):
            click.echo(line)
        ok = ok and passed(one)
    click.echo(f"results: {out_dir}")
    why = None if summary.get("per_class") else machinery_failure(out_dir)
    if why:  # the evaluator's own failure: no verdict on the kernel
        fail(why, EVALUATOR)
    sys.exit(OK if ok else FAIL)


def _one_input_source(inputs, causal, shapes, pattern, extended) -> None:
    """--inputs, --shape and the grid's own options (--scenarios, --extended) exclude each other."""
    if inputs is not None and (pattern or extended):
        fail("--inputs times the file's own scenario: it takes no --scenarios, --extended or --extended-only", USAGE)
    if causal is not None and inputs is None:
        fail("--causal/--no-causal go with --inputs", USAGE)
    if shapes and (inputs is not None or pattern or extended):
        fail("--shape times its own scenarios: it takes no --inputs, --scenarios, --extended or --extended-only", USAGE)


@contextlib.contextmanager
def _failures_as_exit_codes(usage_errors: tuple[type[Exception], ...], as_json: bool = False):
    """A run's failures before its sweep, each ended with its exit code: the rules or the build
    (BUILD), no suitable GPU (NO_GPU), the request itself (USAGE); with `as_json`, a JSON line too."""
    from ..build import BuildError
    from ..gpu import NoGPUError
    from ..rules import DependencyRuleError

    def payload(status: str, e: Exception) -> dict | None:
        return {"status": status, "error": str(e)} if as_json else None

    try:
        yield
    except (BuildError, DependencyRuleError) as e:
        fail(f"build failed: {e}", BUILD, payload("build_failed", e))
    except NoGPUError as e:
        fail(str(e), NO_GPU, payload("no_gpu", e))
    except usage_errors as e:
        fail(str(e), USAGE, payload("usage", e))


@click.command("eval")
@click.argument("kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@arch_option
@click.option("--baseline", default=None, help="default: fa3 on sm90, fa4 on sm100")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--no-extended", is_flag=True, help="skip the extended correctness set")
@click.option("--json", "as_json", is_flag=True, help="print summary.json on stdout")
@click.option(
    "--gpu",
    "gpu_index",
    type=int,
    default=0,
    show_default=True,
    envvar=GPU_ENV,
    show_envvar=True,
    help="the GPU (NVML index)",
)
@_sampling_options
@_sanitize_option
@_previous_option
def eval_cmd(
    kernel,
    arch,
    baseline,
    out_dir,
    no_extended,
    as_json,
    gpu_index,
    warmup,
    min_samples,
    max_samples,
    min_time,
    scenario_timeout,
    max_noise,
    sanitize,
    previous,
):
    """Compile KERNEL, check it on every scenario, time a representative subset; exit 0 only when
    everything is correct. What needs no GPU (the rules, the build, the baseline) is checked first."""
    from ..bench import RequestError
    from ..evaluate import evaluate, machinery_failure, passed
    from ..report import summary_lines

    opts = dict(
        extended=not no_extended,
        sanitize=sanitize,
        previous=previous,
        gpu_index=gpu_index,
        harness_config=_sampling_config(warmup, min_samples, max_samples, min_time, scenario_timeout, max_noise),
    )
    with _failures_as_exit_codes((RequestError,), as_json):
        if as_json:
            summary = evaluate(kernel, arch, baseline, out_dir, **opts)
        else:
            summary = run_with_progress(
                lambda **kw: evaluate(kernel, arch, baseline, out_dir, **opts, **kw), f"eval {kernel.name}"
            )
    why = machinery_failure(Path(summary["out_dir"]))
    if why:  # the evaluator's own failure: no verdict on the kernel (its own exit code)
        summary.update(status="error", evaluator_error=why)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        for line in summary_lines(summary):
            click.echo(line)
        from ..results import read_jsonl

        bad = [r for r in read_jsonl(Path(summary["out_dir"]) / "bench.jsonl") if not r.correct]
        for r in bad[:10]:
            click.echo(f"  {r.status}{f' ({r.code})' if r.code else ''}: {r.scenario}: {r.reason[:200]}")
        if len(bad) > 10:
            click.echo(f"  ... and {len(bad) - 10} more (see {summary['out_dir']}/bench.md)")
    if why:
        fail(why, EVALUATOR)
    sys.exit(OK if passed(summary) else FAIL)


@click.command("env")
@click.option("--json", "as_json", is_flag=True)
def env_cmd(as_json):
    """The machine and versions, as recorded in provenance."""
    from ..provenance import host_provenance

    prov = host_provenance()
    from .. import baselines as bl

    prov["baselines"] = (
        {name: {"status": b.available()[1], "version": b.version()} for name, b in bl.REGISTRY.items()}
        if prov.get("gpu_name")
        else {name: {"status": "not checked (no GPU)", "version": b.version()} for name, b in bl.REGISTRY.items()}
    )
    if as_json:
        click.echo(json.dumps(prov, indent=1))
        return
    for k, v in prov.items():
        click.echo(f"{k}: {v}")


@click.command("report")
@click.argument("result_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report_cmd(result_dir):
    """Re-render bench.csv, bench.md and summary.json from a folder's bench.jsonl (no GPU needed)."""
    from ..bench import rerender
    from ..report import summary_lines

    try:
        summary = rerender(result_dir)
    except FileNotFoundError as e:
        fail(str(e), USAGE)
    for line in summary_lines(summary):
        click.echo(line)


COMMANDS = (scenarios_cmd, build_cmd, bench_cmd, eval_cmd, env_cmd, report_cmd)
