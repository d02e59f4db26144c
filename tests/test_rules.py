"""The dependency-free rule: what a kernel file may use, and that comments and strings neither hide
nor fake a violation."""

from pathlib import Path

import pytest

from kernelseek_suite import rules

ROOT = Path(__file__).resolve().parent.parent
HEAD = "#include <cuda_runtime.h>\n#include <stdint.h>\n"


def found(src: str) -> list[str]:
    return [v.rule for v in rules.check_source(HEAD + src)]


def test_the_reference_kernel_follows_the_rules():
    assert rules.check_source((ROOT / "kernels" / "reference" / "attn_fwd_ref.cu").read_text()) == []


@pytest.mark.parametrize(
    "line,what",
    [
        ("#include <cublas_v2.h>", "include <cublas_v2.h>"),
        ("#include <cudnn.h>", "include <cudnn.h>"),
        ("#include <cutlass/gemm.h>", "include <cutlass/gemm.h>"),
        ("#include <cute/tensor.hpp>", "include <cute/tensor.hpp>"),
        ("#include <mma.h>", "include <mma.h>"),
        ("#include <thread>", "include <thread>"),
        ('#include "helpers.cuh"', "local include"),
        ("#define H <cublas_v2.h>\n#include H", "computed"),
        ("#include_next <cuda_runtime.h>", "computed"),
        ("%:include <cudnn.h>", "include <cudnn.h>"),
        ("cublasHandle_t h; cublasCreate(&h);", "cuBLAS"),
        ("int s = cudnnGetVersion();", "cuDNN"),
        ("using T = cutlass::half_t;", "CUTLASS"),
        ("auto t = cute::make_tensor(p);", "CuTe"),
        ("nvcuda::wmma::fragment<int> f;", "WMMA"),
        ('void* h = dlopen("libcublas.so", 1);', "loading a library"),
        ('void* f = dlsym(0, "x");', "loading a library"),
        ("cudaStream_t s; cudaStreamCreateWithFlags(&s, 1);", "creating a stream"),
        ("CUstream s; cuStreamCreate(&s, 0);", "creating a stream"),
        ("k<<<1, 32, 0, cudaStreamPerThread>>>(p);", "a stream other than"),
        ("std::thread t([]{});", "host thread"),
        ("pthread_create(&t, 0, f, 0);", "host thread"),
        ("auto f = std::async(g);", "host thread"),
        ("k<<<grid, 128>>>(p);", "without the stream"),
        ("k<<<grid, 128, smem>>>(p);", "without the stream"),
        ("cudaGraphLaunch(g, s);", "graphs"),
        ('extern "C" int PyRun_SimpleString(const char*);', "Python C API"),
        ("PyGILState_STATE st = PyGILState_Ensure();", "Python C API"),
        ('system("nvidia-smi -lgc 2000");', "starting a process"),
        ('FILE* f = fopen("results/bench.jsonl", "a");', "file access"),
        ("exit(0);", "ending the process"),
        ('const char* e = getenv("HOME");', "environment"),
        ("__attribute__((constructor)) static void early() {}", "loaded"),
        ('asm volatile("syscall");', "system call"),
        ('const char* p = "/proc/self/mem";', "reaching into"),
        ("cudaDeviceReset();", "contexts"),
    ],
)
def test_each_forbidden_thing_is_found(line, what):
    hits = found(line + "\n")
    assert any(what in h for h in hits), hits


@pytest.mark.parametrize(
    "src",
    [
        "// cublasSgemm would be faster, but no\n",
        '/* #include <cublas_v2.h>\n   dlopen("x") std::thread */\n',
        'const char* msg = "cublasSgemm, dlopen(), std::thread, exit(1)";\n',
        'printf("kernel launch: k<<<grid, block>>>\\n");\n',
        "char c = 'x'; int n = 1'000'000;\n",
        "k<<<dim3(a, b), 128, smem, stream>>>(p);\n",
        "k<<<grid, Cfg::threads, Cfg::smem(d, 2), stream>>>(p);\n",
        "__device__ int is_open(int x) { return x; }\nint Pyramid = 1;\n",
        'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0}, {%1}, {%2}, {%3};" : "+f"(d) : "r"(a), "r"(b), "f"(c));\n',
    ],
)
def test_comments_strings_and_honest_code_are_not_violations(src):
    assert found(src) == []


def test_a_line_marker_inside_a_raw_string_is_refused_too():
    """It would reach the preprocessed code as it stands, and name the lines after it another file."""
    assert "line marker" in " ".join(found('const char* s = R"(\n# 1 "/usr/include/stdio.h"\n)";\n'))


def test_a_quote_in_a_character_literal_cannot_hide_code():
    src = 'char q = \'"\'; int x = cublasSgemm(1); const char* s = "";\n'
    assert "cuBLAS" in found(src)


def test_line_numbers_point_at_the_violation():
    v = rules.check_source(HEAD + "/* a\n comment */\nint x;\nvoid* h = dlopen(0, 0);\n")
    assert [x.line for x in v] == [6]


def test_enforce_raises_with_every_violation(tmp_path):
    p = tmp_path / "k.cu"
    p.write_text(HEAD + "#include <cublas_v2.h>\nvoid f() { std::thread t; }\n")
    with pytest.raises(rules.DependencyRuleError) as e:
        rules.enforce(p)
    assert len(e.value.violations) == 2 and "line 3" in str(e.value) and "line 4" in str(e.value)


# ---- every alternative of every forbidden pattern --------------------------------------------------
# Lines that each pattern must flag, at least one per alternative of each of its groups; the test
# below drops one alternative at a time and checks that some line here is no longer flagged.

FLAGGED = {
    "cuBLAS": ["cublasHandle_t h;", "int v = cublasGetVersion_v2(h, &x);"],
    "cuDNN": ["cudnnHandle_t h;"],
    "CUTLASS": ["using T = cutlass::half_t;"],
    "CuTe": ["auto t = cute::make_tensor(p);"],
    "ThunderKittens": ["kittens::rt_bf<16, 64> r;"],
    "Thrust": ["thrust::device_vector<float> v(8);"],
    "CUB": ["using R = cub::BlockReduce<float, 128>;"],
    "the WMMA library (use inline PTX)": ["using namespace nvcuda::wmma;", "wmma::mma_sync(c, a, b, c);"],
    "loading a library at run time": [
        "void* h = dlopen(name, 1);",
        "void* h = dlmopen(0, name, 1);",
        "void* f = dlsym(h, name);",
        "void* f = dlvsym(h, name, ver);",
        "dlinfo(h, 2, &m);",
        "dlclose(h);",
        "void* h = __libc_dlopen_mode(n, 1);",
        "HMODULE m = LoadLibraryA(name);",
    ],
    "creating a stream (run on the stream passed in)": [
        "cudaStreamCreateWithFlags(&s, 1);",
        "cudaStreamCreate (&s);",
        "cuStreamCreate(&s, 0);",
    ],
    "a stream other than the one passed in": [
        "k<<<g, b, 0, cudaStreamPerThread>>>(p);",
        "cudaMemsetAsync(o, 0, n, cudaStreamLegacy);",
        "cuMemsetD8Async(o, 0, n, CU_STREAM_PER_THREAD);",
        "cuMemsetD8Async(o, 0, n, CU_STREAM_LEGACY);",
    ],
    "creating a host thread": [
        "std::thread t(f);",
        "std::jthread t(f);",
        "pthread_create(&t, 0, f, 0);",
        "auto r = std::async(f);",
        "thrd_create(&t, f, 0);",
        "clone(f, stack, 0, 0);",
    ],
    "linking a library": ['#pragma comment(lib, "cuda.lib")', "#  pragma comment ( lib )"],
    "deferred host-side launches (graphs, host functions)": [
        "cudaGraphLaunch(g, s);",
        "cuGraphLaunch(g, s);",
        "cudaStreamBeginCapture(s, 0);",
        "cudaLaunchHostFunc(s, f, 0);",
        "cuLaunchHostFunc(s, f, 0);",
    ],
    "the Python C API (a kernel must not reach into the process that loads it)": [
        "PyObject* o = 0;",
        "_PyObject_GC_New(t);",
    ],
    "starting a process": [
        'system("ls");',
        "FILE* p = popen(c, m);",
        "pid_t p = fork();",
        "pid_t p = vfork();",
        "posix_spawn(&p, a, 0, 0, v, e);",
        "posix_spawnp(&p, a, 0, 0, v, e);",
        "execl(a, b, 0);",
        "execvp(a, v);",
        "execve(a, v, e);",
        "execle(a, b, 0, e);",
    ],
    "file access from the kernel": [
        "FILE* f = fopen(n, m);",
        "freopen(n, m, f);",
        "fdopen(3, m);",
        "FILE* t = tmpfile();",
        "remove(n);",
        "rename(a, b);",
        "unlink(n);",
        "int fd = open(n, 0);",
        "openat(d, n, 0);",
        "creat(n, 0600);",
    ],
    "ending the process (return a KS_ERR_* code instead)": [
        "exit(1);",
        "_exit(1);",
        "_Exit(1);",
        "quick_exit(1);",
        "abort();",
        "atexit(f);",
        "at_quick_exit(f);",
    ],
    "reading or changing the environment": [
        "getenv(n);",
        "secure_getenv(n);",
        "setenv(n, v, 1);",
        "putenv(s);",
        "unsetenv(n);",
    ],
    "code that runs when the library is loaded": [
        "__attribute__((constructor)) static void f() {}",
        "__attribute__ (( destructor )) static void g() {}",
    ],
    "process-level system calls": [
        "syscall(39);",
        "signal(11, h);",
        "sigaction(11, &a, 0);",
        "raise(9);",
        "kill(0, 9);",
        "ptrace(0, 0, 0, 0);",
        "void* m = mmap(0, n, 3, 34, -1, 0);",
        "mprotect(p, n, 7);",
        "dup(1);",
        "dup2(1, 2);",
        "setrlimit(3, &l);",
        "prctl(4, 0);",
    ],
    "changing, resetting or creating device contexts": [
        "cudaDeviceReset();",
        "cudaSetDevice(1);",
        "cuCtxCreate(&c, 0, d);",
        "cuCtxDestroy(c);",
        "cuCtxSetCurrent(c);",
        "cuCtxPushCurrent_v2(c);",
    ],
    # searched with the strings kept
    "a system call in inline host assembly": [
        'asm volatile("syscall");',
        'asm volatile("int $0x80");',
        'asm volatile("int 0x80");',
        'asm volatile("sysenter");',
    ],
    "embedding a prebuilt binary": ['asm(".incbin \\"blob.bin\\"");'],
    "reaching into the process or system": [
        'const char* p = "/proc/self/maps";',
        'const char* p = "/dev/shm/x";',
        'const char* e = "LD_PRELOAD";',
    ],
    "a line directive or line marker (the build checks the kernel's own lines of the preprocessed code; this "
    "would give them another file's name)": [
        '#line 10 "cuda_runtime.h"',
        "  %:line 3",
        '# 12 "/usr/include/stdio.h" 2',
        "# 7",
    ],
}

# honest lines close to a forbidden one: a word boundary, a name that only contains the word
NEAR_MISSES = [
    "int mycublas = 1;",
    "float kcudnn_like = 0;",
    "int thrust_n = 2;",
    "int cub = 3;",
    "int wmma_tiles = 4;",
    "bool dlopen_ok = false;",
    "int stream_count = 1;",
    "int threads = 128;",
    "int my_clone = 1;",
    "int system_ok = 1;",
    "int reopen_count = 0;",
    "bool is_open(int);",
    "int exit_code = 0;",
    "float getenv_value = 0;",
    "int raised = 0;",
    "int mmap_size = 0;",
    "int Pyramid = 1;",
    "int sysenter_count = 0;",
    "int incbin = 0;",
    "int proc = 0;",
    "#pragma unroll 4",
    "#define LINE_7 7",
    "__attribute__((noinline)) static void f() {}",
    "int kill_count = 0;",
]

_ALL_PATTERNS = rules.FORBIDDEN_CODE + rules.FORBIDDEN_TEXT


def test_every_rule_has_flagged_examples():
    assert set(FLAGGED) == {what for _, what in _ALL_PATTERNS}


@pytest.mark.parametrize("what,line", [(w, line) for w, lines in FLAGGED.items() for line in lines])
def test_each_example_is_flagged_with_its_rule(what, line):
    assert what in found(line + "\n")


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_near_misses_are_not_flagged(line):
    assert found(line + "\n") == []


def drop_each_alternative(pattern: str):
    """The pattern with one alternative of one group (or of the whole) removed, for every alternative."""
    stack, groups, i, in_class = [[0, []]], [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            start = i + 1 + (2 if pattern.startswith("?:", i + 1) else 0)
            stack.append([start, []])
        elif c == ")":
            start, bars = stack.pop()
            groups.append((start, bars, i))
        elif c == "|":
            stack[-1][1].append(i)
        i += 1
    start, bars = stack.pop()
    groups.append((start, bars, len(pattern)))
    for start, bars, end in groups:
        if not bars:
            continue
        edges = [start - 1, *bars, end]
        for k in range(len(bars) + 1):
            if k == 0:
                yield pattern[:start] + pattern[bars[0] + 1 :]
            else:
                yield pattern[: edges[k]] + pattern[edges[k + 1] :]


def test_the_alternative_dropper_finds_every_alternative():
    assert sorted(drop_each_alternative(r"\b(ab|c)d|e(?:f|g|h)")) == sorted(
        [
            r"\b(c)d|e(?:f|g|h)",
            r"\b(ab)d|e(?:f|g|h)",
            r"\b(ab|c)d|e(?:g|h)",
            r"\b(ab|c)d|e(?:f|h)",
            r"\b(ab|c)d|e(?:f|g)",
            r"e(?:f|g|h)",
            r"\b(ab|c)d",
        ]
    )


@pytest.mark.parametrize("table", ["FORBIDDEN_CODE", "FORBIDDEN_TEXT"])
def test_no_alternative_of_a_forbidden_pattern_can_be_dropped_unnoticed(table, monkeypatch):
    patterns = getattr(rules, table)
    unnoticed = []
    for idx, (pattern, what) in enumerate(patterns):
        for dropped in drop_each_alternative(pattern):
            monkeypatch.setattr(rules, table, patterns[:idx] + ((dropped, what),) + patterns[idx + 1 :])
            if all(what in found(line + "\n") for line in FLAGGED[what]):
                unnoticed.append(dropped)
        monkeypatch.setattr(rules, table, patterns)
    assert unnoticed == []


# ---- where a violation is, and what the source around it does ----------------------------------------


@pytest.mark.parametrize(
    "line,what",
    [
        ('const char* p = "/proc/self/maps";', "reaching into"),
        ('asm volatile("syscall");', "system call"),
        ("void* h = dlopen(0, 0);", "loading a library"),
    ],
)
@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_a_violation_is_found_on_any_line(line, what, position):
    before = {"first": "", "middle": "int a = 1;\nint b = 2;\n", "last": "int a = 1;\nint b = 2;\nint c = 3;\n"}
    after = {"first": "int x = 1;\nint y = 2;\n", "middle": "int y = 2;\n", "last": ""}
    src = before[position] + line + "\n" + after[position]
    v = rules.check_source(src)
    assert [(x.line, what in x.rule) for x in v] == [(src.splitlines().index(line) + 1, True)]
    assert v[0].text == line


def test_violations_come_sorted_by_line_with_their_text():
    src = HEAD + "k<<<1, 2>>>(p);\nint fd = open(n, 0);\n#include <thread>\nexit(1);\n"
    v = rules.check_source(src)
    assert [(x.line, x.rule.split(" ")[0]) for x in v] == [(3, "a"), (4, "file"), (5, "include"), (6, "ending")]
    assert str(v[1]) == "line 4: file access from the kernel: int fd = open(n, 0);"


def test_two_rules_on_one_line_are_both_reported():
    v = rules.check_source('void* h = dlopen("/proc/self/exe", 1);\n')
    assert sorted(x.rule for x in v) == ["loading a library at run time", "reaching into the process or system"]
    assert {x.line for x in v} == {1}


def test_an_include_line_is_judged_as_an_include_only():
    # the rest of an include line is the header's name, not code
    assert found("#include <stdio.h> // dlopen() exit(0)\nint x;\n") == []


# the headers a kernel may include, written out: a header added to or dropped from the rule's set
# shows up here as a failing test
ALLOWED_HEADERS = [
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
]


def test_the_allowed_headers_are_exactly_the_listed_ones():
    assert len(set(ALLOWED_HEADERS)) == len(ALLOWED_HEADERS) == 29
    assert sorted(rules.ALLOWED_INCLUDES) == sorted(ALLOWED_HEADERS)


@pytest.mark.parametrize("header", ALLOWED_HEADERS)
def test_every_allowed_header_may_be_included(header):
    assert rules.check_source(f"#include <{header}>\n") == []
    assert rules.check_source(f"  #  include<{header}>  \n") == []


@pytest.mark.parametrize(
    "line,rule",
    [
        ("#include <cuda_runtime.hpp>", "include <cuda_runtime.hpp> is not"),
        ("#include <cuda/barrier>", "include <cuda/barrier> is not"),
        ('#include "cuda_runtime.h"', "local include"),
        ("#include <stdio.h", "not a plain <header>"),
        ("#include stdio.h", "not a plain <header>"),
        ("#include_next <stdio.h>", "not a plain <header>"),
        ("%:include <stdio.h> x", "not a plain <header>"),
    ],
)
def test_includes_that_just_fail(line, rule):
    v = rules.check_source("int a;\n" + line + "\nint b;\n")
    assert [(x.line, rule in x.rule) for x in v] == [(2, True)]


@pytest.mark.parametrize(
    "config,ok",
    [
        ("grid, block, smem, stream", True),
        ("dim3(a, b, c), dim3(32, 4), f(x, y), s[i]", True),
        ("g, b, smem_for(T{1, 2}), streams[idx(0, 1)]", True),
        ("g,\n b,\n 0,\n s", True),
        # commas inside template argument lists separate no launch arguments
        ("G<1, 2>::x, B<3, 4>::y, 0, s", True),
        ("A<B<1, 2>, 3>::x, b, smem<int, 4>(n), streams<A, B>[0]", True),
        ("G<(a > b), 2>::x, b, 0, s", True),
        ("Cfg<1,2>::grid, Cfg<1,2>::block, Cfg<1,2>::smem, s", True),
        # a `<` or `>` that is an operator opens and closes nothing
        ("n < m, b, 0, s", True),
        ("n<4 ? a : b, 256, 0, s", True),
        ("n << m, x > y, 0, s", True),
        ("n <= m, x > y, 0, s", True),
        ("n < m, x >= y, 0, s", True),
        ("n < m, p->x, 0, s", True),
        ("f(x < y, x < z), d > e, 0, s", True),
        ("(a < b), c > d, 0, s", True),
        ("G<1,2>::x, B<3,4>::y", False),
        ("G < 1, 2 >::x, B < 3, 4 >::y", False),
        ("A<B<1, 2>, 3>::x, b, 0", False),
        ("G<(a > b), 2>::x, b, 0", False),
        ("G<x[0], 1>::y, b, 0", False),
        ("G<T{1}, 2>::y, b, 0", False),
        ("G<x[a > b], 1>::y, b, 0", False),
        ("a < b, c > d, 0, s", False),  # read as a template: parentheses around a comparison make it clear
        ("grid, block, smem", False),
        ("dim3(a, b, c), dim3(32, 4), f(x, y)", False),
        ("g, b", False),
        ("g", False),
        ("", False),
        ("  ", False),
    ],
)
def test_a_launch_needs_four_arguments(config, ok):
    v = rules.check_source("int a;\nk<<<" + config + ">>>(p);\nint b;\n")
    assert v == [] if ok else [(x.line, x.rule.startswith("a kernel launch without")) for x in v] == [(2, True)]


def test_a_launch_with_template_arguments_and_no_stream_is_refused():
    v = rules.check_source("int a;\nk<<<G<1,2>::x, B<3,4>::y>>>(p);\nk2<<<G<1,2>::x, B<3,4>::y, 0, s>>>(p);\n")
    assert [(x.line, x.rule, x.text) for x in v] == [
        (
            2,
            "a kernel launch without the stream passed in (use <<<grid, block, smem, stream>>>)",
            "k<<<G<1,2>::x, B<3,4>::y>>>(p);",
        )
    ]


@pytest.mark.parametrize("config", ["g, b, 0, s, extra", "G<1, 2>::x, b, 0, s, f(1, 2)", "a, b, c, d, e, f"])
def test_more_than_four_arguments_are_not_a_launch_without_its_stream(config):
    """nvcc refuses a launch of more than four arguments; this rule reports only the ones with fewer,
    whose stream is missing (a count of template commas as arguments once let `G<1,2>::x, B<3,4>::y`
    pass as four)."""
    assert rules._launch_args(config) > 4
    assert rules.check_source("k<<<" + config + ">>>(p);\n") == []


def test_the_line_of_a_launch_is_where_it_starts():
    v = rules.check_source("int a;\nint b;\nk<<<grid,\n  block>>>(p);\nk2<<<1, 2, 3, s>>>(p);\nk3<<<1>>>(q);\n")
    assert [x.line for x in v] == [3, 6] and v[0].text == "k<<<grid,"


# ---- comments and literals -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        "/* dlopen(0, 0); never closed\nexit(1);\n",
        "int a; // exit(1);\n",
        "// a\n// b exit(1)\n",
        'const char* s = "a \\" exit(1) \\" b";\n',
        "char q = '\\''; const char* s = \"exit(1)\";\n",
        "char h = '\\x41'; char o = '\\101'; const char* s = \"exit(1)\";\n",
        'const char* r = R"(exit(1) " dlopen(x))";\n',
        'const char* r = R"xy(exit(1) )" dlopen(x))xy";\n',
        'const char* r = R"(line one\nexit(1)\n)";\n',
    ],
)
def test_code_inside_comments_and_literals_is_not_code(src):
    assert found(src) == []


@pytest.mark.parametrize(
    "src",
    [
        "/* a */ exit(1);\n",
        "/* a\n b */ exit(1);\n",
        "int n = 1'000; exit(1);\n",
        'const char* s = "a"; exit(1);\n',
        'const char* s = "unterminated\nexit(1);\n',
        "char c = 'x'; exit(1);\n",
        'const char* r = R"(x)"; exit(1);\n',
        'const char* r = R"ab(x)ab"; exit(1);\n',
    ],
)
def test_code_after_comments_and_literals_is_code(src):
    assert "ending the process (return a KS_ERR_* code instead)" in found(src)


def test_lines_stay_true_after_multi_line_comments_and_raw_strings():
    src = 'int a;\n/* one\ntwo\n*/\nconst char* r = R"(x\ny\n)";\nexit(1);\n'
    assert [v.line for v in rules.check_source(src)] == [8]


def test_text_rules_see_strings_but_not_comments():
    assert found('// "/proc/self/maps"\n/* LD_PRELOAD */\n') == []
    assert found('const char* p = "/dev/shm/x"; // fine\n') == ["reaching into the process or system"]


def test_enforce_text_passes_clean_code_and_names_the_path(tmp_path):
    rules.enforce_text(HEAD + "int x;\n", "ok.cu")
    with pytest.raises(rules.DependencyRuleError) as e:
        rules.enforce_text(HEAD + "exit(1);\n", "bad.cu")
    assert e.value.path == "bad.cu" and [v.line for v in e.value.violations] == [3]
    assert str(e.value) == (
        "bad.cu breaks the dependency-free rule (CUDA runtime/driver API and inline PTX only, "
        "one file):\n  line 3: ending the process (return a KS_ERR_* code instead): exit(1);"
    )
    p = tmp_path / "ok.cu"
    p.write_text(HEAD + "int x;\n")
    rules.enforce(p)


# ---- blanking: every comment and literal replaced by spaces, column for column ----------------------

STRIP_SRC = 'a /* b */ c // d\n"e\\"f" \'g\' R"x(h)x" 1\'000 \'\\n\'\n#include "k.h"\n/* two\nlines */ x\n'


def test_blanking_keeps_every_column_and_blanks_exactly_the_comments_and_literals():
    assert rules._strip(STRIP_SRC, strings=True) == (
        'a         c     \n"    " \' \' R"     " 1\'000 \'  \'\n#include "k.h"\n      \n         x\n'
    )
    assert rules._strip(STRIP_SRC, strings=False) == (
        'a         c     \n"e\\"f" \'g\' R"x(h)x" 1\'000 \'\\n\'\n#include "k.h"\n      \n         x\n'
    )


@pytest.mark.parametrize(
    "src",
    [
        STRIP_SRC,
        "int a; /* x */ int b; // y\n",
        "/*/ exit(1); */ int z;\n",
        "const char* s = \"a\\\\\"; int n = 1'000'000; char c = '\\x41';\n",
        'const char* r = R"(a\n)" b\n)"; int q;\n',
        'const char* r = R"d(x)d"; // tail\n',
        'const char* u = "unterminated\nint v;\n',
        'k<<<1, 2, 3, s>>>(p); char q = \'"\'; const char* w = "//";\n',
    ],
)
@pytest.mark.parametrize("strings", [True, False])
def test_blanking_only_ever_turns_characters_into_spaces(src, strings):
    out = rules._strip(src, strings=strings)
    assert len(out) == len(src)
    assert all(o == s or o == " " for o, s in zip(out, src))
    assert [i for i, ch in enumerate(out) if ch == "\n"] == [i for i, ch in enumerate(src) if ch == "\n"]


@pytest.mark.parametrize(
    "src",
    [
        "/*/ exit(1); */\n",  # a comment is not closed by its own opening
        'const char* r = R"(exit(1)',  # a raw string never closed runs to the end
        'const char* r = R"x(exit(1)\n)" exit(1)',  # ... and is not closed by another delimiter
        'const char* s = "a\texit(1)";\n',  # a tab inside a string
        "int " + "x" * 300 + '; const char* s = "exit(1)',  # a string never closed, at the end
        'const char* s = "ends with a backslash \\',
    ],
)
def test_code_hidden_in_odd_comments_and_literals_is_not_code(src):
    assert found(src) == []


def test_code_right_after_a_raw_string_is_code():
    assert "ending the process (return a KS_ERR_* code instead)" in found('f(R"(x)", exit(1));\n')


def test_an_include_violation_shows_its_own_line():
    v = rules.check_source('int a;\nint b;\nint c;\n#include <thread>\n#include "x.h"\n#include_next <x>\n')
    assert [(x.line, x.text) for x in v] == [(4, "#include <thread>"), (5, '#include "x.h"'), (6, "#include_next <x>")]


def test_an_unterminated_string_does_not_shift_the_lines_after_it():
    v = rules.check_source('const char* u = "abc\nint x;\nexit(1);\n')
    assert [(x.line, x.text) for x in v] == [(3, "exit(1);")]


def test_blanking_turns_tabs_and_control_characters_into_spaces_too():
    src = "/*\tx\x01*/ '\t' \"\t\x02\" // \t\n"
    assert rules._strip(src, strings=True) == " " * 7 + " ' ' \"  \" " + " " * 4 + "\n"


def test_a_launch_on_the_first_line_after_a_blank_one_is_on_line_two():
    assert [v.line for v in rules.check_source("\nk<<<1, 2>>>(p);\n")] == [2]


def test_a_violation_cannot_be_changed_after_it_is_found():
    import dataclasses

    v = rules.check_source("exit(1);\n")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.line = 9


def test_a_string_ending_in_an_escaped_backslash_ends_at_its_quote():
    assert "ending the process (return a KS_ERR_* code instead)" in found('const char* s = "\\\\"; exit(1);\n')


def test_a_line_comment_at_the_very_end_of_the_file():
    assert rules.check_source("int a; // exit(1)") == []
    assert rules._strip("int a; // x", strings=True) == "int a;     "


def test_an_empty_string_keeps_both_quotes():
    assert rules._strip('x = ""; y = "" "";\n', strings=True) == 'x = ""; y = "" "";\n'


def test_an_empty_block_comment_ends_where_it_ends():
    assert "ending the process (return a KS_ERR_* code instead)" in found("/**/ exit(1);\n")


def test_code_right_after_a_block_comment_is_code():
    assert "ending the process (return a KS_ERR_* code instead)" in found("/* a */exit(1);\n")
    assert rules._strip("/*a*/b", strings=True) == "     b"


@pytest.mark.parametrize("before", ["", " ", "x=", "u8", "f(a,\n  "])
def test_a_raw_string_is_one_literal_wherever_its_quote_sits(before):
    # the quote at offsets 1, 2, 3, 3 and 8 (the first file starts with the raw string); read as a
    # plain string, the quotes inside would end it early and show what follows as code
    assert rules._strip(before + 'R"(a"b)" x', strings=True) == before + 'R"     " x'
    assert rules.check_source(before + 'R"(a " exit(1) " b)";\n') == []


def test_a_lone_quote_at_the_end_of_the_file_stays_one_quote():
    assert rules._strip('"', strings=True) == '"'
    assert rules._strip('x = "', strings=True) == 'x = "'


@pytest.mark.parametrize("before", ["", "int a;\n"])
def test_the_quotes_of_an_include_open_no_string_on_any_line(before):
    # the first line included, where no newline comes before the include
    line = before.count("\n") + 1
    computed = "an include that is not a plain <header> (computed or #include_next)"
    src = before + '#include <x">\n'
    assert rules._strip(src, strings=True) == src
    assert [(v.line, v.rule) for v in rules.check_source(src)] == [(line, computed)]
    src = before + '#include R"(\nexit(1);\n)"\n'
    assert [(v.line, v.rule) for v in rules.check_source(src)] == [
        (line, computed),
        (line + 1, "ending the process (return a KS_ERR_* code instead)"),
    ]
