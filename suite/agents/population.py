"""The population of the tool-rich arm: every evaluated candidate gets an id (`c<evaluation index>`),
its parents and a generation; the best k correct ones form the population. The model checks a member
out into the workspace, mutates it or recombines it with others, and evaluates the child. The
lineage goes into the trace with each evaluation (`harness_eval.meta`) and an `x-population` event
after it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import partial

from .context import RunContext
from .exceptions import ToolError
from .tools import Tool, ToolResult, evaluation_text


@dataclass
class Member:
    id: str
    eval_index: int
    sha256: str
    status: str
    correct: bool
    geomean: float | None
    generation: int
    parents: list[str]
    operator: str  # seed (no parent), mutate (one), recombine (several)
    step: int
    note: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        gm = "-" if self.geomean is None else f"{self.geomean:.3f}x"
        origin = "seed" if not self.parents else f"{self.operator} of {'+'.join(self.parents)}"
        return f"{self.id}: {gm} {self.status}, generation {self.generation}, {origin}" + (
            f" - {self.note}" if self.note else ""
        )


@dataclass
class Population:
    size: int = 4
    members: dict[str, Member] = field(default_factory=dict)  # every evaluated candidate, by id
    workspace_parents: list[str] = field(default_factory=list)  # what the workspace kernel descends from
    looked_at: list[str] = field(default_factory=list)  # members checked out beside it since

    def top(self) -> list[Member]:
        ok = [m for m in self.members.values() if m.correct and m.geomean is not None]
        return sorted(ok, key=lambda m: (-m.geomean, m.eval_index))[: self.size]

    def get(self, member_id: str) -> Member:
        m = self.members.get(member_id)
        if m is None:
            known = ", ".join(m.id for m in self.top()) or "none yet"
            raise ToolError(f"no candidate {member_id!r}; the population is: {known}")
        return m

    def by_eval(self, index: int) -> Member | None:
        return self.members.get(f"c{index}")

    def latest(self) -> Member | None:
        return max(self.members.values(), key=lambda m: m.eval_index, default=None)

    def lineage_for(self, parents: list[str] | None) -> tuple[list[str], int, str]:
        """The parents (given, or what the workspace descends from), the generation and the operator."""
        if parents is None:
            parents = list(dict.fromkeys(self.workspace_parents + self.looked_at))
        for p in parents:
            self.get(p)
        gen = 1 + max((self.members[p].generation for p in parents), default=-1)
        return parents, gen, "seed" if not parents else "mutate" if len(parents) == 1 else "recombine"

    def add(self, member: Member) -> bool:
        """Records an evaluated candidate; True when it is in the top k now."""
        self.members[member.id] = member
        self.workspace_parents, self.looked_at = [member.id], []
        return member in self.top()

    def table(self) -> str:
        top = self.top()
        if not top:
            return "population: empty (no correct candidate yet)"
        return f"population (best {self.size} correct):\n" + "\n".join(f"  {m.line()}" for m in top)

    def state(self) -> dict:
        return {
            "size": self.size,
            "members": [m.to_dict() for m in self.members.values()],
            "workspace_parents": self.workspace_parents,
            "looked_at": self.looked_at,
        }

    def load_state(self, state: dict) -> None:
        self.size = state["size"]
        self.members = {m["id"]: Member(**m) for m in state["members"]}
        self.workspace_parents, self.looked_at = list(state["workspace_parents"]), list(state["looked_at"])


def _show(pop: Population, args: dict, ctx: RunContext) -> ToolResult:
    lines = [pop.table()]
    if pop.workspace_parents or pop.looked_at:
        lines.append(
            f"the workspace kernel descends from: {', '.join(pop.workspace_parents) or '-'}"
            + (f"; also checked out: {', '.join(pop.looked_at)}" if pop.looked_at else "")
        )
    return ToolResult("\n".join(lines), data={"top": [m.id for m in pop.top()]})


def _checkout(pop: Population, args: dict, ctx: RunContext) -> ToolResult:
    m = pop.get(args["id"])
    target = args.get("path") or ctx.task.kernel
    path = ctx.workspace.resolve(target)
    data = ctx.trace.get_blob(m.sha256)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    rel = ctx.workspace.relative(path)
    if rel == ctx.task.kernel:
        pop.workspace_parents, pop.looked_at = [m.id], []
        role = "the kernel that the next evaluation judges"
    else:
        pop.looked_at = list(dict.fromkeys(pop.looked_at + [m.id]))
        role = "beside the kernel, to recombine from"
    return ToolResult(f"{m.id} ({m.line()}) written to {rel}: {role}", data={"id": m.id, "path": rel})


def _evaluate(pop: Population, args: dict, ctx: RunContext) -> ToolResult:
    parents, gen, operator = pop.lineage_for(args.get("parents"))
    index = ctx.totals.evals + 1
    note = args.get("note")
    meta = {"candidate_id": f"c{index}", "parents": parents, "generation": gen, "operator": operator, "note": note}
    rec = ctx.evaluate(meta=meta)
    ev = rec.evaluation
    member = Member(
        f"c{rec.index}",
        rec.index,
        rec.candidate_sha256,
        ev.status,
        ev.correct,
        ev.geomean,
        gen,
        parents,
        operator,
        rec.step,
        note,
    )
    admitted = pop.add(member)
    ctx.trace.emit(
        "x-population",
        candidate_id=member.id,
        admitted=admitted,
        top=[{"id": m.id, "geomean": m.geomean, "generation": m.generation} for m in pop.top()],
    )
    text = [
        evaluation_text(rec, ctx),
        f"candidate {member.line()}"
        + ("" if admitted or not ev.correct else " (not among the best; not kept in the population)"),
        pop.table(),
    ]
    if ev.status not in ("no_gpu", "error"):  # nothing was learned about the candidate
        text.append("Record what this evaluation taught you with record_lesson.")
    return ToolResult(
        "\n".join(text),
        is_error=not ev.correct,
        data={
            "eval_index": rec.index,
            "status": ev.status,
            "candidate_id": member.id,
            "parents": parents,
            "generation": gen,
            "admitted": admitted,
        },
    )


_CANDIDATE_ID = {"type": "string", "pattern": "^c[0-9]+$"}

_SHOW_PARAMS = {"type": "object", "properties": {}, "additionalProperties": False}

_CHECKOUT_PARAMS = {
    "type": "object",
    "properties": {"id": _CANDIDATE_ID, "path": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}

_EVALUATE_PARAMS = {
    "type": "object",
    "properties": {
        "parents": {
            "type": "array",
            "items": _CANDIDATE_ID,
            "uniqueItems": True,
            "description": "the candidates this one was made from (default: the one the kernel "
            "descends from and any checked out beside it)",
        },
        "note": {"type": "string", "maxLength": 300, "description": "what was changed"},
    },
    "additionalProperties": False,
}


def tools(pop: Population) -> list[Tool]:
    return [
        Tool(
            "population",
            "Show the population: the best correct candidates evaluated so far, with their speed-up, "
            "generation and parents.",
            _SHOW_PARAMS,
            partial(_show, pop),
        ),
        Tool(
            "checkout",
            "Write a candidate of the population into the workspace: into the kernel file (default) to "
            "mutate it, or into another file to recombine parts of it with the kernel.",
            _CHECKOUT_PARAMS,
            partial(_checkout, pop),
        ),
        Tool(
            "evaluate",
            "Run the task's evaluator on the workspace's kernel (correctness on every scenario, then "
            "speed against the baseline) and add it to the population as a child of its parents. Uses one "
            "evaluation of the budget.",
            _EVALUATE_PARAMS,
            partial(_evaluate, pop),
        ),
    ]
