"""What needs no GPU is checked before the GPU is looked for: the contract's exports (read from the
built library's dynamic symbols), the rules, the baseline names and the scenario filter. On a
machine without a GPU (forced here, so the tests mean the same on the H200) a kernel that breaks
the rules or does not build exits 2, a good one 3, a bad request 4, and a usage error writes
nothing."""

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite import build as build_mod
from kernelseek_suite import gpu
from kernelseek_suite.cli import main, run_once
from kernelseek_suite.contract import REQUIRED_SYMBOLS
from kernelseek_suite.contracts import exitcodes

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "kernels" / "reference" / "attn_fwd_ref.cu"
KERNELS = Path(__file__).parent / "kernels"

EXPORTS = {
    "ks_abi_version": 'extern "C" int ks_abi_version(void) { return 1; }',
    "ks_params_size": 'extern "C" int ks_params_size(void) { return 0; }',
    "ks_attn_fwd": 'extern "C" int ks_attn_fwd(const void* p, void* stream) { return 1; }',
}


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(gpu, "list_gpus", lambda: [])


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty current folder: whatever a command writes by default lands here."""
    d = tmp_path / "cwd"
    d.mkdir()
    monkeypatch.chdir(d)
    return d


def _kernel(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _without(name: str) -> str:
    return "\n".join(code for sym, code in EXPORTS.items() if sym != name) + "\n"


# ---- exports, read from the library's dynamic symbols ------------------------------------------


def test_missing_exports_names_each_one_the_contract_asks_for():
    assert build_mod.missing_exports(set(REQUIRED_SYMBOLS)) == []
    assert build_mod.missing_exports(set()) == list(REQUIRED_SYMBOLS)
    assert build_mod.missing_exports({"ks_abi_version", "ks_params_size", "_Z11ks_attn_fwdPKvPv"}) == ["ks_attn_fwd"]


@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
@pytest.mark.parametrize("dropped", [None, *REQUIRED_SYMBOLS])
def test_exports_are_read_from_a_libraries_dynamic_symbols(tmp_path, dropped):
    """The CPU side of the check, on a library built by the C compiler: no nvcc, nothing loaded."""
    src = tmp_path / "lib.c"
    src.write_text(
        "\n".join(code.replace('extern "C" ', "") for sym, code in EXPORTS.items() if sym != dropped)
        + "\nstatic int helper(void) { return 0; }\nint other(void) { return helper(); }\n"
    )
    lib = tmp_path / "lib.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    exported = build_mod.exported_functions(lib)
    assert "other" in exported and "helper" not in exported
    if dropped is None:
        build_mod.check_exports(lib, src)
        assert set(REQUIRED_SYMBOLS) <= exported
    else:
        with pytest.raises(build_mod.ContractError, match=f"does not export {dropped}"):
            build_mod.check_exports(lib, src)


@pytest.mark.nvcc
@pytest.mark.parametrize(
    "name,text,missing",
    [
        ("empty.cu", "", "ks_abi_version, ks_params_size, ks_attn_fwd"),
        ("no_fwd.cu", _without("ks_attn_fwd"), "ks_attn_fwd"),
        ("not_extern_c.cu", _without("ks_abi_version") + "int ks_abi_version(void) { return 1; }\n", "ks_abi_version"),
    ],
)
def test_build_refuses_a_kernel_without_the_contracts_exports(tmp_path, workdir, name, text, missing):
    kernel = _kernel(tmp_path, name, text)
    r = CliRunner().invoke(main, ["build", str(kernel), "--arch", "sm90"])
    assert r.exit_code == exitcodes.BUILD, r.output
    assert f"does not export {missing}" in r.output
    r = CliRunner().invoke(main, ["build", str(kernel), "--arch", "sm90"])  # and again, from nothing cached
    assert r.exit_code == exitcodes.BUILD
    assert list(workdir.iterdir()) == []


@pytest.mark.nvcc
def test_a_kernel_with_the_three_exports_builds(tmp_path, workdir):
    kernel = _kernel(tmp_path, "stub.cu", "\n".join(EXPORTS.values()) + "\n")
    r = CliRunner().invoke(main, ["build", str(kernel), "--arch", "sm90"])
    assert r.exit_code == exitcodes.OK, r.output


# ---- eval and bench without a GPU: the kernel and the request first -----------------------------


def test_eval_of_a_kernel_with_a_cutlass_include_exits_2_without_a_gpu(no_gpu, tmp_path, workdir):
    kernel = _kernel(tmp_path, "cutlass.cu", "#include <cutlass/gemm/device/gemm.h>\n" + REFERENCE.read_text())
    for args in (["eval", str(kernel)], ["bench", "--kernel", str(kernel)]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == exitcodes.BUILD, r.output
        assert "cutlass" in r.output.lower() and "no NVIDIA GPU" not in r.output
    assert list(workdir.iterdir()) == []


@pytest.mark.nvcc
def test_eval_of_a_kernel_that_does_not_compile_exits_2_without_a_gpu(no_gpu, workdir):
    r = CliRunner().invoke(main, ["eval", str(KERNELS / "does_not_compile.cu"), "--json"])
    assert r.exit_code == exitcodes.BUILD, r.output
    assert '"status": "build_failed"' in r.output


def test_eval_of_a_good_kernel_exits_3_without_a_gpu(no_gpu, workdir):
    r = CliRunner().invoke(main, ["eval", str(REFERENCE)])
    assert r.exit_code == exitcodes.NO_GPU, r.output
    assert "no NVIDIA GPU found" in r.output
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize(
    "args,words",
    [
        (["--baseline", "fa9"], "unknown baseline fa9"),
        (["--scenarios", "nomatch*"], "no scenario matches 'nomatch*'"),
        (["--baseline", "fa3", "--baseline", "cudnn", "--baseline", "fa9"], "unknown baseline fa9"),
    ],
)
def test_a_bad_request_exits_4_before_the_gpu_check_and_writes_nothing(no_gpu, workdir, args, words):
    out = workdir / "out"
    r = CliRunner().invoke(main, ["bench", "--kernel", str(REFERENCE), "--out", str(out), *args])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert words in r.output and "no NVIDIA GPU" not in r.output
    assert list(workdir.iterdir()) == []


def test_eval_with_an_unknown_baseline_exits_4(no_gpu, workdir):
    r = CliRunner().invoke(main, ["eval", str(REFERENCE), "--baseline", "fa9", "--json"])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert '"status": "usage"' in r.output


# ---- run_once -----------------------------------------------------------------------------------


def test_run_once_says_no_gpu_with_exit_3(no_gpu, capsys):
    assert run_once.main([str(REFERENCE), "d64-h32kv32-s512", "--check"]) == exitcodes.NO_GPU
    err = capsys.readouterr().err
    assert err.startswith("no GPU: ") and "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        [str(REFERENCE), "d64-h32kv32-s512", "--arch", "sm75"],
        ["no-such-kernel.cu", "d64-h32kv32-s512"],
        [str(REFERENCE), "d64-h32kv32-s512", "--time", "--beside", "no-such-kernel.cu"],
    ],
)
def test_run_once_usage_errors_exit_4(args, capsys):
    with pytest.raises(SystemExit) as e:
        run_once.main(args)
    assert e.value.code == exitcodes.USAGE


def test_run_once_refuses_a_kernel_that_breaks_the_rules_before_the_gpu(no_gpu, tmp_path):
    kernel = _kernel(tmp_path, "cutlass.cu", "#include <cutlass/gemm/device/gemm.h>\n" + REFERENCE.read_text())
    assert run_once.main([str(kernel), "d64-h32kv32-s512"]) == exitcodes.BUILD


def test_run_once_exits_3_in_a_child_process_without_a_traceback():
    """As documented: `kernelseek-suite run-once KERNEL SCENARIO --check` (here through `python -m`)."""
    if gpu.list_gpus():
        pytest.skip("this machine has a GPU")
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "kernelseek_suite.cli", "run-once", str(REFERENCE), "d64-h32kv32-s512", "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == exitcodes.NO_GPU and "Traceback" not in p.stderr


# ---- an agent run that cannot start writes nothing ----------------------------------------------


def test_an_unknown_agent_writes_no_trace(workdir):
    r = CliRunner().invoke(
        main,
        ["run", "--agent", "nobody", "--task", "cpu-attn", "--model", "m", "--base-url", "http://127.0.0.1:9"],
        env={"OPENAI_API_KEY": None},
    )
    assert r.exit_code == exitcodes.USAGE, r.output
    assert "unknown agent 'nobody'" in r.output
    assert list(workdir.iterdir()) == []
