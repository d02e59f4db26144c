"""The README's table of where things stand agrees with the files it cites: every path in its last
column exists, and the adversarial row gives the count the shipped adversarial.md gives."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ADVERSARIAL = ROOT / "results" / "sm90" / "adversarial" / "adversarial.md"


def _status_rows() -> list[list[str]]:
    text = README.read_text()
    section = text[text.index("## Where things stand") :]
    section = section[: section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]


def test_every_path_the_status_table_cites_exists():
    missing = []
    for cells in _status_rows():
        for token in re.findall(r"`([^`]+)`", cells[-1]):
            if "/" in token or token.endswith(".md"):
                if not (ROOT / token).exists():
                    missing.append(token)
    assert missing == []


def test_the_adversarial_row_gives_the_shipped_count():
    m = re.search(r": (\d+)/(\d+) pass", ADVERSARIAL.read_text().splitlines()[0])
    assert m, "adversarial.md's first line gives no count"
    (row,) = [cells for cells in _status_rows() if cells[0].startswith("adversarial kernels")]
    passed, total = m.groups()
    assert f"{passed}/{total} checks as expected in the full run" in row[1]
    if passed != total:
        assert f"{total}/{total}" not in row[1]  # not all of them, as the file says
