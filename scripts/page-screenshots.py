"""Screenshots of the two HTML pages for the README, from the committed results: REPORT.html of
results/sm90 (the claims, the provenance and the heat maps, the cell of the lowest ratio to the main
baseline hovered) and the viewer of its self-check trace, taken in headless Chromium (Debian's
package) through Playwright, as the browser tests open them.

    make screenshots        (or: python scripts/page-screenshots.py [--out docs/img])

The pages are rendered by the suite's own renderers (what `kernelseek-suite render results/sm90 --html`
and `kernelseek-suite traces html results/sm90/agents-selfcheck/trace.jsonl` write) in a temporary
folder that holds copies of the committed source files and nothing else, so every number on them comes
from those files. Beside each PNG goes a sidecar, `<name>.png.json`: the source files with their sha256,
the PNG's sha256, and the numbers the page showed inside the captured viewport, read from its DOM at
capture time. tests/test_screenshots.py checks the sidecars against the committed files."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from kernelseek_suite.reports.html import render_html
from kernelseek_suite.reports.trace_html import render_traces

REPO = Path(__file__).resolve().parents[1]
RESULTS = "results/sm90"
RUN = f"{RESULTS}/flash_fwd_sm90"
SUMMARY = f"{RUN}/summary.json"
TRACE = f"{RESULTS}/agents-selfcheck/trace.jsonl"
# every file REPORT.html of results/sm90 is rendered from (reports/data.py: load)
REPORT_SOURCES = [
    SUMMARY,
    f"{RUN}/bench.jsonl",
    f"{RUN}/provenance.json",
    f"{RESULTS}/reproduce.json",
    f"{RESULTS}/gemm_ceiling.json",
]
TRACE_SOURCES = [TRACE]
REPORT_VIEWPORT = {"width": 1280, "height": 1900}
TRACE_VIEWPORT = {"width": 1280, "height": 1000}
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]

# the texts of the elements lying wholly inside the viewport (what the screenshot shows)
_IN_VIEW_JS = """
const inView = (e) => {
  const r = e.getBoundingClientRect();
  return r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;
};
const texts = (sel) => Array.from(document.querySelectorAll(sel)).filter(inView).map((e) => e.innerText.trim());
"""
REPORT_DOM_JS = (
    "() => {"
    + _IN_VIEW_JS
    + """
  const tip = document.getElementById("tooltip");
  const card = !tip.hidden && inView(tip) ? {
    scenario: tip.querySelector("h4").innerText.trim(),
    rows: Array.from(tip.querySelectorAll("table:not(.by-distribution) tbody tr"))
      .map((tr) => Array.from(tr.cells).map((c) => c.innerText.trim())),
  } : null;
  return {claims: texts("#claims li"), provenance: texts("#provenance li"), card};
}"""
)
TRACE_DOM_JS = (
    "() => {"
    + _IN_VIEW_JS
    + """
  const pane = document.querySelector(".pane");
  const dts = Array.from(pane.querySelectorAll(".summary dt")).filter(inView);
  return {
    title: texts("h1")[0] || null,
    summary: Object.fromEntries(dts.map((dt) => [dt.innerText.trim(), dt.nextElementSibling.innerText.trim()])),
    timeline: texts(".timeline .row"),
  };
}"""
)
HOVER_JS = """([id, scenario]) => {
  const ch = window.ksReport.charts[id];
  const i = ch.data.datasets[0].data.findIndex((c) => c.scenario === scenario);
  const r = ch.canvas.getBoundingClientRect(), c = ch.getDatasetMeta(0).data[i].getCenterPoint();
  return {x: r.left + c.x, y: r.top + c.y};
}"""


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def chromium_path() -> str | None:
    """KERNELSEEK_CHROMIUM, else chromium (or chromium-browser) on the PATH, as the browser tests find it."""
    env = os.environ.get("KERNELSEEK_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _copy_sources(sources: list[str], repo: Path, into: Path) -> dict[str, str]:
    """Copy `sources` (paths relative to the checkout) under `into`, keeping their paths; their sha256."""
    out = {}
    for rel in sources:
        dest = into / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / rel, dest)
        out[rel] = sha256(dest)
    return out


# ---------------------------------------------------------------- what the pages show


class NotShown(RuntimeError):
    """The captured viewport lacks something the README's screenshot is meant to show."""


CORRECT = re.compile(r"Correct on (\d+/\d+) timed scenarios and (\d+/\d+) of the extended set\.$")
# (a run on several input distributions names the headline's and the lowest's)
VERSUS = re.compile(
    r"vs (\S+): geometric mean (\S+x) over (\d+) scenarios"
    r"(?: on the (\S+) inputs, the worst of the \d+ input distributions \(each below\))?"
    r"; lowest (\S+x) \(([^,)]+)(?:, on (\S+))?\)\.$"
)
FAST_P = re.compile(r"vs (\S+) fast_p \(correct and more than p times as fast, of (\d+) timed scenarios\): (.+)\.$")
SHARE = re.compile(r"Share of the .*: geometric mean (\S+%), highest (\S+%)\.$")
DATA = re.compile(r"Data: measured\. Measured (\S+) to (\S+) at commit (\w+)\.$")


def report_numbers(dom: dict) -> dict:
    """The numbers of REPORT.html's claims, its provenance's data line and the hover card, as shown.
    Every visible claim must be one of the known lines: a new kind of claim needs a place here (and in
    tests/test_screenshots.py) before the screenshot can be taken."""
    shown: dict = {"geomean": {}, "ratio_count": {}, "min_ratio": {}, "min_ratio_scenario": {}, "fast_p": {}}
    for line in dom["claims"]:
        if m := CORRECT.match(line):
            shown["scenarios_correct"], shown["extended_correct"] = m.groups()
        elif m := VERSUS.match(line):
            b = m[1]
            shown["geomean"][b], shown["ratio_count"][b] = m[2], m[3]
            shown["min_ratio"][b], shown["min_ratio_scenario"][b] = m[5], m[6]
            if m[4]:
                shown.setdefault("headline_distribution", {})[b] = m[4]
            if m[7]:
                shown.setdefault("min_ratio_distribution", {})[b] = m[7]
        elif m := FAST_P.match(line):
            shown["fast_p"][m[1]] = {"of": m[2], "shares": m[3]}
        elif m := SHARE.match(line):
            shown["gemm_share"] = {"geomean": m[1], "highest": m[2]}
        else:
            raise NotShown(f"a claim this script does not know how to read: {line!r}")
    for line in dom["provenance"]:
        if m := DATA.match(line):
            shown["measured_from"], shown["measured_to"], shown["commit"] = m.groups()
    card = dom["card"]
    if card:
        shown["hovered"] = {"scenario": card["scenario"], "ratio": {r[0]: r[-1] for r in card["rows"][1:]}}
    for key in ("scenarios_correct", "commit", "hovered"):
        if key not in shown or not shown["geomean"]:
            raise NotShown(f"the report's {key} is not inside the {REPORT_VIEWPORT} viewport")
    return shown


EVAL_ROW = re.compile(r"evaluation (\d+): (\w+), (\d+/\d+) correct, geomean (\S+x) vs (\S+)")


def trace_numbers(dom: dict) -> dict:
    """The numbers of the viewer's run summary and its first evaluation row, as shown."""
    s = dom["summary"]
    keys = {"seed": "seed", "started": "started", "steps": "steps", "wall time": "wall_time"}
    keys |= {"evaluations": "evaluations", "questions": "questions", "end": "end"}
    missing = [k for k in keys if k not in s]
    if missing or not dom["title"]:
        raise NotShown(f"the viewer's {missing or 'title'} not inside the {TRACE_VIEWPORT} viewport")
    shown = {"title": dom["title"]} | {name: s[k] for k, name in keys.items()}
    row = next((m for line in dom["timeline"] if (m := EVAL_ROW.search(line))), None)
    if row is None:
        raise NotShown(f"no evaluation row inside the {TRACE_VIEWPORT} viewport")
    shown["evaluation"] = dict(zip(("index", "status", "correct", "geomean", "baseline"), row.groups()))
    return shown


# ---------------------------------------------------------------- taking them


def _sidecar(png: Path, page: str, viewport: dict, sources: dict[str, str], shown: dict) -> dict:
    return {
        "png": png.name,
        "png_sha256": sha256(png),
        "page": page,
        "viewport": viewport,
        "sources": sources,
        "shown": shown,
        "taken_by": "make screenshots (scripts/page-screenshots.py)",
    }


def lowest_cell(summary: dict, charts: list[str]) -> tuple[str, str, str]:
    """(chart, scenario, baseline) of the lowest ratio to the main baseline, from summary.json."""
    baseline = next(iter(summary["min_ratio_scenario"]))
    scenario = summary["min_ratio_scenario"][baseline]
    chart = f"{baseline}-causal" if scenario.endswith("-causal") else f"{baseline}-non-causal"
    if chart not in charts:
        raise NotShown(f"no heat map {chart} for {scenario}")
    return chart, scenario, baseline


def take_report(browser, work: Path, out: Path, repo: Path = REPO) -> dict:
    """REPORT.html rendered from copies of the committed sources, its screenshot and sidecar."""
    sources = _copy_sources(REPORT_SOURCES, repo, work)
    html = render_html(work / RESULTS)
    page = browser.new_page(viewport=REPORT_VIEWPORT, device_scale_factor=1)
    try:
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        summary = json.loads((work / SUMMARY).read_text())
        chart, scenario, _ = lowest_cell(summary, page.evaluate("Object.keys(window.ksReport.charts)"))
        at = page.evaluate(HOVER_JS, [chart, scenario])
        page.mouse.move(at["x"], at["y"])
        page.wait_for_selector("#tooltip:not([hidden])")
        png = out / "report.png"
        page.screenshot(path=str(png))
        shown = report_numbers(page.evaluate(REPORT_DOM_JS))
    finally:
        page.close()
    return _sidecar(png, f"REPORT.html of {RESULTS}", REPORT_VIEWPORT, sources, shown)


def take_trace(browser, work: Path, out: Path, repo: Path = REPO) -> dict:
    """The viewer of the self-check trace rendered from a copy of it, its screenshot and sidecar."""
    sources = _copy_sources(TRACE_SOURCES, repo, work)
    trace = work / TRACE
    html = render_traces([trace], trace.with_suffix(".html"))
    page = browser.new_page(viewport=TRACE_VIEWPORT, device_scale_factor=1)
    try:
        page.goto(html.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        png = out / "trace-viewer.png"
        page.screenshot(path=str(png))
        shown = trace_numbers(page.evaluate(TRACE_DOM_JS))
    finally:
        page.close()
    return _sidecar(png, f"the trace viewer of {TRACE}", TRACE_VIEWPORT, sources, shown)


def take_all(browser, out: Path, repo: Path = REPO) -> list[Path]:
    """Both screenshots and their sidecars into `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="ks-screenshots-") as tmp:
        for take in (take_report, take_trace):
            side = take(browser, Path(tmp), out, repo)
            path = out / f"{side['png']}.json"
            path.write_text(json.dumps(side, indent=2) + "\n")
            written += [out / side["png"], path]
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    ap.add_argument("--chromium", default=chromium_path())
    a = ap.parse_args()
    if not a.chromium:
        raise SystemExit("Chromium is not installed (apt-get install chromium), or name it with --chromium")

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=a.chromium, args=ARGS)
        try:
            written = take_all(browser, a.out)
        finally:
            browser.close()
    for f in written:
        print(f)


if __name__ == "__main__":
    main()
