"""`bench --inputs FILE`: q, k, v captured from a model, in a safetensors file the test writes
itself; read, checked, turned into a scenario, and judged by the harness as any distribution."""

import json
import random
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import fakes
from kernelseek_suite import bench
from kernelseek_suite.cli import main as cli
from kernelseek_suite.config import CheckConfig, HarnessConfig, SweepConfig
from kernelseek_suite.contracts.exitcodes import USAGE
from kernelseek_suite.harness import distributions as D
from kernelseek_suite.harness import trial

save_file = pytest.importorskip("safetensors.torch").save_file
KERNELS = Path(__file__).parent / "kernels"
CFG = CheckConfig(red_zone_bytes=4096)


def captured(tmp_path, name="acts", b=2, sq=48, sk=80, hq=4, hk=2, d=32, dv=32, causal=None, **over):
    """A file of q, k, v as a forward hook would save them: (batch, seqlen, heads, head_dim), bf16."""
    g = torch.Generator().manual_seed(3)
    t = {
        "q": torch.randn(b, sq, hq, d, generator=g).bfloat16(),
        "k": (3 * torch.randn(b, sk, hk, d, generator=g)).bfloat16(),
        "v": torch.randn(b, sk, hk, dv, generator=g).bfloat16(),
    }
    t.update(over)
    path = tmp_path / f"{name}.safetensors"
    save_file(t, str(path), metadata=None if causal is None else {"causal": str(causal).lower()})
    return path


def test_a_captured_file_is_a_scenario_of_its_own_shapes(tmp_path):
    path = captured(tmp_path)
    s = D.scenario_from_file(path)
    assert (s.id, s.batch, s.seqlen_q, s.seqlen_k, s.heads_q, s.heads_kv, s.d_qk, s.d_v, s.causal) == (
        "file-acts",
        2,
        48,
        80,
        4,
        2,
        32,
        32,
        False,
    )
    assert D.scenario_from_file(captured(tmp_path, "masked", causal=True)).id == "file-masked-causal"
    assert not D.scenario_from_file(captured(tmp_path, "masked", causal=True), causal=False).causal
    assert D.scenario_from_file(path, causal=True).causal


def test_the_file_distribution_gives_fresh_copies_of_the_same_tensors_whatever_the_seed(tmp_path):
    path = captured(tmp_path)
    s = D.scenario_from_file(path)
    dist = D.get(f"file:{path}")
    a, b = dist.make(s, 1, "cpu"), dist.make(s, 2, "cpu")
    for x, y in zip(a, b):
        assert torch.equal(x, y) and x.data_ptr() != y.data_ptr() and x.dtype == torch.bfloat16
    a[0].zero_()  # a kernel that writes its inputs changes its own copy only
    assert not torch.equal(dist.make(s, 1, "cpu")[0], a[0])
    other = s.__class__("x", 1, 48, 80, 4, 2, 32, 32, False)
    with pytest.raises(D.InputsError, match="the scenario x needs"):
        dist.make(other, 1, "cpu")


@pytest.mark.parametrize(
    "over,message",
    [
        (
            {"q": torch.zeros(2, 48, 4).bfloat16()},
            "q has shape \\(2, 48, 4\\); expected \\(batch, seqlen, heads, head_dim\\)",
        ),
        ({"v": torch.zeros(2, 81, 2, 32).bfloat16()}, "do not fit together"),
        ({"q": torch.zeros(2, 48, 3, 32).bfloat16()}, "3 q heads are not a multiple of 2 kv heads"),
        ({"k": torch.zeros(2, 80, 2, 32, dtype=torch.int32)}, "k is torch.int32; expected a floating-point"),
    ],
)
def test_a_file_that_does_not_fit_is_refused_with_what_is_wrong(tmp_path, over, message):
    with pytest.raises(D.InputsError, match=message):
        D.read_inputs(captured(tmp_path, **over))


def test_missing_tensors_and_files_that_are_not_safetensors_are_refused(tmp_path):
    path = tmp_path / "two.safetensors"
    save_file({"q": torch.zeros(1, 4, 1, 8), "k": torch.zeros(1, 4, 1, 8)}, str(path))
    with pytest.raises(D.InputsError, match="no tensor named v \\(it has: k, q\\)"):
        D.read_inputs(path)
    junk = tmp_path / "junk.safetensors"
    junk.write_text("not a tensor file")
    with pytest.raises(D.InputsError, match="not a readable safetensors file"):
        D.read_inputs(junk)
    with pytest.raises(D.InputsError, match="not a readable safetensors file"):
        D.read_inputs(tmp_path / "absent.safetensors")


def test_the_harness_judges_captured_inputs_like_any_other(tmp_path):
    path = captured(tmp_path, causal=True)
    s = D.scenario_from_file(path)
    name = f"file:{path}"
    v, state = trial.check_scenario(s, 1, fakes.honest(s), lambda: None, "cpu", CFG, name)
    assert v.ok, v.reason
    assert state.distribution == name and torch.equal(
        state.expected.q, D.read_inputs(path)[0]["q"].roll(-1, 0).roll(-2, 2)
    )
    bad, _ = trial.check_scenario(s, 1, fakes.cheap_uniform(s), lambda: None, "cpu", CFG, name)
    assert bad.code == "mismatch"
    v, _ = trial.check_distribution(s, name, 1, fakes.honest(s), lambda: None, "cpu", CFG, random.Random(0))
    assert v.ok


def test_a_request_for_a_file_times_its_scenario_on_its_inputs_only(tmp_path):
    path = captured(tmp_path)
    req = bench.BenchRequest(kernel=KERNELS / "spin.cu", inputs=path)
    assert [s.id for s in bench.select_scenarios(req)] == ["file-acts"]
    assert req.config.distributions == (f"file:{path.resolve()}",)
    kept = bench.BenchRequest(kernel=KERNELS / "spin.cu", inputs=path, config=HarnessConfig(distributions=("wide",)))
    assert kept.config.distributions == ("wide",)
    with pytest.raises(bench.RequestError, match="not a readable safetensors file"):
        bench.select_scenarios(bench.BenchRequest(kernel=KERNELS / "spin.cu", inputs=tmp_path / "absent.safetensors"))


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--scenarios", "d64-*"], "--inputs times the file's own scenario"),
        (["--extended"], "--inputs times the file's own scenario"),
    ],
)
def test_the_command_line_refuses_what_does_not_go_with_a_file(tmp_path, extra, message):
    path = captured(tmp_path)
    r = CliRunner().invoke(cli, ["bench", "--kernel", str(KERNELS / "spin.cu"), "--inputs", str(path), *extra])
    assert r.exit_code == USAGE and message in r.output
    r = CliRunner().invoke(cli, ["bench", "--kernel", str(KERNELS / "spin.cu"), "--causal"])
    assert r.exit_code == USAGE and "--causal/--no-causal go with --inputs" in r.output


def test_a_bad_file_is_a_usage_error_before_any_gpu_is_looked_for(tmp_path):
    junk = tmp_path / "junk.safetensors"
    junk.write_text("nope")
    r = CliRunner().invoke(
        cli, ["bench", "--kernel", str(KERNELS / "spin.cu"), "--inputs", str(junk), "--out", str(tmp_path / "o")]
    )
    assert r.exit_code == USAGE and "not a readable safetensors file" in r.output
    assert not (tmp_path / "o").exists()


@pytest.mark.nvcc
def test_the_sweep_sends_the_files_scenario_and_distribution_to_the_worker(tmp_path, monkeypatch):
    from kernelseek_suite import gpu

    h100 = gpu.GPUInfo(0, "NVIDIA H100 80GB HBM3", "GPU-00000000-test", (9, 0), "580.00")
    monkeypatch.setattr(bench, "require_gpu", lambda arch, index=0: h100)
    monkeypatch.setattr(gpu, "require_gpu", lambda arch, index=0: h100)
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    plan = tmp_path / "plan.json"
    record = tmp_path / "record.jsonl"
    plan.write_text(json.dumps({"record": str(record), "tflops": 50.0, "ratio": {"fa3": 0.9}}))
    path = captured(tmp_path)
    req = bench.BenchRequest(
        kernel=KERNELS / "spin.cu",
        inputs=path,
        out_dir=tmp_path / "out",
        config=HarnessConfig(sweep=SweepConfig(scenario_timeout_s=5, poll_s=0.05), distributions=None),
        worker_command=(sys.executable, str(Path(__file__).parent / "fake_worker.py"), str(plan)),
    )
    summary = bench.run_bench(req)
    started = [json.loads(line) for line in record.read_text().splitlines()]
    assert started[0]["scenarios"] == ["file-acts"] and started[0]["distributions"] == [f"file:{path.resolve()}"]
    assert summary["scenarios_total"] == 1 and summary["scenarios_correct"] == 1
