"""The dependency-free rule, checked statically on a kernel's source.

A kernel is one file using the CUDA runtime/driver API and inline PTX only: no CUTLASS, CuTe,
cuBLAS, cuDNN, ThunderKittens, CUB/Thrust or other library, no local includes, no loading of
libraries at run time, no host-side streams or threads of its own (work must run on the stream
the harness passes), and no reaching into the process that loads it (the Python interpreter, files,
processes, the environment, code run at load time).

The source is checked with comments and string literals blanked out, so that neither hides nor
fakes a violation; a few patterns that only make sense inside strings (inline host assembly, paths)
are searched with the strings kept. A determined author can still disguise a call (token pasting,
function pointers); the build's symbol check (build.py) and the run-time defences of the harness
are the next lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ALLOWED_INCLUDES = frozenset(
    {
        "cuda.h",
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "cuda_bf16.h",
        "cuda_fp16.h",
        "cudaTypedefs.h",
        "vector_types.h",
        "device_launch_parameters.h",
        "stdint.h",
        "stddef.h",
        "stdio.h",
        "stdlib.h",
        "string.h",
        "math.h",
        "float.h",
        "limits.h",
        "assert.h",
        "cstdint",
        "cstddef",
        "cstdio",
        "cstdlib",
        "cstring",
        "cmath",
        "cfloat",
        "climits",
        "cassert",
        "type_traits",
        "utility",
        "algorithm",
    }
)

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
    (
        r"\b_*(libc_)?dl(open|mopen|sym|vsym|info|close)(_mode)?\b|\bLoadLibrary\w*\s*\(",
        "loading a library at run time",
    ),
    (r"\bcudaStreamCreate\w*\s*\(|\bcuStreamCreate\w*\s*\(", "creating a stream (run on the stream passed in)"),
    (
        r"\bcudaStreamPerThread\b|\bcudaStreamLegacy\b|\bCU_STREAM_PER_THREAD\b|\bCU_STREAM_LEGACY\b",
        "a stream other than the one passed in",
    ),
    (
        r"\bstd::j?thread\b|\bpthread_create\s*\(|\bstd::async\s*\(|\bthrd_create\s*\(|\bclone\s*\(",
        "creating a host thread",
    ),
    (r"#\s*pragma\s+comment\s*\(\s*lib", "linking a library"),
    (
        r"\bcudaGraph\w*|\bcuGraph\w*|\bcudaStreamBeginCapture\w*|\bcudaLaunchHostFunc\s*\(|\bcuLaunchHostFunc\s*\(",
        "deferred host-side launches (graphs, host functions)",
    ),
    (r"\b_?Py[A-Z_]\w*", "the Python C API (a kernel must not reach into the process that loads it)"),
    (r"\b(system|popen|v?fork|posix_spawnp?|exec[lv]p?e?)\s*\(", "starting a process"),
    (r"\b(fopen|freopen|fdopen|tmpfile|remove|rename|unlink|open|openat|creat)\s*\(", "file access from the kernel"),
    (
        r"\b(exit|_exit|_Exit|quick_exit|abort|atexit|at_quick_exit)\s*\(",
        "ending the process (return a KS_ERR_* code instead)",
    ),
    (r"\b(getenv|secure_getenv|setenv|putenv|unsetenv)\s*\(", "reading or changing the environment"),
    (r"__attribute__\s*\(\(\s*(constructor|destructor)\b", "code that runs when the library is loaded"),
    (
        r"\b(syscall|signal|sigaction|raise|kill|ptrace|mmap|mprotect|dup2?|setrlimit|prctl)\s*\(",
        "process-level system calls",
    ),
    (
        r"\bcudaDeviceReset\s*\(|\bcudaSetDevice\s*\(|\bcuCtx(Create|Destroy|SetCurrent|PushCurrent)\w*",
        "changing, resetting or creating device contexts",
    ),
)

# searched with comments removed but strings kept: things that only live in strings
FORBIDDEN_TEXT = (
    (r"\bsyscall\b|\bint\s+\$?0x80\b|\bsysenter\b", "a system call in inline host assembly"),
    (r"\.incbin\b", "embedding a prebuilt binary"),
    (r"/proc/|/dev/shm|LD_PRELOAD", "reaching into the process or system"),
    (
        r"^\s*(#|%:)\s*(line\b|\d+\s*(\"|$))",
        "a line directive or line marker (the build checks the kernel's own "
        "lines of the preprocessed code; this would give them another file's name)",
    ),
)

_INCLUDE_RE = re.compile(r"\s*(?:#|%:)\s*include(_next)?\b(.*)")
_INCLUDE_OK_RE = re.compile(r'\s*([<"])([^>"]+)[>"]\s*$')
_CHAR_RE = re.compile(r"'(?:\\(?:x[0-9A-Fa-f]+|[0-7]{1,3}|.)|[^\\'\n])'")


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
        super().__init__(
            f"{path} breaks the dependency-free rule (CUDA runtime/driver API and inline "
            f"PTX only, one file):\n  {lines}"
        )


def _blank(text: str) -> str:
    return "".join(ch if ch == "\n" else " " for ch in text)


def _blank_quoted(literal: str) -> str:
    """A string literal blanked inside its quotes (an unterminated one after its opening quote)."""
    if len(literal) >= 2 and literal.endswith('"'):
        return '"' + _blank(literal[1:-1]) + '"'
    return '"' + _blank(literal[1:])


def _strip(src: str, strings: bool) -> str:
    """Blank out comments (and string and character literals when `strings`), keeping newlines so
    line numbers stay true. Literals are recognised as the compiler does, so that a quote inside a
    character literal ('"') cannot open a fake string that hides code."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_blank(src[i:j]))
            i = j
        elif c == "'":
            m = _CHAR_RE.match(src, i)
            if m:  # a character literal; otherwise a digit separator (1'000)
                out.append(("'" + " " * (len(m.group(0)) - 2) + "'") if strings else m.group(0))
                i = m.end()
            else:
                out.append(c)
                i += 1
        elif c == '"' and not _inside_include(src, i):
            raw = re.match(r'R"([^()\\\s]{0,16})\(', src[i - 1 : i + 20]) if i > 0 and src[i - 1] == "R" else None
            if raw:  # raw string literal R"delim( ... )delim"
                end = src.find(")" + raw.group(1) + '"', i)
                j = n if end < 0 else end + len(raw.group(1)) + 2
            else:
                j = i + 1
                while j < n and src[j] != '"' and src[j] != "\n":
                    j += 2 if src[j] == "\\" else 1
                j = min(j, n)
                if j < n and src[j] == '"':
                    j += 1  # the closing quote (a string cut off by the line's end leaves the newline alone)
            out.append(_blank_quoted(src[i:j]) if strings else src[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _inside_include(src: str, i: int) -> bool:
    line_start = src.rfind("\n", 0, i) + 1
    return re.match(r"\s*(#|%:)\s*include(_next)?\b", src[line_start:i]) is not None


_TEMPLATE_OPEN_RE = re.compile(r"\w\s*(<)(?![<=])")  # a `<` after a name, not `<<` or `<=`
_TEMPLATE_CLOSE_RE = re.compile(r"(?<!-)>(?!=)")  # a `>` that is not `->` or `>=`


def _template_brackets(config: str) -> tuple[set[int], set[int]]:
    """Where the `<`s and `>`s of template argument lists are in a launch configuration
    (`G<1, 2>::x`): a `<` right after a name that a `>` closes inside the same brackets. Any other
    `<` or `>` is an operator (`a < b`, `a << b`, `p->x`). A comparison that reads like a template
    (`a < b, c > d`) is taken for one: its commas are not counted, and a launch that needs them to
    reach four arguments is refused (parentheses around the comparison make it clear)."""
    maybe = {m.start(1) for m in _TEMPLATE_OPEN_RE.finditer(config)}
    closes = {m.start() for m in _TEMPLATE_CLOSE_RE.finditer(config)}
    opened: set[int] = set()
    closed: set[int] = set()
    stack: list[int] = []  # where the open brackets and `<`s are, innermost last
    for i, ch in enumerate(config):
        if ch in "([{" or i in maybe:
            stack.append(i)
        elif ch in ")]}":
            while stack and stack.pop() in maybe:
                pass  # a `<` still open at a closing bracket was a less-than
        elif i in closes and stack and stack[-1] in maybe:
            opened.add(stack.pop())
            closed.add(i)
    return opened, closed


def _launch_args(config: str) -> int:
    """How many arguments a <<<...>>> launch configuration has: its commas outside brackets and
    outside template argument lists."""
    opened, closed = _template_brackets(config)
    depth, count = 0, 1
    for i, ch in enumerate(config):
        if ch in "([{" or i in opened:
            depth += 1
        elif ch in ")]}" or i in closed:
            depth -= 1
        elif ch == "," and depth == 0:
            count += 1
    return count if config.strip() else 0


def _launch_violations(clean: str, raw_lines: list[str]) -> list[Violation]:
    found = []
    for m in re.finditer(r"<<<(.*?)>>>", clean, flags=re.S):
        if _launch_args(m.group(1)) < 4:
            no = clean.count("\n", 0, m.start()) + 1
            found.append(
                Violation(
                    no,
                    "a kernel launch without the stream passed in (use <<<grid, block, smem, stream>>>)",
                    raw_lines[no - 1],
                )
            )
    return found


def check_source(source: str, path: str = "<kernel>") -> list[Violation]:
    clean = _strip(source, strings=True)
    text = _strip(source, strings=False)
    violations: list[Violation] = []
    lines = clean.splitlines()
    text_lines = text.splitlines()
    raw_lines = source.splitlines()
    for no, line in enumerate(lines, 1):
        m = _INCLUDE_RE.match(line)
        if m:
            ok = _INCLUDE_OK_RE.match(m.group(2))
            if m.group(1) or not ok:
                violations.append(
                    Violation(
                        no, "an include that is not a plain <header> (computed or #include_next)", raw_lines[no - 1]
                    )
                )
            elif ok.group(1) == '"':
                violations.append(Violation(no, "local include (the kernel must be one file)", raw_lines[no - 1]))
            elif ok.group(2).strip() not in ALLOWED_INCLUDES:
                violations.append(
                    Violation(
                        no,
                        f"include <{ok.group(2).strip()}> is not a CUDA runtime/driver or C/C++ standard header",
                        raw_lines[no - 1],
                    )
                )
            continue
        for pat, what in FORBIDDEN_CODE:
            if re.search(pat, line):
                violations.append(Violation(no, what, raw_lines[no - 1]))
        for pat, what in FORBIDDEN_TEXT:
            if no <= len(text_lines) and re.search(pat, text_lines[no - 1]):
                violations.append(Violation(no, what, raw_lines[no - 1]))
    violations += _launch_violations(clean, raw_lines)
    return sorted(violations, key=lambda v: v.line)


def enforce_text(source: str, path: str) -> None:
    violations = check_source(source, path)
    if violations:
        raise DependencyRuleError(path, violations)


def enforce(path: str | Path) -> None:
    p = Path(path)
    enforce_text(p.read_text(), str(p))
