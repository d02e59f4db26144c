"""The `kernelseek-suite` command line: a thin layer over the library."""
from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from tabulate import tabulate

from . import __version__, config
from .gpu import GPU_ENV
from .scaleout.cli import scaleout_options

console = Console(stderr=True)

EXIT_FAIL = 1        # the kernel is not correct everywhere / the command failed
EXIT_BUILD = 2       # the kernel did not build or breaks the contract/rules
EXIT_NO_GPU = 3      # no suitable GPU
EXIT_USAGE = 4       # bad arguments or files


def _arch_option(f):
    return click.option("--arch", type=click.Choice(sorted(config.ARCHES)), default="sm90", show_default=True,
                        help="target architecture")(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernelseek-suite")
def main():
    """Evaluate single-file FlashAttention forward kernels against FA3/FA4/cuDNN, and the agents
    that write them."""
    # SIGTERM (timeout, a job scheduler) unwinds like Ctrl-C, so a sweep's cleanup runs: its worker
    # is killed and what was measured is already on disk
    signal.signal(signal.SIGTERM, _terminate)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


@main.command("scenarios")
@_arch_option
@click.option("--extended", is_flag=True, help="list the extended correctness set instead of the grid")
@click.option("--scenarios", "pattern", default=None, help="comma-separated glob filter on ids")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
def scenarios_cmd(arch, extended, pattern, as_json):
    """List the scenarios (182 timed per architecture, or the extended set)."""
    from . import scenarios as sc

    rows = sc.select(sc.extended(arch) if extended else sc.grid(arch), pattern)
    if as_json:
        for s in rows:
            click.echo(json.dumps({**s.to_dict(), "flops": s.flops}))
        return
    table = [[s.id, s.batch, s.seqlen_q, s.seqlen_k, f"{s.heads_q}/{s.heads_kv}", f"{s.d_qk}/{s.d_v}",
              "yes" if s.causal else "no", f"{s.flops / 1e12:.3f}"] for s in rows]
    click.echo(tabulate(table, headers=["id", "batch", "seqlen_q", "seqlen_k", "heads q/kv", "d qk/v",
                                        "causal", "TFLOP"]))
    click.echo(f"\n{len(rows)} scenarios ({arch}{', extended set' if extended else ''})")


@main.command("build")
@click.argument("kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_arch_option
@click.option("--force", is_flag=True, help="rebuild even if cached")
@click.option("--json", "as_json", is_flag=True)
def build_cmd(kernel, arch, force, as_json):
    """Compile KERNEL (no GPU needed) and print the resource report."""
    from .build import BuildError, build, resource_table
    from .rules import DependencyRuleError

    try:
        r = build(kernel, arch, force=force)
    except (BuildError, DependencyRuleError) as e:
        click.echo(f"build failed: {e}", err=True)
        sys.exit(EXIT_BUILD)
    if as_json:
        click.echo(json.dumps(r.to_dict(), indent=1))
        return
    click.echo(f"built {kernel} for {arch} with nvcc {r.nvcc_version}{' (cached)' if r.cached else ''}")
    click.echo(f"library: {r.library}")
    click.echo(tabulate(resource_table(r), headers=["function", "registers", "static smem B", "stack B",
                                                    "spill B"]))
    for w in r.warnings:
        click.echo(f"warning: {w}")


def _progress():
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[last]}"), console=console)


def _run_with_progress(fn, label):
    with _progress() as prog:
        task = prog.add_task(label, total=1, last="")

        def on_start(total, already):
            prog.update(task, total=total, completed=already)

        def on_row(row):
            r = "/".join(f"{b} {v:.2f}x" for b, v in row.ratio.items())
            prog.update(task, advance=1, last=f"{row.scenario}: {row.status} {r}")
        return fn(on_row=on_row, on_start=on_start)


def _gpu_or_exit(arch, gpu_index: int = 0, as_json: bool = False):
    from .gpu import NoGPUError, require_gpu

    try:
        require_gpu(arch, gpu_index)
    except NoGPUError as e:
        if as_json:
            click.echo(json.dumps({"status": "no_gpu", "error": str(e)}))
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_NO_GPU)


def _sanitize_option(f):
    return click.option("--sanitize", is_flag=True,
                        help="also run compute-sanitizer (memcheck, racecheck, initcheck) on a small subset")(f)


def _previous_option(f):
    return click.option("--previous", type=click.Path(exists=True, path_type=Path), default=None,
                        help="a previous run's folder: a ratio that jumps past it is flagged")(f)


@main.command("bench")
@_arch_option
@click.option("--kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--baseline", "baselines", multiple=True, help="fa3, fa4, cudnn, sdpa-flash (repeatable)")
@click.option("--scenarios", "pattern", default=None, help="comma-separated glob filter on ids")
@click.option("--extended", is_flag=True, help="also run the extended correctness set")
@click.option("--extended-only", is_flag=True, help="run only the extended correctness set")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--resume", is_flag=True, help="continue an interrupted sweep in --out")
@click.option("--seed", type=int, default=None, help="input seed (default: a fresh secret one, recorded)")
@click.option("--gpu", "gpu_index", type=int, default=0, show_default=True)
@_sanitize_option
@_previous_option
@scaleout_options
def bench_cmd(arch, kernel, baselines, pattern, extended, extended_only, out_dir, resume, seed, gpu_index,
              sanitize, previous, scaleout):
    """Run KERNEL over the scenario grid beside the baselines; write results with provenance."""
    from .bench import BenchRequest, ResumeMismatch, run_bench
    from .build import BuildError
    from .gpu import NoGPUError
    from .report import summary_lines
    from .rules import DependencyRuleError
    from .scaleout.cluster import ClusterError

    if scaleout is None:     # on a cluster, the workers' GPUs are checked instead
        _gpu_or_exit(arch, gpu_index)
    baselines = list(baselines) or [config.ARCHES[arch]["baseline"]]
    from . import baselines as bl
    for b in baselines:
        try:
            bl.get(b)
        except KeyError as e:
            click.echo(f"error: {e.args[0]}", err=True)
            sys.exit(EXIT_USAGE)
    out_dir = out_dir or Path("results") / arch / kernel.stem
    req = BenchRequest(kernel=kernel, arch=arch, baselines=baselines, scenario_filter=pattern,
                       extended=extended or extended_only, grid=not extended_only, out_dir=out_dir,
                       resume=resume, seed=seed, gpu_index=gpu_index, sanitize=sanitize, previous=previous,
                       scaleout=scaleout)
    try:
        summary = _run_with_progress(lambda **kw: run_bench(req, **kw), f"bench {kernel.name}")
    except (BuildError, DependencyRuleError) as e:
        click.echo(f"build failed: {e}", err=True)
        sys.exit(EXIT_BUILD)
    except NoGPUError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_NO_GPU)
    except (ResumeMismatch, ValueError, ClusterError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    from .evaluate import passed
    ok = True
    for name, one in (summary.get("per_class") or {"": summary}).items():   # per_class: one per GPU class
        for line in ([f"GPU class {name}:"] if name else []) + summary_lines(one):
            click.echo(line)
        ok = ok and passed(one)
    click.echo(f"results: {out_dir}")
    sys.exit(0 if ok else EXIT_FAIL)


@main.command("eval")
@click.argument("kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_arch_option
@click.option("--baseline", default=None, help="default: fa3 on sm90, fa4 on sm100")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--no-extended", is_flag=True, help="skip the extended correctness set")
@click.option("--json", "as_json", is_flag=True, help="print summary.json on stdout")
@click.option("--gpu", "gpu_index", type=int, default=0, show_default=True, envvar=GPU_ENV, show_envvar=True,
              help="the GPU (NVML index)")
@_sanitize_option
@_previous_option
def eval_cmd(kernel, arch, baseline, out_dir, no_extended, as_json, gpu_index, sanitize, previous):
    """Compile KERNEL, check it on every scenario, time a representative subset; exit 0 only when
    everything is correct."""
    from .build import BuildError
    from .evaluate import evaluate, passed
    from .report import summary_lines
    from .rules import DependencyRuleError

    _gpu_or_exit(arch, gpu_index, as_json=as_json)
    opts = dict(extended=not no_extended, sanitize=sanitize, previous=previous, gpu_index=gpu_index)
    try:
        if as_json:
            summary = evaluate(kernel, arch, baseline, out_dir, **opts)
        else:
            summary = _run_with_progress(
                lambda **kw: evaluate(kernel, arch, baseline, out_dir, **opts, **kw), f"eval {kernel.name}")
    except (BuildError, DependencyRuleError) as e:
        if as_json:
            click.echo(json.dumps({"status": "build_failed", "error": str(e)}))
        click.echo(f"build failed: {e}", err=True)
        sys.exit(EXIT_BUILD)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        for line in summary_lines(summary):
            click.echo(line)
        from .results import read_jsonl
        bad = [r for r in read_jsonl(Path(summary["out_dir"]) / "bench.jsonl") if not r.correct]
        for r in bad[:10]:
            click.echo(f"  {r.status}{f' ({r.code})' if r.code else ''}: {r.scenario}: {r.reason[:200]}")
        if len(bad) > 10:
            click.echo(f"  ... and {len(bad) - 10} more (see {summary['out_dir']}/bench.md)")
    sys.exit(0 if passed(summary) else EXIT_FAIL)


@main.command("env")
@click.option("--json", "as_json", is_flag=True)
def env_cmd(as_json):
    """The machine and versions, as recorded in provenance."""
    from .provenance import host_provenance

    prov = host_provenance()
    from . import baselines as bl
    prov["baselines"] = {name: {"status": b.available()[1], "version": b.version()}
                         for name, b in bl.REGISTRY.items()} if prov.get("gpu_name") else \
        {name: {"status": "not checked (no GPU)", "version": b.version()} for name, b in bl.REGISTRY.items()}
    if as_json:
        click.echo(json.dumps(prov, indent=1))
        return
    for k, v in prov.items():
        click.echo(f"{k}: {v}")


@main.command("report")
@click.argument("result_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report_cmd(result_dir):
    """Re-render bench.csv, bench.md and summary.json from a folder's bench.jsonl (no GPU needed)."""
    from .bench import rerender
    from .report import summary_lines

    try:
        summary = rerender(result_dir)
    except FileNotFoundError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    for line in summary_lines(summary):
        click.echo(line)


from .agents.cli import register as _register_agent_commands  # noqa: E402
_register_agent_commands(main)
from .agents.compare_cli import register as _register_compare_commands  # noqa: E402
_register_compare_commands(main)
from .scaleout.cli import COMMANDS as _SCALEOUT_COMMANDS  # noqa: E402
for _cmd in _SCALEOUT_COMMANDS:
    main.add_command(_cmd)

from .reproduce.cli import COMMANDS as _REPRODUCE_COMMANDS  # noqa: E402

for _cmd in _REPRODUCE_COMMANDS:
    main.add_command(_cmd)


if __name__ == "__main__":
    main()
