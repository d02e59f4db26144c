"""The real shard runner on this host's GPUs through dask-cuda (needs a GPU, nvcc and the dask-cuda
extra). Its CPU-side counterparts are in test_scaleout_bench.py (the sharding, retries and merge with
the GPU parts stood in) and test_scaleout_cli.py (a cluster of workers without GPUs is refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelseek_suite.bench import BenchRequest, run_bench
from kernelseek_suite.gpu import list_gpus
from kernelseek_suite.results import read_jsonl

KERNEL = Path(__file__).resolve().parent.parent / "kernels" / "reference" / "attn_fwd_ref.cu"
PATTERN = "d64-h32kv32-s512*,d128-h16kv16-s1024*,d128-h16kv4-s2048*"


@pytest.mark.gpu
@pytest.mark.nvcc
def test_sharded_bench_on_this_hosts_gpus_matches_one_gpu(tmp_path):
    pytest.importorskip("dask_cuda")
    from kernelseek_suite.scaleout.bench import ScaleOut, run_bench_distributed
    from kernelseek_suite.scaleout.cluster import ClusterSpec

    common = dict(kernel=KERNEL, arch="sm80", baselines=["sdpa-flash"], scenario_filter=PATTERN, seed=11)
    sharded = run_bench_distributed(
        BenchRequest(out_dir=tmp_path / "sharded", **common), scaleout=ScaleOut(ClusterSpec("local-cuda"), chunk=1)
    )
    single = run_bench(BenchRequest(out_dir=tmp_path / "single", **common))
    rows, ref = read_jsonl(tmp_path / "sharded" / "bench.jsonl"), read_jsonl(tmp_path / "single" / "bench.jsonl")
    assert sorted(r.scenario for r in rows) == sorted(r.scenario for r in ref)
    assert {r.scenario: r.status for r in rows} == {r.scenario: r.status for r in ref}
    assert sharded["scenarios_correct"] == single["scenarios_correct"] == 6
    uuids = {g.uuid for g in list_gpus()}
    assert all(r.gpu["uuid"] in uuids for r in rows)
    if len(uuids) > 1:
        assert len({r.gpu["uuid"] for r in rows}) > 1
    # same inputs (seed, scenario) wherever they ran: the check's errors agree exactly
    by_id = {r.scenario: r for r in ref}
    for r in rows:
        assert r.check["max_err"] == by_id[r.scenario].check["max_err"]
