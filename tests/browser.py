"""Headless Chromium (Debian's package) driven by Playwright, for the tests of the HTML pages.

A page is opened from file:// and everything it says on the console, every script error and every
request that does not stay on the local file are collected, so a test can ask for none. Where
Chromium or Playwright is missing the browser tests are skipped with the reason, except under CI
(`CI` set), where `.ci/run` installs Chromium and a missing one fails the run."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    env = os.environ.get("KERNELSEEK_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if chromium_path() is None:
        return "Chromium is not installed (apt-get install chromium; .ci/run does)"
    return None


@dataclass
class Opened:
    page: object
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """Console errors and warnings, script errors, and requests that left the file."""
        return (
            [f"console {t}: {m}" for t, m in self.console if t in ("error", "warning")]
            + [f"page error: {e}" for e in self.errors]
            + [f"request: {r}" for r in self.requests]
        )


class Browser:
    def __init__(self, browser):
        self.browser = browser

    def open(self, path: Path, width: int = 1400, height: int = 1000, timeout_ms: int = 10_000) -> Opened:
        page = self.browser.new_page(viewport={"width": width, "height": height})
        opened = Opened(page)
        page.on("console", lambda m: opened.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: opened.errors.append(str(e)))
        page.on(
            "request",
            lambda r: (
                None if r.url.startswith(("file:", "data:", "blob:", "about:")) else opened.requests.append(r.url)
            ),
        )
        page.goto(Path(path).resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=timeout_ms)
        return opened


@pytest.fixture(scope="session")
def browser():
    why = missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield Browser(b)
        finally:
            b.close()
