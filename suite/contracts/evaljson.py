"""The reader of `kernelseek-suite eval --json` and `bench` as the process that ran them sees them:
the exit code (exitcodes.py) and the summary (the last JSON line `eval --json` prints, or the
`summary.json` that `bench` writes) make one status. The agents' tasks read an evaluation and the
final bench on the full grid with it. Standard library only; of the suite, only the exit codes.

Statuses: `ok` (correct on every scenario) and `wrong` (not) are verdicts on the kernel, as is
`build_failed` (exit BUILD: it breaks the rules or does not build); `timeout` (the command was
killed at its time limit), `no_gpu` (exit NO_GPU) and `error` (exit EVALUATOR, the evaluator's
machinery failed; or any other code, or no summary) are not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .exitcodes import BUILD, EVALUATOR, FAIL, NO_GPU, OK

# the exit codes that come with a summary, and the verdict each gives
VERDICTS = {OK: "ok", FAIL: "wrong"}


@dataclass(frozen=True)
class Outcome:
    status: str  # ok | wrong | build_failed | timeout | no_gpu | error
    summary: dict | None = None  # the command's summary, with a verdict (ok or wrong) only
    error: str | None = None  # why there is no verdict (the build's errors, the evaluator's failure ...)


def last_json(stdout: str) -> dict | None:
    """The last line of `stdout` that starts with `{`, read as JSON (None: none, or not JSON)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def read_outcome(
    returncode: int | None,
    summary: dict | None,
    stderr: str,
    timeout_s: float | None = None,
    program: str = "the evaluator",
    tail_chars: int = 3000,
) -> Outcome:
    """The status of one run of `program` (`returncode` None: killed at `timeout_s`). `summary`: what
    it printed or wrote (`last_json` of `eval --json`'s output, `bench`'s summary.json); the end of
    `stderr` (`tail_chars`) says why where the summary does not."""
    if returncode is None:
        return Outcome("timeout", error=f"{program} took longer than {timeout_s or 0:.0f}s")
    tail = stderr.strip()[-tail_chars:]
    said = summary or {}
    if returncode == EVALUATOR:
        return Outcome("error", error=said.get("evaluator_error") or tail or f"{program}'s machinery failed")
    if returncode == BUILD:
        return Outcome("build_failed", error=said.get("error") or tail)
    if returncode == NO_GPU:
        return Outcome("no_gpu", error=tail or "no suitable GPU")
    if returncode not in VERDICTS or "scenarios_total" not in said:
        return Outcome("error", error=f"{program} exited with {returncode}: {tail}")
    return Outcome(VERDICTS[returncode], summary)
