"""The reader of `eval --json` and `bench` outcomes (contracts/evaljson.py): exit code and summary ->
one status, the same for an evaluation during a run and for the final bench on the full grid."""

import json

import pytest

from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.contracts.evaljson import last_json, read_outcome

SUMMARY = {"scenarios_total": 2, "scenarios_correct": 2, "geomean": {"fa3": 1.5}}


def test_last_json_is_the_last_line_that_is_an_object():
    assert last_json("progress\n" + json.dumps({"a": 1}) + "\n" + json.dumps(SUMMARY) + "\n\n") == SUMMARY
    assert last_json("no json here") is None
    assert last_json('{"cut off') is None


@pytest.mark.parametrize("code,status", [(exitcodes.OK, "ok"), (exitcodes.FAIL, "wrong")])
def test_a_verdict_comes_with_its_summary(code, status):
    got = read_outcome(code, SUMMARY, "")
    assert (got.status, got.summary, got.error) == (status, SUMMARY, None)


@pytest.mark.parametrize(
    "code,summary,stderr,status,error",
    [
        (exitcodes.BUILD, {"error": "ptxas C7515"}, "", "build_failed", "ptxas C7515"),
        (exitcodes.BUILD, None, "  build failed: nvcc\n", "build_failed", "build failed: nvcc"),
        (exitcodes.NO_GPU, None, "", "no_gpu", "no suitable GPU"),
        (exitcodes.NO_GPU, None, "error: no H100\n", "no_gpu", "error: no H100"),
        (exitcodes.EVALUATOR, {"evaluator_error": "CUDA lost"}, "x", "error", "CUDA lost"),
        (exitcodes.EVALUATOR, None, "", "error", "the evaluator's machinery failed"),
        (exitcodes.USAGE, SUMMARY, "bad option", "error", "the evaluator exited with 4: bad option"),
        (exitcodes.OK, None, "", "error", "the evaluator exited with 0: "),
        (exitcodes.FAIL, {"status": "wrong"}, "", "error", "the evaluator exited with 1: "),
    ],
)
def test_anything_but_a_verdict_is_a_status_with_its_reason(code, summary, stderr, status, error):
    got = read_outcome(code, summary, stderr)
    assert (got.status, got.summary, got.error) == (status, None, error)


def test_a_time_out_and_the_programs_name_and_tail():
    assert read_outcome(None, None, "", 600, program="the bench").error == "the bench took longer than 600s"
    got = read_outcome(exitcodes.RUNTIME, None, "x" * 900 + "END", program="the bench", tail_chars=500)
    assert got.status == "error" and got.error == "the bench exited with 5: " + "x" * 497 + "END"
