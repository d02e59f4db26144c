"""The Hopper kernel's steady loop, read in its SASS (nvcc + cuobjdump, no GPU needed).

Two properties that the timings depend on and that a harmless-looking edit can lose without any
test of correctness noticing:

- **Softmax placement.** Where the PV GEMM of block i-1 waits (`WARPGROUP.DEPBAR`) against the
  softmax of S(i), as measured fastest. The fast softmax (v15) keeps the wait below the warpgroup's
  vote on all of its exponentials (100%; the test asks for at least half). The exact step releases
  K(i) as soon as its S GEMM is done, and ptxas then hoists the wait above (nearly) every
  exponential: measured 1.4-2.7% faster on the tiles that take the exact step whole than the wait
  held below the first row's exponentials (~60% of them above it, the choice of v10-v28c; H100,
  kernels/hopper/NOTES.md, runs 44-46). The test asks for at most an eighth above it there.
- **Instruction budget.** Time followed the executed instruction count (ncu beside FA3): the steady
  loop of every configuration must stay within 3% of the count recorded here when it was measured.
"""

import os
import re
import shutil
import subprocess

import pytest

from kernelseek_suite import build, config
from kernelseek_suite.profiling import sass

ROOT = config.REPO_ROOT
KERNEL = ROOT / "kernels/hopper/flash_fwd_sm90.cu"

# instructions in the unmasked steady loop (one K/V block), per (d_qk, d_v, BN, fast-softmax mode of
# the Config, causal), recorded with nvcc 13.0 for v32 (2026-12-06).
# A kernel takes the fast softmax where its mode has the bit of its mask (1 non-causal, 2 causal; 3
# both): no block max, 267-393 instructions; the others take the exact step (419-534). v32's fast
# softmax records each row's largest P with one 3-input integer max per two P (VIMNMX3), where v28c
# kept each thread's largest S with one FMNMX per S (26-28 instructions more a block at BN 128), and
# v23-v25 summed the PV GEMM's weights in a 64x8 GEMM of ones (kernels/hopper/NOTES.md, runs 33, 53).
# v39 (KS_O_IN_K) stages the d192/128 128x128 tile's O in the K stage of its last block: its fast
# loops carry the test for that block, 16-19 instructions more than v34's (391, 391, 393).
BUDGET = {
    (64, 64, 128, 1, False): 322,
    (64, 64, 128, 1, True): 464,
    (64, 64, 128, 3, False): 322,
    (64, 64, 128, 3, True): 325,
    (96, 96, 112, 2, False): 437,
    (96, 96, 112, 2, True): 333,
    (96, 96, 128, 3, False): 328,
    (96, 96, 128, 3, True): 332,
    (128, 128, 80, 3, False): 267,
    (128, 128, 80, 3, True): 269,
    (128, 128, 128, 3, False): 372,
    (128, 128, 128, 3, True): 374,
    (192, 128, 80, 1, False): 285,
    (192, 128, 80, 1, True): 419,
    (192, 128, 128, 1, False): 407,
    (192, 128, 128, 1, True): 534,
    (192, 128, 128, 3, False): 407,
    (192, 128, 128, 3, True): 412,
    (256, 256, 80, 0, False): 482,
    (256, 256, 80, 0, True): 504,
    # KS_DECODE_EXACT: launches of a few query rows, on the exact step with the reference moved to every
    # new row max (P_LOG2 0), recorded with nvcc 13.0 for v39 (2026-12-07)
    (64, 64, 128, 0, False, "decode"): 443,
    (64, 64, 128, 0, True, "decode"): 449,
    (96, 96, 128, 0, False, "decode"): 466,
    (96, 96, 128, 0, True, "decode"): 475,
    (128, 128, 128, 0, False, "decode"): 488,
    (128, 128, 128, 0, True, "decode"): 500,
    (192, 128, 128, 0, False, "decode"): 522,
    (192, 128, 128, 0, True, "decode"): 525,
    (256, 256, 80, 0, False, "decode"): 477,
    (256, 256, 80, 0, True, "decode"): 492,
}
SLACK = 1.03
MIN_EX2_ABOVE_WAIT = 0.5  # the fast softmax's steady loop
MAX_EX2_ABOVE_WAIT_EXACT = 0.125  # the exact step's loops (the masked one everywhere)


def _key_id(k) -> str:
    return f"d{k[0]}-v{k[1]}-bn{k[2]}-fast{k[3]}-{'causal' if k[4] else 'nc'}" + "".join(f"-{t}" for t in k[5:])


# (d_qk, d_v, BN, fast-softmax mode, causal), and "wide" last where the Config's WIDE_128_ flag is set
# (the PV GEMM on N = d_v + 8 at d_v 128: a second configuration of the same tile), "decode" where its
# P_LOG2 is 0 (KS_DECODE_EXACT's configurations: the same tiles, another reference)
_CONFIG = re.compile(r"Config<(\d+), (\d+), (\d+), \d+, \d+, (\d+), (\d+)(?:, (true|false))?>, (true|false)")


def _key(m: re.Match) -> tuple:
    key: tuple = (int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(5)), m.group(7) == "true")
    if m.group(6) == "true":
        key += ("wide",)
    return key + ("decode",) if m.group(4) == "0" else key


def _steady_loops(instrs: list[sass.Instruction]) -> list[list[sass.Instruction]]:
    """The bodies of the innermost loops that issue both GEMMs and a block's exponentials."""
    real = [i for i in instrs if i.op != "NOP"]
    loops = [lp for lp in sass.find_loops(real) if lp.mix.get("tensor", 0) >= 8 and lp.mix.get("mufu", 0) >= 32]
    inner = [lp for lp in loops if not any(lp.contains(o) for o in loops)]
    return [[i for i in real if lp.start <= i.address <= lp.end] for lp in inner]


def _placement(body: list[sass.Instruction]) -> tuple[int, int]:
    """(exponentials above the loop's last wgmma wait, exponentials in the loop)."""
    waits = [k for k, i in enumerate(body) if i.opcode.startswith("WARPGROUP.DEPBAR")]
    ex2 = [k for k, i in enumerate(body) if i.opcode.startswith("MUFU.EX2")]
    last = waits[-1] if waits else -1
    return sum(1 for k in ex2 if k < last), len(ex2)


@pytest.fixture(scope="module")
def kernels():
    from kernelseek_suite.agents.profiler_tools import find_executable

    cuobjdump, nvdisasm = find_executable("cuobjdump"), find_executable("nvdisasm")
    if cuobjdump is None or nvdisasm is None:
        pytest.skip("needs cuobjdump and nvdisasm (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    r = build.build(KERNEL, "sm90")  # the session's build cache (conftest), shared with the other build tests
    env = dict(os.environ, NVDISASM_PATH=os.path.dirname(nvdisasm))
    env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    text = subprocess.run(
        [cuobjdump, "-sass", str(r.library)], capture_output=True, text=True, check=True, env=env
    ).stdout
    funcs = sass.parse_functions(text)
    names = sass.demangle(list(funcs))
    out = {}
    for mangled, instrs in funcs.items():
        m = _CONFIG.search(names[mangled])
        if m and "flash_fwd_sm90_kernel" in names[mangled]:
            out[_key(m)] = instrs
    if not out:
        if shutil.which("c++filt"):  # the names are readable, so the pattern no longer matches them
            pytest.fail(f"no configuration matched {_CONFIG.pattern}: {sorted(set(names.values()))[:3]}")
        pytest.skip("c++filt is needed to name the kernel's configurations")
    return out


@pytest.mark.nvcc
@pytest.mark.slow
def test_every_configuration_is_built_and_budgeted(kernels):
    assert set(kernels) == set(BUDGET)


# the decode configurations' loads bound their time (a few query rows a head): no placement was measured there
@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(k for k in BUDGET if "decode" not in k[5:]), ids=_key_id)
def test_the_pv_wait_sits_where_it_was_measured_fastest(kernels, key):
    loops = sorted(_steady_loops(kernels[key]), key=len)
    assert len(loops) == 2, "expected a masked and an unmasked steady loop"
    mode, causal = key[3], key[4]
    fast = (mode & (2 if causal else 1)) != 0  # the unmasked loop's softmax (the masked one is exact)
    # the causal tiles with half blocks (BN 128, fast softmax, not d96) keep K to the end of the exact
    # step too: released early there, ptxas serializes the wgmmas of the d128 kernel (C7511)
    halves = causal and key[2] == 128 and key[0] != 96 and fast
    for body, wait_low in ((loops[0], fast), (loops[1], halves)):
        above, total = _placement(body)
        assert total >= 32
        if wait_low:
            assert above >= MIN_EX2_ABOVE_WAIT * total, f"wait held low: {above}/{total} MUFU.EX2 above the PV wait"
        else:
            assert above <= MAX_EX2_ABOVE_WAIT_EXACT * total, f"exact step: {above}/{total} MUFU.EX2 above the PV wait"


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(BUDGET), ids=_key_id)
def test_steady_loop_within_its_instruction_budget(kernels, key):
    unmasked = min(len(body) for body in _steady_loops(kernels[key]))
    assert unmasked <= BUDGET[key] * SLACK, f"steady loop {unmasked} instructions, budget {BUDGET[key]}"


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(BUDGET), ids=_key_id)
def test_steady_loop_touches_no_local_memory(kernels, key):
    for body in _steady_loops(kernels[key]):
        local = [f"{i.address:#x} {i.opcode}" for i in body if i.opcode.startswith(("LDL", "STL"))]
        assert local == [], f"spill traffic in the steady loop: {local}"


def _kernel_constant(name: str) -> str:
    m = re.search(rf"^constexpr (?:float|int) {name} = ([^;]+);", KERNEL.read_text(), re.M)
    assert m, f"{name} not found in {KERNEL.name}"
    return m.group(1)


def test_the_redo_window_is_the_measured_one():
    """The fast softmax redoes a block (a second S GEMM) only when a row's partial sum passes
    FAST_LIMIT = 2^P_LOG2, i.e. when the row max grew by more than REF_BIAS + P_LOG2 - log2(BN / 4)
    (log2 units) past the block that set its reference: at least 75 here (52 in natural units), more
    than real logits move within a row. P_LOG2 stays at the bound measured right on the H200 (16:
    kernels/hopper/NOTES.md, runs 25-26: P up to 2^64 gave wrong results there)."""
    assert _kernel_constant("REF_BIAS") == "KS_REF_BIAS"
    m = re.search(r"^#define KS_REF_BIAS (\d+)$", KERNEL.read_text(), re.M)
    assert m, "KS_REF_BIAS has no default"
    bias, p_log2 = float(m.group(1)), int(_kernel_constant("P_LOG2"))
    limit = float(_kernel_constant("FAST_LIMIT").rstrip("f"))
    assert limit == 2.0**p_log2 and p_log2 <= 16
    assert bias + p_log2 - 5 >= 75  # BN / 4 <= 32 terms in a partial sum: 2^5


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(BUDGET), ids=_key_id)
def test_a_steady_loop_issues_one_s_gemm_and_one_pv_gemm_per_block(kernels, key):
    """The redo of the fast softmax sits outside the unmasked steady loop (the outer loop takes it and
    moves on to the next block): an iteration issues exactly the S GEMM's k-steps and the PV GEMM's, so
    no block can be redone more than once, whatever the data. The sums of the PV GEMM's weights come
    with it at d_v <= 96 (where the fast softmax runs somewhere in the kernel), but on the 192x112 d96
    tile (there they spill): the PV GEMM runs on N = d_v + 8, over V and a chunk of ones. Elsewhere
    there is no GEMM of ones: the epilogue corrects the row sum by its largest term, which the fast
    softmax records as it goes (one VIMNMX3 per two P). (The masked loop takes the exact step, which
    never redoes; with half blocks it holds an N = 64 and a whole S GEMM.)"""
    dqk, dv, bn, fast, causal = key[:5]
    wide = ((dv <= 96 and bn != 112) or key[5:] == ("wide",)) and fast != 0
    per_block = dqk // 16 + bn // 16
    unmasked = min(_steady_loops(kernels[key]), key=len)
    hgmma = [i for i in unmasked if i.opcode.startswith("HGMMA")]
    assert len(hgmma) == per_block, f"{len(hgmma)} HGMMA in the unmasked steady loop, {per_block} per block"
    sums = [i for i in hgmma if i.opcode.startswith("HGMMA.64x8x16.")]
    assert not sums, f"{len(sums)} 64x8 GEMMs in the steady loop"
    if wide:
        pv = [i for i in hgmma if i.opcode.startswith(f"HGMMA.64x{dv + 8}x16.")]
        assert len(pv) == bn // 16, f"{len(pv)} PV GEMMs on N = {dv + 8} (V and the ones), {bn // 16} per block"
    elif fast & (2 if causal else 1):
        # the fast softmax never computes the block's row max, but records each row's largest P: one
        # 3-input integer max for each two of the thread's BN / 2 values of P, and no FMNMX per S
        vmx = [i for i in unmasked if i.opcode.startswith("VIMNMX3")]
        assert len(vmx) >= bn // 4, f"{len(vmx)} VIMNMX3 in the fast steady loop, {bn // 2} P values per thread"
        fmx = [i for i in unmasked if i.opcode.startswith("FMNMX")]
        assert len(fmx) < bn // 4, f"{len(fmx)} FMNMX in the fast steady loop: a max per S again"


def test_a_configurations_name_gives_its_key_with_and_without_the_wide_and_decode_flags():
    name = "void flash_fwd_sm90_kernel<Config<{}>, {}>(CUtensorMap_st, CUtensorMap_st, DeviceParams)"
    assert _key(_CONFIG.search(name.format("128, 128, 80, 2, 3, 16, 3", "true"))) == (128, 128, 80, 3, True)
    assert _key(_CONFIG.search(name.format("96, 96, 112, 2, 3, 16, 0", "false"))) == (96, 96, 112, 0, False)
    wide = _key(_CONFIG.search(name.format("128, 128, 80, 2, 3, 16, 3, true", "true")))
    assert wide == (128, 128, 80, 3, True, "wide") and _key_id(wide) == "d128-v128-bn80-fast3-causal-wide"
    assert _key(_CONFIG.search(name.format("128, 128, 80, 2, 3, 16, 3, false", "false"))) == (128, 128, 80, 3, False)
    decode = _key(_CONFIG.search(name.format("256, 256, 80, 2, 2, 0, 0", "true")))
    assert decode == (256, 256, 80, 0, True, "decode") and _key_id(decode) == "d256-v256-bn80-fast0-causal-decode"
    assert _key(_CONFIG.search(name.format("256, 256, 80, 2, 2, 16, 0", "true"))) == (256, 256, 80, 0, True)


def test_placement_counts_exponentials_above_the_last_wait():
    # the counting itself, on a made-up loop body: 2 of 3 exponentials above the second wait
    def ins(op):
        return sass.Instruction(0, op, "")

    body = [
        ins(o)
        for o in (
            "HGMMA.64x128x16.F32.BF16",
            "WARPGROUP.DEPBAR.LE",
            "MUFU.EX2",
            "MUFU.EX2",
            "WARPGROUP.DEPBAR.LE",
            "MUFU.EX2",
            "FADD",
        )
    ]
    assert _placement(body) == (2, 3)
    assert _placement([ins("MUFU.EX2")]) == (0, 1)
