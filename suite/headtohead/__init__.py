"""The head-to-head: the arms of `kernelseek_suite.agents` run on equal terms and compared.

  protocol.py   a protocol file (model, seeds, budgets, task, arms, question settings, final bench)
  compare.py    the runs (arm x seed) as plain specs, run or resumed one after another; re-measuring
  runstats.py   what a run achieved and spent, read back from its trace
  report.py     runs.jsonl, the tables (compare.md, compare.csv) and the best-so-far plot
  analysis.py   trace analysis: counts per run, large gains attributed to questions

It uses the agents' library (runner, trace, config, tasks) and is never imported by it. The
commands are `kernelseek-suite compare` and `kernelseek-suite traces analyze` (suite/cli/).
"""
