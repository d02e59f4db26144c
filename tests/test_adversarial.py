"""The adversarial kernels (tests/adversarial/): what can be checked without a GPU -- the table is
complete and consistent, the static rules and the build treat each kernel as expected, the verdict
logic of the H200 script -- and, on a GPU, the whole run."""

import re
import sys
from pathlib import Path

import pytest

from kernelseek_suite import rules
from kernelseek_suite import scenarios as sc
from kernelseek_suite.results import CODES, ScenarioResult

HERE = Path(__file__).parent / "adversarial"
sys.path.insert(0, str(HERE))
import run_h200  # noqa: E402

BY_NAME = {a.kernel: a for a in run_h200.ATTACKS}


def test_every_kernel_has_one_line_in_the_table():
    files = {p.stem for p in HERE.glob("*.cu")}
    assert files == set(BY_NAME) and len(BY_NAME) == len(run_h200.ATTACKS)


def test_the_expectations_are_known_codes_and_real_scenarios():
    ids = sc.by_id()
    for a in run_h200.ATTACKS:
        assert a.expect in CODES or a.expect in ("pass", "rules")
        assert a.unchecked is None or (a.unchecked in CODES and a.expect == "rules")
        assert all(s in ids for s in a.scenarios)
        assert a.scenarios or a.expect == "rules"


def test_each_cheating_kernel_is_the_honest_one_plus_a_marked_cheat():
    for name in BY_NAME:
        text = (HERE / f"{name}.cu").read_text()
        assert "ks_attn_fwd" in text and "KS_ABI_VERSION 1" in text
        if name != "honest":
            assert "CHEAT" in text and "Adversarial kernel:" in text.splitlines()[0]


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_the_static_rules(name):
    found = rules.check_source((HERE / f"{name}.cu").read_text())
    if name == "creates_stream":
        assert [v.rule for v in found] == ["creating a stream (run on the stream passed in)"]
    else:
        # python_patch hides its names from a text search; the build's symbol check catches it
        assert found == [], found


def row(sid, status="ok", code="", flags=()):
    return ScenarioResult(sid, "x", 1, 1, 1, False, False, 1.0, status, code=code, flags=list(flags))


def test_the_verdict_of_the_script():
    a = BY_NAME["cache_result"]
    rows = [row(s) for s in a.scenarios]
    rows[0] = row(a.scenarios[0], "rejected", "cached")
    o = run_h200.judge(a, rows, None)
    assert o.passed and o.observed == "rejected: 1 cached"
    assert not run_h200.judge(a, [row(s) for s in a.scenarios], None).passed  # nothing caught
    wrong_reason = [row(s, "wrong", "mismatch") for s in a.scenarios]
    assert not run_h200.judge(a, wrong_reason, None).passed  # caught, wrong reason
    assert not run_h200.judge(a, rows + [rows[0]], None).passed  # a row twice (forged)
    h = BY_NAME["honest"]
    assert run_h200.judge(h, [row(s) for s in h.scenarios], None).passed
    assert not run_h200.judge(h, [row(s, flags=["roofline: x"]) for s in h.scenarios], None).passed
    assert run_h200.judge(h, [row(s, flags=["nondeterministic: x"]) for s in h.scenarios], None).passed
    p = BY_NAME["python_patch"]
    assert run_h200.judge(p, None, "x.cu breaks the rule\n  built library: imports `PyRun_SimpleString`").passed
    assert not run_h200.judge(p, [], None).passed


def test_the_verdict_on_the_new_classes():
    for kernel, code in (
        ("replay_by_content", "cached"),
        ("replay_by_content_paced", "cached"),
        ("above_ceiling", "implausible"),
    ):
        a = BY_NAME[kernel]
        caught = [row(s, "implausible" if code == "implausible" else "rejected", code) for s in a.scenarios]
        o = run_h200.judge(a, caught, None)
        assert o.passed and o.observed == f"rejected: 1 {code}"
        assert not run_h200.judge(a, [row(s) for s in a.scenarios], None).passed
        assert not run_h200.judge(a, [row(s, "rejected", "timed-output") for s in a.scenarios], None).passed
    for kernel in ("reads_process", "static_constructor", "persisting_l2"):
        assert run_h200.judge(BY_NAME[kernel], None, "x.cu breaks the rule\n  compiled code: imports `x`").passed
        assert not run_h200.judge(BY_NAME[kernel], [], None).passed
    u = run_h200.unchecked_attack(BY_NAME["persisting_l2"])
    assert u.expect == "device-state" and u.scenarios and "without the allow-list" in u.kernel
    assert run_h200.judge(u, [row(s, "rejected", "device-state") for s in u.scenarios], None).passed
    assert not run_h200.judge(u, [row(s) for s in u.scenarios], None).passed


@pytest.mark.nvcc
def test_the_unchecked_build_is_plain_nvcc_outside_the_suites_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    lib, why = run_h200.build_unchecked(BY_NAME["persisting_l2"], "sm90", tmp_path)
    assert why is None and lib.exists() and lib.parent == tmp_path / "unchecked"
    assert not list((tmp_path / "cache").glob("build/*/kernel.so"))  # not through the suite's build


def test_the_script_refuses_to_run_without_a_gpu(monkeypatch, tmp_path):
    from kernelseek_suite import gpu

    monkeypatch.setattr(gpu, "list_gpus", lambda: [])
    assert run_h200.main(["--out", str(tmp_path)]) == 3


@pytest.mark.nvcc
def test_each_kernel_builds_or_is_refused_as_expected(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path))
    libs = run_h200.build_all(run_h200.ATTACKS, "sm90")
    for a in run_h200.ATTACKS:
        built, err = libs[a.kernel]
        if a.expect == "rules":
            assert built is None and err, a.kernel
        else:
            assert err is None and built is not None, (a.kernel, err)
    assert "PyRun_SimpleString" in libs["python_patch"][1] and "Python C API" in libs["python_patch"][1]
    assert "creating a stream" in libs["creates_stream"][1]
    for name in ("`environ` (the process environment)", "`fopen64` (files", "`cudaStreamAddCallback` (host code"):
        assert name in libs["reads_process"][1]
    assert "static constructor in `.init_array`" in libs["static_constructor"][1]
    assert "`cudaDeviceSetLimit`" in libs["persisting_l2"][1] and "`cudaStreamSetAttribute`" in libs["persisting_l2"][1]
    names = {re.sub(r"ILi(\d+)E", r"\1", f.name) for f in libs["honest"][0].functions}
    assert len(names) == 2


@pytest.mark.gpu
@pytest.mark.nvcc
def test_every_attack_is_caught_and_the_honest_kernel_passes(tmp_path):
    assert run_h200.main(["--out", str(tmp_path)]) == 0
