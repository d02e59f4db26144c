"""The tests leave nothing outside the checkout and its venv: a run of a few of them, chosen among
those that write Dask's config and scratch space, matplotlib's and Chromium's files and the suite's
temporary folders, in a subprocess with a HOME and a TMPDIR of its own, writes nothing to that HOME
and leaves nothing in that TMPDIR (tests/conftest.py gives each session a private folder for both)."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from browser import missing as browser_missing

ROOT = Path(__file__).resolve().parent.parent
SUBSET = [
    "tests/test_scaleout_cli.py::test_batch_jobs_start_one_pinned_worker_per_gpu",  # ~/.config/dask
    "tests/test_scaleout_cli.py::test_bench_on_a_cluster_without_gpus_says_so",  # dask-scratch-space
    "tests/test_analysis.py::test_traces_analyze_writes_tables_and_a_timeline_per_run",  # matplotlib
    "tests/test_gate.py::test_the_wait_ends_when_the_gate_opens",  # ks-gate-*
    "tests/test_browser_pages.py::test_selfcheck_trace_viewer",  # ~/.config/chromium
]
# what the variables set by the caller could point elsewhere: the run below has none of them
ELSEWHERE = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "MPLCONFIGDIR", "DASK_CONFIG", "KERNELSEEK_CACHE")


def _run(tests: list[str], home: Path, tmp: Path, keep: bool, *options: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ELSEWHERE and k != "KERNELSEEK_KEEP_TEST_TMP"}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    if keep:
        env["KERNELSEEK_KEEP_TEST_TMP"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
def test_a_run_of_the_tests_writes_nothing_to_its_home_and_leaves_nothing_in_its_tmpdir():
    # short paths: Chromium's socket in the inner session's TMPDIR must stay below 108 characters
    tmp_path = Path(tempfile.mkdtemp(prefix="c"))
    home, tmp = tmp_path / "h", tmp_path / "t"
    home.mkdir()
    tmp.mkdir()
    p = _run(SUBSET, home, tmp, keep=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert _tree(home) == []
    # kept on request: the session's private folder is the only thing in TMPDIR, and what the
    # tests wrote (that went to HOME and /tmp before) is in it
    (private,) = tmp.iterdir()
    assert private.name.startswith("ks-tests-") and f"kept in {private}" in p.stdout
    assert (private / "home" / ".config" / "dask" / "jobqueue.yaml").is_file()
    assert (private / "home" / ".config" / "matplotlib").is_dir()
    assert (private / "tmp" / "dask-scratch-space").is_dir()
    assert any(c.name.startswith("pytest-of-") for c in (private / "tmp").iterdir())
    if browser_missing() is None:
        assert (private / "home" / ".config" / "chromium").is_dir()

    # and without the request to keep it, it goes at the end of the session
    home2, tmp2 = tmp_path / "h2", tmp_path / "t2"
    home2.mkdir()
    tmp2.mkdir()
    p = _run(SUBSET[:2], home2, tmp2, keep=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert _tree(home2) == [] and _tree(tmp2) == []

    # nor on two workers, as `make test` runs them: each worker's private folder goes too
    home3, tmp3 = tmp_path / "h3", tmp_path / "t3"
    home3.mkdir()
    tmp3.mkdir()
    p = _run(SUBSET[:2], home3, tmp3, False, "-n", "2", "--dist", "loadgroup")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "bringing up nodes" in p.stdout and _tree(home3) == [] and _tree(tmp3) == []
    shutil.rmtree(tmp_path)


def test_the_build_cache_of_the_tests_is_inside_the_checkout():
    assert Path(os.environ["KERNELSEEK_CACHE"]).resolve().is_relative_to(ROOT)
    assert Path(tempfile.gettempdir()).name == "tmp" and Path(tempfile.gettempdir()).parent.name.startswith("ks-tests-")
    assert Path(os.path.expanduser("~")).parent.name.startswith("ks-tests-")


def test_browser_tests_skipped_for_want_of_chromium_say_so():
    """Not silently: a line of its own at the end, whatever the report options (-q, no -ra)."""
    env = {**os.environ, "KERNELSEEK_CHROMIUM": "/nonexistent/chromium"}
    env.pop("CI", None)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "tests/test_browser_pages.py::test_selfcheck_trace_viewer",
            "tests/test_browser_pages.py::test_two_arms_side_by_side",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert (
        "2 browser tests skipped: Chromium is not installed (apt-get install chromium; .ci/run does): "
        "REPORT.html and the trace viewer were not opened in a browser"
    ) in p.stdout, p.stdout


def test_make_test_quick_leaves_out_the_slow_kinds_of_test():
    """`make test-quick`: the tests marked slow, nvcc, browser, network, gpu or integration left out,
    integration being the modules conftest names (each of which exists) and the README saying so."""
    import conftest

    p = subprocess.run(
        ["make", "-n", "-o", f"{sys.prefix}/.ready", "test-quick", f"VENV={sys.prefix}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert '-m pytest -q -m "not (slow or nvcc or browser or network or gpu or integration)"' in p.stdout
    assert conftest.INTEGRATION_MODULES and all((ROOT / "tests" / m).is_file() for m in conftest.INTEGRATION_MODULES)
    readme = (ROOT / "README.md").read_text()
    said = readme[readme.index("`make test-quick`") :][:600]
    for kind in ("slow", "nvcc", "browser", "network", "gpu", "integration"):
        assert kind in said, kind
