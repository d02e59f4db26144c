"""What a kernel's compiled code may import, and what may run when its library is loaded.

nvcc links the CUDA runtime into the library statically, and that runtime alone imports some 170 C
library functions (dlopen, pthread_create, getenv, fopen, socket, ...): the library's imports say
little about the kernel. So the kernel's own code is checked before that link, in the object file
nvcc compiles it to (`-keep`): its undefined symbols must be on the allow-list below -- the CUDA
runtime calls a kernel needs, the calls nvcc generates to register and launch kernels, the C++
runtime's support, and a short list of C library functions for memory, strings, formatting and
math. Anything else is refused by name, with what it is: the environment, files, processes,
sockets, dynamic loading, host callbacks and host functions on streams, graphs, IPC, threads,
signals, clocks, device-wide settings, streams and events of its own.

`cudaGetDriverEntryPoint[ByVersion]` returns any driver function by its name, so it is allowed only
as a call whose first argument is a string literal naming a driver function on DRIVER_FUNCTIONS,
checked in the kernel's own lines of the host code after the preprocessor (macros and token pasting
expanded; nvcc's `-keep` leaves it as `*.cpp4.ii`), whose line markers say which lines are the
kernel's. A line in the source that reads like a line marker or a `#line` directive (even inside a
raw string literal), which could move the kernel's lines under a header's name, is refused by the
static rules (rules.py).

Static constructors: the object's `.init_array` may hold nvcc's own registration function
(`__sti____cudaRegisterAll`) and nothing else; `.preinit_array`, `.ctors`, `.init` and IFUNC
resolvers (which run while the library is relocated) are refused too, and so are destructors in
`.fini_array`/`.dtors`/`.fini`.

The library itself is checked as before: an unversioned undefined symbol in it (other than the C
runtime's weak hooks and the driver's `cu*`) would be resolved from the loading process -- the Python
interpreter, torch -- and is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

# ---- the allow-list --------------------------------------------------------------------------------

CUDA_RUNTIME = frozenset(
    {
        # launching and configuring the kernel's own functions
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaFuncSetAttribute",
        "cudaFuncGetAttributes",
        "cudaFuncSetCacheConfig",
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
        "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
        "cudaOccupancyMaxActiveClusters",
        "cudaOccupancyMaxPotentialClusterSize",
        "cudaOccupancyAvailableDynamicSMemPerBlock",
        # errors
        "cudaGetLastError",
        "cudaPeekAtLastError",
        "cudaGetErrorString",
        "cudaGetErrorName",
        # what the device is
        "cudaGetDevice",
        "cudaGetDeviceCount",
        "cudaDeviceGetAttribute",
        "cudaGetDeviceProperties",
        "cudaGetDeviceProperties_v2",
        "cudaDriverGetVersion",
        "cudaRuntimeGetVersion",
        "cudaPointerGetAttributes",
        # scratch memory, and copies and fills on the stream passed in
        "cudaMalloc",
        "cudaFree",
        "cudaMallocAsync",
        "cudaFreeAsync",
        "cudaMemsetAsync",
        "cudaMemset2DAsync",
        "cudaMemcpyAsync",
        "cudaMemcpy2DAsync",
        "cudaMemcpyToSymbolAsync",
        "cudaMemcpyFromSymbolAsync",
        "cudaGetSymbolAddress",
        "cudaGetSymbolSize",
        "cudaStreamSynchronize",
        # driver functions by a literal name on DRIVER_FUNCTIONS (checked in the source, see above)
        "cudaGetDriverEntryPoint",
        "cudaGetDriverEntryPointByVersion",
    }
)

# what nvcc's generated host code calls: registration of the fatbinary, kernels and variables, launches
NVCC_GENERATED = frozenset(
    {
        "__cudaRegisterFatBinary",
        "__cudaRegisterFatBinaryEnd",
        "__cudaUnregisterFatBinary",
        "__cudaRegisterFunction",
        "__cudaRegisterVar",
        "__cudaPushCallConfiguration",
        "__cudaPopCallConfiguration",
        "__cudaLaunchKernel",
        "__cudaLaunchKernel_ptsz",
        "__cudaGetKernel",
        "__cudaInitModule",
    }
)

# driver functions a kernel may import by name or look up by a literal name: tensor maps (TMA), and
# the words for an error code
DRIVER_FUNCTIONS = frozenset(
    {
        "cuTensorMapEncodeTiled",
        "cuTensorMapEncodeIm2col",
        "cuTensorMapEncodeIm2colWide",
        "cuTensorMapReplaceAddress",
        "cuGetErrorString",
        "cuGetErrorName",
        "cuDriverGetVersion",
    }
)

CXX_RUNTIME = frozenset(
    {
        "__cxa_guard_acquire",
        "__cxa_guard_release",
        "__cxa_guard_abort",  # function-local statics
        "__cxa_atexit",
        "atexit",
        "__dso_handle",
        "__cxa_thread_atexit",
        "__tls_get_addr",
        "__gxx_personality_v0",
        "_Unwind_Resume",
        "__cxa_begin_catch",
        "__cxa_end_catch",
        "__cxa_rethrow",
        "__cxa_allocate_exception",
        "__cxa_free_exception",
        "__cxa_throw",
        "__cxa_pure_virtual",
        "__cxa_call_terminate",
        "_ZSt9terminatev",
        "__stack_chk_fail",
        "__assert_fail",
        "_GLOBAL_OFFSET_TABLE_",
        "_Znwm",
        "_Znam",
        "_ZdlPv",
        "_ZdlPvm",
        "_ZdaPv",
        "_ZdaPvm",
        "_ZnwmRKSt9nothrow_t",
        "_ZnamRKSt9nothrow_t",
        "_ZnwmSt11align_val_t",
        "_ZdlPvSt11align_val_t",
        "_ZdlPvmSt11align_val_t",
        "__popcountdi2",
        "__udivti3",
        "__divti3",
        "__umodti3",
        "__modti3",
    }
)
# std::__throw_length_error and its kin, from the header-only parts of <algorithm> and <utility>
_CXX_THROW = re.compile(r"^_ZSt\d+__throw_\w+$")

LIBC = frozenset(
    {
        # memory
        "malloc",
        "calloc",
        "realloc",
        "free",
        "aligned_alloc",
        "posix_memalign",
        "memcpy",
        "memmove",
        "memset",
        "memcmp",
        "memchr",
        "__memcpy_chk",
        "__memmove_chk",
        "__memset_chk",
        # strings
        "strlen",
        "strnlen",
        "strcmp",
        "strncmp",
        "strcpy",
        "strncpy",
        "strcat",
        "strncat",
        "strchr",
        "strrchr",
        "strstr",
        "strspn",
        "strcspn",
        "strtol",
        "strtoul",
        "strtoll",
        "strtoull",
        "strtod",
        "strtof",
        "atoi",
        "atol",
        "atof",
        "__strcpy_chk",
        "__strncpy_chk",
        "__strcat_chk",
        "__strncat_chk",
        "__isoc99_sscanf",
        "__isoc23_sscanf",
        "sscanf",
        "__isoc23_strtol",
        "__isoc23_strtoul",
        "__isoc23_strtoll",
        "__isoc23_strtoull",
        "strerror",
        "__errno_location",
        "__ctype_b_loc",
        "__ctype_tolower_loc",
        "__ctype_toupper_loc",
        "toupper",
        "tolower",
        # formatting, to stdout and stderr (the worker's log)
        "printf",
        "fprintf",
        "sprintf",
        "snprintf",
        "vprintf",
        "vfprintf",
        "vsprintf",
        "vsnprintf",
        "puts",
        "fputs",
        "putchar",
        "fputc",
        "putc",
        "fwrite",
        "fflush",
        "stdout",
        "stderr",
        "__printf_chk",
        "__fprintf_chk",
        "__sprintf_chk",
        "__snprintf_chk",
        "__vprintf_chk",
        "__vfprintf_chk",
        "__vsprintf_chk",
        "__vsnprintf_chk",
    }
)

_MATH_NAMES = (
    "sqrt cbrt hypot exp exp2 expm1 log log2 log10 log1p pow fabs floor ceil round lround llround "
    "trunc rint lrint nearbyint fmin fmax fmod remainder sin cos tan asin acos atan atan2 sinh cosh "
    "tanh asinh acosh atanh erf erfc tgamma lgamma ldexp frexp modf scalbn ilogb logb copysign nan "
    "fma fdim"
).split()
MATH = frozenset(
    [n for base in _MATH_NAMES for n in (base, base + "f", base + "l")]
    + [
        "__isnan",
        "__isnanf",
        "__isinf",
        "__isinff",
        "__finite",
        "__finitef",
        "__signbit",
        "__signbitf",
        "__fpclassify",
        "__fpclassifyf",
        "sincos",
        "sincosf",
    ]
)

ALLOWED = CUDA_RUNTIME | NVCC_GENERATED | DRIVER_FUNCTIONS | CXX_RUNTIME | LIBC | MATH
ENTRY_POINT_LOOKUPS = frozenset({"cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion"})

# ---- what a refused name is, for the message ---------------------------------------------------------

_KINDS = (
    (r"^_?Py[A-Z_]", "the Python C API"),
    (
        r"^(cublas|cudnn|cutlass|nccl|cufft|curand|cusparse|cusolver|nvrtc|nvjitlink)",
        "a library the kernel may not use",
    ),
    (
        r"^(cudaStreamAddCallback|cudaLaunchHostFunc|cuStreamAddCallback|cuLaunchHostFunc)",
        "host code run from a stream: a host callback or host function",
    ),
    (
        r"^(cudaGraph|cuGraph|cudaStreamBeginCapture|cudaStreamEndCapture|cuStreamBeginCapture|cuStreamEndCapture|"
        r"cudaUserObject|cuUserObject)",
        "graphs",
    ),
    (
        r"^(cudaIpc|cuIpc|cuMemExportToShareableHandle|cuMemImportFromShareableHandle|shm_|shmget|shmat|shmdt|"
        r"shmctl|mq_|sem_open)",
        "inter-process communication",
    ),
    (
        r"^(dlopen|dlmopen|dlsym|dlvsym|dlclose|dlerror|dladdr|dlinfo|dl_iterate_phdr|cuGetProcAddress|"
        r"cudaGetDriverEntryPoint|cuModuleLoad|cuLibraryLoad|cudaLibraryLoad|cuLinkCreate)",
        "loading code or looking functions up at run time",
    ),
    (
        r"^(getenv|secure_getenv|setenv|putenv|unsetenv|clearenv|environ|__environ|_environ|program_invocation_|"
        r"__progname|getauxval|__libc_argv)",
        "the process environment",
    ),
    (
        r"^(open|open64|openat|openat64|creat|creat64|fopen|fopen64|freopen|freopen64|fdopen|tmpfile|mkstemp|"
        r"opendir|readdir|scandir|stat|stat64|lstat|fstat|__xstat|__lxstat|__fxstat|statx|access|faccessat|readlink|"
        r"realpath|read|pread|readv|write|pwrite|writev|lseek|close|unlink|remove|rename|mkdir|rmdir|chdir|chmod|"
        r"getcwd|fgets|fgetc|getc|getchar|fread|fscanf|scanf|getline|getdelim|__getdelim|fileno|ioctl|fcntl|dup|"
        r"dup2|dup3|pipe|pipe2|mmap|mmap64|munmap|mprotect|madvise|memfd_create|inotify_|sendfile|stdin|ftell|fseek|"
        r"fclose|nftw|ftw|glob)\d*$",
        "files and file descriptors",
    ),
    (
        r"^(fork|vfork|clone|system|popen|pclose|exec[lv]|posix_spawn|kill|getpid|getppid|ptrace|prctl|wait|waitpid|"
        r"exit|_exit|_Exit|quick_exit|abort|setrlimit|getrlimit|process_vm_|syscall|setuid|setgid)",
        "processes and system calls",
    ),
    (
        r"^(socket|socketpair|connect|bind|listen|accept|send|sendto|sendmsg|recv|recvfrom|recvmsg|getaddrinfo|"
        r"gethostbyname|setsockopt|getsockopt|shutdown|select|poll|epoll_)",
        "sockets and polling",
    ),
    (r"^(pthread_|thrd_|mtx_|cnd_|sem_|sched_|_ZNSt6thread|std::thread)", "threads"),
    (r"^(signal|sigaction|sigprocmask|raise|alarm|setitimer|sigqueue|__sysv_signal|bsd_signal)", "signals"),
    (
        r"^(clock_gettime|gettimeofday|time|clock|timespec_get|nanosleep|usleep|sleep|times|getrusage)$",
        "clocks and sleeping: learning when it is timed",
    ),
    (
        r"^(cudaDeviceSetLimit|cudaDeviceSetCacheConfig|cudaDeviceSetSharedMemConfig|cudaStreamSetAttribute|"
        r"cudaCtxResetPersistingL2Cache|cudaDeviceReset|cudaSetDevice|cudaSetDeviceFlags|cudaDeviceSetMemPool|"
        r"cudaMemPoolSet|cudaDeviceSetGraphMemAttribute|cudaSetValidDevices|cudaDeviceFlushGPUDirectRDMAWrites|cuCtx|"
        r"cuDevicePrimaryCtx|cuStreamSetAttribute|cuDeviceSetMemPool|cuMemPoolSet)",
        "device-wide or stream state the harness owns",
    ),
    (
        r"^(cudaStreamCreate|cuStreamCreate|cudaStreamDestroy|cudaEvent|cuEvent|cudaStreamWaitEvent|cuStreamWaitEvent|"
        r"cudaStreamQuery|cudaDeviceSynchronize|cudaThreadSynchronize)",
        "streams, events and synchronization of its own",
    ),
    (
        r"^(cudaHostRegister|cudaHostAlloc|cudaMallocHost|cudaMallocManaged|cudaHostGetDevicePointer|cuMemHost|"
        r"cuMemAllocHost|cudaMemcpy(Peer)?$|cudaMemcpy2D$|cudaMemset$)",
        "host memory or synchronous copies",
    ),
)


def kind_of(name: str) -> str:
    for pattern, what in _KINDS:
        if re.match(pattern, name):
            return what
    return "not on the allow-list"


def allowed(name: str) -> bool:
    return name in ALLOWED or bool(_CXX_THROW.match(name))


# ---- the object file -----------------------------------------------------------------------------------

# nvcc's registration constructor, as gcc mangles the static function (or without mangling)
_NVCC_CONSTRUCTOR = re.compile(r"^(_ZL24)?__sti____cudaRegisterAll(v)?$")


def object_imports(obj: str | Path) -> list[str]:
    """The undefined symbols of a relocatable object (strong and weak): what its code calls or
    reads that it does not define."""
    from elftools.elf.elffile import ELFFile

    with open(obj, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        if symtab is None:
            return []
        return sorted({s.name for s in symtab.iter_symbols() if s.name and s["st_shndx"] == "SHN_UNDEF"})


def load_time_code(obj: str | Path) -> list[str]:
    """What in the object would run when the library is loaded or unloaded, other than nvcc's own
    registration: (where, what) as text."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection

    found = []
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        arrays = {
            i
            for i, sec in enumerate(elf.iter_sections())
            if sec["sh_type"] in ("SHT_INIT_ARRAY", "SHT_PREINIT_ARRAY", "SHT_FINI_ARRAY")
        }
        for sec in elf.iter_sections():
            name = sec.name
            if sec["sh_type"] == "SHT_PREINIT_ARRAY" or re.match(r"^\.(ctors|dtors|init|fini)(\.|$)", name):
                found.append(f"a `{name}` section (code run when the library is loaded or unloaded)")
        covered: dict[int, int] = {}
        for rel in elf.iter_sections():
            if not isinstance(rel, RelocationSection) or rel["sh_info"] not in arrays:
                continue
            target = elf.get_section(rel["sh_info"])
            symtab = elf.get_section(rel["sh_link"])
            for r in rel.iter_relocations():
                covered[rel["sh_info"]] = covered.get(rel["sh_info"], 0) + 1
                fn = _function_at(symtab, symtab.get_symbol(r["r_info_sym"]), r["r_addend"])
                if target["sh_type"] == "SHT_INIT_ARRAY" and _NVCC_CONSTRUCTOR.match(fn or ""):
                    continue
                what = "a static constructor" if target["sh_type"] != "SHT_FINI_ARRAY" else "a static destructor"
                found.append(
                    f"{what} in `{target.name}`: `{fn or '?'}` runs when the library is "
                    f"{'unloaded' if target['sh_type'] == 'SHT_FINI_ARRAY' else 'loaded'}"
                )
        for i in arrays:
            sec = elf.get_section(i)
            entries = sec["sh_size"] // max(1, sec["sh_entsize"] or 8)
            if entries > covered.get(i, 0):
                found.append(
                    f"`{sec.name}` holds {entries} entries of which only {covered.get(i, 0)} are "
                    "functions of this object"
                )
        symtab = elf.get_section_by_name(".symtab")
        for s in symtab.iter_symbols() if symtab is not None else ():
            if s["st_info"]["type"] in ("STT_GNU_IFUNC", "STT_LOOS") and s["st_shndx"] != "SHN_UNDEF":
                found.append(f"`{s.name}` is an IFUNC: its resolver runs while the library is loaded")
    return found


def _function_at(symtab, sym, addend: int) -> str | None:
    """The function a relocation points at: the symbol itself, or for a section symbol the function
    at the addend in that section."""
    if sym["st_info"]["type"] != "STT_SECTION":
        return sym.name or None
    for s in symtab.iter_symbols():
        if s["st_shndx"] == sym["st_shndx"] and s["st_info"]["type"] == "STT_FUNC" and s["st_value"] == addend:
            return s.name
    return None


_LINEMARKER = re.compile(r'^#\s*(?:line\s+)?\d+\s+"((?:[^"\\]|\\.)*)"', re.M)
_LOOKUP = re.compile(r"\b(cudaGetDriverEntryPoint(?:ByVersion)?)\b")
_LITERAL_CALL = re.compile(r'\s*\(\s*"(\w+)"\s*,')


def own_lines(preprocessed: str, source: str | Path) -> str:
    """The text of the preprocessed file that comes from `source` itself (not from headers), as the
    preprocessor's line markers attribute it."""
    want = str(source)
    parts, pos, current = [], 0, None
    for m in _LINEMARKER.finditer(preprocessed):
        if current == want:
            parts.append(preprocessed[pos : m.start()])
        current, pos = re.sub(r"\\(.)", r"\1", m.group(1)), m.end()
    if current == want:
        parts.append(preprocessed[pos:])
    return "\n".join(parts)


def entry_point_violations(preprocessed: str, source: str | Path) -> list[str]:
    """Each use of cudaGetDriverEntryPoint[ByVersion] in the kernel's own code must be a call whose
    first argument is a literal name on DRIVER_FUNCTIONS."""
    text = own_lines(preprocessed, source)
    if "ks_attn_fwd" not in text:
        return [
            f"the preprocessed host code has no lines of {source} (its line markers name other files): the "
            "driver functions it looks up cannot be checked"
        ]
    bad = []
    for m in _LOOKUP.finditer(text):
        call = _LITERAL_CALL.match(text, m.end())
        if call is None:
            bad.append(
                f"uses `{m.group(1)}` other than in a call with a literal function name: it could return "
                "any driver function"
            )
        elif call.group(1) not in DRIVER_FUNCTIONS:
            bad.append(
                f"looks up `{call.group(1)}` with `{m.group(1)}` ({kind_of(call.group(1))}): not a driver "
                f"function a kernel may use ({', '.join(sorted(DRIVER_FUNCTIONS))})"
            )
    return bad


def object_violations(obj: str | Path, preprocessed: str | None = None, source: str | Path | None = None) -> list[str]:
    """Everything the object imports that is not allowed, and any load-time code. The entry-point
    lookups are checked in `preprocessed` (the host code after the preprocessor) when it is given;
    without it, an object that imports a lookup function is refused."""
    bad = []
    names = object_imports(obj)
    for name in names:
        if not allowed(name):
            bad.append(
                f"imports `{name}` ({kind_of(name)}): not on the allow-list of imports (docs/evaluator-hardening.md)"
            )
    if ENTRY_POINT_LOOKUPS & set(names):
        if preprocessed is None or source is None:
            bad.append(
                "looks up driver functions by name, and the preprocessed source to check the names in is missing"
            )
        else:
            bad += entry_point_violations(preprocessed, source)
    return bad + load_time_code(obj)


# ---- the library ---------------------------------------------------------------------------------------

# undefined symbols a library may import without a version: the C runtime's weak hooks, and the
# CUDA driver API (cu*, resolved from libcuda); anything else unversioned comes from whatever the
# loading process exports -- the Python interpreter, torch, cuBLAS -- which is reaching into the harness
_UNVERSIONED_OK = re.compile(r"^(_ITM_\w+|__gmon_start__|_Jv_RegisterClasses|cu[A-Z]\w*)$")


def library_imports(library: str | Path) -> list[tuple[str, bool]]:
    """(name, versioned) of the shared library's undefined dynamic symbols."""
    from elftools.elf.elffile import ELFFile

    out = []
    with open(library, "rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        versym = elf.get_section_by_name(".gnu.version")
        if dynsym is None:
            return out
        for i, s in enumerate(dynsym.iter_symbols()):
            if not s.name or s["st_shndx"] != "SHN_UNDEF":
                continue
            ndx = versym.get_symbol(i)["ndx"] if versym is not None else 0
            out.append((s.name, isinstance(ndx, int) and ndx >= 2))
    return out


def library_violations(symbols: list[tuple[str, bool]]) -> list[str]:
    bad = []
    for name, versioned in symbols:
        if versioned or _UNVERSIONED_OK.match(name):
            continue
        what = (
            "the Python C API"
            if re.match(r"_?Py", name)
            else "a library the kernel may not use"
            if re.match(r"(cublas|cudnn|cutlass|nccl|cufft|curand)", name, re.I)
            else "a symbol of the loading process"
        )
        bad.append(f"imports `{name}` ({what}): no system library provides it")
    return bad
