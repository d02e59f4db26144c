"""Screenshots of the two HTML pages for the README: REPORT.html of results/sm90 and the viewer of its
self-check trace, taken in headless Chromium (Debian's package) through Playwright, as the browser
tests open them.

    python scripts/page-screenshots.py [--out docs/img]

Renders the pages first (`kernelseek-suite render results/sm90 --html` and `kernelseek-suite traces
html results/sm90/agents-selfcheck/trace.jsonl` do the same), then writes report.png (the claims and
the heat maps, a cell hovered) and trace-viewer.png."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from kernelseek_suite.reports.html import render_html
from kernelseek_suite.reports.trace_html import default_output, render_traces

REPO = Path(__file__).resolve().parents[1]
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
HOVER = "d96-h16kv16-s8192"  # the lowest ratio to FA3 in the shipped run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    results = REPO / "results" / "sm90"
    trace = results / "agents-selfcheck" / "trace.jsonl"
    report = render_html(results)
    viewer = render_traces([trace], default_output([trace]))
    a.out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=a.chromium, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1180}, device_scale_factor=1)
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.locator("#claims").scroll_into_view_if_needed()
        box = page.evaluate(
            """(id) => {
            const ch = window.ksReport.charts["fa3-non-causal"];
            const i = ch.data.datasets[0].data.findIndex((c) => c.scenario === id);
            const r = ch.canvas.getBoundingClientRect(), c = ch.getDatasetMeta(0).data[i].getCenterPoint();
            return {x: r.left + c.x, y: r.top + c.y};
        }""",
            HOVER,
        )
        page.mouse.move(box["x"], box["y"])
        page.wait_for_selector("#tooltip:not([hidden])")
        page.screenshot(path=str(a.out / "report.png"))

        page = browser.new_page(viewport={"width": 1280, "height": 1000}, device_scale_factor=1)
        page.goto(viewer.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.screenshot(path=str(a.out / "trace-viewer.png"))
        browser.close()
    for f in (report, viewer, a.out / "report.png", a.out / "trace-viewer.png"):
        print(f)


if __name__ == "__main__":
    main()
