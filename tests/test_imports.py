"""What a kernel's compiled code may import and run at load time (suite/imports.py): the allow-list
and the load-time checks on objects compiled here with gcc (no nvcc needed), the driver-function
lookups in preprocessed code, and -- with nvcc -- `kernelseek-suite build` refusing kernels with exit 2
while our own kernels pass."""

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite import build as B
from kernelseek_suite import imports as I
from kernelseek_suite.cli import main

ROOT = Path(__file__).resolve().parent.parent
SPIN = Path(__file__).parent / "kernels" / "spin.cu"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def compile_object(tmp_path, code: str, lang: str = "c") -> Path:
    src = tmp_path / f"k.{lang}"
    src.write_text(code)
    obj = tmp_path / "k.o"
    compiler = "gcc" if lang == "c" else "g++"
    subprocess.run([compiler, "-c", "-O1", "-fPIC", "-o", str(obj), str(src)], check=True)
    return obj


@needs_gcc
def test_the_symbols_a_kernel_needs_pass(tmp_path):
    obj = compile_object(
        tmp_path,
        """
#include <string.h>
#include <stdio.h>
#include <math.h>
typedef int cudaError_t;
cudaError_t cudaFuncSetAttribute(const void*, int, int);
cudaError_t cudaGetLastError(void);
cudaError_t cudaMemsetAsync(void*, int, unsigned long, void*);
int ks_attn_fwd(const void* p, void* stream) {
  char buf[32];
  snprintf(buf, sizeof buf, "%f", sqrtf(*(const float*)p));
  memset(buf, 0, strlen(buf));
  cudaMemsetAsync((void*)p, 0, 4, stream);
  return cudaFuncSetAttribute(p, 8, 1) + cudaGetLastError();
}
""",
    )
    assert I.object_violations(obj) == []
    assert {"cudaFuncSetAttribute", "cudaGetLastError", "snprintf", "sqrtf"} <= set(I.object_imports(obj))


@needs_gcc
def test_environment_files_and_host_callbacks_are_refused_by_name(tmp_path):
    """The attack of the issue: reading the process's environment, a file under /proc, and a host
    callback on the stream -- to learn when it is being timed."""
    obj = compile_object(
        tmp_path,
        """
#define _LARGEFILE64_SOURCE
#include <stdio.h>
extern char** environ;
typedef int cudaError_t;
cudaError_t cudaStreamAddCallback(void*, void (*)(void*, int, void*), void*, unsigned);
static void cb(void* s, int e, void* d) {}
int ks_attn_fwd(const void* p, void* stream) {
  FILE* f = fopen64("x", "r");
  return environ[0][0] + (f != 0) + cudaStreamAddCallback(stream, cb, 0, 0);
}
""",
    )
    bad = I.object_violations(obj)
    text = "\n".join(bad)
    assert len(bad) == 3, bad
    assert "`environ` (the process environment)" in text
    assert "`fopen64` (files and file descriptors)" in text
    assert "`cudaStreamAddCallback` (host code run from a stream" in text


@pytest.mark.parametrize(
    "name,kind",
    [
        ("getenv", "the process environment"),
        ("secure_getenv", "the process environment"),
        ("open64", "files"),
        ("readlink", "files"),
        ("__xstat64", "files"),
        ("mmap", "files"),
        ("fork", "processes"),
        ("execve", "processes"),
        ("syscall", "processes"),
        ("posix_spawnp", "processes"),
        ("socket", "sockets"),
        ("connect", "sockets"),
        ("dlopen", "loading code"),
        ("dlsym", "loading code"),
        ("cuGetProcAddress_v2", "loading code"),
        ("cudaLaunchHostFunc", "host code run from a stream"),
        ("cuLaunchHostFunc", "host code run from a stream"),
        ("cudaGraphLaunch", "graphs"),
        ("cudaStreamBeginCapture", "graphs"),
        ("cudaIpcGetMemHandle", "inter-process"),
        ("shm_open", "inter-process"),
        ("pthread_create", "threads"),
        ("thrd_create", "threads"),
        ("signal", "signals"),
        ("sigaction", "signals"),
        ("raise", "signals"),
        ("clock_gettime", "clocks"),
        ("gettimeofday", "clocks"),
        ("cudaDeviceSetLimit", "device-wide"),
        ("cudaStreamSetAttribute", "device-wide"),
        ("cudaCtxResetPersistingL2Cache", "device-wide"),
        ("cuCtxSetLimit", "device-wide"),
        ("cudaStreamCreateWithFlags", "streams, events"),
        ("cudaEventRecord", "streams, events"),
        ("PyRun_SimpleString", "Python C API"),
        ("cublasGemmEx", "a library"),
        ("cudaMallocHost", "host memory"),
        ("cudaMemcpy", "host memory"),
        ("some_helper", "not on the allow-list"),
    ],
)
def test_every_refused_name_says_what_it_is(name, kind):
    assert not I.allowed(name)
    assert kind in I.kind_of(name)


def test_the_allow_list_holds_what_our_kernels_import_and_nothing_of_the_refused_kinds():
    for name in (
        "cudaFuncSetAttribute",
        "cudaGetLastError",
        "cudaMalloc",
        "cudaMemsetAsync",
        "cudaGetDevice",
        "cudaDeviceGetAttribute",
        "cudaGetDriverEntryPointByVersion",
        "cudaLaunchKernelExC",
        "__cudaRegisterFatBinary",
        "__cudaLaunchKernel",
        "__cxa_guard_acquire",
        "atexit",
        "_ZSt20__throw_length_errorPKc",
        "expf",
        "memcpy",
        "snprintf",
    ):
        assert I.allowed(name), name
    for name in I.ALLOWED:
        assert I.kind_of(name) in ("not on the allow-list", "loading code or looking functions up at run time"), (
            name,
            I.kind_of(name),
        )


@needs_gcc
@pytest.mark.parametrize(
    "code,lang,words",
    [
        (
            "void side(void); static void f(void) __attribute__((constructor)); static void f(void) { side(); }",
            "c",
            "static constructor in `.init_array`: `f` runs when the library is loaded",
        ),
        ("void side(); [[gnu::constructor]] static void hidden() { side(); }", "cpp", "`_ZL6hiddenv` runs"),
        ("int side(); struct S { S() { side(); } }; static S s; int g() { return 0; }", "cpp", "_GLOBAL__sub_I_"),
        (
            "void side(void); static void f(void) __attribute__((destructor)); static void f(void) { side(); }",
            "c",
            "static destructor in `.fini_array`",
        ),
        (
            "static int impl(void) { return 1; } static int (*resolve(void))(void) { return impl; }\n"
            'int g(void) __attribute__((ifunc("resolve")));',
            "c",
            "IFUNC",
        ),
        (
            '__attribute__((section(".init_array"), used)) static void* p = 0; int g(void) { return 0; }',
            "c",
            "entries of which only 0",
        ),
    ],
)
def test_code_that_runs_at_load_time_is_refused(tmp_path, code, lang, words):
    obj = compile_object(tmp_path, code, lang)
    found = I.load_time_code(obj)
    assert any(words in f for f in found), found


@needs_gcc
def test_nvccs_own_registration_constructor_is_the_one_allowed(tmp_path):
    nvcc_like = (
        "void side(void); static void __sti____cudaRegisterAll(void) __attribute__((constructor));\n"
        "static void __sti____cudaRegisterAll(void) { side(); }\n"
    )
    obj = compile_object(tmp_path, nvcc_like)
    assert I.load_time_code(obj) == [] and I.object_imports(obj) == ["side"]
    obj = compile_object(tmp_path, nvcc_like.replace("(void)", "()"), "cpp")  # as g++ names it
    assert I.load_time_code(obj) == []
    two = compile_object(
        tmp_path,
        nvcc_like + "static void mine(void) __attribute__((constructor));\nstatic void mine(void) { side(); }\n",
    )
    found = I.load_time_code(two)
    assert len(found) == 1 and "`mine`" in found[0]


def preprocessed(own: str, path="/tmp/k.cu") -> str:
    return (
        f'# 1 "{path}"\n# 1 "/usr/local/cuda/include/cuda_runtime_api.h" 1\n'
        "extern cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, "
        "unsigned int v, unsigned long long f, int *s);\n"
        f'# 5 "{path}" 2\n' + own + '\nextern "C" int ks_attn_fwd(const void* p, void* s) { return 0; }\n'
    )


@pytest.mark.parametrize(
    "own,ok",
    [
        (
            'static void* f() { void* p; cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, 0, 0); '
            "return p; }",
            True,
        ),
        ('void* f() { void* p; cudaGetDriverEntryPoint ( "cuGetErrorString" , &p, 0); return p; }', True),
        (
            'void* f() { void* p; cudaGetDriverEntryPointByVersion("cuLaunchHostFunc", &p, 12000, 0, 0); return p; }',
            False,
        ),
        ("void* f(const char* n) { void* p; cudaGetDriverEntryPointByVersion(n, &p, 12000, 0, 0); return p; }", False),
        ("auto g = cudaGetDriverEntryPointByVersion;", False),
        (
            'void* f() { void* p; cudaGetDriverEntryPointByVersion("cuTensorMap" "EncodeTiled", &p, 1, 0, 0); '
            "return p; }",
            False,
        ),
    ],
)
def test_driver_functions_are_looked_up_only_by_a_literal_name_on_the_list(own, ok):
    bad = I.entry_point_violations(preprocessed(own), "/tmp/k.cu")
    assert (bad == []) is ok, bad
    if "cuLaunchHostFunc" in own:
        assert "host code run from a stream" in bad[0]


def test_the_headers_declarations_are_not_the_kernels_lines():
    assert I.entry_point_violations(preprocessed("int x;"), "/tmp/k.cu") == []
    # lines marked as another file are not checked, and lines of no file named the kernel's are refused
    assert I.entry_point_violations(preprocessed("int x;", path="/tmp/other.cu"), "/tmp/k.cu")


def test_library_imports_unversioned_come_from_the_loading_process():
    ok = [
        ("malloc", True),
        ("__gmon_start__", False),
        ("_ITM_registerTMCloneTable", False),
        ("cuTensorMapEncodeTiled", False),
        ("_Znwm", True),
    ]
    assert I.library_violations(ok) == []
    bad = I.library_violations([("PyRun_SimpleString", False), ("cublasGemmEx", False), ("at_fn", False)])
    assert len(bad) == 3 and "Python C API" in bad[0] and "library" in bad[1] and "loading process" in bad[2]


# ---- with nvcc: the build ---------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


SNEAKY = """
#define JOIN(a, b) a##b
extern "C" char** JOIN(env, iron);
#include <stdio.h>
static void on_host(cudaStream_t, cudaError_t, void*) {}
extern "C" int ks_extra(cudaStream_t s) {
  FILE* f = JOIN(fopen, 64)("x", "r");
  return (int)JOIN(env, iron)[0][0] + (f != 0) + (int)JOIN(cudaStreamAdd, Callback)(s, on_host, 0, 0);
}
"""


@pytest.mark.nvcc
def test_build_refuses_environ_fopen64_and_a_stream_callback_with_exit_2(cache, tmp_path):
    """Token pasting keeps the names out of the source rules; the object's symbol table names them."""
    src = tmp_path / "sneaky.cu"
    src.write_text(SPIN.read_text() + SNEAKY)
    r = CliRunner().invoke(main, ["build", str(src), "--arch", "sm90"])
    assert r.exit_code == 2, r.output
    for name in ("environ", "fopen64", "cudaStreamAddCallback"):
        assert f"`{name}`" in r.output
    assert not list((cache / "build").glob("*/kernel.so"))


@pytest.mark.nvcc
def test_build_refuses_a_static_constructor_and_a_driver_lookup_by_a_computed_name(cache, tmp_path):
    ctor = tmp_path / "ctor.cu"
    ctor.write_text(SPIN.read_text() + "struct Early { Early(); };\nEarly::Early() {}\nstatic Early early;\n")
    with pytest.raises(B.rules.DependencyRuleError) as e:
        B.build(ctor, "sm90")
    assert "static constructor" in str(e.value)
    lookup = tmp_path / "lookup.cu"
    lookup.write_text(
        SPIN.read_text()
        + """
#define NAME(a, b) a##b
extern "C" void* ks_find(const char* n) {
  void* p = 0;
  cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion(n, &p, 12000, cudaEnableDefault, &q);
  return p;
}
"""
    )
    with pytest.raises(B.rules.DependencyRuleError) as e:
        B.build(lookup, "sm90")
    assert "literal function name" in str(e.value)


@pytest.mark.nvcc
@pytest.mark.parametrize(
    "kernel,arch",
    [
        ("kernels/reference/attn_fwd_ref.cu", "sm90"),
        ("tests/adversarial/honest.cu", "sm90"),
        ("kernels/hopper/flash_fwd_sm90.cu", "sm90"),
        ("kernels/blackwell/flash_fwd_sm100.cu", "sm100"),
    ],
)
def test_our_kernels_pass_the_allow_list(kernel, arch):
    # (the session's build cache, shared with the other build tests: a build found there is checked
    # again, which the second call below asserts too)
    built = B.build(ROOT / kernel, arch)  # raises DependencyRuleError when refused
    obj = Path(built.library).parent / "kernel.o"
    assert [n for n in I.object_imports(obj) if not I.allowed(n)] == [] and I.load_time_code(obj) == []
    assert B.build(ROOT / kernel, arch).cached  # and the cached copy is checked again
