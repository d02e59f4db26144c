"""Drives the tool-rich arm's profiler and disassembly tools through the agent loop with a fixed
script instead of a model, and prints what the model would read: the compact tables.

    python -m kernelseek_suite.agents.toolrich_check [--kernel K.cu] [--scenario ID] [--trace T.jsonl]

Exit 0 when both tools gave their tables, 1 when one of them could not run or failed (its reason is
printed), 4 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ..contracts import exitcodes
from ..contracts.traces import read_trace
from .config import RunConfig
from .runner import new_run
from .selfcheck import ScriptedModel


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kernelseek_suite.agents.toolrich_check", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--task", default="fa-fwd-sm90")
    ap.add_argument("--kernel", default=None, help="the kernel (default: the task's own starting kernel)")
    ap.add_argument("--scenario", default=None, help="the scenario to profile (default: the arm's)")
    ap.add_argument("--trace", default=None, help="trace file (default: a temporary folder)")
    args = ap.parse_args(argv)

    trace_path = Path(args.trace) if args.trace else Path(tempfile.mkdtemp(prefix="ks-toolcheck-")) / "trace.jsonl"
    cfg = RunConfig(arm="toolrich", task=args.task, task_options={"kernel": args.kernel} if args.kernel else {})
    cfg.model.name = "toolrich-check-script"
    profile = {"scenario": args.scenario} if args.scenario else {}
    script = [[("disassemble", {})], [("profile", profile)], [("search_docs", {"query": "wgmma TMA pipeline"})]]
    try:
        agent = new_run(cfg, trace_path, model=ScriptedModel(script))
    except (KeyError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return exitcodes.USAGE
    agent.run()
    ok = True
    for ev in read_trace(trace_path).events:
        if ev["type"] != "tool_result":
            continue
        print(f"===== {ev['tool']} {ev['arguments'] or ''} ({ev['duration_s']:.1f}s)")
        print(ev["output"])
        print()
        if ev["tool"] in ("disassemble", "profile") and ev["is_error"]:
            ok = False
    print(f"trace: {trace_path}")
    print("TOOLCHECK PASS" if ok else "TOOLCHECK FAIL")
    return exitcodes.OK if ok else exitcodes.FAIL


if __name__ == "__main__":
    sys.exit(main())
