"""The bf16 GEMM measured in the run is a reference, not a ceiling: a kernel (and FA3) can run above
a torch GEMM. The report names it so; the files keep their keys and the plausibility check keeps its
meaning (a row above 1.10x of it is implausible)."""

from kernelseek_suite.reports import render
from kernelseek_suite.results import ScenarioResult
from synthetic_results import make_rows, write_results


def test_the_report_names_the_measured_gemm_a_reference_and_says_what_is_implausible(tmp_path):
    # the kernel at 400-727 TFLOP/s against a GEMM of 500: above it on the long rows, as on the H200
    root = write_results(tmp_path / "sm90", make_rows(), ceiling=500.0)
    out = render(root, html=True)
    md, page = out.report.read_text(), out.html.read_text()
    assert "GEMM ceiling" not in md and "GEMM ceiling" not in page
    assert (
        "- **bf16 GEMM reference (measured)**: 500 TFLOP/s (8192^3, torch.matmul on random data, median of 30 "
        "runs; before the sweep 500, after 495). A reference measured on this GPU, not its peak: a kernel may run "
        "above it; a row above 1.1x of it is `implausible` (not correct)."
    ) in md
    share = next(line for line in md.splitlines() if line.startswith("- Share of the bf16 GEMM reference (measured)"))
    assert float(share.rsplit("highest ", 1)[1].rstrip("%.")) > 100  # above it, and said without a contradiction
    assert "a reference, not a bound: above 100% can happen" in md and "a reference, not a bound" in page


def test_the_plausibility_bound_keeps_its_meaning():
    from kernelseek_suite.config import PlausibilityConfig
    from kernelseek_suite.harness import plausibility

    row = make_rows(extended=False)[0]
    gemm = row.tflops["kernel"] / 1.2  # the kernel at 1.2x the measured GEMM: above 1.10x, implausible
    marked = plausibility.annotate(ScenarioResult.from_dict(row.to_dict()), gemm, {}, PlausibilityConfig())
    assert marked.status == "implausible"
    fine = plausibility.annotate(
        ScenarioResult.from_dict(row.to_dict()), row.tflops["kernel"] / 1.05, {}, PlausibilityConfig()
    )
    assert fine.status == "ok"  # above the GEMM, below 1.10x of it: a reference, not a bound
