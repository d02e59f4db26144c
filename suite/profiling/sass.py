"""`cuobjdump --dump-sass` output, summarized per function: the instruction mix that matters for an
attention kernel (tensor-core MMAs, global, shared and local memory traffic, barriers, MUFU), the
registers the code names, and the hot inner loop: the innermost backward branch that holds math,
with its length and its own mix.

The counts are static (instructions in the binary, not instructions executed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from tabulate import tabulate

from ..build import without_parameters

# instruction classes, by the opcode before its first '.'
CLASSES: dict[str, tuple[str, ...]] = {
    "tensor": (
        "HGMMA",
        "IGMMA",
        "QGMMA",
        "BGMMA",
        "HMMA",
        "IMMA",
        "DMMA",
        "UTCHMMA",
        "UTCQMMA",
        "UTCIMMA",
        "UTCOMMA",
        "UTCMMA",
    ),
    "global_load": ("LDG",),
    "global_store": ("STG", "RED", "ATOMG"),
    "tma": ("UTMALDG", "UTMASTG", "UTMAPF", "UBLKCP", "UTMAREDG", "UBLKRED"),
    "async_copy": ("LDGSTS",),
    "shared_load": ("LDS", "LDSM"),
    "shared_store": ("STS", "STSM"),
    "local": ("LDL", "STL"),
    "barrier": ("BAR", "SYNCS", "WARPSYNC", "MEMBAR", "DEPBAR", "LDGDEPBAR", "ARRIVES", "WARPGROUP"),
    "mufu": ("MUFU",),
    "fp32": ("FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSETP", "FCHK"),
}
_CLASS_OF = {op: cls for cls, ops in CLASSES.items() for op in ops}
# what makes a loop "hot": it computes
MATH = ("tensor", "mufu", "fp32")

_FUNCTION = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+([^;]*?)\s*;")
_PRED = re.compile(r"^@!?U?P[T\d]+\s+")
_BRANCH_TARGET = re.compile(r"\b0x([0-9a-f]+)\s*$")
_REG = re.compile(r"\bR(\d+)\b")


@dataclass
class Instruction:
    address: int
    opcode: str  # the full mnemonic with modifiers, e.g. HGMMA.64x128x16.F32.BF16
    operands: str
    predicate: str = ""  # e.g. @!P0

    @property
    def predicated(self) -> bool:
        return bool(self.predicate)

    @property
    def op(self) -> str:
        return self.opcode.split(".", 1)[0]


@dataclass
class Loop:
    start: int  # address of the branch target
    end: int  # address of the backward branch
    instructions: int
    mix: dict[str, int]

    @property
    def math(self) -> int:
        return sum(self.mix.get(c, 0) for c in MATH)

    def contains(self, other: Loop) -> bool:
        return (
            self.start <= other.start and other.end <= self.end and (self.start, self.end) != (other.start, other.end)
        )


@dataclass
class FunctionSummary:
    name: str  # as cuobjdump prints it (mangled)
    display_name: str  # demangled when c++filt is available
    instructions: int  # NOP padding excluded
    mix: dict[str, int]
    opcodes: dict[str, int]  # every opcode (before its first '.'), by count
    registers_named: int  # highest R<n> used + 1 (ptxas's report is the authority on allocation)
    loops: int
    inner_loop: Loop | None
    tensor_shapes: dict[str, int] = field(default_factory=dict)  # e.g. HGMMA.64x128x16.F32.BF16: 16

    def to_dict(self) -> dict:
        return asdict(self)


def parse_functions(text: str) -> dict[str, list[Instruction]]:
    """Instructions of every function in the listing, in order."""
    funcs: dict[str, list[Instruction]] = {}
    cur: list[Instruction] | None = None
    for line in text.splitlines():
        m = _FUNCTION.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        if cur is None:
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        body = m.group(2).strip()
        pred = _PRED.match(body)
        if pred:
            body = body[pred.end() :]
        opcode, _, operands = body.partition(" ")
        cur.append(Instruction(int(m.group(1), 16), opcode, operands.strip(), pred.group(0).strip() if pred else ""))
    return funcs


def _mix(instrs: list[Instruction]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in instrs:
        cls = _CLASS_OF.get(i.op)
        if cls:
            out[cls] = out.get(cls, 0) + 1
    return out


def find_loops(instrs: list[Instruction]) -> list[Loop]:
    """Every backward branch, less two kinds that are not loops: a branch to itself (the trap at the
    end of a function) and an unconditional jump back from an out-of-line block (a slow path placed
    after the function's exits), recognized by an unconditional EXIT inside its range."""
    loops = []
    for i in instrs:
        if i.op != "BRA":
            continue
        m = _BRANCH_TARGET.search(i.operands)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < i.address:
            body = [x for x in instrs if target <= x.address <= i.address]
            if not i.predicated and any(x.op == "EXIT" and not x.predicated for x in body):
                continue
            loops.append(Loop(target, i.address, len(body), _mix(body)))
    return loops


def hot_loop(loops: list[Loop]) -> Loop | None:
    """The innermost loop that computes: among loops with math that hold no other such loop, the one
    with the most tensor-core instructions, then the most math."""
    working = [l for l in loops if l.math]
    inner = [l for l in working if not any(l.contains(o) for o in working)]
    if not inner:
        return None
    return max(inner, key=lambda l: (l.mix.get("tensor", 0), l.math, -l.instructions))


def summarize_function(name: str, instrs: list[Instruction], display_name: str | None = None) -> FunctionSummary:
    real = [i for i in instrs if i.op != "NOP"]
    opcodes: dict[str, int] = {}
    shapes: dict[str, int] = {}
    regs = -1
    for i in real:
        opcodes[i.op] = opcodes.get(i.op, 0) + 1
        if _CLASS_OF.get(i.op) == "tensor":
            shapes[i.opcode] = shapes.get(i.opcode, 0) + 1
        for r in _REG.findall(i.operands):
            regs = max(regs, int(r))
    loops = find_loops(real)
    return FunctionSummary(
        name, display_name or name, len(real), _mix(real), opcodes, regs + 1, len(loops), hot_loop(loops), shapes
    )


def demangle(names: list[str]) -> dict[str, str]:
    """Demangled names through c++filt when it is installed; the names as they are otherwise."""
    exe = shutil.which("c++filt")
    if not exe or not names:
        return {n: n for n in names}
    try:
        out = subprocess.run([exe], input="\n".join(names), capture_output=True, text=True, timeout=30).stdout
        lines = out.splitlines()
        if len(lines) == len(names):
            return dict(zip(names, lines))
    except (OSError, subprocess.SubprocessError):
        pass
    return {n: n for n in names}


def summarize(text: str) -> list[FunctionSummary]:
    funcs = parse_functions(text)
    names = demangle(list(funcs))
    return [summarize_function(n, instrs, names[n]) for n, instrs in funcs.items()]


# ---------------------------------------------------------------- the compact table

COLUMNS = (
    ("tensor", "MMA"),
    ("global_load", "LDG"),
    ("global_store", "STG"),
    ("tma", "TMA"),
    ("async_copy", "LDGSTS"),
    ("shared_load", "LDS/LDSM"),
    ("shared_store", "STS/STSM"),
    ("local", "LDL/STL"),
    ("barrier", "BAR/SYNCS"),
    ("mufu", "MUFU"),
    ("fp32", "FP32"),
)


def short_name(display: str, width: int = 48) -> str:
    """A function's name without its parameter list, cut to `width`."""
    base = without_parameters(display).removeprefix("void ")
    return base if len(base) <= width else base[: width - 3] + "..."


def table(summaries: list[FunctionSummary], resources: dict[str, dict] | None = None) -> str:
    """What the model reads. `resources` (mangled name -> registers, shared_bytes, spill_bytes) comes
    from ptxas's report when the tool built the kernel itself."""
    resources = resources or {}
    head = ["function", "instrs", "regs", "smem B", "spill B"] + [label for _, label in COLUMNS] + ["inner loop"]
    rows = []
    for s in summaries:
        res = resources.get(s.name, {})
        loop = s.inner_loop
        loop_txt = (
            "-"
            if loop is None
            else f"{loop.instructions} instrs, {loop.mix.get('tensor', 0)} MMA, {loop.mix.get('mufu', 0)} MUFU"
        )
        regs = res.get("registers")
        rows.append(
            [
                short_name(s.display_name),
                s.instructions,
                regs if regs is not None else f"{s.registers_named} named",
                res.get("shared_bytes", "-"),
                res.get("spill_bytes", "-"),
            ]
            + [s.mix.get(cls, 0) for cls, _ in COLUMNS]
            + [loop_txt]
        )
    out = [tabulate(rows, head, tablefmt="simple")]
    for s in summaries:
        if s.tensor_shapes:
            out.append(f"{short_name(s.display_name)}: " + ", ".join(f"{k} x{v}" for k, v in s.tensor_shapes.items()))
    out.append(
        "counts are static (instructions in the binary); 'inner loop' is the innermost backward branch "
        "that holds math, with its length in instructions"
    )
    return "\n".join(out)
