"""Building kernels: nvcc's errors, ptxas's fatal warnings, the resource report, the cache, the
private copy of the source, and the check of what a library imports."""

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite import build as B
from kernelseek_suite.cli import main
from kernelseek_suite.rules import DependencyRuleError

ROOT = Path(__file__).resolve().parent.parent
KERNELS = Path(__file__).parent / "kernels"
REFERENCE = ROOT / "kernels" / "reference" / "attn_fwd_ref.cu"

# as nvcc 13.0 prints them (C7515 in the form reported for FA3's mainloop)
PTXAS_LOG = """\
ptxas info    : 16 bytes gmem
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function '_Z4attnv'
ptxas info    : Compiling entry function '_Z4attnv' for 'sm_90a'
ptxas info    : Function properties for _Z4attnv
    8 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem, 528 bytes cmem[0]
ptxas warning : Registers are spilled to local memory in function '_Z4attnv', 32 bytes spill stores
ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90a'
ptxas info    : Used 32 registers
attn.cu(922): warning #549-D: variable "acc_o" is used before its value is set
Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"
"""


def test_parse_ptxas_reads_resources_and_both_kinds_of_warning():
    funcs, warnings = B.parse_ptxas(PTXAS_LOG)
    assert [f.name for f in funcs] == ["_Z4attnv", "_Z5otherv"]
    f = funcs[0]
    assert (f.registers, f.shared_bytes, f.stack_bytes, f.spill_store_bytes, f.spill_load_bytes) == (
        168,
        4096,
        8,
        12,
        20,
    )
    assert funcs[1].registers == 32 and funcs[1].shared_bytes == 0
    assert len(warnings) == 3 and "#549-D" in warnings[2]  # the front end's, not fatal
    assert B.fatal_warnings(warnings) == [warnings[0]] and "C7515" in warnings[0]


def test_fatal_warnings_are_the_three_codes():
    ws = [
        "ptxas info : (C7519) warpgroup.arrive is injected",
        "ptxas info : (C7511) ... insufficient register",
        "ptxas info : (C7515) ...",
        "ptxas info : (C7510) something else",
        "ptxas warning : spills",
    ]
    assert B.fatal_warnings(ws) == ws[:3]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.nvcc
def test_a_kernel_that_does_not_compile_fails_with_nvccs_words(cache):
    with pytest.raises(B.BuildError) as e:
        B.build(KERNELS / "does_not_compile.cu", "sm90")
    assert "undeclared_name" in str(e.value) and "does_not_compile.cu" in str(e.value)
    assert not list((cache / "build").glob("*/kernel.so"))


@pytest.mark.nvcc
def test_ptxas_performance_warnings_fail_the_build(cache):
    with pytest.raises(B.BuildError) as e:
        B.build(KERNELS / "ptxas_serialized_wgmma.cu", "sm90")
    assert "C7519" in str(e.value) or "C7511" in str(e.value)


@pytest.mark.nvcc
def test_build_cli_fails_with_exit_code_2(cache):
    r = CliRunner().invoke(main, ["build", str(KERNELS / "does_not_compile.cu"), "--arch", "sm90"])
    assert r.exit_code == 2 and "build failed" in r.output


@pytest.mark.nvcc
def test_reference_builds_without_a_gpu_and_reports_resources(cache):
    r = CliRunner().invoke(main, ["build", str(REFERENCE), "--arch", "sm90"])
    assert r.exit_code == 0, r.output
    assert "registers" in r.output and "attn_fwd_ref_kernel" in r.output
    built = B.build(REFERENCE, "sm90")
    assert built.cached and len(built.functions) == 5 and Path(built.library).exists()
    assert not B.fatal_warnings(built.warnings)


@pytest.mark.nvcc
def test_the_compiled_source_is_the_one_that_was_checked(cache, tmp_path, monkeypatch):
    """The source is read once: swapping the file while nvcc runs changes nothing."""
    src = tmp_path / "k.cu"
    src.write_text((KERNELS / "spin.cu").read_text())
    real_run = subprocess.run

    def swap_then_run(cmd, *a, **kw):
        if "nvcc" in str(cmd[0]) and "--version" not in cmd:
            src.write_text('#include "/etc/passwd"\n#error swapped in after the check\n')
        return real_run(cmd, *a, **kw)

    monkeypatch.setattr(B.subprocess, "run", swap_then_run)
    built = B.build(src, "sm90")
    assert Path(built.library).exists()
    assert built.source_sha256 == B.hashlib.sha256((KERNELS / "spin.cu").read_bytes()).hexdigest()


@pytest.mark.nvcc
def test_a_library_that_imports_the_python_api_is_rejected(cache, tmp_path):
    """Token pasting hides the name from the source rules; the symbol table does not lie."""
    src = tmp_path / "sneaky.cu"
    src.write_text(
        (KERNELS / "spin.cu").read_text()
        + """
#define JOIN(a, b) a##b
extern "C" int JOIN(Py, Run_SimpleString)(const char*);
extern "C" int ks_extra(void) { return JOIN(Py, Run_SimpleString)("pass"); }
"""
    )
    with pytest.raises(DependencyRuleError) as e:
        B.build(src, "sm90")
    assert "PyRun_SimpleString" in str(e.value) and "Python C API" in str(e.value)


@pytest.mark.nvcc
def test_a_library_planted_in_the_cache_is_checked_again(cache, tmp_path):
    """Someone who can write the cache can put any library under the key of an honest source; the
    imported-symbol check runs on cache hits too."""
    src = tmp_path / "honest.cu"
    src.write_text((KERNELS / "spin.cu").read_text())
    built = B.build(src, "sm90")
    evil = tmp_path / "evil.cu"
    evil.write_text(
        (KERNELS / "spin.cu").read_text() + 'extern "C" int PyRun_SimpleString(const char*);\n'
        'extern "C" int ks_x(void) { return PyRun_SimpleString("pass"); }\n'
    )
    subprocess.run([B.nvcc_path(), "-shared", "-Xcompiler", "-fPIC", "-o", built.library, str(evil)], check=True)
    with pytest.raises(DependencyRuleError) as e:
        B.build(src, "sm90")
    assert "PyRun_SimpleString" in str(e.value) and "cached" in str(e.value)


def test_different_kernels_build_side_by_side_and_one_kernel_once_at_a_time(cache, tmp_path, monkeypatch):
    """run-once builds its variants in threads: nvcc runs for different sources overlap, while two
    builds of the same text (the background build and a later request for it) never do."""
    import threading
    import time

    spans: dict[str, list[tuple[float, float]]] = {}
    guard = threading.Lock()

    def fake_compile(nvcc, flags, src, source_bytes, arch, tmp):
        start = time.monotonic()
        time.sleep(0.3)
        with guard:
            spans.setdefault(src.name, []).append((start, time.monotonic()))
        return [], [], "", False

    monkeypatch.setattr(B, "_compile", fake_compile)
    monkeypatch.setattr(B, "nvcc_path", lambda: "/usr/bin/true")
    monkeypatch.setattr(B, "nvcc_version", lambda: "test")
    a, b, a2 = tmp_path / "a.cu", tmp_path / "b.cu", tmp_path / "a2.cu"
    a.write_text("// kernel a\n")
    b.write_text("// kernel b\n")
    a2.write_text("// kernel a\n")  # the same text as a.cu under another name
    jobs = [threading.Thread(target=B.build, args=(p, "sm90"), kwargs={"force": True}) for p in (a, b, a2)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join()
    # whichever of a.cu and a2.cu took the text's turn first overlapped b.cu; the other came after it
    (s1, e1), (s2, e2) = sorted([spans["a.cu"][0], spans["a2.cu"][0]])
    b_start, b_end = spans["b.cu"][0]
    assert s1 < b_end and b_start < e1  # different texts overlapped
    assert e1 <= s2  # the same text, one build after the other


def test_one_build_folder_is_built_by_one_process_at_a_time(tmp_path):
    """Processes sharing a cache (the test workers, two sessions) take turns on one build folder: the
    second finds what the first built, where it would have built it again and replaced the folder
    while the first was reading from it."""
    import sys

    root = tmp_path / "build" / "0123abcd"
    done = tmp_path / "first-done"
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from kernelseek_suite.build import _folder_lock\n"
            "with _folder_lock(Path(sys.argv[1])):\n"
            "    print('holding', flush=True)\n"
            "    time.sleep(0.5)\n"
            "    Path(sys.argv[2]).write_text('built')\n",
            str(root),
            str(done),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline() == "holding\n"
        with B._folder_lock(root):
            assert done.read_text() == "built"  # the first process's turn ended before this one began
    finally:
        first.wait(timeout=60)
    assert first.returncode == 0
    assert list(root.parent.iterdir()) == []  # the lock's file goes with the last turn


def test_a_cache_that_cannot_be_written_is_read_without_a_lock(tmp_path):
    (tmp_path / "build").write_text("a file where the cache's folder would be")
    with B._folder_lock(tmp_path / "build" / "0123abcd"):
        pass
