import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The tests leave nothing outside the checkout and its venv. Each session gets a private folder
# (ks-tests-*, in the TMPDIR it was started with) holding its HOME and its TMPDIR, removed when the
# session ends: the suite's temporary folders (ks-ws-*, ks-seal-*, ks-gate-*), pytest's tmp_path,
# Dask's scratch space and config, matplotlib's and Chromium's files all land there.
# KERNELSEEK_KEEP_TEST_TMP=1 keeps it (its path is printed at the end). The build cache is kept
# between sessions, inside the checkout (.pytest_cache/kernelseek-suite; builds are keyed by source,
# flags and nvcc version, and written atomically, so sessions can share it), never in
# ~/.cache/kernelseek-suite. All of it is set before the suite or any library is imported, so that
# every child process the tests start inherits it.
# Under pytest-xdist (`make test` runs two workers) each worker is a session of its own: it makes its
# own private folder beside the controller's, in the TMPDIR the run was started with (as deep as a
# serial session's: Chromium's socket path in it must stay below 108 characters), and names it in the
# controller's folder, whose session removes it at its end (that of a worker that died too). A worker is
# known by the TMPDIR it inherits unchanged from its controller; a pytest that a test starts is not one.
_CONTROLLER = os.environ.get("KERNELSEEK_TESTS_PRIVATE")
WORKER = (
    os.environ.get("PYTEST_XDIST_WORKER")
    if _CONTROLLER and os.environ.get("TMPDIR") == str(Path(_CONTROLLER) / "tmp")
    else None
)
if WORKER:
    PRIVATE = Path(tempfile.mkdtemp(prefix="ks-tests-", dir=Path(_CONTROLLER).parent))
    (Path(_CONTROLLER) / "workers").mkdir(exist_ok=True)
    (Path(_CONTROLLER) / "workers" / WORKER).write_text(str(PRIVATE))
    # a worker's share of the cores for the thread pools of torch, OpenBLAS and OpenMP (and so for the
    # processes it starts): sized to the whole machine, two workers' pools contend for it, and a CPU
    # model check that takes 32 s alone took 107-207 s beside another worker on two cores
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // _workers)))
else:
    PRIVATE = Path(tempfile.mkdtemp(prefix="ks-tests-"))
    os.environ["KERNELSEEK_TESTS_PRIVATE"] = str(PRIVATE)
PRIVATE_TMP, PRIVATE_HOME = PRIVATE / "tmp", PRIVATE / "home"
PRIVATE_TMP.mkdir()
PRIVATE_HOME.mkdir()
_real_gitconfig = Path(os.path.expanduser("~/.gitconfig"))
if "GIT_CONFIG_GLOBAL" not in os.environ and _real_gitconfig.is_file():  # read only: git's identity
    os.environ["GIT_CONFIG_GLOBAL"] = str(_real_gitconfig)
os.environ.update(
    TMPDIR=str(PRIVATE_TMP),
    HOME=str(PRIVATE_HOME),
    XDG_CONFIG_HOME=str(PRIVATE_HOME / ".config"),
    XDG_CACHE_HOME=str(PRIVATE_HOME / ".cache"),
    XDG_DATA_HOME=str(PRIVATE_HOME / ".local" / "share"),
    MPLCONFIGDIR=str(PRIVATE_HOME / ".config" / "matplotlib"),
    DASK_CONFIG=str(PRIVATE_HOME / ".config" / "dask"),
)
tempfile.tempdir = str(PRIVATE_TMP)
CACHE = str(ROOT / ".pytest_cache" / "kernelseek-suite")
os.environ["KERNELSEEK_CACHE"] = CACHE
KEEP_TMP = bool(os.environ.get("KERNELSEEK_KEEP_TEST_TMP"))

from browser import browser  # noqa: E402,F401  (one browser for the session: two Playwright sessions clash)
from kernelseek_suite.gpu import list_gpus  # noqa: E402

# what tools keep in a checkout (the venv, caches): not written by the tests
TOOLING = {
    ".git",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".import_linter_cache",
    "__pycache__",
    "kernelseek_suite.egg-info",
    "scratch",
}

HAS_GPU = bool(list_gpus())
HAS_NVCC = shutil.which("nvcc") is not None or __import__("os").path.exists("/usr/local/cuda/bin/nvcc")
# per-test limits beyond pyproject's `timeout` (120 s): builds with nvcc, and runs on a GPU
SLOW_TIMEOUT_S = 900
GPU_TIMEOUT_S = 1800


# `integration`: the modules that run whole pipelines end to end (agents against a stand-in endpoint,
# compare and the head-to-head, the Dask cluster, the sealed evaluator, reproduce) rather than units.
# `make test` runs them; `make test-quick` leaves them out, with the slow, nvcc, browser, network and
# gpu tests.
INTEGRATION_MODULES = {
    "test_agent_cmd.py",
    "test_agents_cli.py",
    "test_agents_context.py",
    "test_agents_limits.py",
    "test_agents_runs.py",
    "test_compare.py",
    "test_headtohead.py",
    "test_reproduce.py",
    "test_real_agent_clis.py",
    "test_reproduce_overlap.py",
    "test_run_failures.py",
    "test_scaleout_agents.py",
    "test_scaleout_bench.py",
    "test_scaleout_cli.py",
    "test_sealed.py",
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "integration: a whole pipeline end to end (conftest.INTEGRATION_MODULES; not in make test-quick)"
    )
    config.addinivalue_line(
        "markers",
        "agent_cli(name): runs the real coding-agent CLI `name` (skipped where it is not on PATH, but not in CI)",
    )


def pytest_runtest_setup(item):
    """A test of a real coding-agent CLI (codex, claude, aider) is skipped where the CLI is not on PATH,
    except under CI (`CI` set), where .ci/run installs them and a missing one is a failure."""
    mark = item.get_closest_marker("agent_cli")
    if mark is None or shutil.which(mark.args[0]) is not None:
        return
    why = f"the {mark.args[0]} CLI is not on PATH (.ci/run installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"the real agent CLIs must run in CI: {why}")
    pytest.skip(why)


def shared_fixture_group(item) -> str | None:
    """The module (or class) whose tests share a fixture made once for them (a kernel built and
    disassembled, a compare run), or None. Under pytest-xdist (`--dist loadgroup`, as `make test`
    runs) such tests go to one worker together, which makes that fixture once, not once per worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {defs[-1].scope for defs in info.name2fixturedefs.values() if defs}
    module = item.nodeid.split("::")[0]
    if "module" in scopes:
        return module
    if "class" in scopes and item.cls is not None:
        return f"{module}::{item.cls.__name__}"
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU")
    skip_nvcc = pytest.mark.skip(reason="needs nvcc")
    for item in items:
        if getattr(getattr(item, "path", None), "name", None) in INTEGRATION_MODULES:
            item.add_marker(pytest.mark.integration)
        group = shared_fixture_group(item)
        if group and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        if item.get_closest_marker("timeout") is None:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.timeout(GPU_TIMEOUT_S))
            elif "nvcc" in item.keywords or "slow" in item.keywords:
                item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)
        if "nvcc" in item.keywords and not HAS_NVCC:
            item.add_marker(skip_nvcc)


def _checkout_paths() -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in TOOLING and not d.startswith(".venv")]
        rel = os.path.relpath(dirpath, ROOT)
        out.update(os.path.normpath(os.path.join(rel, n)) for n in dirnames + filenames)
    return out


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller's, under pytest-xdist (see below)
        session.config._checkout_before = _checkout_paths()


def pytest_runtest_logreport(report):
    """Note the browser tests skipped, and why (said at the end of the session, see below)."""
    if report.skipped and "browser" in report.keywords and isinstance(report.longrepr, tuple):
        _browser_skips.append(str(report.longrepr[2]).removeprefix("Skipped: "))


_browser_skips: list[str] = []


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Browser tests skipped for want of Chromium or Playwright say so in a line of their own, -q or
    not: the HTML pages were not tested in a browser."""
    if _browser_skips:
        reasons = "; ".join(sorted(set(_browser_skips)))
        terminalreporter.write_line(
            f"{len(_browser_skips)} browser tests skipped: {reasons}: REPORT.html and the trace viewer were not "
            "opened in a browser",
            yellow=True,
        )


def pytest_unconfigure(config):
    """The session's private HOME and TMPDIR go, and those of its xdist workers
    (KERNELSEEK_KEEP_TEST_TMP=1 keeps them)."""
    workers = [] if WORKER else [Path(f.read_text()) for f in sorted((PRIVATE / "workers").glob("*"))]
    if KEEP_TMP:
        if not WORKER:
            print(f"\nthe tests' HOME and TMPDIR are kept in {PRIVATE}")
            for folder in workers:
                print(f"the tests' HOME and TMPDIR of a worker are kept in {folder}")
        return
    for folder in [*workers, PRIVATE]:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """A test that leaves a file in the checkout (runs/<id>/, results/...) fails the session. Under
    pytest-xdist the controller looks, once every worker is done (a worker that finishes first could
    see what a test on another one has not yet removed)."""
    before = getattr(session.config, "_checkout_before", None)
    if before is None:
        return
    new = sorted(_checkout_paths() - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ["the tests left files in the checkout (they write only to temporary folders):", *new[:20]]
        if reporter:
            reporter.write_line("\n".join(lines), red=True)
        if session.exitstatus == 0:
            session.exitstatus = 1
