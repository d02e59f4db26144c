"""What `build` tells a person: a kernel built for an architecture it was not written for gets one
line naming the target it needs (not ptxas's errors on files already deleted), and the resource
table names every kernel instance so that two of them never read the same."""

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite import build as B
from kernelseek_suite.cli import main
from kernelseek_suite.contracts import exitcodes

ROOT = Path(__file__).resolve().parent.parent
HOPPER = ROOT / "kernels" / "hopper" / "flash_fwd_sm90.cu"
NEEDS_SM90A = Path(__file__).parent / "kernels" / "needs_sm90a.cu"

# as ptxas (CUDA 13.0) prints them for the Hopper kernel built with --arch sm80, paths as build.py
# rewrites them
SM80_ERRORS = """\
ptxas flash_fwd_sm90.cu (PTX), line 186; error   : Feature '.op_restrict' requires .target sm_90 or higher
ptxas flash_fwd_sm90.cu (PTX), line 186; error   : Modifier '.mbarrier_init' requires .target sm_90 or higher
ptxas flash_fwd_sm90.cu (PTX), line 192; error   : Modifier '.async' requires .target sm_90 or higher
ptxas flash_fwd_sm90.cu (PTX), line 206; error   : Instruction 'setmaxnreg.inc' not supported on .target 'sm_80'
ptxas flash_fwd_sm90.cu (PTX), line 322; error   : Feature 'mbarrier.try_wait.parity' requires .target sm_90 or higher
ptxas flash_fwd_sm90.cu (PTX), line 550; error   : Instruction 'wgmma.fence' not supported on .target 'sm_80'
ptxas flash_fwd_sm90.cu (PTX), line 577; error   : Instruction 'wgmma.mma_async with floating point types' not supported on .target 'sm_80'
ptxas fatal   : Ptx assembly aborted due to errors
"""


def test_a_kernel_for_a_newer_architecture_gets_one_line_naming_its_target():
    msg = B.failure_message("flash_fwd_sm90.cu", "sm80", SM80_ERRORS)
    first, second = msg.splitlines()
    assert first == (
        "nvcc failed for flash_fwd_sm90.cu (sm80): the kernel needs sm_90a (setmaxnreg.inc, wgmma.fence, "
        "wgmma.mma_async, .op_restrict), not sm80: build it with --arch sm90"
    )
    assert second == (
        "  8 ptxas errors, the first: flash_fwd_sm90.cu (PTX), line 186: Feature '.op_restrict' requires "
        ".target sm_90 or higher"
    )


def test_the_target_hint_for_other_architectures():
    blackwell = "ptxas k.cu (PTX), line 9; error   : Instruction 'tcgen05.mma' not supported on .target 'sm_90a'\n"
    assert (
        B.target_hint(blackwell, "sm90")
        == "the kernel needs sm_100a (tcgen05.mma), not sm90: build it with --arch sm100"
    )
    generic = "ptxas k.cu (PTX), line 3; error   : Feature 'cp.async.bulk' requires .target sm_90 or higher\n"
    assert (
        B.target_hint(generic, "sm80") == "the kernel needs sm_90 (cp.async.bulk), not sm80: build it with --arch sm90"
    )
    unknown = "ptxas k.cu (PTX), line 3; error   : Instruction 'foo.bar' not supported on .target 'sm_80'\n"
    assert B.target_hint(unknown, "sm80") == "the kernel uses instructions that sm80 lacks (foo.bar)"


def test_other_compiler_errors_are_given_as_they_are():
    log = 'k.cu(3): error: identifier "undeclared_name" is undefined\n1 error detected in the compilation of "k.cu".\n'
    assert B.target_hint(log, "sm90") is None
    assert B.failure_message("k.cu", "sm90", log) == (
        "nvcc failed for k.cu (sm90):\n"
        'k.cu(3): error: identifier "undeclared_name" is undefined\n'
        '1 error detected in the compilation of "k.cu".'
    )


@pytest.mark.nvcc
def test_building_a_hopper_kernel_for_sm80_says_it_needs_sm_90a(tmp_path, monkeypatch):
    """A small kernel with the Hopper kernel's sm_90a instructions, in the order its PTX has them, gets
    the Hopper kernel's own line (SM80_ERRORS). The Hopper kernel itself is not compiled for sm80 here
    (all its instances, only to fail in ptxas): its instructions are checked below, on the build that
    the kernel tests share."""
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    r = CliRunner().invoke(main, ["build", str(NEEDS_SM90A), "--arch", "sm80"])
    assert r.exit_code == exitcodes.BUILD, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0] == (
        "error: build failed: nvcc failed for needs_sm90a.cu (sm80): the kernel needs sm_90a (setmaxnreg.inc, "
        "wgmma.fence, wgmma.mma_async, .op_restrict), not sm80: build it with --arch sm90"
    )
    assert "needs_sm90a.cu (PTX), line" in lines[1]
    assert str(tmp_path) not in r.stderr and "/keep/" not in r.stderr  # no path of a deleted file


@pytest.mark.nvcc
@pytest.mark.slow
def test_the_hopper_kernels_instructions_for_sm80_say_it_needs_sm_90a(tmp_path):
    """The Hopper kernel itself: its PTX (the session's build cache, one build for every kernel test),
    assembled for sm_80 by ptxas as its build for sm80 would be, fails with the line that names sm_90a."""
    nvcc = B.nvcc_path()
    ptxas = shutil.which("ptxas") or (nvcc and shutil.which("ptxas", path=str(Path(nvcc).parent)))
    assert ptxas, "ptxas is not beside nvcc"
    ptx = Path(B.build(HOPPER, "sm90").ptx).read_text()
    assert "\n.target sm_90a\n" in ptx
    sm80 = tmp_path / "flash_fwd_sm90.ptx"
    sm80.write_text(ptx.replace("\n.target sm_90a\n", "\n.target sm_80\n", 1))
    p = subprocess.run(
        [ptxas, "-arch=sm_80", str(sm80), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True
    )
    assert p.returncode != 0, p.stdout + p.stderr
    log = (p.stdout + p.stderr).replace(str(sm80), "flash_fwd_sm90.cu (PTX)")
    lines = B.failure_message(HOPPER.name, "sm80", log).splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("nvcc failed for flash_fwd_sm90.cu (sm80): the kernel needs sm_90a (")
    assert lines[0].endswith("not sm80: build it with --arch sm90")
    assert "wgmma.mma_async" in lines[0] and "flash_fwd_sm90.cu (PTX), line" in lines[1]


MANGLED = [
    "_Z21flash_fwd_sm90_kernelI6ConfigILi192ELi128ELi128ELi2ELi2ELi64ELi3EELb0EEv14CUtensorMap_stS2_S2_S2_12DeviceParams",
    "_Z21flash_fwd_sm90_kernelI6ConfigILi192ELi128ELi128ELi2ELi2ELi64ELi3EELb1EEv14CUtensorMap_stS2_S2_S2_12DeviceParams",
    "_Z19attn_fwd_ref_kernelILi96ELi96EEv14ks_attn_params",
    "plain_c_kernel",
]


def _result(names):
    return B.BuildResult(
        source="k.cu",
        source_sha256="0",
        arch="sm90",
        library="k.so",
        ptx=None,
        nvcc_version="13.0",
        flags=[],
        cached=True,
        functions=[B.FunctionResources(n, registers=168 + i) for i, n in enumerate(names)],
    )


def test_the_resource_table_tells_the_causal_and_non_causal_instances_apart():
    rows = B.resource_table(_result(MANGLED))
    names = [r[0] for r in rows]
    assert len(set(names)) == len(names)
    assert [r[1] for r in rows] == [168, 169, 170, 171]
    assert not any(n.endswith("...") for n in names)
    if shutil.which("c++filt") or shutil.which("cu++filt"):
        assert names == [
            "flash_fwd_sm90_kernel<Config<192, 128, 128, 2, 2, 64, 3>, false>",
            "flash_fwd_sm90_kernel<Config<192, 128, 128, 2, 2, 64, 3>, true>",
            "attn_fwd_ref_kernel<96, 96>",
            "plain_c_kernel",
        ]


def test_without_a_demangler_the_names_are_whole(monkeypatch):
    monkeypatch.setattr(B.shutil, "which", lambda *a, **k: None)
    assert [r[0] for r in B.resource_table(_result(MANGLED))] == MANGLED


@pytest.mark.parametrize(
    "cxx, readable",
    [
        ("void k<Config<1, 2>, true>(CUtensorMap_st, DeviceParams)", "k<Config<1, 2>, true>"),
        ("void k<(int)3>(float (*) [4])", "k<(int)3>"),
        ("plain", "plain"),
    ],
)
def test_readable_name(cxx, readable):
    assert B.readable_name(cxx) == readable
