"""The lessons store of the tool-rich arm: after each evaluation the model records what it learned
(`record_lesson`); the lessons most relevant to what it is doing now are put back into its prompt
later (the arm's supervisor). Kept in SQLite in the run's folder (`<trace>.d/lessons.sqlite`), so a
resumed run has them, and ranked with BM25 (retrieval.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from ..provenance import now_utc
from .context import RunContext
from .exceptions import ToolError
from .retrieval import Bm25Index
from .tools import Tool, ToolResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS lessons (
    id INTEGER PRIMARY KEY,
    step INTEGER NOT NULL,
    eval_index INTEGER,            -- the evaluation the lesson is about (null: none yet)
    candidate_id TEXT,
    status TEXT,                   -- that evaluation's status
    geomean REAL,                  -- and its speed-up
    text TEXT NOT NULL,
    created TEXT NOT NULL
)"""
MAX_CHARS = 1000


@dataclass
class Lesson:
    id: int
    step: int
    eval_index: int | None
    candidate_id: str | None
    status: str | None
    geomean: float | None
    text: str
    created: str

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        about = ""
        if self.eval_index is not None:
            gm = "" if self.geomean is None else f" {self.geomean:.3f}x"
            about = (
                f" (evaluation {self.eval_index}{', ' + self.candidate_id if self.candidate_id else ''}: "
                f"{self.status}{gm})"
            )
        return f"L{self.id}{about}: {self.text}"


class LessonStore:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.execute(SCHEMA)
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    def add(
        self,
        text: str,
        step: int,
        eval_index: int | None = None,
        candidate_id: str | None = None,
        status: str | None = None,
        geomean: float | None = None,
    ) -> Lesson:
        cur = self.db.execute(
            "INSERT INTO lessons (step, eval_index, candidate_id, status, geomean, text, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (step, eval_index, candidate_id, status, geomean, text, now_utc()),
        )
        self.db.commit()
        return self.get(cur.lastrowid)

    def get(self, lesson_id: int) -> Lesson:
        row = self.db.execute("SELECT * FROM lessons WHERE id = ?", (lesson_id,)).fetchone()
        if row is None:
            raise KeyError(lesson_id)
        return Lesson(*row)

    def all(self) -> list[Lesson]:
        return [Lesson(*r) for r in self.db.execute("SELECT * FROM lessons ORDER BY id")]

    def last_id(self) -> int:
        return self.db.execute("SELECT COALESCE(MAX(id), 0) FROM lessons").fetchone()[0]

    def drop_after(self, lesson_id: int) -> int:
        """Forgets lessons recorded after `lesson_id` (a resumed run goes back to its checkpoint)."""
        cur = self.db.execute("DELETE FROM lessons WHERE id > ?", (lesson_id,))
        self.db.commit()
        return cur.rowcount

    def relevant(self, query: str, k: int, exclude: set[int] = frozenset()) -> list[Lesson]:
        pool = [l for l in self.all() if l.id not in exclude]
        index = Bm25Index([l.text for l in pool])
        return [pool[i] for i, _ in index.search(query, k)]


def record_tool(store: LessonStore, population) -> Tool:
    """`record_lesson`: stores a lesson about the latest evaluation (or a given one) of the run;
    `population` (population.py) knows every evaluated candidate, resumed sessions included."""

    def run(args: dict, ctx: RunContext) -> ToolResult:
        text = " ".join(args["text"].split())
        if not text:
            raise ToolError("the lesson is empty")
        index = args.get("eval_index")
        member = population.by_eval(index) if index is not None else population.latest()
        if index is not None and member is None:
            latest = population.latest()
            raise ToolError(
                f"there is no evaluation {index}" + (f"; the latest is {latest.eval_index}" if latest else "")
            )
        lesson = store.add(
            text, ctx.trace.step, *((member.eval_index, member.id, member.status, member.geomean) if member else ())
        )
        return ToolResult(f"recorded {lesson.line()}", data={"lesson": lesson.to_dict()})

    return Tool(
        "record_lesson",
        "Record one lesson learned from an evaluation (what was changed, what happened, "
        "why): it is kept for the rest of the run and brought back when it is relevant.",
        {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_CHARS},
                "eval_index": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "the evaluation it is about (default: the latest)",
                },
            },
            "required": ["text"],
            "additionalProperties": False,
        },
        run,
    )
