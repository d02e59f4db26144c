"""Agent runs as work items: arm x seed spread over a cluster's workers, one run per worker (per
GPU) at a time, for a head-to-head comparison.

An item names its trace file. Run again (a retry after its worker died, or a comparison started
again after an interruption) it does not start over: a finished trace is read back, a trace cut short
is resumed from its last checkpoint, and only a trace with no model call yet starts anew. Traces
must be on storage every worker sees (one host, or a shared file system)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .executor import Channel, ItemFailure, WorkItem, run_items


@dataclass(frozen=True)
class AgentRunItem:
    arm: str
    seed: int
    config: dict                      # RunConfig.to_dict() of this run (arm and seed set)
    trace: str                        # where its trace goes
    api_key_env: str = "OPENAI_API_KEY"   # read on the worker: no key travels through the scheduler

    @property
    def key(self) -> str:
        return f"{self.arm}/seed-{self.seed}"


def _state(trace: Path) -> str:
    """'new' (nothing to resume), 'finished', or 'resumable'."""
    from ..agents.trace import read_trace
    if not trace.exists() or not trace.stat().st_size:
        return "new"
    events = read_trace(trace).events
    ends = [e for e in events if e["type"] == "run_end"]
    if ends and events[-1]["type"] == "run_end" and ends[-1].get("exit_reason") != "interrupted":
        return "finished"
    return "resumable" if any(e["type"] == "llm_call" for e in events) else "new"


def _summary(item: AgentRunItem, trace: Path, how: str) -> dict:
    from ..agents.trace import read_trace
    events = read_trace(trace).events
    end = [e for e in events if e["type"] == "run_end"][-1]
    return {"arm": item.arm, "seed": item.seed, "trace": str(trace), "how": how,
            "exit_reason": end["exit_reason"], "goal_met": end["goal_met"], "best": end["best"],
            "totals": end["totals"], "sessions": 1 + sum(e["type"] == "resume" for e in events)}


def run_agent_item(item: AgentRunItem, channel: Channel | None = None, model=None) -> dict:
    """Run (or resume, or read back) one agent run; returns its summary. `model` replaces the
    OpenAI client (tests)."""
    from ..agents.config import RunConfig
    from ..agents.runner import new_run, resume_run

    trace = Path(item.trace)
    api_key = os.environ.get(item.api_key_env) or None
    state = _state(trace)
    if state == "finished":
        return _summary(item, trace, "read back")
    if state == "resumable":
        agent = resume_run(trace, api_key, model=model)
        how = "resumed"
    else:
        if trace.exists():
            trace.unlink()           # a run_start and nothing after it: start over
        trace.parent.mkdir(parents=True, exist_ok=True)
        cfg = RunConfig.from_dict(item.config)
        cfg.arm, cfg.seed = item.arm, item.seed
        agent = new_run(cfg, trace, api_key, model=model)
        how = "new"
    agent.run()
    return _summary(item, trace, how)


def _run_payload(item: AgentRunItem, channel: Channel) -> dict:
    return run_agent_item(item, channel)


def run_agent_items(client, items: list[AgentRunItem],
                    on_result: Callable[[AgentRunItem, dict], None] | None = None,
                    on_failure: Callable[[AgentRunItem, ItemFailure], None] | None = None) -> dict[str, Any]:
    """Run every item on the cluster, one per worker at a time; returns {item.key: summary}. An item
    whose workers keep dying, or that raises, goes to on_failure (default: raise)."""
    work = [WorkItem(i.key, i) for i in items]
    return run_items(client, work, _run_payload,
                     on_result=(lambda w, res: on_result(w.payload, res)) if on_result else None,
                     on_failure=(lambda w, f: on_failure(w.payload, f)) if on_failure else None)
