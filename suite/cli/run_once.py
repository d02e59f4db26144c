"""`kernelseek-suite run-once` (or `python -m kernelseek_suite.cli run-once`, the profiler tool's
target): one kernel on one scenario or a few (harness/run_once.py), for profilers and quick manual
checks. Its arguments are parsed by argparse, as they were when it was a module of the harness, with
the suite's own exit codes."""

from __future__ import annotations

import argparse
import os
import sys

import click

from .. import config
from ..contracts import exitcodes


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error exits USAGE, as the command line's do
        self.print_usage(sys.stderr)
        self.exit(exitcodes.USAGE, f"{self.prog}: error: {message}\n")


def _repeatable(ap: _Parser, flag: str, metavar: str, help_: str) -> None:
    ap.add_argument(flag, action="append", default=[], metavar=metavar, help=help_)


def _parser(prog: str) -> _Parser:
    ap = _Parser(prog=prog)
    ap.add_argument("kernel")
    ap.add_argument("scenario", nargs="?", help="a scenario id, or several comma-separated ids or globs")
    _repeatable(
        ap,
        "--shape",
        "SPEC",
        "instead of SCENARIO, a scenario of this shape (repeatable): batch=B,seqlen=S[/SK],heads=H[/HKV],"
        "d=D[/DV][,causal]",
    )
    ap.add_argument("--arch", default="sm90", choices=sorted(config.ARCHES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="also check the output against the reference")
    ap.add_argument("--check-beside", action="store_true", help="with --check: check the --beside kernels' outputs too")
    ap.add_argument("--seed", type=int, default=1234)
    _repeatable(ap, "--inputs", "NAME", "an input distribution (repeatable; 'all' for every one; default: standard)")
    ap.add_argument("--time", action="store_true", help="time the kernel (and the --beside kernels)")
    _repeatable(
        ap, "--beside", "OTHER.cu", "with --time: also time this kernel, interleaved (its output is not checked)"
    )
    _repeatable(
        ap, "--baseline", "NAME", "with --time: also time this baseline (fa3, fa4, cudnn, sdpa-flash), interleaved"
    )
    return ap


def _distributions(ap: _Parser, args) -> list[str]:
    """The arguments that go together checked; the input distributions named (`all`: every one)."""
    if bool(args.scenario) == bool(args.shape):
        ap.error("give SCENARIO or --shape, one of them")
    if args.baseline and not args.time:
        ap.error("--baseline needs --time")
    if args.beside and not (args.time or args.check_beside):
        ap.error("--beside needs --time (to time it) or --check --check-beside (to check it)")
    if args.check_beside and not (args.check and args.beside):
        ap.error("--check-beside needs --check and at least one --beside")
    from ..baselines import REGISTRY
    from ..harness.distributions import DISTRIBUTIONS

    unknown = [b for b in args.baseline if b not in REGISTRY]
    if unknown:
        ap.error(f"unknown baseline {', '.join(unknown)}; known: {', '.join(sorted(REGISTRY))}")
    dists = list(DISTRIBUTIONS) if "all" in args.inputs else list(dict.fromkeys(args.inputs or ["standard"]))
    bad = [d for d in dists if d not in DISTRIBUTIONS]
    if bad:
        ap.error(f"unknown input distribution {', '.join(bad)}; known: {', '.join(DISTRIBUTIONS)}, all")
    return dists


def main(argv: list[str] | None = None, prog: str = "kernelseek-suite run-once") -> int:
    """Exit codes as the command line's: 4 bad arguments, 2 the kernel breaks the rules or does not
    build, 3 no suitable GPU (checked after everything that needs none), 1 a wrong output or a
    kernel's error code."""
    from ..harness.run_once import run, select_scenarios
    from ..scenarios import ShapeError, by_id, parse_shape

    ap = _parser(prog)
    args = ap.parse_args(argv)
    dists = _distributions(ap, args)
    try:
        shaped = [parse_shape(spec) for spec in args.shape]
    except ShapeError as e:
        ap.error(f"--shape: {e}")
    scenarios = shaped or select_scenarios(args.scenario, by_id(args.arch))
    if not scenarios:
        print(f"unknown scenario {args.scenario}", file=sys.stderr)
        return exitcodes.USAGE
    missing = [k for k in dict.fromkeys([args.kernel, *args.beside]) if not os.path.isfile(k)]
    if missing:
        ap.error(f"no such kernel file: {', '.join(missing)}")
    return run(args, scenarios, dists)


@click.command(
    "run-once",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.pass_context
def run_once_cmd(ctx):
    """Run KERNEL on one scenario or a few, a few times, inside an nvtx range (the target for ncu
    and compute-sanitizer); --check checks it, --time times it beside other kernels and baselines
    (`run-once --help` for the options)."""
    sys.exit(main(ctx.args))


COMMANDS = [run_once_cmd]
