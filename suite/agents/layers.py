"""The layers of the system a kernel optimization can work in, and a keyword classifier that says
which layers a step touched: from the lines its edits changed (added or removed, in any file, by any
tool or command), so that rewriting a whole file counts only what changed in it; from its commands
and text when it changed no file.

The layer ids are part of two contracts: the question bank's `layers` tags and the trace's `step`
events. The classifier is a heuristic; it is recorded with every step so that later analysis can
re-score a run without re-running it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    id: str
    title: str
    pattern: re.Pattern


def _words(*words: str) -> re.Pattern:
    return re.compile("|".join(words), re.IGNORECASE)


LAYERS: tuple[Layer, ...] = (
    Layer(
        "algorithm",
        "algorithm",
        _words(
            r"online softmax",
            r"\balgorithm",
            r"\bcausal\b",
            r"\bmask",
            r"\bskip\w*",
            r"\bflash\b",
            r"\btiling\b",
            r"recompute",
            r"rescal\w*",
            r"\bblocked\b",
            r"\bcomplexity\b",
        ),
    ),
    Layer(
        "decomposition",
        "work decomposition and scheduling",
        _words(
            r"blockIdx",
            r"gridDim",
            r"\bgrid\b",
            r"\bsplit\w*",
            r"\bpersistent\b",
            r"schedul\w*",
            r"\bBLOCK_[MN]\b",
            r"tile size",
            r"\bwarp.?speciali[sz]\w*",
            r"\bproducer\b",
            r"\bconsumer\b",
            r"load.?balanc\w*",
            r"\bpartition\w*",
            r"\bparallel\w*",
            r"\bthreads? per\b",
            r"\bpack.?gqa\b",
        ),
    ),
    Layer(
        "memory",
        "memory hierarchy and pipeline",
        _words(
            r"__shared__",
            r"\bsmem\b",
            r"shared memory",
            r"\bTMA\b",
            r"cp\.async",
            r"\bmbarrier\b",
            r"\bstages?\b",
            r"prefetch\w*",
            r"\bcache\w*",
            r"\bL[12]\b",
            r"ldmatrix",
            r"stmatrix",
            r"coalesc\w*",
            r"\bswizzl\w*",
            r"\bbandwidth\b",
            r"\bmemcpy\b",
            r"\bstride\w*",
            r"loop order",
            r"locality",
            r"\bpipelin\w*",
        ),
    ),
    Layer(
        "instructions",
        "instruction selection / SASS",
        _words(
            r"\bwgmma\b",
            r"\bmma\b",
            r"\basm\b",
            r"\bptx\b",
            r"\bsass\b",
            r"\bexp2f?\b",
            r"\bfma\w*",
            r"\bsimd\b",
            r"vectori[sz]\w*",
            r"#pragma\s+(unroll|GCC)",
            r"__restrict__|\brestrict\b",
            r"intrinsic\w*",
            r"\bavx\w*",
            r"\bsse\d*\b",
            r"\bcuobjdump\b",
            r"\bMUFU\b",
            r"__builtin_\w+",
            r"\bunroll\w*",
        ),
    ),
    Layer(
        "registers",
        "registers and occupancy",
        _words(
            r"__launch_bounds__",
            r"setmaxnreg",
            r"\bregisters?\b",
            r"\boccupancy\b",
            r"\bspill\w*",
            r"maxrregcount",
            r"register pressure",
        ),
    ),
    Layer(
        "synchronization",
        "synchronization",
        _words(
            r"__syncthreads",
            r"__syncwarp",
            r"\bbarriers?\b",
            r"\bfence\w*",
            r"\batomic\w*",
            r"bar\.sync",
            r"named barrier",
            r"\bwait_group\b",
            r"commit_group",
            r"\bmutex\b",
            r"\block\b",
        ),
    ),
    Layer(
        "launch",
        "launch and host",
        _words(
            r"<<<",
            r"cudaLaunch\w*",
            r"\bstreams?\b",
            r"\bhost\b",
            r"\bmalloc\b",
            r"cudaMalloc\w*",
            r"\bfree\(",
            r"cudaFuncSetAttribute",
            r"tensor ?map",
            r"\blaunch\w*",
            r"\bcluster\w*",
        ),
    ),
    Layer(
        "measurement",
        "measurement",
        _words(
            r"\bbenchmark\w*",
            r"\bprofil\w*",
            r"\bncu\b",
            r"\bnsys\b",
            r"\btim(e|ing|er)s?\b",
            r"\bclock\w*",
            r"\bmedian\b",
            r"\bvariance\b",
            r"\bnoise\b",
            r"\bgeomean\b",
            r"\bperf\b",
            r"\bcounters?\b",
        ),
    ),
    Layer(
        "numerics",
        "numerics",
        _words(
            r"\bbf16\b",
            r"\bfp16\b",
            r"\bfp32\b",
            r"\bfloat\b",
            r"\bdouble\b",
            r"precision",
            r"\bnan\b",
            r"-inf\b",
            r"\binf\b",
            r"overflow",
            r"underflow",
            r"\btolerance\b",
            r"round\w*",
            r"\bexpf?\b",
            r"\blog2?\b",
            r"\bscale\b",
        ),
    ),
)

LAYER_IDS: tuple[str, ...] = tuple(layer.id for layer in LAYERS)


def scores(text: str) -> dict[str, int]:
    """How many keyword hits each layer has in `text` (layers with none are left out)."""
    out = {}
    for layer in LAYERS:
        n = len(layer.pattern.findall(text))
        if n:
            out[layer.id] = n
    return out


def dominant(layer_scores: dict[str, int]) -> str | None:
    """The layer with the most hits; ties go to the layer listed first; None when nothing matched."""
    if not layer_scores:
        return None
    best = max(layer_scores.values())
    return next(lid for lid in LAYER_IDS if layer_scores.get(lid) == best)


DIFF_MAX_FILE = 1 << 20  # larger files are not diffed for the layer of an edit


def diffable_files(files: dict) -> dict[str, bytes]:
    """The contents of the files ({path: Path}) small enough to diff."""
    return {rel: p.read_bytes() for rel, p in files.items() if p.stat().st_size <= DIFF_MAX_FILE}


def changed_lines(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The lines added or removed between two snapshots of the workspace ({path: content}), over every
    file created, changed or deleted; files that are not text are left out."""
    lines: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        try:
            a = (old or b"").decode("utf-8").splitlines()
            b = (new or b"").decode("utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        lines += [
            d[1:]
            for d in difflib.unified_diff(a, b, lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))
        ]
    return lines


def step_scores(before: dict[str, bytes], after: dict[str, bytes], other_text: str) -> dict[str, int]:
    """A step's layer scores: from the lines it changed, or from `other_text` (its commands and what it
    wrote) when it changed none."""
    changed = changed_lines(before, after)
    return scores("\n".join(changed) if changed else other_text)
