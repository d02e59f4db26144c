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


@pytest.mark.parametrize("line,what", [
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
    ("void* h = dlopen(\"libcublas.so\", 1);", "loading a library"),
    ("void* f = dlsym(0, \"x\");", "loading a library"),
    ("cudaStream_t s; cudaStreamCreateWithFlags(&s, 1);", "creating a stream"),
    ("CUstream s; cuStreamCreate(&s, 0);", "creating a stream"),
    ("k<<<1, 32, 0, cudaStreamPerThread>>>(p);", "a stream other than"),
    ("std::thread t([]{});", "host thread"),
    ("pthread_create(&t, 0, f, 0);", "host thread"),
    ("auto f = std::async(g);", "host thread"),
    ("k<<<grid, 128>>>(p);", "without the stream"),
    ("k<<<grid, 128, smem>>>(p);", "without the stream"),
    ("cudaGraphLaunch(g, s);", "graphs"),
    ("extern \"C\" int PyRun_SimpleString(const char*);", "Python C API"),
    ("PyGILState_STATE st = PyGILState_Ensure();", "Python C API"),
    ("system(\"nvidia-smi -lgc 2000\");", "starting a process"),
    ("FILE* f = fopen(\"results/bench.jsonl\", \"a\");", "file access"),
    ("exit(0);", "ending the process"),
    ("const char* e = getenv(\"HOME\");", "environment"),
    ("__attribute__((constructor)) static void early() {}", "loaded"),
    ("asm volatile(\"syscall\");", "system call"),
    ("const char* p = \"/proc/self/mem\";", "reaching into"),
    ("cudaDeviceReset();", "contexts"),
])
def test_each_forbidden_thing_is_found(line, what):
    hits = found(line + "\n")
    assert any(what in h for h in hits), hits


@pytest.mark.parametrize("src", [
    "// cublasSgemm would be faster, but no\n",
    "/* #include <cublas_v2.h>\n   dlopen(\"x\") std::thread */\n",
    "const char* msg = \"cublasSgemm, dlopen(), std::thread, exit(1)\";\n",
    "printf(\"kernel launch: k<<<grid, block>>>\\n\");\n",
    "char c = 'x'; int n = 1'000'000;\n",
    "k<<<dim3(a, b), 128, smem, stream>>>(p);\n",
    "k<<<grid, Cfg::threads, Cfg::smem(d, 2), stream>>>(p);\n",
    "__device__ int is_open(int x) { return x; }\nint Pyramid = 1;\n",
    "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0}, {%1}, {%2}, {%3};\" : \"+f\"(d) : \"r\"(a), \"r\"(b), \"f\"(c));\n",
])
def test_comments_strings_and_honest_code_are_not_violations(src):
    assert found(src) == []


def test_a_quote_in_a_character_literal_cannot_hide_code():
    src = "char q = '\"'; int x = cublasSgemm(1); const char* s = \"\";\n"
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
