"""Constructed traces with known answers, written through the real TraceWriter and valid against the
trace schema: for testing analysis and reports without running a model."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kernelseek_suite.agents.config import RunConfig
from kernelseek_suite.agents.trace import TraceWriter
from kernelseek_suite.contracts.traces import TRACE_SCHEMA_VERSION

ZERO = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost": None}


class TraceBuilder:
    def __init__(
        self,
        path: Path,
        arm: str = "kernelseek",
        run_id: str = "run-1",
        seed: int = 1,
        task: str = "cpu-attn",
        tokens_per_step: int = 100,
    ):
        self.w = TraceWriter(path)
        self.path = Path(path)
        self.steps = self.evals = self.questions = 0
        self.best = None
        self.run_id = run_id
        self.shas: list[str] = []  # each evaluation's candidate sha256, in order
        self.tokens_per_step = tokens_per_step
        cfg = RunConfig(arm=arm, task=task, seed=seed)
        self.w.emit(
            "run_start",
            schema_version=TRACE_SCHEMA_VERSION,
            run_id=run_id,
            arm=arm,
            task={"name": task, "kernel": "attn.c", "goal": {"min_geomean": 2.0, "baseline": "baseline", "text": "2x"}},
            model={"name": "constructed", "base_url": None, "sampling": {}},
            config=cfg.to_dict(),
            suite={"version": "0", "git_sha": None},
            prompts={"system_sha256": "0" * 64, "task_sha256": "0" * 64, "tools_sha256": "0" * 64},
            hardware={},
            versions={},
            seed=seed,
            sandbox={"sandbox": "none"},
            tools=[],
            workspace={},
        )

    def step(self, edit: str | None = None, shell: str | None = None, tool: str | None = None) -> TraceBuilder:
        """A new step (the previous one gets its checkpoint): an edit (its added lines), a shell command,
        or another tool call; evaluations and questions that follow belong to it."""
        if self.steps:
            self.checkpoint()
        self.steps += 1
        self.w.step = self.steps
        if edit is not None:
            self._tool("edit_file", {"path": "attn.c"}, data={"added": edit})
        if shell is not None:
            self._tool("shell", {"command": shell}, data={"exit_code": 0})
        if tool is not None:
            self._tool(tool, {})
        return self

    def _tool(self, name, args, data=None):
        self.w.emit(
            "tool_result",
            call_id=f"c{self.w._seq}",
            tool=name,
            arguments=args,
            output="ok",
            is_error=False,
            duration_s=0.0,
            data=data,
        )

    def evaluate(
        self, geomean: float | None, correct: bool = True, status: str | None = None, sha: str | None = None
    ) -> TraceBuilder:
        self.evals += 1
        status = status or ("ok" if correct else "wrong")
        new_best = bool(correct and geomean is not None and (self.best is None or geomean > self.best["geomean"]))
        # a distinct kernel per evaluation unless one is named (runs do not share files by accident)
        sha = sha or hashlib.sha256(f"{self.run_id}:{self.evals}".encode()).hexdigest()
        self.shas.append(sha)
        if new_best:
            self.best = {"geomean": geomean, "eval_index": self.evals, "candidate_sha256": sha}
        self._tool("evaluate", {})
        self.w.emit(
            "harness_eval",
            index=self.evals,
            kernel="attn.c",
            candidate_sha256=sha,
            candidate_blob=f"blobs/{sha}",
            status=status,
            correct=correct,
            scenarios_total=6,
            scenarios_correct=6 if correct else 0,
            geomean=geomean if correct else None,
            baseline="baseline",
            per_scenario=[],
            new_best=new_best,
            best=self.best,
            goal_met=False,
            wall_s=0.1,
            meta=None,
        )
        return self

    def question(
        self, category: str | None, trigger: str = "plateau", bank_id: str | None = "q-1", source: str = "bank"
    ) -> TraceBuilder:
        self.questions += 1
        self.w.emit(
            "question",
            trigger=trigger,
            evidence={},
            source=source,
            bank_id=bank_id if source == "bank" else None,
            category=category,
            layers=[],
            text=f"question {self.questions}?",
        )
        return self

    def checkpoint(self, layers: dict | None = None) -> TraceBuilder:
        self.w.emit(
            "step",
            messages_delta=[],
            messages_count=2 + 2 * self.steps,
            messages_sha256="0" * 64,
            totals=self._totals(),
            best=self.best,
            layers=layers or {},
            dominant_layer=None,
            workspace={},
            supervisor={},
        )
        return self

    def _totals(self) -> dict:
        t = self.steps * self.tokens_per_step
        return {
            "steps": self.steps,
            "prompt_tokens": t,
            "completion_tokens": 0,
            "total_tokens": t,
            "cost": None,
            "evals": self.evals,
            "retries": 0,
            "questions": self.questions,
            "wall_s": 60.0 * self.steps,
        }

    def end(self, reason: str = "limit") -> Path:
        if self.steps:
            self.checkpoint()
        self.w.emit(
            "exit", reason=reason, message="", goal_met=False, limit="steps" if reason == "limit" else None, details={}
        )
        self.w.emit("run_end", totals=self._totals(), best=self.best, goal_met=False, exit_reason=reason)
        self.w.close()
        return self.path
