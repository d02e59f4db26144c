import csv
import math

from kernelseek_suite.reports import load, render
from kernelseek_suite.reports.data import SHIPPED
from kernelseek_suite.reports.tables import geomean_table, scenario_table
from kernelseek_suite.scenarios import grid
from synthetic_results import make_rows, write_results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _ratio_by_head(s, b):
    # d64 heads get 2.0 vs fa3 and everything else 0.5, so the geomeans are known exactly
    if b != "fa3":
        return 1.0
    return 2.0 if s.d_qk == 64 else 0.5


def test_render_writes_report_tables_and_plots(tmp_path):
    root = write_results(tmp_path / "sm90", make_rows(ratio=_ratio_by_head))
    out = render(root)
    text = out.report.read_text()
    for section in (
        "## Provenance",
        "## Claims",
        "## Geometric means",
        "## Plots",
        "## Per scenario",
        "## Extended correctness set",
    ):
        assert section in text
    assert "do not edit by hand" in text
    assert "Synthetic GPU" in text and "700 TFLOP/s" in text
    # 182 scenario rows in the CSV, one LaTeX booktabs table per CSV
    with open(root / "tables" / "scenarios.csv") as f:
        assert len(list(csv.reader(f))) == 1 + 182
    tex = (root / "tables" / "scenarios.tex").read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert "\\%" in (root / "tables" / "geomeans.tex").read_text()  # escaped for LaTeX
    # heat maps per baseline and mask, and TFLOP/s vs seqlen per mask
    names = sorted(p.name for p in out.plots)
    assert names == sorted(
        [f"ratio_vs_{b}_{m}.png" for b in ("fa3", "fa4", "cudnn") for m in ("causal", "non-causal")]
        + ["tflops_vs_seqlen_causal.png", "tflops_vs_seqlen_non-causal.png"]
    )
    for p in out.plots:
        assert p.read_bytes()[:8] == PNG_MAGIC
        assert f"]({p.relative_to(root)})" in text


def test_geomeans_per_group_are_exact(tmp_path):
    t = geomean_table(load(write_results(tmp_path, make_rows(ratio=_ratio_by_head))))
    col = t.headers.index("geomean vs fa3")
    by = {(r[0], r[1]): r[col] for r in t.rows}
    assert math.isclose(by[("head config", "d64-h32kv32")], 2.0)
    assert math.isclose(by[("head config", "d128-h16kv16")], 0.5)
    # 4 of 13 head configurations are d64: overall = 2^(4/13) * 0.5^(9/13)
    assert math.isclose(by[("overall", "all")], math.exp((4 * math.log(2) + 9 * math.log(0.5)) / 13), rel_tol=1e-9)
    assert math.isclose(by[("seqlen", "4096")], by[("overall", "all")], rel_tol=1e-9)
    assert ("mask", "causal") in by and ("mask", "non-causal") in by


def test_ceiling_fraction_and_wrong_rows(tmp_path):
    wrong = {"d128-h16kv16-s4096"}
    res = load(write_results(tmp_path, make_rows(kernel_tflops=lambda s: 350.0, wrong=wrong), ceiling=700.0))
    t = scenario_table(res)
    frac = t.headers.index("kernel % of GEMM")
    correct = t.headers.index("correct")
    rows = {r[0]: r for r in t.rows}
    assert len(rows) == len(grid())
    assert math.isclose(rows["d64-h32kv32-s512"][frac], 50.0)
    assert rows["d128-h16kv16-s4096"][correct] == "wrong"
    # a wrong scenario does not enter the geomeans
    g = geomean_table(res)
    hc = {(r[0], r[1]): r for r in g.rows}[("head config", "d128-h16kv16")]
    assert hc[2] == "13/14"


def test_shipped_report_is_marked_and_written_elsewhere(tmp_path):
    shipped = write_results(tmp_path / "results" / "sm90", ceiling=None)
    out_dir = tmp_path / "partial"
    out = render(shipped, out_dir, status=SHIPPED)
    text = out.report.read_text()
    assert "shipped, not re-measured" in text
    assert "bf16 GEMM reference (measured)**: not measured" in text
    assert not (shipped / "REPORT.md").exists()  # the shipped folder is left alone
    assert all(p.is_relative_to(out_dir) for p in out.plots)


def test_missing_baseline_says_why(tmp_path):
    rows = make_rows(ratio=lambda s, b: None if b == "fa4" else 1.0)
    text = render(write_results(tmp_path, rows)).report.read_text()
    assert "vs fa4: no ratio measured (unsupported (synthetic))" in text


def test_without_matplotlib_the_report_still_renders(tmp_path, monkeypatch):
    from kernelseek_suite.reports import plots

    monkeypatch.setattr(plots, "available", lambda: False)
    out = render(write_results(tmp_path))
    text = out.report.read_text()
    assert out.plots == [] and "Not drawn: matplotlib is not installed" in text
    assert (tmp_path / "tables" / "scenarios.csv").exists()


def test_report_paths_are_relative_to_the_report_with_forward_slashes(tmp_path):
    from kernelseek_suite.reports.sections import rel_path

    assert rel_path(tmp_path / "tables" / "scenarios.csv", tmp_path) == "tables/scenarios.csv"
    assert rel_path(tmp_path / "sm90" / "bench.jsonl", tmp_path / "elsewhere") == "../sm90/bench.jsonl"
