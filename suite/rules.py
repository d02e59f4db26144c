"""The dependency-free rule, checked statically on a kernel's source.

A kernel is one file using the CUDA runtime/driver API and inline PTX only: no CUTLASS, CuTe,
cuBLAS, cuDNN, ThunderKittens, CUB/Thrust or other library, no local includes, no loading of
libraries at run time, no host-side streams or threads of its own (work must run on the stream
the harness passes).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ALLOWED_INCLUDES = frozenset({
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda_bf16.h", "cuda_fp16.h",
    "cudaTypedefs.h", "vector_types.h", "device_launch_parameters.h",
    "stdint.h", "stddef.h", "stdio.h", "stdlib.h", "string.h", "math.h", "float.h", "limits.h",
    "assert.h", "cstdint", "cstddef", "cstdio", "cstdlib", "cstring", "cmath", "cfloat", "climits",
    "cassert", "type_traits", "utility", "algorithm",
})

# (pattern, what it is) -- searched in the source with comments and strings removed
FORBIDDEN_CODE = (
    (r"\bcublas\w*", "cuBLAS"),
    (r"\bcudnn\w*", "cuDNN"),
    (r"\bcutlass::", "CUTLASS"),
    (r"\bcute::", "CuTe"),
    (r"\bkittens::", "ThunderKittens"),
    (r"\bthrust::", "Thrust"),
    (r"\bcub::", "CUB"),
    (r"\bnvcuda::wmma\b|\bwmma::", "the WMMA library (use inline PTX)"),
    (r"\bdlopen\s*\(|\bdlsym\s*\(|\bLoadLibrary\w*\s*\(", "loading a library at run time"),
    (r"\bcudaStreamCreate\w*\s*\(|\bcuStreamCreate\w*\s*\(", "creating a stream (run on the stream passed in)"),
    (r"\bstd::thread\b|\bpthread_create\s*\(|\bstd::async\s*\(", "creating a host thread"),
    (r"#\s*pragma\s+comment\s*\(\s*lib", "linking a library"),
    (r"\bcudaGraphLaunch\s*\(|\bcudaLaunchHostFunc\s*\(", "deferred host-side launches"),
)


@dataclass(frozen=True)
class Violation:
    line: int
    rule: str
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}: {self.text.strip()}"


class DependencyRuleError(ValueError):
    def __init__(self, path: str, violations: list[Violation]):
        self.path, self.violations = path, violations
        lines = "\n  ".join(str(v) for v in violations)
        super().__init__(f"{path} breaks the dependency-free rule (CUDA runtime/driver API and inline "
                         f"PTX only, one file):\n  {lines}")


def _strip_comments_and_strings(src: str) -> str:
    """Blank out comments and string literals (keeping newlines) so line numbers stay true."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j])); i = j
        elif c == '"' and not _inside_include(src, i):
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('"' + " " * max(0, min(j, n) - i - 1) + '"'); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def _inside_include(src: str, i: int) -> bool:
    line_start = src.rfind("\n", 0, i) + 1
    return re.match(r"\s*#\s*include\b", src[line_start:i]) is not None


def check_source(source: str, path: str = "<kernel>") -> list[Violation]:
    clean = _strip_comments_and_strings(source)
    violations: list[Violation] = []
    lines = clean.splitlines()
    raw_lines = source.splitlines()
    for no, line in enumerate(lines, 1):
        m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
        if m:
            kind, name = m.group(1), m.group(2).strip()
            if kind == '"':
                violations.append(Violation(no, "local include (the kernel must be one file)", raw_lines[no - 1]))
            elif name not in ALLOWED_INCLUDES:
                violations.append(Violation(no, f"include <{name}> is not a CUDA runtime/driver or C/C++ "
                                                "standard header", raw_lines[no - 1]))
            continue
        for pat, what in FORBIDDEN_CODE:
            if re.search(pat, line):
                violations.append(Violation(no, what, raw_lines[no - 1]))
    return violations


def enforce(path: str | Path) -> None:
    p = Path(path)
    violations = check_source(p.read_text(), str(p))
    if violations:
        raise DependencyRuleError(str(p), violations)
