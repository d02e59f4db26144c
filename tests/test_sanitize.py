"""--sanitize: reading compute-sanitizer's verdict (CPU), and the run itself (GPU)."""

import pytest

from kernelseek_suite import config
from kernelseek_suite import scenarios as sc
from kernelseek_suite.evaluate import passed
from kernelseek_suite.harness import sanitize as S

MEMCHECK_ERRORS = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at attn_fwd_ref_kernel<128, 128>(ks_attn_params)+0x1a30
=========     by thread (0,0,0) in block (1,0,2)
=========     Address 0x7f3a5c000200 is out of bounds
========= ERROR SUMMARY: 12 errors
"""
MEMCHECK_CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at attn_kernel+0x900
=========     and Read access at attn_kernel+0xa10 [1024 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_parse_report():
    assert S.parse_report(MEMCHECK_CLEAN)[:2] == (0, "ERROR SUMMARY: 0 errors")
    errors, summary, findings = S.parse_report(MEMCHECK_ERRORS)
    assert errors == 12 and "12 errors" in summary and findings[0].startswith("Invalid __global__ write")
    errors, summary, findings = S.parse_report(RACECHECK)
    assert errors == 1 and summary.startswith("RACECHECK SUMMARY") and "Race reported" in findings[0]


def test_verdicts():
    assert S.verdict("memcheck", ["x"], 0, MEMCHECK_CLEAN, 1.0).ok
    bad = S.verdict("memcheck", ["x"], S.ERROR_EXITCODE, MEMCHECK_ERRORS, 1.0)
    assert not bad.ok and bad.errors == 12
    assert not S.verdict("racecheck", ["x"], S.ERROR_EXITCODE, RACECHECK, 1.0).ok
    crashed = S.verdict("memcheck", ["x"], 1, MEMCHECK_CLEAN, 1.0)
    assert not crashed.ok and "exit code 1" in crashed.summary
    assert not S.verdict("memcheck", ["x"], 0, "", 1.0).ok  # no summary: no verdict
    assert not S.verdict("memcheck", ["x"], None, "", 1.0).ok  # timed out


def test_a_failed_sanitizer_run_fails_eval():
    base = {"scenarios_total": 3, "scenarios_correct": 3, "extended_total": 0, "extended_correct": 0}
    assert passed(base)
    runs = [S.verdict("memcheck", ["x"], S.ERROR_EXITCODE, MEMCHECK_ERRORS, 1.0)]
    assert not passed({**base, "sanitize": S.summary_entry(runs)})
    assert passed({**base, "sanitize": S.summary_entry([S.verdict("memcheck", ["x"], 0, MEMCHECK_CLEAN, 1.0)])})


def test_without_compute_sanitizer_the_run_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(S, "sanitizer_path", lambda: None)
    runs = S.run_sanitizer("k.so", {"memcheck": ("ext-d64-h32kv1-b3-q17-k17",)}, 1, log_dir=tmp_path)
    assert len(runs) == 1 and not runs[0].ok and "compute-sanitizer not found" in runs[0].summary


def test_the_subset_names_real_small_scenarios():
    ids = sc.by_id()
    for tool, subset in config.SANITIZE_SUBSET.items():
        assert tool in S.TOOLS and subset
        for i in subset:
            s = ids[i]
            assert s.extended and s.batch * s.heads_q * s.seqlen_q * s.seqlen_k <= 3 * 32 * 3001 * 3001


@pytest.mark.gpu
@pytest.mark.nvcc
def test_memcheck_is_clean_on_the_reference_kernel(tmp_path):
    from pathlib import Path

    from kernelseek_suite.build import build

    built = build(Path(__file__).resolve().parent.parent / "kernels" / "reference" / "attn_fwd_ref.cu", "sm90")
    runs = S.run_sanitizer(built.library, {"memcheck": config.SANITIZE_SUBSET["memcheck"][:2]}, 1, log_dir=tmp_path)
    assert runs[0].ok, runs[0]
