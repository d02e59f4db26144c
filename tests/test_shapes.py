"""Custom scenarios from the command line: `bench --shape` and `run_once --shape`
(`batch=4,seqlen=8192,heads=32/8,d=128,causal`), parsed into a scenario, refused with a message that
says what is wrong, and timed instead of the grid."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

# imported before any test stands in for bench.run_bench: evaluate binds the real one at its import
import kernelseek_suite.evaluate  # noqa: F401
from kernelseek_suite import config
from kernelseek_suite.bench import BenchRequest, RequestError, select_scenarios
from kernelseek_suite.cli import main
from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.gpu import NoGPUError, list_gpus
from kernelseek_suite.scenarios import Scenario, ShapeError, by_id, parse_shape

REFERENCE = config.REPO_ROOT / config.REFERENCE_KERNEL
ISSUE = "batch=4,seqlen=8192,heads=32/8,d=128,causal"


def test_the_shape_of_the_issue():
    s = parse_shape(ISSUE)
    assert s == Scenario("shape-b4-d128-h32kv8-s8192-causal", 4, 8192, 8192, 32, 8, 128, 128, True)
    assert s.flops == 2.0 * 4 * 32 * 8192 * 4096 * 256
    assert s.id not in by_id("sm90")  # never taken for a grid scenario


@pytest.mark.parametrize(
    "spec, want",
    [
        ("seqlen=1024,heads=16,d=64", Scenario("shape-b1-d64-h16kv16-s1024", 1, 1024, 1024, 16, 16, 64, 64, False)),
        (
            "batch=2,seqlen=1000/3001,heads=16/4,d=192/128,causal=no",
            Scenario("shape-b2-d192v128-h16kv4-q1000-k3001", 2, 1000, 3001, 16, 4, 192, 128, False),
        ),
        (
            " d=96 , heads=8/1 , seqlen=512 , causal=yes ",
            Scenario("shape-b1-d96-h8kv1-s512-causal", 1, 512, 512, 8, 1, 96, 96, True),
        ),
    ],
)
def test_shapes_in_every_form(spec, want):
    assert parse_shape(spec) == want


@pytest.mark.parametrize(
    "spec, said",
    [
        ("batch=4", "'batch=4' lacks seqlen, heads, d"),
        ("seqlen=8192,heads=32/7,d=128", "heads=32/7: the query heads must be a multiple of the kv heads"),
        ("seqlen=8192,heads=32,d=100", "d=100: a head dimension is a multiple of 8 up to 256"),
        ("seqlen=8192,heads=32,d=128/512", "d (v)=512: a head dimension is a multiple of 8 up to 256"),
        ("seqlen=8192,heads=32,d=128,window=4", "unknown key 'window'"),
        ("seqlen=many,heads=32,d=128", "seqlen=many: expected a positive whole number or two as N/M"),
        ("seqlen=0,heads=32,d=128", "seqlen=0: must be positive"),
        ("seqlen=1/2/3,heads=32,d=128", "seqlen=1/2/3: expected a positive whole number or two as N/M"),
        ("seqlen=8,heads=32,d=128,causal=maybe", "causal=maybe: expected causal, causal=yes or causal=no"),
        ("seqlen=8,seqlen=9,heads=32,d=128", "seqlen given twice"),
        ("batch,seqlen=8,heads=32,d=128", "batch: expected batch=VALUE"),
        ("batch=2/3,seqlen=8,heads=32,d=128", "batch=2/3: one number"),
    ],
)
def test_a_shape_that_describes_no_scenario_says_why(spec, said):
    with pytest.raises(ShapeError, match=said.replace("(", r"\(").replace(")", r"\)")):
        parse_shape(spec)


def test_bench_times_the_shapes_instead_of_the_grid(monkeypatch, tmp_path):
    seen = []

    def run_local(req, *a, **kw):
        seen.append(req)
        raise NoGPUError("no GPU (stand-in)")

    monkeypatch.setattr("kernelseek_suite.bench.run_local", run_local)
    monkeypatch.chdir(tmp_path)
    two = "seqlen=2048,heads=16,d=64"
    r = CliRunner().invoke(main, ["bench", "--kernel", str(REFERENCE), "--shape", ISSUE, "--shape", two])
    assert r.exit_code == exitcodes.NO_GPU, r.output
    (req,) = seen
    assert [s.id for s in select_scenarios(req)] == [parse_shape(ISSUE).id, parse_shape(two).id]
    assert req.out_dir == tmp_path.joinpath("results", "sm90", "attn_fwd_ref-shapes").relative_to(tmp_path)


@pytest.mark.parametrize(
    "args, said",
    [
        (["--shape", "seqlen=8,heads=32/7,d=128"], "Invalid value for --shape: heads=32/7"),
        (["--shape", ISSUE, "--scenarios", "d64-*"], "--shape times its own scenarios"),
        (["--shape", ISSUE, "--extended"], "--shape times its own scenarios"),
    ],
)
def test_bench_refuses_a_bad_shape_before_anything_runs(monkeypatch, tmp_path, args, said):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["bench", "--kernel", str(REFERENCE), *args])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert said in r.output and list(tmp_path.iterdir()) == []


def test_a_request_with_shapes_and_a_filter_is_refused():
    req = BenchRequest(kernel=REFERENCE, shapes=[parse_shape(ISSUE)], scenario_filter="d64-*")
    with pytest.raises(RequestError, match="custom shapes are timed on their own"):
        select_scenarios(req)


def _run_once(*args):
    return subprocess.run(
        [sys.executable, "-m", "kernelseek_suite.cli", "run-once", str(REFERENCE), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ["--shape", "seqlen=8,heads=3/2,d=64"],
            "--shape: heads=3/2: the query heads must be a multiple of the kv heads",
        ),
        ([], "give SCENARIO or --shape, one of them"),
        (["d64-h32kv32-s512", "--shape", ISSUE], "give SCENARIO or --shape, one of them"),
    ],
)
def test_run_once_refuses_a_bad_shape(args, said):
    p = _run_once(*args)
    assert p.returncode == exitcodes.USAGE and said in p.stderr, p.stderr


@pytest.mark.nvcc
def test_run_once_takes_a_shape_as_far_as_the_gpu(tmp_path):
    """The kernel's static checks pass for the shape; without a GPU it stops there (3)."""
    if list_gpus():
        pytest.skip("a GPU is here")
    p = _run_once("--shape", "batch=2,seqlen=512,heads=8/2,d=64,causal", "--check")
    assert p.returncode == exitcodes.NO_GPU, p.stderr
