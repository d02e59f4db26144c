"""Build a single-file kernel into a shared library with nvcc, cached by source hash, flags and
nvcc version. No GPU is needed. ptxas's resource report is parsed; ptxas warnings C7515/C7519/C7511
fail the build.

The source is read once: the rules are checked on those bytes and nvcc compiles a private copy of
them, so the file cannot be swapped between the check and the compile. What the compiled code imports
and runs at load time is checked against an allow-list, and the library's own imports too
(imports.py). So are its exports: the contract's three C functions, read from the library's dynamic
symbols (`check_exports`), never by loading it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import config, contract, imports, rules


class BuildError(RuntimeError):
    """The kernel did not build; the message holds the compiler's own words."""


class ContractError(BuildError):
    """The kernel builds, but its library does not export what the contract asks for."""


@dataclass
class FunctionResources:
    name: str
    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0


@dataclass
class BuildResult:
    source: str
    source_sha256: str
    arch: str
    library: str
    ptx: str | None
    nvcc_version: str
    flags: list[str]
    cached: bool
    functions: list[FunctionResources] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def spill_bytes(self) -> int:
        return sum(f.spill_store_bytes + f.spill_load_bytes for f in self.functions)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["spill_bytes"] = self.spill_bytes
        return d


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for cand in ("/usr/local/cuda/bin/nvcc",):
        if os.path.exists(cand):
            return cand
    return None


def nvcc_version() -> str:
    nvcc = nvcc_path()
    if not nvcc:
        raise BuildError("nvcc not found: install the CUDA toolkit (12.4 or newer) or put nvcc on the PATH")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return m.group(2) if m else out.strip().splitlines()[-1]


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_FUNC_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPS_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


_CODE_RE = re.compile(r"\(C\d{4}\)")
# the compiler front end's diagnostics: "kernel.cu(922): warning #549-D: variable ... is used before ..."
_FRONTEND_RE = re.compile(r"\(\d+\): warning #\d+")


def parse_ptxas(text: str) -> tuple[list[FunctionResources], list[str]]:
    """Parse nvcc's log (with `-Xptxas -v`) into per-function resources and the list of warnings. ptxas
    prints its performance warnings (C7511, C7515, C7519, ...) as `ptxas info : (C75xx) ...` lines,
    not as warnings, so every line with such a code counts as one; the front end's warnings
    (`file.cu(LINE): warning #N-D: ...`) count too."""
    funcs: list[FunctionResources] = []
    warnings: list[str] = []
    cur: FunctionResources | None = None
    for line in text.splitlines():
        low = line.lower()
        if ("warning" in low and "ptxas" in low) or _CODE_RE.search(line) or _FRONTEND_RE.search(line):
            warnings.append(line.strip())
        m = _FUNC_RE.search(line)
        if m:
            cur = FunctionResources(m.group(1))
            funcs.append(cur)
            continue
        if cur is None:
            continue
        m = _PROPS_RE.search(line)
        if m:
            cur.stack_bytes, cur.spill_store_bytes, cur.spill_load_bytes = map(int, m.groups())
        m = _USED_RE.search(line)
        if m:
            cur.registers = int(m.group(1))
            s = _SMEM_RE.search(line)
            if s:
                cur.shared_bytes = int(s.group(1))
    return funcs, warnings


# ptxas on code for a newer architecture than the target: "Feature 'x' requires .target sm_90 or
# higher", "Instruction 'wgmma.fence' not supported on .target 'sm_80'"
_NEEDS_RE = re.compile(r"(?:Feature|Modifier|Instruction) '([^']+)' (?:requires \.target (sm_\d+a?)|not supported on)")
# instructions of one architecture only (the "a" targets), by their first word
ARCH_SPECIFIC = {"wgmma": "sm_90a", "setmaxnreg": "sm_90a", "tcgen05": "sm_100a"}


def target_hint(log: str, arch: str) -> str | None:
    """One line for a kernel built for an architecture it was not written for (ptxas's errors on
    instructions the target lacks), naming the target it needs and the --arch that builds it; None
    when the errors are of another kind."""
    found = _NEEDS_RE.findall(log)
    if not found:
        return None
    features = list(dict.fromkeys(name.split(" ")[0] for name, _ in found))
    specific_features = [f for f in features if f.split(".")[0] in ARCH_SPECIFIC]
    specific = sorted({ARCH_SPECIFIC[f.split(".")[0]] for f in specific_features})
    at_least = sorted({t for _, t in found if t}, key=lambda t: int(re.sub(r"\D", "", t)))
    needed = specific[0] if specific else (at_least[-1] if at_least else None)
    shown = ", ".join((specific_features + [f for f in features if f not in specific_features])[:4])
    if needed is None:
        return f"the kernel uses instructions that {arch} lacks ({shown})"
    number = int(re.sub(r"\D", "", needed))
    fits = [
        a
        for a, spec in config.ARCHES.items()
        if f"code={needed}" in spec["gencode"]
        or f"code=[{needed}" in spec["gencode"]
        or (not needed.endswith("a") and spec["cc"][0] * 10 + spec["cc"][1] >= number)
    ]
    use = f": build it with --arch {fits[0]}" if fits else ""
    return f"the kernel needs {needed} ({shown}), not {arch}{use}"


_PTXAS_ERROR_RE = re.compile(r"^ptxas (.*?), line (\d+); error\s*:\s*(.*)$")


def failure_message(name: str, arch: str, log: str) -> str:
    """What a failed nvcc run says: the compiler's errors, at most 40 of them; where they come from
    instructions the target lacks, one line naming the target the kernel needs and one with the
    first error."""
    errors = [l.strip() for l in log.splitlines() if "error" in l.lower()] or log.splitlines()[-20:]
    hint = target_hint(log, arch)
    if hint is None:
        return f"nvcc failed for {name} ({arch}):\n" + "\n".join(errors[:40])
    m = _PTXAS_ERROR_RE.match(errors[0]) if errors else None
    first = f"{m.group(1)}, line {m.group(2)}: {m.group(3)}" if m else (errors[0] if errors else "")
    return f"nvcc failed for {name} ({arch}): {hint}\n  {len(errors)} ptxas errors, the first: {first}"


def fatal_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if any(code in w for code in config.FATAL_PTXAS_WARNINGS)]


def exported_functions(library: str | Path) -> set[str]:
    """The names of the functions the shared library exports (its defined global dynamic symbols)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(library, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        if not isinstance(dynsym, SymbolTableSection):
            return set()
        return {
            s.name
            for s in dynsym.iter_symbols()
            if s.name
            and s["st_shndx"] != "SHN_UNDEF"
            and s["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC")
            and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
        }


def missing_exports(exported: set[str]) -> list[str]:
    """The contract's C functions (contract.REQUIRED_SYMBOLS) that are not among `exported`."""
    return [name for name in contract.REQUIRED_SYMBOLS if name not in exported]


def check_exports(library: str | Path, source: Path) -> None:
    """Raises ContractError when the library lacks one of the contract's exports."""
    missing = missing_exports(exported_functions(library))
    if missing:
        raise ContractError(
            f"{source.name} does not export {', '.join(missing)}: a kernel defines "
            f'{", ".join(contract.REQUIRED_SYMBOLS)} as extern "C" functions (see the kernel contract)'
        )


def import_violations(
    obj: Path | None, library: Path, preprocessed: Path | None = None, source: Path | None = None
) -> list[rules.Violation]:
    """The allow-list on the kernel's object file (when there is one) and the library's own imports."""
    bad = []
    if obj is not None:
        text = preprocessed.read_text(errors="replace") if preprocessed is not None and preprocessed.exists() else None
        bad += [rules.Violation(0, "compiled code", b) for b in imports.object_violations(obj, text, source)]
    bad += [
        rules.Violation(0, "built library", b) for b in imports.library_violations(imports.library_imports(library))
    ]
    return bad


# one build of a kernel at a time in a process: a build started in the background (reproduce starts the
# kernel's beside its first GEMM ceiling) and the same build asked for meanwhile (run_bench's) make one
# nvcc run, the second call waiting for the first and finding its result in the cache; different
# kernels (run-once's variants) build side by side
_LOCKS: dict[tuple, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(source: str | Path, arch: str, extra_flags: tuple[str, ...], cache: Path | None) -> threading.Lock:
    """The lock of one build: by the source's content (two paths to the same text share a cache
    folder), the arch, the extra flags and the cache."""
    try:
        content = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    except OSError:
        content = str(source)  # _build reports it
    key = (content, arch, tuple(extra_flags), str(cache))
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


@contextlib.contextmanager
def _folder_lock(root: Path) -> Iterator[None]:
    """One build of a cache folder at a time across processes too (two sessions, or the test
    workers, sharing a cache): the second waits for the first and finds its result, where it would
    otherwise build it again and replace the folder while the first reads from it. The lock is a file
    beside the folder, there only while held (the holder removes it before letting go; a waiter that
    then holds a removed file takes the lock again). A cache this process cannot write (read from a
    sandbox) is only read: no lock."""
    path = root.parent / f"{root.name}.lock"
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")
    except OSError:
        yield
        return
    while True:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()
        f = open(path, "a")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        f.close()


def build(
    source: str | Path,
    arch: str = "sm90",
    extra_flags: tuple[str, ...] = (),
    cache: Path | None = None,
    force: bool = False,
) -> BuildResult:
    with _lock_for(source, arch, extra_flags, cache):
        return _build(source, arch, extra_flags, cache, force)


def _build(source: str | Path, arch: str, extra_flags: tuple[str, ...], cache: Path | None, force: bool) -> BuildResult:
    src = Path(source).resolve()
    if not src.is_file():
        raise BuildError(f"kernel source not found: {src}")
    if src.suffix != ".cu":
        raise BuildError(f"a kernel is one .cu file; got {src.name}")
    if arch not in config.ARCHES:
        raise BuildError(f"unknown arch {arch!r}; known: {', '.join(config.ARCHES)}")
    source_bytes = src.read_bytes()
    rules.enforce_text(source_bytes.decode("utf-8", errors="replace"), str(src))
    nvcc = nvcc_path()
    if not nvcc:
        raise BuildError("nvcc not found: install the CUDA toolkit (12.4 or newer) or put nvcc on the PATH")
    version = nvcc_version()
    flags = [*config.NVCC_FLAGS, config.ARCHES[arch]["gencode"], *extra_flags]
    digest = hashlib.sha256()
    digest.update(source_bytes)
    digest.update("\0".join(flags).encode())
    digest.update(version.encode())
    key = digest.hexdigest()[:24]
    root = (cache or config.cache_dir() / "build") / key
    with _folder_lock(root):
        return _build_into(root, src, source_bytes, arch, nvcc, version, flags, force)


def _build_into(
    root: Path, src: Path, source_bytes: bytes, arch: str, nvcc: str, version: str, flags: list[str], force: bool
) -> BuildResult:
    """The build in its cache folder `root`, or the one found there. The folder appears whole, its
    report included, in one rename."""
    report = root / "build.json"
    if report.exists() and not force and (root / "kernel.so").exists() and (root / "kernel.o").exists():
        return _cached(root, src)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=root.parent))
    try:
        funcs, warnings, log, has_ptx = _compile(nvcc, flags, src, source_bytes, arch, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (tmp / "ptxas.log").write_text(log)
    result = BuildResult(
        source=str(src),
        source_sha256=hashlib.sha256(source_bytes).hexdigest(),
        arch=arch,
        library=str(root / "kernel.so"),
        ptx=str(root / "kernel.ptx") if has_ptx else None,
        nvcc_version=version,
        flags=flags,
        cached=False,
        functions=funcs,
        warnings=warnings,
    )
    (tmp / "build.json").write_text(json.dumps(result.to_dict(), indent=1))
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
    os.replace(tmp, root)
    return result


def _cached(root: Path, src: Path) -> BuildResult:
    """A cached build, its imports and exports checked again: the cache is a folder like any other
    (the driver functions it looks up were checked when it was built)."""
    bad = import_violations(root / "kernel.o", root / "kernel.so", None, None)
    bad = [v for v in bad if "preprocessed source" not in v.text]
    if bad:
        raise rules.DependencyRuleError(str(src), [rules.Violation(0, v.rule + " (cached)", v.text) for v in bad])
    check_exports(root / "kernel.so", src)
    data = json.loads((root / "build.json").read_text())
    data["functions"] = [FunctionResources(**f) for f in data["functions"]]
    data.pop("spill_bytes", None)
    data["cached"] = True
    data["source"] = str(src)
    # the files where the folder is now: a cache may be packed on one machine and unpacked on another
    data["library"] = str(root / "kernel.so")
    data["ptx"] = str(root / "kernel.ptx") if (root / "kernel.ptx").exists() else None
    return BuildResult(**data)


def _compile(nvcc: str, flags: list[str], src: Path, source_bytes: bytes, arch: str, tmp: Path):
    """nvcc on a private copy of the source in `tmp`, which ends holding kernel.so, kernel.o and
    kernel.ptx; the build fails (BuildError, DependencyRuleError, ContractError) on an nvcc error, a
    ptxas warning that fails it, a forbidden import or a missing export. Returns (the functions'
    resources, the warnings, nvcc's log, whether PTX was kept)."""
    lib = tmp / "kernel.so"
    keep = tmp / "keep"
    keep.mkdir()
    private_src = tmp / src.name
    private_src.write_bytes(source_bytes)
    cmd = [nvcc, *flags, "-keep", f"-keep-dir={keep}", "-o", str(lib), str(private_src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = (proc.stdout + proc.stderr).replace(str(private_src), str(src))
    if proc.returncode != 0:
        # the files nvcc kept are gone with the build folder: its paths name the kernel instead
        log = log.replace(str(keep / f"{private_src.stem}.ptx"), f"{src.name} (PTX)").replace(str(tmp), "<build>")
        raise BuildError(failure_message(src.name, arch, log))
    funcs, warnings = parse_ptxas(log)
    fatal = fatal_warnings(warnings)
    if fatal:
        raise BuildError(f"ptxas warnings that fail the build for {src.name}:\n" + "\n".join(fatal))
    obj = keep / f"{private_src.stem}.o"
    if not obj.exists():
        raise BuildError(
            f"nvcc -keep left no object file for {src.name} in {keep.name}/: its imports cannot be checked"
        )
    bad = import_violations(obj, lib, keep / f"{private_src.stem}.cpp4.ii", private_src)
    if bad:
        raise rules.DependencyRuleError(str(src), bad)
    check_exports(lib, src)
    shutil.copy(obj, tmp / "kernel.o")
    ptx_files = sorted(keep.glob("*.ptx"))
    if ptx_files:
        shutil.copy(ptx_files[-1], tmp / "kernel.ptx")
    shutil.rmtree(keep, ignore_errors=True)
    return funcs, warnings, log, bool(ptx_files)


def demangle(names: list[str]) -> list[str]:
    """The C++ names of `names` (c++filt, or CUDA's cu++filt beside nvcc), or the names themselves
    where neither is here."""
    nvcc = nvcc_path()
    tools = [shutil.which("c++filt"), shutil.which("cu++filt")]
    if nvcc:
        tools.append(shutil.which("cu++filt", path=str(Path(nvcc).parent)))
    for tool in filter(None, tools):
        try:
            out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if len(out.splitlines()) == len(names):
            return out.splitlines()
    return list(names)


def without_parameters(name: str) -> str:
    """A C++ function's name without the parameter list it ends with (the parentheses matched from the
    end); `name` as it is when it does not end with one."""
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i]
    return name


def readable_name(cxx_name: str) -> str:
    """A kernel's C++ name without its return type and parameter list, its template arguments kept
    whole: what tells its instances apart (`flash_fwd_sm90_kernel<Config<128, ...>, true>`)."""
    return without_parameters(cxx_name.strip()).removeprefix("void ").strip()


def resource_table(result: BuildResult) -> list[list]:
    """One row per kernel function: its readable name (never cut: instances differ at the end), then
    registers, static shared memory, stack and spill bytes."""
    names = [readable_name(n) for n in demangle([f.name for f in result.functions])]
    return [
        [name, f.registers, f.shared_bytes, f.stack_bytes, f.spill_store_bytes + f.spill_load_bytes]
        for name, f in zip(names, result.functions, strict=True)
    ]
