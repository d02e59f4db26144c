"""KernelBench's fast_p in summary.json (an additive key of schema 3), the summary lines and the
report: the share of the timed scenarios that are correct and more than p times as fast as the
baseline."""

import json
import re
from pathlib import Path

from kernelseek_suite import config, report
from kernelseek_suite.reports.data import load
from kernelseek_suite.reports.document import _claims
from kernelseek_suite.results import SUMMARY_SCHEMA_VERSION, fast_p, summarize
from synthetic_results import BASELINES, make_rows, write_results

ROOT = Path(__file__).resolve().parent.parent
# schema 3's keys before fast_p: a summary keeps every one of them
SCHEMA_3_KEYS = {
    "schema_version",
    "kind",
    "arch",
    "scenarios_total",
    "scenarios_correct",
    "extended_total",
    "extended_correct",
    "geomean",
    "min_ratio",
    "min_ratio_scenario",
    "ratio_count",
    "distributions",
    "worst_distribution",
    "by_distribution",
    "data_dependent",
    "kernel",
    "provenance",
    "failures",
    "flagged",
    "ceiling",
}
WRONG = {"d64-h32kv32-s512", "d64-h32kv32-s1024-causal"}


def _ratio(s, b):
    """fa3: 1.25x on the d128 rows, 0.95x elsewhere; fa4: 2.5x on causal rows; cudnn: not measured."""
    if b == "fa3":
        return 1.25 if s.d_qk == 128 and s.d_v == 128 else 0.95
    if b == "fa4":
        return 2.5 if s.causal else 1.0
    return None


def _summary(rows, kind="bench"):
    return summarize(rows, kind, "sm90", {"path": "k.cu", "sha256": "0" * 64}, {}, BASELINES)


def test_fast_p_is_the_share_correct_and_faster_than_p():
    rows = make_rows(ratio=_ratio, wrong=WRONG)
    s = _summary(rows)
    assert s["schema_version"] == SUMMARY_SCHEMA_VERSION == 3
    assert SCHEMA_3_KEYS <= set(s)  # added, nothing renamed or removed
    assert s["fast_p_total"] == 182
    assert [float(p) for p in s["fast_p"]["fa3"]] == list(config.FAST_P_THRESHOLDS)
    d128 = 4 * 7 * 2  # four d128 head configurations, 7 seqlens, both masks: all correct
    assert s["fast_p"]["fa3"] == {
        "0": round(180 / 182, 4),  # correct and timed
        "1": round(d128 / 182, 4),
        "1.1": round(d128 / 182, 4),
        "1.2": round(d128 / 182, 4),
        "1.5": 0.0,
        "2": 0.0,
    }
    # fa4: 2.5x on the 91 causal rows, one of them wrong; 1.0x is not more than 1
    assert s["fast_p"]["fa4"]["1"] == s["fast_p"]["fa4"]["2"] == round(90 / 182, 4)
    assert s["fast_p"]["cudnn"] is None  # measured on no scenario
    json.dumps(s)  # a JSON document, keys and all


def test_an_evals_fast_p_is_over_its_timed_subset():
    timed = set(config.EVAL_TIMED_SUBSET)
    rows = make_rows(ratio=lambda s, b: 1.5 if s.id in timed else None, baselines=["fa3"])
    s = summarize(rows, "eval", "sm90", {"path": "k.cu", "sha256": "0" * 64}, {}, ["fa3"])
    assert s["fast_p_total"] == len(timed) == 10
    assert s["fast_p"]["fa3"]["1.2"] == 1.0 and s["fast_p"]["fa3"]["1.5"] == 0.0
    assert fast_p(rows, "bench", ["fa3"])["fa3"]["1.2"] == round(10 / 182, 4)  # over the grid, for a bench


def test_the_summary_lines_give_fast_p_per_baseline():
    s = _summary(make_rows(ratio=_ratio, wrong=WRONG))
    lines = [line for line in report.summary_lines(s) if "fast_p" in line]
    assert lines == [
        "vs fa3 fast_p (correct and more than p times as fast, of 182 timed scenarios): "
        "p=0 98.9%, p=1 30.8%, p=1.1 30.8%, p=1.2 30.8%, p=1.5 0.0%, p=2 0.0%",
        "vs fa4 fast_p (correct and more than p times as fast, of 182 timed scenarios): "
        "p=0 98.9%, p=1 49.5%, p=1.1 49.5%, p=1.2 49.5%, p=1.5 49.5%, p=2 49.5%",
    ]
    old = {k: v for k, v in s.items() if not k.startswith("fast_p")}  # written before fast_p
    assert not [line for line in report.summary_lines(old) if "fast_p" in line]


def test_the_report_gives_fast_p_also_for_results_written_before_it(tmp_path):
    """REPORT.md's (and REPORT.html's) claims: from summary.json, or from the rows for a summary
    written before fast_p."""
    rows = make_rows(ratio=_ratio, wrong=WRONG)
    root = write_results(tmp_path / "sm90", rows)
    summary_path = root / "flash_fwd_sm90" / "summary.json"
    with_key = _claims(load(root))
    s = json.loads(summary_path.read_text())
    summary_path.write_text(json.dumps({k: v for k, v in s.items() if not k.startswith("fast_p")}))
    without_key = _claims(load(root))
    want = (
        "- vs fa3 fast_p (correct and more than p times as fast, of 182 timed scenarios): "
        "p=0 98.9%, p=1 30.8%, p=1.1 30.8%, p=1.2 30.8%, p=1.5 0.0%, p=2 0.0%."
    )
    assert want in with_key and want in without_key
    assert not any("cudnn fast_p" in line for line in with_key)  # measured on no scenario


def test_fast_p_is_documented_where_the_contract_is():
    import kernelseek_suite.results as results

    assert re.search(r"^  fast_p\s", results.__doc__, re.M) and re.search(r"^  fast_p_total\s", results.__doc__, re.M)
    kernels_md = (ROOT / "docs" / "kernels.md").read_text()
    assert "`fast_p`" in kernels_md and "`fast_p_total`" in kernels_md
