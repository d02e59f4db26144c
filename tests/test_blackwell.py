"""The Blackwell kernel without a Blackwell GPU: what can be checked here is checked here.

- `bench`/`eval --arch sm100` refuse every GPU that is not compute capability 10.0 (the harness's
  exact check), with a message that says what is needed, before anything is built or run.
- The sm100 arch entry targets sm_100a.
- The compiled PTX's tcgen05.mma instruction descriptors and shared-memory descriptors, decoded
  with the bit layouts of the PTX ISA (tcgen05 "Instruction descriptor" for .kind::f16 and "Shared
  memory descriptor"), say what the kernel's design says: M = 128, bf16 x bf16 -> fp32, Q and K
  K-major, V MN-major, 128-byte swizzle, the sm100 version bit.
- The compile-time budget asserts fire for a configuration over the budget.
The compile checks shared with the other kernels (no spills, no ptxas warnings, PTX machinery, the
dependency-free rule) are in test_kernels.py."""

import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite import build, config, gpu
from kernelseek_suite.cli import main
from kernelseek_suite.gpu import GPUInfo, NoGPUError

ROOT = config.REPO_ROOT
KERNEL = ROOT / "kernels" / "blackwell" / "flash_fwd_sm100.cu"
NOTES = ROOT / "kernels" / "blackwell" / "NOTES.md"

B200 = GPUInfo(0, "NVIDIA B200", "GPU-00000000-b200", (10, 0), "580.00")
NOT_SM100 = [
    GPUInfo(0, "NVIDIA H200", "GPU-00000000-h200", (9, 0), "580.00"),
    GPUInfo(0, "NVIDIA H100 80GB HBM3", "GPU-00000000-h100", (9, 0), "580.00"),
    GPUInfo(0, "NVIDIA B300 SXM6 AC", "GPU-00000000-b300", (10, 3), "580.00"),  # sm103
    GPUInfo(0, "NVIDIA RTX PRO 6000 Blackwell", "GPU-00000000-rtx", (12, 0), "580.00"),  # sm120
]


# ---- the architecture entry and the GPU check ---------------------------------------------------


def test_the_sm100_arch_builds_sm_100a_for_compute_capability_10_0():
    arch = config.ARCHES["sm100"]
    assert arch["gencode"] == "-gencode=arch=compute_100a,code=sm_100a"
    assert arch["cc"] == (10, 0) and arch["baseline"] == "fa4" and "B200" in arch["gpus"]
    assert ROOT / config.REPRODUCE["sm100"]["kernel"] == KERNEL and KERNEL.is_file()


@pytest.mark.parametrize("have", NOT_SM100, ids=[g.name for g in NOT_SM100])
def test_require_gpu_refuses_anything_but_compute_capability_10_0(have):
    with pytest.raises(NoGPUError) as e:
        gpu.require_gpu("sm100", gpus=[have])
    msg = str(e.value)
    assert "compute capability 10.0" in msg and "B200" in msg and have.name in msg
    assert "sm{}{}".format(*have.compute_capability) in msg


def test_require_gpu_accepts_a_b200():
    assert gpu.require_gpu("sm100", gpus=[B200]) is B200


@pytest.mark.parametrize("have", NOT_SM100, ids=[g.name for g in NOT_SM100])
def test_the_b200_bench_command_refuses_another_gpu_after_its_static_checks(monkeypatch, tmp_path, have):
    """The kernel's static checks (the build where nvcc is here) come first, then the GPU is refused
    and nothing is written."""
    monkeypatch.setattr(gpu, "list_gpus", lambda: [have])
    built = []
    monkeypatch.setattr(build, "build", lambda *a, **k: built.append(a))
    out = tmp_path / "out"
    r = CliRunner().invoke(
        main,
        [
            "bench",
            "--arch",
            "sm100",
            "--kernel",
            str(KERNEL),
            "--baseline",
            "fa4",
            "--baseline",
            "cudnn",
            "--extended",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 3, r.output
    assert "sm100 needs a GPU of compute capability 10.0 (B200 / GB200)" in r.output and have.name in r.output
    assert len(built) == (1 if build.nvcc_path() else 0) and not out.exists()


def test_eval_sm100_json_says_no_gpu_on_an_h200(monkeypatch):
    monkeypatch.setattr(gpu, "list_gpus", lambda: [NOT_SM100[0]])
    r = CliRunner().invoke(main, ["eval", str(KERNEL), "--arch", "sm100", "--json"])
    assert r.exit_code == 3
    line = next(l for l in r.output.splitlines() if l.startswith("{"))
    assert '"status": "no_gpu"' in line and "compute capability 10.0" in line


# ---- what the header and the notes promise ------------------------------------------------------


def test_the_header_and_the_notes_say_it_has_not_run():
    head = KERNEL.read_text().split("#include", 1)[0]
    for words in ("NOT YET RUN ON HARDWARE", "Checked (", "Unverified", "DESIGN", "MEASURED STANDING: none"):
        assert words in head, words
    notes = NOTES.read_text()
    assert "NOT YET RUN ON HARDWARE" in notes
    assert (
        "kernelseek-suite bench --arch sm100 --kernel kernels/blackwell/flash_fwd_sm100.cu "
        "--baseline fa4 --baseline cudnn --extended"
    ) in notes


# ---- the descriptors in the compiled PTX --------------------------------------------------------

_MMA = re.compile(
    r"tcgen05\.mma\.cta_group::1\.kind::f16\s+\[%r\d+\],\s*(\[%r\d+\]|%rd\d+),\s*(%rd\d+),"
    r"\s*(%r\d+),"
)


def decode_idesc(v: int) -> dict:
    """The .kind::f16 instruction descriptor (PTX ISA, tcgen05 instruction descriptor table)."""
    return {
        "sparse": (v >> 2) & 1,
        "d_format": (v >> 4) & 3,
        "a_format": (v >> 7) & 7,
        "b_format": (v >> 10) & 7,
        "negate": (v >> 13) & 3,
        "a_major": (v >> 15) & 1,
        "b_major": (v >> 16) & 1,
        "n": ((v >> 17) & 0x3F) << 3,
        "m": ((v >> 24) & 0x1F) << 4,
        "max_shift": (v >> 30) & 3,
    }


def decode_smem_desc_constant(v: int) -> dict:
    """The fields of an sm100 shared-memory descriptor other than the start address."""
    return {
        "lbo": ((v >> 16) & 0x3FFF) << 4,
        "sbo": ((v >> 32) & 0x3FFF) << 4,
        "version": (v >> 46) & 3,
        "base_offset": (v >> 49) & 7,
        "lbo_mode": (v >> 52) & 1,
        "layout": v >> 61,
    }


def _defined_before(lines: list[str], i: int, op: str, reg: str) -> int:
    """The immediate of the nearest `op reg, ..., IMM;` above line i (PTX registers are virtual)."""
    pat = re.compile(rf"^\s*{re.escape(op)}\s+{re.escape(reg)},(?:\s*%\w+,)?\s*(\d+);")
    for line in reversed(lines[:i]):
        m = pat.match(line)
        if m:
            return int(m.group(1))
    raise AssertionError(
        f"no `{op} {reg}, ..., IMM` above line {i}: the compiler no longer emits the "
        "descriptor as an immediate; update this test's reading of the PTX"
    )


@pytest.fixture(scope="module")
def ptx_functions() -> dict[str, list[str]]:
    r = build.build(KERNEL, "sm100")  # the session's build cache (conftest), shared with the other build tests
    text = Path(r.ptx).read_text()
    funcs = {}
    for chunk in text.split(".entry ")[1:]:
        funcs[chunk.split("(", 1)[0].strip()] = chunk.splitlines()
    return funcs


@pytest.mark.nvcc
@pytest.mark.slow
def test_every_mma_has_the_designed_descriptors(ptx_functions):
    assert len(ptx_functions) == 5  # one kernel per head configuration
    pv_n = set()
    for name, lines in ptx_functions.items():
        qk = pv = 0
        for i, line in enumerate(lines):
            m = _MMA.search(line)
            if not m:
                continue
            a, b, idesc_reg = m.groups()
            d = decode_idesc(_defined_before(lines, i, "mov.b32", idesc_reg))
            assert (d["m"], d["d_format"], d["a_format"], d["b_format"]) == (128, 1, 1, 1), (name, d)
            assert d["sparse"] == d["negate"] == d["a_major"] == d["max_shift"] == 0, (name, d)
            b_desc = decode_smem_desc_constant(_defined_before(lines, i, "or.b64", b))
            assert (b_desc["version"], b_desc["layout"], b_desc["base_offset"], b_desc["lbo_mode"]) == (1, 2, 0, 0)
            if a.startswith("["):  # O += P V: P from tensor memory, V MN-major
                pv += 1
                assert d["b_major"] == 1, (name, d)
                # LBO: the step between V's 64-column chunks of BN = 128 rows
                assert (b_desc["lbo"], b_desc["sbo"]) == (128 * 128, 1024), (name, b_desc)
                pv_n.add(d["n"])
            else:  # S = Q K^T: both K-major, N = BN
                qk += 1
                assert d["b_major"] == 0 and d["n"] == 128, (name, d)
                for reg in (a, b):
                    desc = decode_smem_desc_constant(_defined_before(lines, i, "or.b64", reg))
                    assert (desc["sbo"], desc["version"], desc["layout"]) == (1024, 1, 2), (name, desc)
        assert qk >= 2 and pv >= 1, name  # S: the first block and the loop; PV: the loop
        allocs = [
            int(x)
            for x in re.findall(
                r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32"
                r"\s+\[%r\d+\],\s*(\d+);",
                "\n".join(lines),
            )
        ]
        assert allocs and all(32 <= n <= 512 and n & (n - 1) == 0 for n in allocs), (name, allocs)
    assert pv_n == {64, 128, 256}  # d64; d96, d128, d192/128; d256


# ---- the compile-time budgets -------------------------------------------------------------------


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize(
    "config_args,message",
    [
        ("256, 256, 128, 1, 2", "tensor memory has 512 columns"),  # 2 x (128 + 256) columns
        ("128, 128, 128, 3, 2", "shared memory budget of an sm100 CTA"),  # 64 KB Q + 3 x 64 KB K/V
    ],
)
def test_the_budget_asserts_fire_for_a_configuration_over_budget(tmp_path, config_args, message):
    probe = tmp_path / "over_budget.cu"
    probe.write_text(f'#include "{KERNEL}"\ntemplate struct Config<{config_args}>;\n')
    p = subprocess.run(
        [
            build.nvcc_path(),
            "-std=c++17",
            config.ARCHES["sm100"]["gencode"],
            "-c",
            "-o",
            str(tmp_path / "o.o"),
            str(probe),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode != 0 and message in p.stdout + p.stderr, p.stdout + p.stderr


# ---- on a B200 only -----------------------------------------------------------------------------


def _has_sm100() -> bool:
    return any(g.compute_capability is not None and tuple(g.compute_capability) == (10, 0) for g in gpu.list_gpus())


@pytest.mark.gpu
@pytest.mark.nvcc
def test_on_a_b200_the_kernel_is_correct_on_a_slice_of_every_kind(tmp_path):
    """The first run on hardware: tails, seqlen_q != seqlen_k both ways, causal, GQA/MQA and every
    head dimension, on the extended set (not timed). The CPU-side checks are the ones above."""
    if not _has_sm100():
        pytest.skip("needs a B200 (compute capability 10.0)")
    from kernelseek_suite import scenarios as sc
    from kernelseek_suite.bench import BenchRequest, run_bench
    from kernelseek_suite.results import read_jsonl

    pattern = ",".join(
        ["ext-*-b3-q113-k1000-causal", "ext-*-b3-q1000-k113-causal", "ext-*-b3-q17-k17", "ext-d*-h1kv1-b1-q1-k17*"]
    )
    req = BenchRequest(
        kernel=KERNEL,
        arch="sm100",
        baselines=[],
        scenario_filter=pattern,
        extended=True,
        grid=False,
        out_dir=tmp_path / "out",
    )
    run_bench(req)
    rows = read_jsonl(tmp_path / "out" / "bench.jsonl")
    assert len(rows) == len(sc.select(sc.extended("sm100"), pattern)) == 49  # 13 head configs x 3 + 5 dims x 2
    bad = [(r.scenario, r.status, r.reason[:200]) for r in rows if r.status != "ok"]
    assert not bad, bad
