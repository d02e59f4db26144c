"""Retrieval for the tool-rich arm: a BM25 index (the `bm25s` library) over a documents folder, cut
into passages, and the `search_docs` tool that queries it. The same index type ranks the lessons of
a run (lessons.py).

By default the documents are the suite's contract docs (what a kernel must do and how it is judged:
README.md, docs/kernels.md, docs/judging.md and docs/evaluator-hardening.md); a user adds others,
e.g. the CUDA and PTX guides saved as text or HTML, with the arm option `docs_extra`, or replaces
them with `docs`. The repository's
answers are never documents: a source in (or holding) kernels/, results/, the question bank or the
runs' traces is refused, and the shell may read the documents given and nothing else of the
repository (policy.py). Since a copy of them can be anywhere (another clone, a download), a source is
also refused by content: a file under it (any file: the shell reads them all) with the content of a
file of the repository's kernels/ (its tuned kernels and their NOTES.md), or sharing at least
MIN_SHARED_LINES of their distinctive lines (an older version, an excerpt).
"""

from __future__ import annotations

import functools
import hashlib
import html.parser
from dataclasses import dataclass
from pathlib import Path

from .. import config as suite_config
from ..contracts.extras import MissingExtra
from .context import RunContext
from .exceptions import ToolError
from .tools import Tool, ToolResult, elide

TEXT_SUFFIXES = {
    ".md",
    ".txt",
    ".rst",
    ".cu",
    ".cuh",
    ".h",
    ".hpp",
    ".c",
    ".cc",
    ".cpp",
    ".py",
    ".ptx",
    ".html",
    ".htm",
}
CONTRACT_DOCS = ("README.md", "docs/kernels.md", "docs/judging.md", "docs/evaluator-hardening.md")
ANSWERS = ("kernels", "results", "bank", "runs")  # never documents
MAX_FILE_BYTES = 8 << 20
PASSAGE_CHARS = 1500


def _bm25s():
    try:
        import bm25s
    except ImportError as e:
        raise MissingExtra("retrieval (the tool-rich arm's search_docs)", "agents", "bm25s") from e
    return bm25s


class Bm25Index:
    """A BM25 ranking over a list of texts; scores of 0 (no shared term) are never returned."""

    def __init__(self, texts: list[str]):
        self.size = len(texts)
        self._retriever = None
        if texts:
            bm25s = _bm25s()
            self._retriever = bm25s.BM25()
            self._retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        if not self._retriever or k <= 0:
            return []
        bm25s = _bm25s()
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        if not tokens[0]:
            return []
        docs, scores = self._retriever.retrieve(tokens, k=min(k, self.size), show_progress=False)
        return [(int(d), float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]


@dataclass
class Passage:
    source: str  # the file, relative to the folder it was found in
    first_line: int
    last_line: int
    text: str


class _Text(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        if tag in ("p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "pre", "section"):
            self.parts.append("\n")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def _read(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix in (".html", ".htm"):
        p = _Text()
        p.feed(text)
        lines = [" ".join(l.split()) for l in "".join(p.parts).splitlines()]
        text = "\n".join(l for l in lines if l)
    return text


def passages(text: str, source: str, max_chars: int = PASSAGE_CHARS) -> list[Passage]:
    """Consecutive blocks (split at blank lines) joined up to `max_chars`; a longer block is cut."""
    out: list[Passage] = []
    lines = text.splitlines()
    start, buf = 0, []

    def flush(end):
        body = "\n".join(buf).strip()
        if body:
            out.append(Passage(source, start + 1, end, body))

    for i, line in enumerate(lines):
        if not buf:
            start = i
        buf.append(line)
        size = sum(len(l) + 1 for l in buf)
        if (not line.strip() and size >= max_chars // 2) or size >= max_chars:
            flush(i + 1)
            buf = []
    flush(len(lines))
    return out


def collect(sources: list[Path]) -> tuple[list[Passage], list[str]]:
    """Passages of every text file under `sources` (files or folders), and what was skipped."""
    found: list[Passage] = []
    skipped: list[str] = []
    for src in sources:
        if not src.exists():
            skipped.append(f"{src}: not found")
            continue
        files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
        for f in files:
            if f.suffix.lower() not in TEXT_SUFFIXES or any(part.startswith(".") for part in f.parts[-3:]):
                continue
            if f.stat().st_size > MAX_FILE_BYTES:
                skipped.append(f"{f}: larger than {MAX_FILE_BYTES >> 20} MiB")
                continue
            rel = f.name if src.is_file() else f"{src.name}/{f.relative_to(src)}"
            found.extend(passages(_read(f), rel))
    return found, skipped


class DocIndex:
    def __init__(self, sources: list[Path]):
        self.sources = [Path(s).resolve() for s in sources]
        self.passages, self.skipped = collect(self.sources)
        self.index = Bm25Index([f"{p.source}\n{p.text}" for p in self.passages])
        h = hashlib.sha256()
        for p in self.passages:
            h.update(f"{p.source}:{p.first_line}\0{p.text}\0".encode())
        self.sha256 = h.hexdigest()

    def search(self, query: str, k: int = 5) -> list[tuple[Passage, float]]:
        return [(self.passages[i], s) for i, s in self.index.search(query, k)]

    def describe(self) -> dict:
        return {
            "sources": [str(s) for s in self.sources],
            "passages": len(self.passages),
            "files": len({p.source for p in self.passages}),
            "sha256": self.sha256,
            "skipped": self.skipped[:20],
        }


def default_sources() -> list[Path]:
    return [suite_config.REPO_ROOT / s for s in CONTRACT_DOCS]


# the starting kernels: given to every agent, so their lines (and the lines the contract docs quote)
# say nothing of an answer
GIVEN = ("kernels/reference",)
MIN_LINE_CHARS = 30  # a line this long (whitespace collapsed) is distinctive
MIN_SHARED_LINES = 12  # this many of an answer's distinctive lines in one file: a copy of it
MAX_CHECKED_BYTES = 64 << 20


def _lines(data: bytes) -> set[str]:
    out = set()
    for line in data.decode("utf-8", "replace").splitlines():
        norm = " ".join(line.split())
        if len(norm) >= MIN_LINE_CHARS:
            out.add(norm)
    return out


@functools.lru_cache(1)
def answer_fingerprints() -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """The repository's answers by content: sha256 -> path (relative to the checkout) of every file
    under kernels/, and path -> the distinctive lines of each that is not a starting kernel (lines of
    the starting kernels and of the contract docs left out)."""
    root = suite_config.REPO_ROOT
    files = sorted(p for p in (root / "kernels").rglob("*") if p.is_file()) if (root / "kernels").is_dir() else []
    hashes = {hashlib.sha256(p.read_bytes()).hexdigest(): p.relative_to(root).as_posix() for p in files}
    public: set[str] = set()
    for p in [*(root / g for g in GIVEN), *(root / d for d in CONTRACT_DOCS)]:
        for f in [p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else []:
            if f.is_file():
                public |= _lines(f.read_bytes())
    lines = {}
    for p in files:
        rel = p.relative_to(root).as_posix()
        if not any(rel.startswith(g + "/") for g in GIVEN):
            lines[rel] = frozenset(_lines(p.read_bytes()) - public)
    return hashes, lines


def answer_in(path: Path) -> str | None:
    """Which of the repository's answers the file at `path` holds (its content, or enough of its
    distinctive lines), in words; None when it holds none."""
    try:
        if path.stat().st_size > MAX_CHECKED_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    hashes, lines = answer_fingerprints()
    same = hashes.get(hashlib.sha256(data).hexdigest())
    if same:
        return f"the content of the repository's {same}"
    mine = _lines(data)
    shared, rel = max(((len(mine & theirs), rel) for rel, theirs in lines.items()), default=(0, ""))
    return f"{shared} lines of the repository's {rel}" if shared >= MIN_SHARED_LINES else None


def refuse_answers(sources: list[Path]) -> None:
    """A ValueError for a source that is, or is in, or holds one of the repository's ANSWERS folders,
    or that holds (anywhere) a file with one of its answers' content (answer_in)."""
    for src in sources:
        p = Path(src).expanduser().resolve()
        for name in ANSWERS:
            answers = (suite_config.REPO_ROOT / name).resolve()
            if p == answers or answers in p.parents or p in answers.parents:
                raise ValueError(
                    f"{src}: the documents may not include the repository's {name}/ "
                    f"(kernels, results, the question bank and traces are never documents)"
                )
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else []
        for f in files:
            held = answer_in(f)
            if held:
                raise ValueError(
                    f"{f}: the documents may not hold {held} (a tuned kernel or its notes, wherever they are, "
                    "are never documents)"
                )


def search_tool(index: DocIndex, max_chars: int = 1200) -> Tool:
    def run(args: dict, ctx: RunContext) -> ToolResult:
        query = args["query"].strip()
        if not query:
            raise ToolError("the query is empty")
        k = int(args.get("k") or 5)
        hits = index.search(query, k)
        if not index.passages:
            return ToolResult(
                "the document index is empty: no documents were found in " + ", ".join(str(s) for s in index.sources),
                is_error=True,
                data={"hits": []},
            )
        if not hits:
            return ToolResult(f"no passage matches {query!r}", data={"hits": []})
        parts = [
            f"[{n}] {p.source}:{p.first_line}-{p.last_line} (score {s:.2f})\n{elide(p.text, max_chars)}"
            for n, (p, s) in enumerate(hits, 1)
        ]
        return ToolResult(
            "\n\n".join(parts),
            data={
                "hits": [
                    {"source": p.source, "lines": [p.first_line, p.last_line], "score": round(s, 3)} for p, s in hits
                ]
            },
        )

    return Tool(
        "search_docs",
        "Search the documents (the suite's contract docs, and any guides the user added) "
        "with a keyword query; returns the best-matching passages with their file and lines.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "k": {"type": "integer", "minimum": 1, "maximum": 10, "description": "passages (default 5)"},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        run,
    )
