"""On a GPU: real kernels that crash (an illegal address) and hang (a spin) are recorded with their
reason and the sweep goes on; the reference kernel passes. The CPU counterparts of this logic are in
test_sweep.py (a stand-in worker) and test_trials.py (the defences)."""

from pathlib import Path

import pytest

from kernelseek_suite.bench import BenchRequest, run_bench
from kernelseek_suite.config import HarnessConfig, SweepConfig
from kernelseek_suite.results import read_jsonl

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

ROOT = Path(__file__).resolve().parent.parent
KERNELS = Path(__file__).parent / "kernels"
SMALL = "d128-h16kv4-s512,d64-h32kv1-s512-causal,ext-d128-h16kv4-b3-q113-k1000-causal"


def bench(tmp_path, kernel: Path, timeout_s=120.0, **kw):
    cfg = HarnessConfig(sweep=SweepConfig(scenario_timeout_s=timeout_s))
    req = BenchRequest(
        kernel=kernel,
        arch="sm90",
        baselines=[],
        scenario_filter=SMALL,
        extended=True,
        out_dir=tmp_path / "out",
        config=cfg,
        **kw,
    )
    summary = run_bench(req)
    return summary, {r.scenario: r for r in read_jsonl(tmp_path / "out" / "bench.jsonl")}


def test_an_illegal_address_is_recorded_and_the_sweep_goes_on(tmp_path):
    summary, rows = bench(tmp_path, KERNELS / "illegal_address.cu")
    assert len(rows) == 3 and summary["scenarios_correct"] == 0
    for r in rows.values():
        assert r.status in ("error", "crash") and r.code == "cuda-error", r
        assert "illegal" in r.reason.lower()


def test_a_hang_is_timed_out_and_the_sweep_goes_on(tmp_path):
    summary, rows = bench(tmp_path, KERNELS / "spin.cu", timeout_s=15.0)
    assert len(rows) == 3
    assert all(r.status == "timeout" and r.code == "timeout" for r in rows.values())


def test_the_reference_kernel_passes_every_defence(tmp_path):
    summary, rows = bench(tmp_path, ROOT / "kernels" / "reference" / "attn_fwd_ref.cu")
    assert all(r.status == "ok" for r in rows.values()), [(r.scenario, r.reason) for r in rows.values()]
    timed = [r for r in rows.values() if not r.extended]
    assert all(r.times_ms["kernel"]["late_ms"] < 0.05 and r.recheck for r in timed)
    assert summary["provenance"]["gemm_tflops"] > 100
