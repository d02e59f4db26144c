"""The Nsight Compute and SASS parsers on real tool output captured on an H200 (tests/fixtures/), and
the disassembly of a kernel built here when nvcc and cuobjdump are installed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelseek_suite.profiling import ncu, sass

FIX = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent


def _one(name: str) -> ncu.KernelProfile:
    kernels = ncu.parse((FIX / name).read_text())
    assert len(kernels) == 1
    return kernels[0]


@pytest.mark.parametrize("name", ["ncu_ref_d128_s4096.txt", "ncu_ref_d128_s4096.csv"])
def test_both_ncu_forms_give_the_kernel_and_its_launch(name):
    k = _one(name)
    assert k.name == "void attn_fwd_ref_kernel<128, 128>(ks_attn_params)"
    assert (k.grid, k.block) == ("(64, 16, 8)", "(128, 1, 1)")
    s = ncu.summarize(k)
    assert s.registers_per_thread == 129
    assert s.smem_dynamic_bytes == pytest.approx(52_224, rel=1e-3) and s.smem_static_bytes == 0
    assert s.theoretical_occupancy_pct == 18.75
    # the occupancy limiters are the block limits that are lowest (3 blocks: registers and shared memory)
    assert s.occupancy_limiters == ["registers", "shared memory"]
    # not collected in these captures: said so, never filled in
    assert s.tensor_pipe_pct is None and s.stalls == []
    table = ncu.table(s)
    assert "tensor pipe                         not reported" in table
    assert "top warp stalls                     not reported" in table
    assert "registers per thread                129" in table


def test_the_text_form_keeps_units_and_sections_apart():
    s = ncu.summarize(_one("ncu_ref_d128_s4096.txt"))
    assert s.duration_s == pytest.approx(7.97e-3)
    assert (s.sm_throughput_pct, s.dram_throughput_pct, s.l2_throughput_pct) == (34.72, 1.38, 11.63)
    assert s.achieved_occupancy_pct == 18.61
    # "Memory Throughput" is a percentage in the SOL section and a rate in Memory Workload Analysis
    assert s.dram_bytes_per_s == pytest.approx(66.52e9)
    assert s.l2_hit_pct == 89.27 and s.spill_requests == 0 and s.warp_cycles_per_issue == 8.53
    assert [round(f.speedup_pct, 2) for f in s.findings[:2]] == [81.25, 44.29]
    assert "scoreboard dependency on a L1TEX" in s.findings[1].text
    assert "66.5 GB/s" in ncu.table(s)


def test_the_csv_form_reads_base_units_and_rule_rows():
    k = _one("ncu_ref_d128_s4096.csv")
    s = ncu.summarize(k)
    assert s.duration_s == pytest.approx(7_973_376e-9)
    assert (s.sm_throughput_pct, s.achieved_occupancy_pct, s.warp_cycles_per_issue) == (34.69, 18.51, 8.61)
    assert k.get("SM Frequency").value == pytest.approx(1_791_962_024.62)
    assert {f.rule for f in k.findings} == {"SOLBottleneck", "CPIStall", "TheoreticalOccupancy"}
    assert [f.speedup_pct for f in s.findings[:2]] == [81.25, 44.19]
    # the Memory Workload Analysis section was not captured in this run
    assert s.spill_requests is None and s.dram_bytes_per_s is None
    assert "spills (local memory requests)      not reported" in ncu.table(s)


def test_the_two_captures_agree_where_they_measure_the_same_thing():
    a, b = (ncu.summarize(_one(n)) for n in ("ncu_ref_d128_s4096.txt", "ncu_ref_d128_s4096.csv"))
    for field in ("duration_s", "sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct"):
        assert getattr(a, field) == pytest.approx(getattr(b, field), rel=0.06), field


def test_extra_metrics_from_the_command_line_section_fill_stalls_and_tensor_pipe():
    # ncu prints metrics given with --metrics in a section of their own ("Command line profiler
    # metrics"); rows in that form are added to the real capture
    text = (FIX / "ncu_ref_d128_s4096.csv").read_text()
    head = (
        '"0","1060","python3.12","127.0.0.1","void attn_fwd_ref_kernel<128, 128>(ks_attn_params)","1","7",'
        '"(128, 1, 1)","(64, 16, 8)","0","9.0","Command line profiler metrics",'
    )
    extra = {
        ncu.TENSOR_METRICS[0]: ("%", "12.50"),
        ncu.STALL_METRIC.format("long_scoreboard"): ("", "3.80"),
        ncu.STALL_METRIC.format("mio_throttle"): ("", "1.10"),
        ncu.STALL_METRIC.format("selected"): ("", "1.00"),
        ncu.STALL_METRIC.format("wait"): ("", "0.40"),
    }
    text += "".join(f'{head}"{m}","{u}","{v}",\n' for m, (u, v) in extra.items())
    s = ncu.summarize(ncu.parse(text)[0])
    assert s.tensor_pipe_pct == 12.5 and s.tensor_pipe_metric == ncu.TENSOR_METRICS[0]
    assert [x.reason for x in s.stalls] == ["long_scoreboard", "mio_throttle", "wait"]  # 'selected' is issuing
    assert s.stalls[0].share == pytest.approx(3.80 / 8.61)
    assert "long_scoreboard 3.80 (44 %)" in ncu.table(s)


def test_the_profiler_command_filters_by_the_nvtx_range_of_run_once():
    cmd = ncu.ncu_command(
        "ncu",
        ["python", "-m", "kernelseek_suite.harness.run_once", "k.cu", "d64-h32kv32-s1024"],
        nvtx_range="kernel:d64-h32kv32-s1024",
    )
    assert cmd[:5] == ["ncu", "--clock-control", "none", "--target-processes", "all"]
    assert cmd[cmd.index("--nvtx-include") + 1] == "kernel:d64-h32kv32-s1024/"  # a push/pop range
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"] == list(ncu.SECTIONS)
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(ncu.TENSOR_METRICS + ncu.STALL_METRICS)
    assert cmd[-5:] == ["python", "-m", "kernelseek_suite.harness.run_once", "k.cu", "d64-h32kv32-s1024"]
    assert "--metrics" not in ncu.ncu_command("ncu", ["x"], extra_metrics=False)


# ---------------------------------------------------------------- SASS


def _hopper() -> tuple[str, list[sass.FunctionSummary]]:
    text = (FIX / "sass_flash_fwd_sm90_d128.txt").read_text()
    return text, sass.summarize(text)


def test_the_sass_summary_counts_what_the_listing_holds():
    text, funcs = _hopper()
    assert len(funcs) == 1
    f = funcs[0]
    assert f.name == "_Z21flash_fwd_sm90_kernelI6ConfigILi128ELi128ELi128ELi2EEEv14CUtensorMap_stS2_S2_12DeviceParams"
    # counted again here by a plain pattern over the listing
    instr_lines = [l for l in text.splitlines() if re.match(r"^\s+/\*[0-9a-f]{4}\*/", l)]
    assert f.instructions == sum(" NOP" not in l for l in instr_lines) == 1334
    assert f.mix["tensor"] == sum(" HGMMA." in l for l in instr_lines) == 16
    assert f.tensor_shapes == {"HGMMA.64x128x16.F32.BF16": 16}
    assert f.mix["mufu"] == sum(" MUFU." in l for l in instr_lines)
    assert f.mix.get("local", 0) == 0 and f.mix.get("global_load", 0) == 0  # no spills; loads go through TMA
    assert f.mix["tma"] == sum(" UTMALDG" in l for l in instr_lines) == 6
    assert f.opcodes["HGMMA"] == 16 and f.registers_named > 128


def test_the_inner_loop_is_the_main_loop_not_a_spin_wait_or_a_slow_path():
    _, (f,) = _hopper()
    loop = f.inner_loop
    # the consumer's loop over K/V tiles: from 0xb40 back-branched at 0x3e10, both GEMMs inside
    assert (loop.start, loop.end) == (0xB40, 0x3E10)
    assert loop.instructions == (0x3E10 - 0xB40) // 0x10 + 1 == 814
    assert loop.mix["tensor"] == 16 and loop.mix["mufu"] > 0
    # the other backward branches: barrier spin-waits with no math, and jumps back from slow paths
    loops = sass.find_loops([i for i in sass.parse_functions(_hopper()[0])[f.name] if i.op != "NOP"])
    assert all(l.math == 0 for l in loops if (l.start, l.end) != (0xB40, 0x3E10))
    # the unconditional jumps back from the slow paths after the exits (at 0x52c0 and 0x52f0) are not loops
    assert not {0x52C0, 0x52F0} & {l.end for l in loops}
    assert {0x52B0, 0x52E0} <= {l.end for l in loops}  # while their own spin-waits are


def test_the_sass_table_names_the_function_and_its_mix():
    _, funcs = _hopper()
    t = sass.table(funcs, {funcs[0].name: {"registers": 168, "shared_bytes": 0, "spill_bytes": 0}})
    row = next(l for l in t.splitlines() if l.startswith("flash_fwd_sm90_kernel<Config<128, 128, 128, 2>"))
    assert re.split(r"\s{2,}", row)[1:3] == ["1334", "168"]  # instructions, registers from ptxas
    assert row.endswith("814 instrs, 16 MMA, 66 MUFU")
    assert "HGMMA.64x128x16.F32.BF16 x16" in t


def _cuobjdump():
    from kernelseek_suite.agents.profiler_tools import find_executable

    return find_executable("cuobjdump")


@pytest.mark.nvcc
@pytest.mark.skipif(
    _cuobjdump() is None, reason="needs cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
)
def test_a_kernel_built_here_is_disassembled_and_summarized():
    import os
    import subprocess

    from kernelseek_suite.build import build

    # the session's build cache (conftest), shared with the other build tests
    built = build(REPO / "kernels" / "reference" / "attn_fwd_ref.cu", "sm90")
    exe = _cuobjdump()
    env = dict(os.environ, PATH=f"{Path(exe).parent}{os.pathsep}{os.environ['PATH']}")
    out = subprocess.run([exe, "--dump-sass", built.library], capture_output=True, text=True, env=env, check=True)
    funcs = {f.display_name: f for f in sass.summarize(out.stdout)}
    assert len(funcs) == len(built.functions) == 5
    d128 = next(f for n, f in funcs.items() if "<128, 128>" in n)
    assert d128.mix["tensor"] > 0 and all(op.startswith("HMMA") for op in d128.tensor_shapes)  # mma.sync
    assert d128.inner_loop is not None and d128.inner_loop.mix["tensor"] == d128.mix["tensor"]
    ptxas = {f.name: f.registers for f in built.functions}
    assert d128.registers_named <= ptxas[d128.name]


def test_the_tool_rich_profilers_own_capture_with_nvtx_columns_and_command_line_metrics():
    # captured on the H200 on 2026-12-03 by the tool-rich arm's profile tool itself (toolrich_check):
    # the nvtx filter adds range columns before "Kernel Name", and the --metrics list comes back in
    # its own section; the values below are the ones the model was shown
    k = _one("ncu_toolrich_ref_d128_s4096.csv")
    assert k.name == "void attn_fwd_ref_kernel<128, 128>(ks_attn_params)"
    s = ncu.summarize(k)
    assert s.duration_s == pytest.approx(0.008037344)
    assert (s.sm_throughput_pct, s.tensor_pipe_pct, s.l2_hit_pct) == (34.34, 21.31, 91.48)
    assert s.tensor_pipe_metric == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
    assert (s.registers_per_thread, s.smem_dynamic_bytes, s.spill_requests) == (129.0, 52224.0, 0.0)
    assert [(x.reason, x.cycles_per_issue) for x in s.stalls[:3]] == [
        ("long_scoreboard", 3.81),
        ("wait", 1.56),
        ("short_scoreboard", 0.88),
    ]
    table = ncu.table(s)
    assert "tensor pipe                         21.3 %" in table and "66.0 GB/s" in table


def test_names_lose_their_parameter_list_matched_from_the_end():
    from kernelseek_suite.build import readable_name, without_parameters

    cxx = "void attn_kernel<Config<128, (int)64>, true>(ks_attn_params, float (*)(int))"
    assert without_parameters(cxx) == "void attn_kernel<Config<128, (int)64>, true>"
    assert without_parameters("no_parameters<1>") == "no_parameters<1>"
    assert without_parameters("unbalanced)") == "unbalanced)"
    assert readable_name(f"  {cxx} ") == "attn_kernel<Config<128, (int)64>, true>"
    assert sass.short_name(cxx) == "attn_kernel<Config<128, (int)64>, true>"
    assert sass.short_name(cxx, width=12) == "attn_kern..."
