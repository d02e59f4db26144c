"""The sampling options of `bench` and `eval` (--warmup, --min-samples, --max-samples, --min-time,
--timeout): mapped onto TimingConfig and SweepConfig, checked before anything runs, carried to the
worker's job and recorded in provenance.json."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite import config
from kernelseek_suite.bench import BenchRequest, SweepOutput
from kernelseek_suite.cli import main
from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.gpu import NoGPUError
from kernelseek_suite.harness.sweep import _setup_job
from kernelseek_suite.scenarios import grid

REFERENCE = config.REPO_ROOT / config.REFERENCE_KERNEL
OPTIONS = [
    "--warmup", "7", "--min-samples", "40", "--max-samples", "60", "--min-time", "0.5", "--timeout", "30",
    "--max-noise", "2.5",
]  # fmt: skip


def test_the_options_map_onto_the_harness_config():
    cfg = config.with_sampling(config.HarnessConfig(), 7, 40, 60, 0.5, 30.0, 0.025)
    t = cfg.timing
    assert (t.warmup, t.min_reps, t.min_reps_per_distribution, t.max_reps, t.max_reps_per_distribution) == (
        7,
        40,
        40,
        60,
        60,
    )
    assert t.budget_s == 0.5 and cfg.sweep.scenario_timeout_s == 30.0 and t.max_noise == 0.025
    assert config.HarnessConfig().timing.max_noise is None  # without the option: the budget alone
    # the rest is left as it was
    d = config.HarnessConfig()
    assert t.l2_flush_bytes == d.timing.l2_flush_bytes and cfg.check == d.check
    assert cfg.sweep.max_restarts == d.sweep.max_restarts
    assert config.with_sampling(d) == d


def test_a_minimum_above_the_default_maximum_raises_it_and_contradictions_are_refused():
    t = config.with_sampling(config.HarnessConfig(), min_samples=100).timing
    assert t.min_reps == t.max_reps == t.min_reps_per_distribution == t.max_reps_per_distribution == 100
    with pytest.raises(config.SamplingError, match="--max-samples 5 is below the minimum, 10 counted calls"):
        config.with_sampling(config.HarnessConfig(), min_samples=10, max_samples=5)
    with pytest.raises(config.SamplingError, match=r"below the minimum, 5 counted calls \(set --min-samples too\)"):
        config.with_sampling(config.HarnessConfig(), max_samples=3)


def _captured(monkeypatch, where: str) -> list:
    seen = []

    def run_local(req, *a, **kw):
        seen.append(req)
        raise NoGPUError("no GPU (stand-in)")

    monkeypatch.setattr(where, run_local)
    return seen


def test_bench_takes_the_sampling_options(monkeypatch, tmp_path):
    seen = _captured(monkeypatch, "kernelseek_suite.bench.run_local")
    r = CliRunner().invoke(main, ["bench", "--kernel", str(REFERENCE), "--out", str(tmp_path / "o"), *OPTIONS])
    assert r.exit_code == exitcodes.NO_GPU, r.output
    (req,) = seen
    assert req.config == config.with_sampling(
        config.HarnessConfig(), 7, 40, 60, 0.5, 30.0, 0.025
    )  # --max-noise 2.5 (%)


def test_eval_takes_the_sampling_options(monkeypatch, tmp_path):
    seen = _captured(monkeypatch, "kernelseek_suite.bench.run_local")
    r = CliRunner().invoke(main, ["eval", str(REFERENCE), "--out", str(tmp_path / "o"), *OPTIONS])
    assert r.exit_code == exitcodes.NO_GPU, r.output
    (req,) = seen
    assert req.config == config.with_sampling(
        config.HarnessConfig(), 7, 40, 60, 0.5, 30.0, 0.025
    )  # --max-noise 2.5 (%)
    assert req.kind == "eval" and req.timed_ids == set(config.EVAL_TIMED_SUBSET)


@pytest.mark.parametrize(
    "args, said",
    [
        (["--min-samples", "10", "--max-samples", "5"], "--max-samples 5 is below the minimum"),
        (["--warmup", "-1"], "Invalid value for '--warmup'"),
        (["--min-samples", "0"], "Invalid value for '--min-samples'"),
        (["--timeout", "0"], "Invalid value for '--timeout'"),
        (["--min-time", "-0.1"], "Invalid value for '--min-time'"),
    ],
)
@pytest.mark.parametrize("command", ["bench", "eval"])
def test_bad_sampling_options_are_usage_errors_before_anything_runs(monkeypatch, tmp_path, args, said, command):
    monkeypatch.chdir(tmp_path)
    seen = _captured(monkeypatch, "kernelseek_suite.bench.run_local")
    kernel = ["--kernel", str(REFERENCE)] if command == "bench" else [str(REFERENCE)]
    r = CliRunner().invoke(main, [command, *kernel, *args])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert said in r.output
    assert seen == [] and list(tmp_path.iterdir()) == []


def test_the_worker_gets_them_and_provenance_records_them(tmp_path):
    cfg = config.with_sampling(config.HarnessConfig(), 7, 40, 60, 0.5, 30.0, 0.025)
    job = _setup_job(["fa3"], cfg, None)
    assert job["timing"]["warmup"] == 7 and job["timing"]["min_reps_per_distribution"] == 40
    assert job["timing"]["max_reps"] == 60 and job["timing"]["budget_s"] == 0.5 and job["timing"]["max_noise"] == 0.025
    req = BenchRequest(kernel=Path(REFERENCE), out_dir=tmp_path, config=cfg)
    out = SweepOutput(tmp_path, req, "0" * 64, grid("sm90")[:2], fresh=dict)
    assert out.prov["sampling"] == {
        "warmup": 7,
        "min_samples": 40,
        "max_samples": 60,
        "min_samples_one_distribution": 40,
        "max_samples_one_distribution": 60,
        "min_time_s": 0.5,
        "max_noise": 0.025,
        "scenario_timeout_s": 30.0,
    }
