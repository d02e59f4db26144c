"""Results that ship hold no folder of the machine they were measured on: summary.json and
provenance.json name the kernel relative to the checkout, the trace viewer names its traces from its
own folder."""

import shutil
from pathlib import Path

from kernelseek_suite import config
from kernelseek_suite.bench import BenchRequest, SweepOutput, recorded_path
from kernelseek_suite.reports.trace_html import render_traces
from kernelseek_suite.scenarios import grid
from synthetic_results import make_rows

ROOT = config.REPO_ROOT
REFERENCE = ROOT / config.REFERENCE_KERNEL
SELFCHECK_TRACE = ROOT / "results" / "sm90" / "agents-selfcheck" / "trace.jsonl"


def test_a_kernel_in_the_checkout_is_recorded_relative_to_it(tmp_path):
    assert recorded_path(REFERENCE) == "kernels/reference/attn_fwd_ref.cu"
    assert recorded_path(ROOT / "kernels" / ".." / config.REFERENCE_KERNEL) == "kernels/reference/attn_fwd_ref.cu"
    own = tmp_path / "mine.cu"
    assert recorded_path(own) == str(own)  # a kernel of one's own, outside the checkout: as given


def test_summary_and_provenance_name_the_kernel_relative_to_the_checkout(tmp_path):
    req = BenchRequest(kernel=REFERENCE.resolve(), out_dir=tmp_path, baselines=["fa3", "fa4", "cudnn"])
    chosen = grid("sm90")
    out = SweepOutput(tmp_path, req, "0" * 64, chosen, fresh=dict)
    summary = out.finish([r for r in make_rows(extended=False)])
    assert out.prov["kernel"] == summary["kernel"]["path"] == "kernels/reference/attn_fwd_ref.cu"
    for name in ("summary.json", "provenance.json", "bench.md"):
        assert str(ROOT) not in (tmp_path / name).read_text(), name


def test_the_trace_viewer_names_its_traces_from_its_own_folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    trace = run / "trace.jsonl"
    shutil.copy(SELFCHECK_TRACE, trace)
    beside = render_traces([trace], run / "trace.html").read_text()
    assert '"path": "trace.jsonl"' in beside and str(tmp_path) not in beside
    elsewhere = render_traces([trace], tmp_path / "pages" / "t.html").read_text()
    assert '"path": "../run/trace.jsonl"' in elsewhere and str(tmp_path) not in elsewhere
    assert Path(tmp_path / "pages" / "t.html").exists()
