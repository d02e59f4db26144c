"""The head-to-head: the arms of `kernelseek_suite.agents` run on equal terms and compared.

  protocol.py   a protocol file (model, seeds, budgets, task, arms, question settings, final bench)
  request.py    a comparison put together from a protocol and the command line's settings
  arms.py       the arms named on the command line, their options, the A/A copy, the question settings
  sandbox_policy.py  which sandbox the runs get, and what is refused without one
  outputs.py    a comparison's outputs: the re-measurement of the best kernels, the files written
  compare.py    the runs (arm x seed) as plain specs, run or resumed one after another; re-measuring
  estimate.py   the plan: runs, evaluations, GPU-hours, tokens and cost expected, before any model call
  final.py      each run's best kernel benched on the task's full grid at the end
  runstats.py   what a run achieved and spent, read back from its trace
  stats.py      per-arm median and spread, a bootstrap interval of the difference between arms (seeds and
                re-measurements), its verdict
  noise.py      the A/A control: repeated measurements of one kernel, the noise band of a task
  report.py     runs.jsonl, the tables (compare.md, compare.csv, stats.json) and the best-so-far plot
  analysis.py   trace analysis: counts per run, large gains attributed to questions
  control.py    the attribution's baselines: question times shuffled within the run, the other arms' rate
  tables.py, plots.py  the column tables and the plots' shared set-up

It uses the agents' library (runner, trace, config, tasks) and is never imported by it. The
commands are `kernelseek-suite compare` and `kernelseek-suite traces analyze` (suite/cli/).
"""
