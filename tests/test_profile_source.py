"""scripts/profile-source.py reads Nsight Compute's source page (SASS, CSV) as ncu 2025 writes it: a
trimmed page of a real profile (the Hopper kernel on d128-h16kv1-s1024-causal, an H100) is the fixture."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "tests" / "fixtures" / "ncu-source-sass.csv").read_text()


def _module():
    spec = importlib.util.spec_from_file_location("profile_source", ROOT / "scripts" / "profile-source.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_read_past_the_kernel_name_line():
    ps = _module()
    columns, rows = ps.rows_of(PAGE)
    assert columns[:3] == ["Address", "Source", "Warp Stall Sampling (All Samples)"]
    assert len(rows) == 7 and ps.samples_column(columns) == "Warp Stall Sampling (All Samples)"


def test_the_instructions_with_most_samples_come_first_with_their_share_and_reasons():
    ps = _module()
    lines = ps.summary(PAGE, top=3).splitlines()
    _, rows = ps.rows_of(PAGE)
    total = sum(ps.number(r["Warp Stall Sampling (All Samples)"]) for r in rows)
    assert lines[0] == f"7 instructions, {total:.0f} samples"
    assert len(lines) == 4
    first = lines[1]
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in first and "barrier 1626" in first
    depbar = next(r for r in rows if r["Address"] == "0x7efa217db480")
    assert first.startswith(f"{100 * ps.number(depbar['Warp Stall Sampling (All Samples)']) / total:5.1f}%")
    shares = [float(line.split("%")[0]) for line in lines[1:]]
    assert shares == sorted(shares, reverse=True)


def test_a_branch_after_an_mbarrier_try_wait_names_the_barrier():
    ps = _module()
    text = ps.summary(PAGE, top=7)
    waits = [line for line in text.splitlines() if "BRA" in line and "<-" in line]
    assert waits and all("+0x38" in line and "long_sb" in line for line in waits)


def test_a_page_without_samples_says_which_columns_it_has():
    ps = _module()
    said = ps.summary('"Address","Source","Instructions Executed"\n"0x10","NOP","4"\n', top=5)
    assert said.startswith("no per-instruction samples") and "Instructions Executed" in said
