"""A constructed run of realistic shape and any length, written through the real TraceWriter and valid
against the trace schema: each step a model call with its tool call, the tool's result and the
step's checkpoint (with the conversation's deltas); every few steps an edit of the kernel and an
evaluation with its candidate stored as a blob; questions of each trigger and category, one typed by
a person, retries, a decision point, a resume after a step cut short, and the limit that ends it.
Nothing here is a measurement: the speed-ups are made up and known."""

from __future__ import annotations

import json
import random
from pathlib import Path

from kernelseek_suite.agents.config import RunConfig
from kernelseek_suite.agents.trace import TraceWriter
from kernelseek_suite.contracts.traces import TRACE_SCHEMA_VERSION

# the conversation hashes are not computed (the viewer does not read them; hashing the growing
# conversation at every event would make a long trace slow to write)
NO_SHA = "0" * 64

KERNEL = "attn.c"
LOST = "a note sent with the call of the step cut short"
TRIGGERS = ("plateau", "claimed-limit", "repeated-failure", "layer-dwell", "early-stop")
CATEGORIES = ("layer-shift", "limit-rejection", "information")


def _kernel(version: int) -> str:
    lines = [f"// candidate {version}", "#include <math.h>", "void attn(const float *q, float *o, int n) {"]
    lines += [f"  o[{i}] = q[{i}] * {1 + (version * 7 + i) % 5}.0f;  // line {i}" for i in range(40)]
    return "\n".join(lines + ["}", ""])


class LongRun:
    def __init__(self, path: Path, arm: str = "kernelseek", run_id: str = "long-run", seed: int = 3):
        self.w = TraceWriter(path)
        self.path = Path(path)
        self.rng = random.Random(seed)
        self.messages: list[dict] = []
        self.delta_start = 0
        self.calls = self.evals = self.questions = self.retries = self.version = 0
        self.tokens = 0
        self.best: dict | None = None
        start_sha = self.w.put_blob(_kernel(0).encode())
        self.workspace = {KERNEL: start_sha}
        cfg = RunConfig(arm=arm, task="cpu-attn", seed=seed)
        self.w.emit(
            "run_start",
            schema_version=TRACE_SCHEMA_VERSION,
            run_id=run_id,
            arm=arm,
            task={
                "name": "cpu-attn",
                "kernel": KERNEL,
                "goal": {"min_geomean": 2.0, "baseline": "baseline", "text": "correct and 2x the start"},
            },
            model={"name": "constructed", "base_url": None, "sampling": {}},
            config=cfg.to_dict(),
            suite={"version": "0", "git_sha": None},
            prompts={"system_sha256": "0" * 64, "task_sha256": "0" * 64, "tools_sha256": "0" * 64},
            hardware={},
            versions={},
            seed=seed,
            sandbox={"sandbox": "none"},
            tools=["shell", "edit_file"],
            workspace=dict(self.workspace),
        )
        self.messages += [
            {"role": "system", "content": "You are a performance engineer."},
            {"role": "user", "content": "Make attn.c faster. <b>not bold</b> & <script>x</script>"},
        ]

    def _delta(self) -> list[dict]:
        d = self.messages[self.delta_start :]
        self.delta_start = len(self.messages)
        return d

    def model_call(self, tool: str, args: dict, text: str | None = None) -> str:
        self.calls += 1
        call_id = f"call_{self.calls}"
        usage = {
            "prompt_tokens": 900 + self.calls,
            "completion_tokens": 60,
            "total_tokens": 960 + self.calls,
            "cost": None,
        }
        self.tokens += usage["total_tokens"]
        delta = self._delta()
        self.w.emit(
            "llm_call",
            call=self.calls,
            messages_count=len(self.messages),
            messages_sha256=NO_SHA,
            messages_delta=delta,
            request={"model": "constructed"},
            response={
                "content": text,
                "tool_calls": [{"id": call_id, "name": tool, "arguments": args}],
                "finish_reason": "tool_calls",
            },
            usage=usage,
            latency_s=round(self.rng.uniform(0.5, 4.0), 2),
            attempts=1,
        )
        self.messages.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
                ],
            }
        )
        return call_id

    def tool(self, call_id: str, tool: str, args: dict, output: str, data: dict | None = None) -> None:
        self.w.emit(
            "tool_result",
            call_id=call_id,
            tool=tool,
            arguments=args,
            output=output,
            is_error=False,
            duration_s=0.2,
            data=data,
        )
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})

    def checkpoint(self) -> None:
        self.w.emit(
            "step",
            messages_delta=self._delta(),
            messages_count=len(self.messages),
            messages_sha256=NO_SHA,
            totals=self.totals(),
            best=self.best,
            layers={"kernel": 1},
            dominant_layer="kernel",
            workspace=dict(self.workspace),
            supervisor={},
        )

    def totals(self) -> dict:
        return {
            "steps": self.w.step,
            "prompt_tokens": self.tokens,
            "completion_tokens": 0,
            "total_tokens": self.tokens,
            "cost": None,
            "evals": self.evals,
            "retries": self.retries,
            "questions": self.questions,
            "wall_s": round(self.w.elapsed(), 3),
        }

    def step(self) -> None:
        self.w.step += 1
        n = self.w.step
        if n % 6 == 0:  # an edit, then an evaluation
            self.version += 1
            sha = self.w.put_blob(_kernel(self.version).encode())
            self.workspace = {KERNEL: sha}
            args = {"path": KERNEL, "new_text": "..."}
            cid = self.model_call("edit_file", args, text=f"Trying variant {self.version}.")
            self.tool(cid, "edit_file", args, f"{KERNEL}: wrote", data={"added": f"variant {self.version}"})
            self.checkpoint()
            self.w.step += 1
            cid = self.model_call("evaluate", {})
            self.evaluate(sha)
            self.tool(cid, "evaluate", {}, f"status ok; geomean {self.last:.3f}x")
        else:
            args = {"command": f"gcc -O3 -c {KERNEL} && echo step {n}"}
            cid = self.model_call("shell", args)
            self.tool(cid, "shell", args, f"exit code 0\nstep {n}\n" + "output line\n" * (n % 7), data={"exit_code": 0})
        if n % 40 == 0:
            self.question(source="human" if n % 120 == 0 else "bank")
        if n % 97 == 0:
            self.retries += 1
            self.w.emit(
                "retry", attempt=1, kind="rate_limit", error="429 Too Many Requests", status_code=429, wait_s=2.0
            )
        if n % 150 == 0:
            self.w.emit(
                "decision",
                trigger="plateau",
                evidence={"evals_since_best": 4},
                asked=False,
                reason="asked too recently",
            )
        self.checkpoint()

    def evaluate(self, sha: str) -> None:
        self.evals += 1
        correct = self.evals % 5 != 0
        g = round(1.0 + 0.9 * self.evals / (self.evals + 30) + self.rng.uniform(-0.05, 0.05), 4) if correct else None
        self.last = g or 0.0
        new_best = bool(correct and (self.best is None or g > self.best["geomean"]))
        if new_best:
            self.best = {"geomean": g, "eval_index": self.evals, "candidate_sha256": sha}
        self.w.emit(
            "harness_eval",
            index=self.evals,
            kernel=KERNEL,
            candidate_sha256=sha,
            candidate_blob=f"blobs/{sha}",
            status="ok" if correct else "wrong",
            correct=correct,
            scenarios_total=6,
            scenarios_correct=6 if correct else 4,
            geomean=g,
            baseline="start",
            per_scenario=[]
            if correct
            else [{"scenario": "n=17", "status": "wrong", "ratio": None, "reason": "max err 3e-2 > tol 1e-3"}],
            new_best=new_best,
            best=self.best,
            goal_met=False,
            wall_s=0.4,
            meta=None,
        )

    def question(self, source: str = "bank") -> None:
        self.questions += 1
        trigger = TRIGGERS[self.questions % len(TRIGGERS)]
        category = None if source == "human" else CATEGORIES[self.questions % len(CATEGORIES)]
        text = f"question {self.questions}: what limits the inner loop now?"
        self.w.emit(
            "question",
            trigger=trigger,
            evidence={},
            source=source,
            bank_id=None if source == "human" else f"q-{self.questions % 9}",
            category=category,
            layers=["kernel"],
            text=text,
        )
        self.messages.append({"role": "user", "content": text})

    def resume(self) -> None:
        """A step cut short (a model call with no checkpoint after it), then a new session from the
        last checkpoint, which drops that call's message from the conversation."""
        self.w.step += 1
        self.messages.append({"role": "user", "content": LOST})
        self.model_call("shell", {"command": "sleep 1000"})
        del self.messages[-2:]
        self.delta_start = len(self.messages)
        self.w.step -= 1
        self.w.emit(
            "resume",
            from_step=self.w.step,
            session=2,
            limits={},
            discarded_events=1,
            dropped_partial_line=False,
            sandbox={"sandbox": "none"},
        )

    def end(self) -> Path:
        self.w.emit("exit", reason="limit", message="step limit reached", goal_met=False, limit="steps", details={})
        self.w.emit("run_end", totals=self.totals(), best=self.best, goal_met=False, exit_reason="limit")
        self.w.close()
        return self.path


def write_long_trace(
    path: Path, events: int = 10_000, arm: str = "kernelseek", run_id: str = "long-run", seed: int = 3
) -> Path:
    """A valid trace of at least `events` events."""
    run = LongRun(path, arm, run_id, seed)
    resumed = False
    while run.w._seq < events - 2:
        run.step()
        if not resumed and run.w._seq > events // 2:
            run.resume()
            resumed = True
    return run.end()
