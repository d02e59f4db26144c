"""The README is a front page: at most 200 lines, every page of docs/ reachable from it, every
relative link in it and in docs/ leading to a file that exists, and every command listed."""

import re
from pathlib import Path

import click

from kernelseek_suite.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_readme_is_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.split("#")[0]).resolve() for t in _relative_links(README)}
    pages = set((ROOT / "docs").glob("*.md"))
    assert pages, "docs/ has no pages"
    assert sorted(p.name for p in pages if p.resolve() not in linked) == []


def test_every_relative_link_leads_to_a_file():
    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in _relative_links(page):
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_command_is_in_the_readmes_command_list():
    text = README.read_text()
    table = text[text.index("## The command line") :]
    table = table[: table.index("\n## ", 1)]
    missing = []
    for name, cmd in main.commands.items():
        names = [name] if not isinstance(cmd, click.Group) else [f"{name} {sub}" for sub in cmd.commands]
        for full in names:
            group, _, sub = full.partition(" ")
            row = next((line for line in table.splitlines() if line.startswith(f"| `{group}")), "")
            if not row or (sub and f"`{sub}`" not in row and f"{group} {sub}" not in row):
                missing.append(full)
    assert missing == []
