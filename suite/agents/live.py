"""The terminal view of a run (CLI only): the step, the best result so far and the budget left,
refreshed from the trace's events, with questions and evaluations printed as they happen."""

from __future__ import annotations

from rich.console import Console
from rich.live import Live
from rich.table import Table


class LiveView:
    def __init__(self, console: Console, limits, enabled: bool = True):
        self.console, self.limits, self.enabled = console, limits, enabled
        self.state = {"step": 0, "evals": 0, "tokens": 0, "cost": None, "wall": 0.0, "best": None, "last": "starting"}
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False) if enabled else None

    def __enter__(self):
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.update(self._render())
            self.live.stop()

    def pause(self):
        if self.live:
            self.live.stop()

    def unpause(self):
        if self.live:
            self.live.start()

    @staticmethod
    def _of(used, limit, fmt="{}") -> str:
        return fmt.format(used) + (f" / {fmt.format(limit)}" if limit is not None else "")

    def _render(self) -> Table:
        s, lim = self.state, self.limits
        t = Table.grid(padding=(0, 2))
        t.add_row("step", self._of(s["step"], lim.max_steps), "evaluations", self._of(s["evals"], lim.max_evals))
        wall_lim = None if lim.max_wall_s is None else lim.max_wall_s / 60
        t.add_row(
            "tokens", self._of(s["tokens"], lim.max_tokens), "wall (min)", self._of(s["wall"] / 60, wall_lim, "{:.1f}")
        )
        cost = "-" if s["cost"] is None else f"${s['cost']:.4f}"
        best = "-" if not s["best"] else f"{s['best']['geomean']:.3f}x (evaluation {s['best']['eval_index']})"
        t.add_row("cost", cost + (f" / ${lim.max_cost:g}" if lim.max_cost is not None else ""), "best so far", best)
        t.add_row("last", s["last"][:100], "", "")
        return t

    def on_event(self, ev: dict) -> None:
        s, t = self.state, ev["type"]
        s["step"], s["wall"] = ev.get("step", s["step"]), ev.get("elapsed_s", s["wall"])
        if t == "llm_call":
            s["tokens"] += ev["usage"]["total_tokens"]
            if ev["usage"].get("cost") is not None:
                s["cost"] = (s["cost"] or 0) + ev["usage"]["cost"]
            names = [c["name"] for c in ev["response"]["tool_calls"]]
            s["last"] = "model -> " + (", ".join(names) if names else "stops")
        elif t in ("step", "run_end"):
            s["tokens"] = ev["totals"]["total_tokens"]
            s["cost"] = ev["totals"]["cost"]
            s["evals"] = ev["totals"]["evals"]
        elif t == "tool_result":
            s["last"] = f"{ev['tool']}{' (error)' if ev['is_error'] else ''}"
        elif t == "harness_eval":
            s["evals"], s["best"] = ev["index"], ev["best"]
            gm = "-" if ev["geomean"] is None else f"{ev['geomean']:.3f}x"
            self.console.print(
                f"evaluation {ev['index']}: {ev['status']}, {ev['scenarios_correct']}/"
                f"{ev['scenarios_total']} correct, geomean {gm}{'  new best' if ev['new_best'] else ''}"
            )
        elif t == "question":
            self.console.print(
                f"[bold]question[/] ({ev['trigger']}, {ev['source']}"
                f"{' ' + ev['bank_id'] if ev['bank_id'] else ''}): {ev['text']}"
            )
        elif t == "retry":
            s["last"] = f"retry {ev['attempt']}: {ev['kind']}"
        elif t == "context":
            s["last"] = f"context compacted: {ev['tokens_before']} -> {ev['tokens_after']} tokens"
        elif t == "invocation":
            s["last"] = f"session {ev['session']}: {ev['stopped']}"
        elif t == "exit":
            s["last"] = f"exit: {ev['reason']}" + (f" ({ev['limit']})" if ev.get("limit") else "")
        if self.live:
            self.live.update(self._render())
