"""The README's screenshots (docs/img/*.png) against the committed results, without a browser: each
PNG has a sidecar (`<name>.png.json`, written by `make screenshots`, scripts/page-screenshots.py) whose
PNG sha256 is the PNG's, whose source files are the committed ones byte for byte, and whose numbers
(read from the page's DOM when the screenshot was taken) are the committed results formatted as the
page formats them: REPORT.html's claims, its provenance's commit and dates and the hovered cell from
results/sm90 (summary.json first), the trace viewer's run summary from the self-check trace. The
browser test re-takes both screenshots and finds the same numbers on the pages."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

from kernelseek_suite.contracts.traces import read_trace
from kernelseek_suite.reports import load
from kernelseek_suite.results import fast_p, fast_p_rows, geomean

REPO = Path(__file__).resolve().parents[1]
IMG = REPO / "docs" / "img"
SM90 = "results/sm90"
SUMMARY = f"{SM90}/flash_fwd_sm90/summary.json"
TRACE = f"{SM90}/agents-selfcheck/trace.jsonl"
SIDECARS = sorted(IMG.glob("*.png.json"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _side(path: Path) -> dict:
    return json.loads(path.read_text())


# ---------------------------------------------------------------- what each page must have shown


def _x3(v: float) -> str:
    return f"{v:.3f}x"


def report_numbers(repo: Path) -> dict:
    """REPORT.html's numbers as the page formats them (reports/document.py, _claims and the Data line;
    the hover card of report.js), from the committed results."""
    s = json.loads((repo / SUMMARY).read_text())
    res = load(repo / SM90)
    baselines = list(s["geomean"])
    fp = s.get("fast_p") or fast_p(res.rows, s.get("kind") or "bench", baselines)  # a summary without it
    total = s.get("fast_p_total") or len(fast_p_rows(res.rows, s.get("kind") or "bench"))
    c = res.ceiling_tflops
    share = [r.tflops["kernel"] / c for r in res.grid_rows if c and r.correct and r.tflops.get("kernel")]
    main = baselines[0]
    lowest = next(r for r in res.grid_rows if r.scenario == s["min_ratio_scenario"][main])
    assert _x3(lowest.ratio[main]) == _x3(s["min_ratio"][main])  # bench.jsonl's row is summary.json's lowest
    # on several input distributions: each baseline's headline distribution (its lowest geometric
    # mean) and the one its lowest ratio was measured on
    by = s.get("by_distribution") or {}
    several = {}
    if len(by) > 1:
        several = {
            "headline_distribution": {b: min(by, key=lambda d: by[d]["geomean"][b]) for b in baselines},
            "min_ratio_distribution": {b: min(by, key=lambda d: by[d]["min_ratio"][b]) for b in baselines},
        }
    return several | {
        "scenarios_correct": f"{s['scenarios_correct']}/{s['scenarios_total']}",
        "extended_correct": f"{s['extended_correct']}/{s['extended_total']}",
        "geomean": {b: _x3(v) for b, v in s["geomean"].items()},
        "ratio_count": {b: str(n) for b, n in s["ratio_count"].items()},
        "min_ratio": {b: _x3(v) for b, v in s["min_ratio"].items()},
        "min_ratio_scenario": dict(s["min_ratio_scenario"]),
        "fast_p": {
            b: {"of": str(total), "shares": ", ".join(f"p={p} {100 * x:.1f}%" for p, x in shares.items())}
            for b, shares in fp.items()
            if shares
        },
        "gemm_share": {"geomean": f"{100 * geomean(share):.1f}%", "highest": f"{100 * max(share):.1f}%"},
        "measured_from": s["provenance"]["date"],
        "measured_to": s["provenance"]["date_end"],
        "commit": s["provenance"]["git_sha"],
        "hovered": {"scenario": lowest.scenario, "ratio": {b: _x3(lowest.ratio[b]) for b in baselines}},
    }


def _clock(s: float) -> str:  # trace.js's clock()
    s = max(0, math.floor(s + 0.5))
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def trace_numbers(repo: Path) -> dict:
    """The viewer's run summary and first evaluation row (trace.js), from the committed trace."""
    events = read_trace(repo / TRACE).events
    by = {t: [e for e in events if e.get("type") == t] for t in ("run_start", "run_end", "exit", "harness_eval")}
    start, end, ev = by["run_start"][0], by["run_end"][-1], by["harness_eval"]
    stop = (by["exit"] or [{}])[-1]
    limit = f" ({stop['limit']} limit)" if stop.get("limit") else ""
    first = ev[0]
    return {
        "title": f"Agent run {start['run_id']}",
        "seed": str(start["seed"]),
        "started": start["time"],
        "steps": f"{end['totals']['steps']} ({len(events)} events)",
        "wall_time": _clock(end["totals"]["wall_s"]),
        "evaluations": f"{len(ev)}, best {_x3(end['best']['geomean'])}",
        "questions": str(sum(e.get("type") == "question" for e in events)),
        "end": f"{end.get('exit_reason') or stop.get('reason')}{limit}, goal {'met' if end['goal_met'] else 'not met'}",
        "evaluation": {
            "index": str(first["index"]),
            "status": first["status"],
            "correct": f"{first['scenarios_correct']}/{first['scenarios_total']}",
            "geomean": _x3(first["geomean"]),
            "baseline": first["baseline"],
        },
    }


# each screenshot: the committed file its numbers come from, and those numbers
PAGES = {"report.png": (SUMMARY, report_numbers), "trace-viewer.png": (TRACE, trace_numbers)}


# ---------------------------------------------------------------- the checks


def test_every_screenshot_in_the_readme_has_a_sidecar():
    shown = set(re.findall(r"docs/img/([\w.-]+\.png)", (REPO / "README.md").read_text()))
    assert shown, "the README shows no screenshot"
    assert {p.name.removesuffix(".json") for p in SIDECARS} >= shown
    assert set(PAGES) >= shown, "a screenshot whose numbers nothing checks"


@pytest.mark.parametrize("sidecar", SIDECARS, ids=lambda p: p.name)
def test_the_png_is_the_one_the_sidecar_describes(sidecar):
    side = _side(sidecar)
    assert sidecar.name == f"{side['png']}.json"
    assert _sha256(sidecar.parent / side["png"]) == side["png_sha256"], "re-take it: make screenshots"


@pytest.mark.parametrize("sidecar", SIDECARS, ids=lambda p: p.name)
def test_the_page_was_rendered_from_the_committed_files(sidecar):
    side = _side(sidecar)
    assert PAGES[side["png"]][0] in side["sources"]
    changed = [rel for rel, sha in side["sources"].items() if not (REPO / rel).is_file() or _sha256(REPO / rel) != sha]
    assert changed == [], f"{side['png']} shows other data than the committed {changed}: re-take it (make screenshots)"


@pytest.mark.parametrize("sidecar", SIDECARS, ids=lambda p: p.name)
def test_the_numbers_shown_are_the_committed_results(sidecar):
    side = _side(sidecar)
    _, expected = PAGES[side["png"]]
    assert side["shown"] == expected(REPO)


# ---------------------------------------------------------------- re-taken in a browser


def _script():
    spec = importlib.util.spec_from_file_location("page_screenshots", REPO / "scripts" / "page-screenshots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.browser
def test_retaken_screenshots_show_the_committed_sidecars_numbers(browser, tmp_path):  # noqa: F811
    written = _script().take_all(browser.browser, tmp_path)
    sidecars = sorted(p for p in written if p.name.endswith(".png.json"))
    assert [p.name for p in sidecars] == [p.name for p in SIDECARS]
    for new, committed in zip(sidecars, SIDECARS, strict=True):
        got, want = _side(new), _side(committed)
        assert (got["sources"], got["shown"]) == (want["sources"], want["shown"]), new.name
