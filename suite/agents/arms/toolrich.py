"""`toolrich`: the baseline in the prevailing style of kernel agents. The same model client, loop,
limits, task and evaluator as KernelSeek, no questions, and the equipment, each a tool:
`profile` (Nsight Compute), `disassemble` (SASS summary), `search_docs` (BM25 over a documents
folder), `record_lesson` (a SQLite lessons store whose relevant entries come back into the prompt
after each evaluation), and a population (`population`, `checkout`, and an `evaluate` that records
each child's parents and generation).

Like KernelSeek it holds the model to the goal while budget remains (arm option `enforce_goal`), so
the two arms differ in the questions and the equipment only; the refusal carries no question.

Arm options (`--agent-opt KEY=VALUE`): population_size (4), lessons_k (3), docs (folders or files
that replace the default documents), docs_extra (added to them), profile_scenario
(d128-h16kv16-s4096), ncu, cuobjdump (paths), profile_timeout_s (600), disassemble_timeout_s (300),
enforce_goal (true).
"""

from __future__ import annotations

from pathlib import Path

from .. import lessons as lessons_mod
from .. import population as population_mod
from ..context import RunContext
from ..profiler_tools import disassemble_tool, find_executable, profile_tool
from ..retrieval import DocIndex, default_sources, refuse_answers, search_tool
from ..tools import base_tools
from . import ArmParts, check_options, register_arm

OPTIONS = {
    "population_size": 4,
    "lessons_k": 3,
    "docs": None,
    "docs_extra": (),
    "profile_scenario": None,
    "ncu": None,
    "cuobjdump": None,
    "profile_timeout_s": 600,
    "disassemble_timeout_s": 300,
    "enforce_goal": True,
}

SYSTEM_ADDENDUM = """\

You also have the equipment of a kernel engineer, each a tool:
- profile: Nsight Compute on the kernel for one scenario (throughputs, occupancy, stalls, registers);
- disassemble: the kernel's SASS summarized (instruction mix, registers, spills, inner loop length);
- search_docs: search the documents (the suite's contract docs, and guides);
- record_lesson: after each evaluation, record what it taught you; relevant lessons come back later;
- population and checkout: the best candidates so far; mutate one or recombine several in the \
workspace, and evaluate the child (evaluate takes its parents)."""

REFUSAL = "The run is not over: the goal ({goal}) is not met yet (best so far: {best}) and budget remains. Continue."


class ToolRichSupervisor:
    """Holds the model to the goal and brings relevant lessons back after each evaluation."""

    def __init__(
        self, population: population_mod.Population, store: lessons_mod.LessonStore, k: int, enforce_goal: bool
    ):
        self.population, self.store, self.k, self.enforce_goal = population, store, k, enforce_goal
        self.last_shown: list[int] = []
        self.since_eval: list[str] = []  # what the steps since the last evaluation wrote and ran

    def on_stop(self, ctx: RunContext, response) -> str | None:
        if ctx.goal_met or not self.enforce_goal:
            return None
        best = f"{ctx.best.geomean:.3f}x" if ctx.best else "no correct evaluation yet"
        ctx.trace.emit("x-stop-refused", best=best, goal=ctx.task.goal.text(), budget_left=ctx.budget_left())
        return REFUSAL.format(goal=ctx.task.goal.text(), best=best)

    def after_step(self, ctx: RunContext, step) -> list[str]:
        self.since_eval = (self.since_eval + [_step_text(step)])[-8:]
        if not step.evals:
            return []
        query, self.since_eval = "\n".join(self.since_eval), []
        recorded_now = {l.id for l in self.store.all() if l.step == step.step}
        hits = self.store.relevant(query, self.k, exclude=recorded_now)
        ids = [l.id for l in hits]
        if not hits or ids == self.last_shown:
            return []
        self.last_shown = ids
        ctx.trace.emit("x-lessons", lesson_ids=ids)
        return [
            "Lessons recorded earlier in this run that may bear on this:\n" + "\n".join(f"- {l.line()}" for l in hits)
        ]

    def state(self) -> dict:
        return {
            "population": self.population.state(),
            "lessons_last_id": self.store.last_id(),
            "last_shown": self.last_shown,
        }

    def load_state(self, state: dict) -> None:
        # lessons written after the checkpoint belong to a step that is being redone
        self.store.drop_after(state.get("lessons_last_id", 0) if state else 0)
        if state:
            self.population.load_state(state["population"])
            self.last_shown = list(state.get("last_shown", []))


def _step_text(step) -> str:
    parts = [step.response.content or ""]
    for call, result in step.results:
        if call.name == "evaluate":
            parts.append(result.output[:600])
        elif call.name == "edit_file" and result.data:
            parts.append(str(result.data.get("added", ""))[:2000])
        elif call.name == "shell":
            parts.append(str(call.arguments.get("command", "")))
    return "\n".join(parts)


def options_of(ctx: RunContext) -> dict:
    return check_options("toolrich", dict(ctx.config.arm_options))


def _paths(value) -> list[Path]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    return [Path(p).expanduser() for p in items]


@register_arm("toolrich", options=OPTIONS)
def build(ctx: RunContext) -> ArmParts:
    opts = options_of(ctx)
    if SYSTEM_ADDENDUM not in ctx.config.system_prompt:  # a resumed run's config has it already
        ctx.config.system_prompt += SYSTEM_ADDENDUM
    sources = (_paths(opts["docs"]) if opts["docs"] is not None else default_sources()) + _paths(opts["docs_extra"])
    refuse_answers(sources)
    index = DocIndex(sources)
    ctx.workspace.allow_read([s for s in sources if s.exists()])  # the shell reads the same documents
    population = population_mod.Population(int(opts["population_size"]))
    store = lessons_mod.LessonStore(ctx.trace.artifacts / "lessons.sqlite")
    ctx.finalizers.append(store.close)
    registry = base_tools()
    pop_tools = {t.name: t for t in population_mod.tools(population)}
    registry.add(pop_tools.pop("evaluate"), replace=True)  # the same evaluator, with lineage
    for tool in (
        profile_tool(opts),
        disassemble_tool(opts),
        search_tool(index),
        lessons_mod.record_tool(store, population),
        *pop_tools.values(),
    ):
        registry.add(tool)
    info = {
        "toolrich": {
            "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()},
            "docs": index.describe(),
            "lessons": str(store.path.relative_to(ctx.trace.artifacts.parent)),
            "executables": {
                "ncu": find_executable("ncu", opts["ncu"]),
                "cuobjdump": find_executable("cuobjdump", opts["cuobjdump"]),
            },
        }
    }
    return ArmParts(
        registry, ToolRichSupervisor(population, store, int(opts["lessons_k"]), bool(opts["enforce_goal"])), info
    )
