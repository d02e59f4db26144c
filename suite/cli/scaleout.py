"""The scale-out's command line: the executor options `bench`, `reproduce` and `compare` take, and
the `agreement` and `cluster` commands."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click

from ..contracts.exitcodes import NO_GPU, USAGE
from .common import fail

_executor_option = click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default=None,
    help="local: this one GPU (the default); dask: every GPU of a Dask cluster",
)
_scheduler_option = click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS|SPEC",
    help="with --executor dask: a scheduler address (tcp://host:8786), local-cuda (this host's GPUs, the default), "
    "local[:N] (CPU workers), or a YAML cluster spec (Slurm/PBS); implies --executor dask",
)


def executor_options(f):
    """Adds --executor and --scheduler alone (commands whose items are whole runs, e.g. compare);
    the command receives `scaleout`: a ScaleOut, or None for this machine."""

    @_executor_option
    @_scheduler_option
    @functools.wraps(f)
    def wrapper(*args, executor, scheduler, **kwargs):
        kwargs["scaleout"] = make_scaleout(executor, scheduler, False, None)
        return f(*args, **kwargs)

    return wrapper


def scaleout_options(f):
    """Adds --executor, --scheduler, --per-class-reports and --chunk; the command receives
    `scaleout`: a ScaleOut, or None for the single-GPU path."""

    @_executor_option
    @_scheduler_option
    @click.option(
        "--per-class-reports",
        is_flag=True,
        help="with --executor dask on mixed GPUs: one sweep and report per GPU class under --out",
    )
    @click.option(
        "--chunk",
        type=click.IntRange(min=1),
        default=None,
        help="with --executor dask: scenarios per work item (default: about four items per GPU)",
    )
    @functools.wraps(f)
    def wrapper(*args, executor, scheduler, per_class_reports, chunk, **kwargs):
        kwargs["scaleout"] = make_scaleout(executor, scheduler, per_class_reports, chunk)
        return f(*args, **kwargs)

    return wrapper


def make_executor(scaleout):
    """The executor of a run (run.Executor), chosen here once: this GPU, or the Dask cluster's."""
    if scaleout is None:
        from ..run import LOCAL

        return LOCAL
    from ..scaleout.bench import Dask

    return Dask(scaleout)


def make_scaleout(executor: str | None, scheduler: str | None, per_class_reports: bool, chunk: int | None):
    if executor == "local" or (executor is None and scheduler is None):
        if per_class_reports or chunk is not None or scheduler:
            fail("--scheduler, --per-class-reports and --chunk go with --executor dask", USAGE)
        return None
    from ..scaleout.bench import ScaleOut
    from ..scaleout.cluster import ClusterError, parse_scheduler

    try:
        spec = parse_scheduler(scheduler)
    except ClusterError as e:
        fail(f"--scheduler: {e}", USAGE)
    return ScaleOut(cluster=spec, per_class_reports=per_class_reports, chunk=chunk)


@click.command("agreement")
@click.argument("reference", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--baseline", default=None, help="default: the runs' first baseline")
@click.option("--json", "as_json", is_flag=True)
def agreement_cmd(reference, run, baseline, as_json):
    """How RUN's ratios agree with REFERENCE's, scenario by scenario, per GPU of RUN (e.g. a run on
    one GPU against the same kernel sharded over several)."""
    from tabulate import tabulate

    from ..scaleout.agreement import ratio_agreement

    try:
        ag = ratio_agreement(reference, run, baseline)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e), USAGE)
    if as_json:
        click.echo(json.dumps(ag.to_dict(), indent=1))
        return
    click.echo(f"ratio vs {ag.baseline}: {run} against {reference}, {ag.scenarios} scenarios in both")
    table = [
        [
            g.gpu,
            g.host,
            g.scenarios,
            _f(g.geomean_quotient),
            _f(g.min_quotient),
            _f(g.max_quotient),
            _pct(g.max_abs_dev),
        ]
        for g in ag.per_gpu
    ]
    click.echo(
        tabulate(
            table,
            headers=["GPU", "host", "scenarios", "geomean run/ref", "min", "max", "max |dev|"],
            disable_numparse=True,
        )
    )
    click.echo(
        f"overall: geomean run/ref {_f(ag.geomean_quotient)}, max |dev| {_pct(ag.max_abs_dev)}; "
        f"spread of the per-GPU geomeans {_pct(ag.gpu_spread)}"
    )
    if ag.wall_s:
        click.echo(
            f"wall time: reference {ag.wall_s['reference']:.0f} s, run {ag.wall_s['run']:.0f} s"
            if all(ag.wall_s.values())
            else "wall time: not recorded in both"
        )


def _f(x):
    return "-" if x is None else f"{x:.4f}"


def _pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


@click.command("cluster")
@click.option("--scheduler", default=None, metavar="ADDRESS|SPEC", help="as for bench --executor dask")
@click.option("--json", "as_json", is_flag=True)
def cluster_cmd(scheduler, as_json):
    """Start or reach a Dask cluster and list its workers, their GPUs and the GPU classes."""
    from tabulate import tabulate

    from ..gpu import NoGPUError
    from ..scaleout.cluster import ClusterError, open_client, parse_scheduler
    from ..scaleout.gpus import by_class, cluster_gpus

    try:
        with open_client(parse_scheduler(scheduler)) as client:
            gpus = cluster_gpus(client)
    except NoGPUError as e:
        fail(str(e), NO_GPU)
    except ClusterError as e:
        fail(str(e), USAGE)
    if as_json:
        click.echo(json.dumps({a: g.to_dict() for a, g in gpus.items()}, indent=1))
        return
    click.echo(
        tabulate(
            [[a, g.host, g.index, g.uuid, g.device_class] for a, g in sorted(gpus.items())],
            headers=["worker", "host", "GPU", "UUID", "class"],
        )
    )
    classes = by_class(gpus)
    click.echo(
        f"{len(gpus)} workers, {len(classes)} GPU class{'es' if len(classes) != 1 else ''}: "
        + "; ".join(f"{c} x{len(v)}" for c, v in classes.items())
    )


COMMANDS = (agreement_cmd, cluster_cmd)
