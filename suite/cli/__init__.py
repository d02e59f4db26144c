"""The `kernelseek-suite` command line. Every click command lives in this package, each a thin
layer: parse, choose local or Dask, call the library, print. The library never imports it, and
nothing else imports click.

  common.py      the group itself, exit codes on usage errors and closed pipes, shared options
  evaluator.py   scenarios, build, bench, eval, env, report
  agents.py      run
  checks.py      selfcheck, toolrich-check
  run_once.py    run-once
  traces.py      traces validate / show / analyze
  compare.py     compare
  scaleout.py    the --executor/--scheduler options; agreement, cluster
  reproduce.py   reproduce, doctor, wheelhouse, render, verify, container

The exit codes are those of `kernelseek_suite.contracts.exitcodes`.
"""

from __future__ import annotations

from . import agents, checks, compare, evaluator, reproduce, run_once, scaleout, traces
from .common import main

for _module in (evaluator, run_once, agents, checks, traces, compare, scaleout, reproduce):
    for _command in _module.COMMANDS:
        main.add_command(_command)

__all__ = ["main"]
