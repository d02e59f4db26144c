"""The report reads right: every ratio heat map on one diverging log scale (0.5x-2x, the bar
labelled), the kernel named by its file, the GEMM ceiling labelled with its value, a baseline
missing from a whole column said once, provenance paths relative to the repository, cuDNN as
9.19.0; `verify` warns when the two runs are of different kernels; `doctor` says "skipped" for what
it did not check."""

import json
import math

import matplotlib.pyplot as plt
import pytest
from click.testing import CliRunner

from kernelseek_suite.cli import main
from kernelseek_suite.reports import load, plots, render, scale
from kernelseek_suite.reports.data import repo_relative, version_of_cudnn
from kernelseek_suite.reproduce.doctor import diagnose
from synthetic_results import make_rows, write_results


def _fa3_narrow_cudnn_wide(s, b):
    """fa3's ratios between 0.74 and 1.09, cudnn's between 0.5 and 2: each map alone would stretch
    its own colours over a different range."""
    if b == "fa3":
        return 1.09 if s.d_qk == 64 else 0.74
    if b == "cudnn":
        return 2.0 if s.d_qk == 64 else 0.5
    return None  # fa4: not installed, in no row


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots close, kept to be looked at."""
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    return kept


def test_every_heat_map_uses_the_same_labelled_log_scale(tmp_path, figures):
    res = load(write_results(tmp_path / "sm90", make_rows(ratio=_fa3_narrow_cudnn_wide)))
    for b in ("fa3", "cudnn"):
        assert plots.heatmap(res, b, False, tmp_path / f"{b}.png")
    assert len(figures) == 2
    norms = []
    for fig in figures:
        heat, bar = fig.axes
        im = heat.images[0]
        norms.append((type(im.norm).__name__, im.norm.vmin, im.norm.vmax, im.cmap.name))
        assert [t.get_text() for t in bar.get_yticklabels()] == [f"{t:g}x" for t in scale.TICKS]
        assert "log scale" in bar.get_ylabel()
        # the same ratio gets the same colour on every map, and 0.8x and 1.25x sit equally far from 1x
        assert math.isclose(im.norm(0.8) - im.norm(1.0), im.norm(1.0) - im.norm(1.25), abs_tol=1e-9)
    assert norms[0] == norms[1] == ("LogNorm", scale.RATIO_MIN, scale.RATIO_MAX, scale.cmap().name)
    assert (scale.RATIO_MIN, scale.RATIO_MAX) == (0.5, 2.0)


def test_the_kernel_is_named_by_its_file_and_the_ceiling_by_its_value(tmp_path, figures):
    res = load(write_results(tmp_path / "sm90", make_rows(), ceiling=789.4))
    plots.heatmap(res, "fa3", True, tmp_path / "h.png")
    plots.tflops_vs_seqlen(res, True, tmp_path / "t.png")
    heat, lines = figures
    assert "flash_fwd_sm90.cu time" in heat.axes[0].get_title()
    labels = lines.axes[0].get_legend_handles_labels()[1]
    assert labels[0] == "flash_fwd_sm90.cu" and "kernel" not in labels
    assert "bf16 GEMM reference (measured), 789 TFLOP/s" in labels


def test_a_baseline_missing_from_every_row_is_said_once_in_the_report(tmp_path):
    root = write_results(tmp_path / "sm90", make_rows(ratio=_fa3_narrow_cudnn_wide))
    text = render(root).report.read_text()
    per_scenario = text[text.index("## Per scenario") :]
    assert per_scenario.count("unsupported (synthetic)") == 1
    assert "- fa4: no number in any scenario: unsupported (synthetic)" in per_scenario
    assert "`kernel` is `flash_fwd_sm90.cu`" in per_scenario


def test_provenance_paths_are_relative_to_the_repository_and_cudnn_reads_as_a_version(tmp_path):
    root = write_results(tmp_path / "sm90")
    prov_path = root / "flash_fwd_sm90" / "provenance.json"
    prov = json.loads(prov_path.read_text())
    prov["kernel"] = "/home/someone/checkout/kernels/hopper/flash_fwd_sm90.cu"
    prov_path.write_text(json.dumps(prov))
    summary_path = root / "flash_fwd_sm90" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["kernel"]["path"] = prov["kernel"]
    summary_path.write_text(json.dumps(summary))
    text = render(root).report.read_text()
    assert "- **Kernel**: `kernels/hopper/flash_fwd_sm90.cu`" in text
    assert "/home/someone" not in text
    assert "cuDNN 9.19.0" in text and "91900" not in text


@pytest.mark.parametrize(
    "raw,shown", [(91900, "9.19.0"), (90100, "9.1.0"), (8906, "8.9.6"), ("9.5.1", "9.5.1"), (None, None)]
)
def test_cudnn_versions(raw, shown):
    assert version_of_cudnn(raw) == shown


@pytest.mark.parametrize(
    "recorded,shown",
    [
        ("kernels/hopper/flash_fwd_sm90.cu", "kernels/hopper/flash_fwd_sm90.cu"),
        ("/work/main/kernels/reference/attn_fwd_ref.cu", "kernels/reference/attn_fwd_ref.cu"),
        ("/ci/clone/tests/kernels/spin.cu", "tests/kernels/spin.cu"),
        ("/tmp/ks-eval-x/candidate.cu", "candidate.cu"),
    ],
)
def test_repo_relative(recorded, shown):
    assert repo_relative(recorded) == shown


def test_verify_warns_when_the_kernels_hashes_differ(tmp_path):
    shipped = write_results(tmp_path / "shipped")
    same = write_results(tmp_path / "same")
    other = write_results(tmp_path / "other")
    for name in ("summary.json", "provenance.json"):
        p = other / "flash_fwd_sm90" / name
        d = json.loads(p.read_text())
        if "kernel" in d and isinstance(d["kernel"], dict):
            d["kernel"]["sha256"] = "f" * 64
        d["kernel_sha256"] = "f" * 64
        p.write_text(json.dumps(d))
    r = CliRunner().invoke(main, ["verify", str(shipped), "--against", str(same)])
    assert r.exit_code == 0 and "warning" not in r.output
    r = CliRunner().invoke(main, ["verify", str(shipped), "--against", str(other)])
    assert "warning: the runs are of different kernels" in r.output
    assert "sha256 0000000000000000" in r.output and "sha256 ffffffffffffffff" in r.output


def test_doctor_says_skipped_for_what_it_did_not_check():
    rep = diagnose("sm90", "native", gpus=[], nvcc_version=lambda: "13.0.88")
    state = {f.check: f.state for f in rep.findings}
    assert state["gpu"] == "FAIL 3" and state["nvcc"] == "ok"
    for check in ("docker-engine", "driver", "baselines", "gpu-busy", "throttle"):
        assert state[check] == "skipped", (check, state)
    assert not any(f.ok and "not checked" in f.detail for f in rep.findings)
    assert rep.exit_code == 3
    r = CliRunner().invoke(main, ["doctor", "--arch", "sm90", "--runtime", "native", "--json"])
    findings = json.loads(r.output)["findings"]
    assert all(f["state"] in ("ok", "skipped") or f["state"].startswith(("FAIL", "note")) for f in findings)


@pytest.mark.slow  # two renders, one in worker processes (about 9 s on 2 cores)
def test_the_plots_drawn_in_parallel_processes_are_the_ones_drawn_in_this_one(tmp_path):
    res = load(write_results(tmp_path / "sm90", make_rows(ratio=_fa3_narrow_cudnn_wide)))
    serial = plots.render_all(res, tmp_path / "serial", processes=1)
    parallel = plots.render_all(res, tmp_path / "parallel", processes=3)
    assert list(serial) == list(parallel) and len(serial) >= 4  # same plots, same order
    for name, path in serial.items():
        assert path.read_bytes() == parallel[name].read_bytes(), name
    # a second render leaves no stale PNG behind
    (tmp_path / "parallel" / "stale.png").write_bytes(b"old")
    again = plots.render_all(res, tmp_path / "parallel", processes=2)
    assert sorted(p.name for p in (tmp_path / "parallel").glob("*.png")) == sorted(p.name for p in again.values())
