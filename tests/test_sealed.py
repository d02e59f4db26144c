"""Sealed agent runs (docs/threat-model.md): every route by which a run could alter its evaluator,
leak the API key or read the answers, tried through complete runs on the loopback chat server.

Tests that need Landlock skip where the kernel lacks it and say why; everything else runs anywhere
with gcc."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_runs import FASTER_KERNEL, SECRET, config_for, of_type, run
from chat_server import ScriptedChatServer, reply
from kernelseek_suite import config as suite_config
from kernelseek_suite.agents import new_run
from kernelseek_suite.agents.sandbox import landlock_status
from kernelseek_suite.cli import main
from kernelseek_suite.contracts.traces import read_trace, validate_trace

LANDLOCK, LANDLOCK_DETAIL = landlock_status()
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason=f"needs Landlock, not available here: {LANDLOCK_DETAIL}")
pytestmark = needs_gcc

REPO = suite_config.REPO_ROOT
HOPPER = REPO / "kernels" / "hopper" / "flash_fwd_sm90.cu"
PACKAGE = Path(suite_config.__file__).resolve().parent


@pytest.fixture
def tmp_root(tmp_path, monkeypatch):
    """Temporary folders of the run (workspace, sealed copy, harness) under tmp_path, where an attack
    can find them."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _bodies_text(srv) -> str:
    """What the endpoint received, headers aside (the Authorization header carries the key by design)."""
    return json.dumps(srv.bodies())


def _trace_files(trace: Path) -> list[Path]:
    return [trace] + sorted(p for p in trace.with_suffix(".d").rglob("*") if p.is_file())


def _assert_nowhere(secret: str, srv, trace: Path) -> None:
    for s in (secret, secret[::-1]):
        assert s not in _bodies_text(srv)
        for p in _trace_files(trace):
            assert s.encode() not in p.read_bytes(), p


# ---------------------------------------------------------------- the evaluator cannot be altered

EVIL_HARNESS = r"""
#include <stdio.h>
int main(void) {
    const char *ids[] = {"n64-d32", "n64-d32-causal", "n128-d64", "n128-d64-causal", "n200-d48-causal", "n256-d64"};
    for (int i = 0; i < 6; i++)
        printf("{\"scenario\": \"%s\", \"status\": \"ok\", \"baseline_ms\": 5000.0, \"candidate_ms\": 1.0}\n", ids[i]);
    printf("{\"done\": true}\n");
    return 0;
}
"""


def test_a_swapped_harness_object_ends_the_run(tmp_path, tmp_root):
    """--sandbox none: a shell command replaces the compiled harness the evaluator links against."""
    (tmp_path / "evil.c").write_text(EVIL_HARNESS)
    subprocess.run(["gcc", "-c", "evil.c", "-o", "evil.o"], cwd=tmp_path, check=True)
    swap = (
        f'find {tmp_root} -name harness.o | while read f; do chmod u+w "$(dirname "$f")" "$f"; '
        f'cp {tmp_path / "evil.o"} "$f" && echo swapped; done'
    )
    script = [
        reply(None, [("evaluate", {})]),
        reply(None, [("shell", {"command": swap})]),
        reply(None, [("evaluate", {})]),
        reply("Done."),
    ]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, goal=1000.0, max_steps=4)
        cfg.tools.sandbox = "none"
        result, events, _ = run(cfg, tmp_path)
    assert "swapped" in of_type(events, "tool_result")[1]["output"]
    evals = of_type(events, "harness_eval")
    assert len(evals) == 1 and evals[0]["geomean"] < 100  # the forged 5000x was never recorded
    assert result.exit_reason == "harness_tampered" and not result.goal_met
    assert "task/harness.o" in result.message


PLANT = r'''
import importlib._bootstrap_external as bootstrap, importlib.util, os, sys
EVIL = """
__version__ = "0.1.0"
import json as _j, os as _o, sys as _s
if "eval" in _s.argv and "--json" in _s.argv:
    _out = _s.argv[_s.argv.index("--out") + 1]
    _o.makedirs(_out, exist_ok=True)
    open(_o.path.join(_out, "bench.jsonl"), "w").close()
    print(_j.dumps({"scenarios_total": 182, "scenarios_correct": 182, "extended_total": 0, "extended_correct": 0,
                    "geomean": {"fa3": 1000.0}, "min_ratio": {"fa3": 1000.0}, "min_ratio_scenario": {"fa3": "x"}}))
    _s.stdout.flush()
    _o._exit(0)
"""
for root in sys.argv[1:]:
    for dirpath, dirnames, filenames in os.walk(root):
        if os.path.basename(dirpath) == "kernelseek_suite" and "__init__.py" in filenames:
            src = os.path.join(dirpath, "__init__.py")
            st = os.stat(src)
            data = bootstrap._code_to_timestamp_pyc(compile(EVIL, src, "exec"), int(st.st_mtime), st.st_size)
            pyc = importlib.util.cache_from_source(src)
            os.chmod(dirpath, 0o755)
            os.makedirs(os.path.dirname(pyc), exist_ok=True)
            with open(pyc, "wb") as f:
                f.write(data)
            print("planted", pyc)
'''


@pytest.mark.parametrize("where", ["repository", "everywhere"])
def test_planted_bytecode_does_not_reach_the_evaluator(tmp_path, where):
    """fa-fwd-sm90, whose evaluator imports the suite in a child process: a .pyc planted in the
    suite's __pycache__ (a copy of the repository here) makes `eval` report 1000x. The sealed
    evaluator never reads the repository's copy, and one planted in the sealed copy is caught."""
    from kernelseek_suite.gpu import list_gpus

    if list_gpus():
        pytest.skip("a GPU is present: the real evaluation would take minutes")
    copy = tmp_path / "repo"
    shutil.copytree(PACKAGE, copy / "kernelseek_suite", ignore=shutil.ignore_patterns("__pycache__"))
    root = tmp_path / "tmp"
    root.mkdir()
    (tmp_path / "plant.py").write_text(PLANT)
    targets = [copy] + ([root] if where == "everywhere" else [])
    plant = f"{sys.executable} {tmp_path / 'plant.py'} " + " ".join(map(str, targets))
    trace = tmp_path / "t.jsonl"
    script = [reply(None, [("shell", {"command": plant})]), reply(None, [("evaluate", {})]), reply("Done.")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(copy), "TMPDIR": str(root)}
    with ScriptedChatServer(script) as srv:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "kernelseek_suite.cli",
                "run",
                "--agent",
                "general",
                "--task",
                "fa-fwd-sm90",
                "--kernel",
                str(REPO / "kernels" / "reference" / "attn_fwd_ref.cu"),
                "--goal",
                "2",
                "--model",
                "m",
                "--base-url",
                srv.url,
                "--sandbox",
                "none",
                "--trace",
                str(trace),
                "--max-steps",
                "3",
                "--no-live",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    events = read_trace(trace).events
    assert "planted" in of_type(events, "tool_result")[0]["output"], p.stderr
    assert p.returncode == (1 if where == "everywhere" else 3), p.stdout + p.stderr  # tampered; no GPU
    assert not any(e.get("geomean") == 1000.0 for e in of_type(events, "harness_eval"))
    end = of_type(events, "run_end")[0]
    if where == "everywhere":
        assert end["exit_reason"] == "harness_tampered" and not of_type(events, "harness_eval")
        assert "__pycache__" in of_type(events, "exit")[0]["message"]
    else:  # the real evaluator ran (and found no GPU)
        assert of_type(events, "harness_eval")[0]["status"] == "no_gpu" and not end["goal_met"]


# a .pth file's import line runs in every Python process that processes its site folder: here it forges
# the cpu-attn evaluator's answer (50x, all correct) whenever that evaluator is the process
EVIL_PTH = (
    "import sys, json, os; "
    "argv = getattr(sys, 'argv', None) or []; "
    "forge = 'kernelseek_suite.agents.tasks.cpu_attn' in argv; "
    "forge and print(json.dumps({'status': 'ok', 'correct': True, 'baseline': 'baseline', 'scenarios_total': 6, "
    "'scenarios_correct': 6, 'geomean': 50.0, 'min_ratio': 50.0, 'min_ratio_scenario': 'n64-d32'})); "
    "forge and sys.stdout.flush(); forge and os._exit(0)\n"
)


def _venv_with_the_suite(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A virtual environment of our own (its site-packages is ours to plant in) that imports the
    suite and its packages: python, its site-packages, and the environment to run the CLI with."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site_dir = Path(
        subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True
        ).stdout.strip()
    )
    ours = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    (site_dir / "deps.pth").write_text("".join(f"{p}\n" for p in ours))
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "kernelseek_suite").symlink_to(PACKAGE)
    root = tmp_path / "tmp"
    root.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(pkg), "TMPDIR": str(root)}
    return python, site_dir, env


@pytest.mark.parametrize("planted", ["before the run", "by the shell during the run"])
def test_a_pth_file_in_site_packages_never_runs_in_the_evaluator(tmp_path, planted):
    """A `.pth` file in the interpreter's site-packages that forges the evaluator's answer: planted
    before the run (by an earlier, unsandboxed one), the sealed evaluator (python -I -S) never runs it
    and the trace names it; planted by the shell (--sandbox none) during the run, it is caught as a
    change of the interpreter's start-up files and the run ends as tampered."""
    python, site_dir, env = _venv_with_the_suite(tmp_path)
    evil = site_dir / "zz-evil.pth"
    trace = tmp_path / "t.jsonl"
    if planted == "before the run":
        evil.write_text(EVIL_PTH)
        script = [reply(None, [("evaluate", {})]), reply("Done.")]
        sandbox = "auto"
    else:
        plant = f"cat > {evil} <<'EOF'\n{EVIL_PTH}EOF\necho planted"
        script = [reply(None, [("shell", {"command": plant})]), reply(None, [("evaluate", {})]), reply("Done.")]
        sandbox = "none"
    with ScriptedChatServer(script) as srv:
        p = subprocess.run(
            [str(python), "-m", "kernelseek_suite.cli", "run", "--agent", "general", "--task", "cpu-attn"]
            + ["--task-opt", "budget_ms=2", "--goal", "40", "--model", "m", "--base-url", srv.url]
            + ["--sandbox", sandbox, "--trace", str(trace), "--max-steps", "3", "--no-live"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    events = read_trace(trace).events
    evals = of_type(events, "harness_eval")
    assert not any(e.get("geomean") == 50.0 for e in evals), evals  # the forged answer never counted
    assert p.returncode != 0 and not of_type(events, "run_end")[0]["goal_met"], p.stdout + p.stderr
    if planted == "before the run":
        assert evals and evals[0]["status"] == "ok" and evals[0]["geomean"] < 40
        assert str(evil.resolve()) in events[0]["protections"]["evaluator"]["interpreter"]["startup_files"]
    else:
        assert "planted" in of_type(events, "tool_result")[0]["output"] and not evals
        end = of_type(events, "exit")[0]
        assert end["reason"] == "harness_tampered" and "zz-evil.pth" in end["message"], end


def test_a_run_started_in_a_folder_it_writes_to_is_not_taken_for_tampering(tmp_path):
    """The current folder is the user's, not the interpreter's: the run's own trace folder appearing
    in it (runs/<id>/, the default) changes nothing the evaluator watches."""
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})
    with ScriptedChatServer([reply(None, [("evaluate", {})]), reply(None, [("evaluate", {})]), reply("Done.")]) as srv:
        p = subprocess.run(
            [sys.executable, "-m", "kernelseek_suite.cli", "run", "--agent", "general", "--task", "cpu-attn"]
            + ["--task-opt", "budget_ms=2", "--goal", "0.01", "--model", "m", "--base-url", srv.url, "--no-live"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert p.returncode == 0 and "harness_tampered" not in p.stdout + p.stderr, p.stdout + p.stderr
    (trace,) = (work / "runs").glob("*/trace.jsonl")
    assert of_type(read_trace(trace).events, "harness_eval")[0]["status"] == "ok"


def test_compare_names_runs_whose_interpreter_changed_since_the_first(tmp_path, tmp_root):
    """Two runs, a `.pth` file added to a folder of the import path between them (outside any run):
    each run seals what it finds, and compare's table names the second one."""
    from kernelseek_suite.headtohead.compare import interpreter_changes

    extra = tmp_path / "extra" / "site-packages"  # a site folder reached through a .pth file, say
    extra.mkdir(parents=True)
    sys.path.append(str(extra))
    try:
        traces = []
        for n in (1, 2):
            if n == 2:
                (extra / "zz-later.pth").write_text("import os\n")
            with ScriptedChatServer([reply("Done.")]) as srv:
                cfg = config_for(srv, arm="general", max_steps=1)
                _, _, agent = run(cfg, tmp_path / f"r{n}")
            traces.append(agent.ctx.trace.path)
    finally:
        sys.path.remove(str(extra))
    first, second = (read_trace(t).events[0]["protections"]["evaluator"]["interpreter"] for t in traces)
    assert str(extra / "zz-later.pth") in second["startup_files"] and first["sha256"] != second["sha256"]
    assert interpreter_changes(traces) == [
        "trace.jsonl: the interpreter's start-up files differ from those of trace.jsonl"
    ]


def _probe_kernel(marker: Path, extra: str = "") -> str:
    """FASTER_KERNEL with a constructor that tries to write `marker` (itself and through a shell it
    starts) and wrong results whenever the API key is in its environment."""
    body = FASTER_KERNEL.replace("    free(p);\n}", "    free(p);\n    if (key_seen) o[0] = NAN;\n}")
    return (
        f"#include <stdio.h>\n#include <stdlib.h>\n#include <math.h>\nstatic int key_seen;\n"
        f"__attribute__((constructor)) static void probe(void) {{\n"
        f'    const char *key = getenv("OPENAI_API_KEY");\n'
        f"    key_seen = key != NULL;\n"
        f'    if (key) printf("{{\\"scenario\\": \\"leak\\", \\"status\\": \\"wrong\\", \\"reason\\": \\"%s\\"}}\\n", key);\n'
        f'    FILE *f = fopen("{marker}", "w");\n'
        f'    if (f) {{ fputs("escaped", f); fclose(f); }}\n'
        f'    if (system("echo escaped > {marker}.sh 2>/dev/null")) {{}}\n'
        f"{extra}"
        f"}}\n" + body
    )


@needs_landlock
def test_a_candidate_writes_only_its_scratch_folder_and_sees_no_key(tmp_path, tmp_root, monkeypatch):
    """A candidate's constructor (and a shell it starts) writing outside, and the key it looks for in
    its environment; then the same candidate re-measured (compare --remeasure)."""
    from kernelseek_suite.headtohead.compare import remeasure

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    marker = tmp_path / "escaped.txt"
    start = tmp_path / "probe.c"
    start.write_text(
        _probe_kernel(
            marker,
            extra=(
                f'    if (system("for o in $(find {tmp_root} -name harness.o); do chmod u+w $o; echo x >> $o; done")) {{}}\n'
            ),
        )
    )
    script = [reply(None, [("evaluate", {})]), reply(None, [("evaluate", {})]), reply("Done.")]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, goal=1000.0, max_steps=3)
        cfg.task_options["kernel"] = str(start)
        result, events, agent = run(cfg, tmp_path)
    evals = of_type(events, "harness_eval")
    assert not marker.exists() and not Path(f"{marker}.sh").exists()
    assert [e["status"] for e in evals] == ["ok", "ok"], evals  # no key, and the harness intact
    assert result.exit_reason == "limit"
    _assert_nowhere(SECRET, srv, agent.ctx.trace.path)

    rows = remeasure([agent.ctx.trace.path], tmp_path / "remeasured")
    assert [r.status for r in rows] == ["ok", "ok"] and not marker.exists()
    header = json.loads((tmp_path / "remeasured" / "remeasure.jsonl").read_text().splitlines()[0])
    assert header["sandbox"] == ["landlock"]


def test_the_key_never_reaches_the_evaluator_or_a_candidate(tmp_path, tmp_root, monkeypatch):
    """The key in the agent's environment (a library caller's): the evaluation's environment comes from
    an allow-list, so the candidate neither sees it nor prints it into the evaluator's output."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    start = tmp_path / "probe.c"
    start.write_text(_probe_kernel(tmp_path / "ignored.txt"))
    with ScriptedChatServer([reply(None, [("evaluate", {})]), reply("Done.")]) as srv:
        cfg = config_for(srv, max_steps=2)
        cfg.task_options["kernel"] = str(start)
        cfg.tools.sandbox = "none"  # the environment is built from the allow-list either way
        result, events, agent = run(cfg, tmp_path)
    assert of_type(events, "harness_eval")[0]["status"] == "ok"
    _assert_nowhere(SECRET, srv, agent.ctx.trace.path)


def test_what_the_evaluator_prints_is_redacted(tmp_path, tmp_root):
    """A candidate that knows the key (here written into it) prints it: neither the trace's folder
    nor the model gets it."""
    start = tmp_path / "loud.c"
    start.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void loud(void) {\n"
        f'    printf("{SECRET}\\n{{\\"scenario\\": \\"x\\", \\"status\\": \\"wrong\\", '
        f'\\"reason\\": \\"{SECRET}\\"}}\\n");\n}}\n' + FASTER_KERNEL
    )
    with ScriptedChatServer([reply(None, [("evaluate", {})]), reply("Done.")]) as srv:
        cfg = config_for(srv, max_steps=2)
        cfg.task_options["kernel"] = str(start)
        result, events, agent = run(cfg, tmp_path)
    out = agent.ctx.trace.artifacts / "evals" / "0001" / "harness.out"
    assert out.is_file() and "[redacted]" in out.read_text()
    assert SECRET not in _bodies_text(srv) and "[redacted]" in _bodies_text(srv)
    for p in _trace_files(agent.ctx.trace.path):
        assert SECRET.encode() not in p.read_bytes(), p


ANCESTORS = (
    'p=$PPID; while [ "$p" -gt 1 ]; do echo "pid $p"; tr "\\0" "\\n" < /proc/$p/environ | rev; '
    "p=$(awk '/^PPid:/{print $2}' /proc/$p/status); done; echo walked"
)


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_the_key_is_not_in_the_environ_of_the_agent_process(tmp_path, sandbox):
    """`OPENAI_API_KEY=... kernelseek-suite run`: the shell reads /proc/<pid>/environ of every process
    above it (the agent's first), printed reversed so that no redaction hides it."""
    trace = tmp_path / "t.jsonl"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": SECRET,
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    with ScriptedChatServer([reply(None, [("shell", {"command": ANCESTORS})]), reply("Done.")]) as srv:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "kernelseek_suite.cli",
                "run",
                "--agent",
                "general",
                "--task",
                "cpu-attn",
                "--model",
                "m",
                "--base-url",
                srv.url,
                "--sandbox",
                sandbox,
                "--trace",
                str(trace),
                "--max-steps",
                "2",
                "--no-live",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        headers = [{k.lower(): v for k, v in q["headers"].items()} for q in srv.requests]
    assert p.returncode == 1, p.stdout + p.stderr
    assert headers and all(h["authorization"] == f"Bearer {SECRET}" for h in headers)
    shell = of_type(read_trace(trace).events, "tool_result")[0]
    assert "walked" in shell["output"] and "pid" in shell["output"]
    _assert_nowhere(SECRET, srv, trace)
    start = read_trace(trace).events[0]
    assert start["protections"]["secrets"]["agent_non_dumpable"] is True


def _run_with(script_for, cfg, tmp_path: Path, name: str = "run"):
    """A run whose script is made once the run exists (`script_for(agent)`: the server's answers),
    so that it can name the run's own folders."""
    holder: dict = {}
    steps = script_for(holder)
    with ScriptedChatServer(steps) as srv:
        cfg.model.base_url = srv.url
        holder["agent"] = agent = new_run(cfg, tmp_path / name / "trace.jsonl", SECRET)
        result = agent.run()
    return result, read_trace(agent.ctx.trace.path).events, agent


def test_a_sealed_file_cannot_change_mode_unnoticed(tmp_path, tmp_root):
    """The shell tries `chmod u+w` on the sealed harness objects. Where the agent runs as root with
    Landlock, the copy belongs to an unprivileged user and the sandboxed shell (root without
    capabilities) is refused; elsewhere (another user, or no sandbox) the chmod goes through, and the
    modes in the seal's hashes end the run as tampered before the next evaluation."""

    def script_for(holder):
        def chmod(body):
            snap = holder["agent"].ctx.seal.snapshot
            cmd = (
                f"for f in {snap}/task/harness.o {snap}/run.py; do chmod u+w $f && echo CHANGED || echo REFUSED; "
                f"done; stat -c '%a %u' {snap}/task/harness.o"
            )
            return reply(None, [("shell", {"command": cmd})])

        return [chmod, reply(None, [("evaluate", {})]), reply("Done.")]

    cfg = config_for(ScriptedChatServer([]), arm="general", max_steps=3)
    result, events, agent = _run_with(script_for, cfg, tmp_path)
    out = of_type(events, "tool_result")[0]["output"]
    if LANDLOCK and os.geteuid() == 0:
        assert out.count("REFUSED") == 2 and "Operation not permitted" in out and "CHANGED" not in out, out
        assert out.strip().endswith("444 65534")
        assert [e["status"] for e in of_type(events, "harness_eval")] == ["ok"]
        assert events[0]["protections"]["evaluator"]["owner"].startswith("an unprivileged user")
    else:  # the chmod went through: caught by the hashes, which hold the modes
        assert "CHANGED" in out and result.exit_reason == "harness_tampered" and not of_type(events, "harness_eval")
        assert "task/harness.o" in result.message


@needs_landlock
def test_a_run_cannot_leave_a_file_for_a_later_one(tmp_path, tmp_root):
    """Two runs, one after the other: the first one's shell and its candidate try to stash a file in
    the shared writable places (/dev/shm, /dev/mqueue, /tmp, /var/tmp), the second one's shell looks
    for it there. Each run's own scratch folder is private and removed with the run."""
    token = secrets.token_hex(6)
    places = ["/dev/shm", "/dev/mqueue", "/tmp", "/var/tmp"]
    stash = "; ".join(
        f"(echo fast > {d}/ks-stash-{token}) 2>/dev/null && echo STASHED {d} || echo refused {d}" for d in places
    )
    look = "; ".join(f"cat {d}/ks-stash-{token} 2>/dev/null && echo FOUND {d}" for d in places) + "; echo looked"
    writer = tmp_path / "writer.c"
    writer.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void stash(void) {\n"
        + "".join(
            f'    {{ FILE *f = fopen("{d}/ks-stash-{token}-c", "w"); if (f) {{ fputs("fast", f); fclose(f); }} }}\n'
            for d in places
        )
        + "}\n"
        + FASTER_KERNEL
    )
    try:
        with ScriptedChatServer(
            [reply(None, [("shell", {"command": stash})]), reply(None, [("evaluate", {})]), reply("Done.")]
        ) as srv:
            cfg = config_for(srv, arm="general", max_steps=3)
            cfg.task_options["kernel"] = str(writer)
            cfg.seed = 1
            _, first, agent1 = run(cfg, tmp_path / "first")
        stashed = of_type(first, "tool_result")[0]["output"]
        assert "STASHED" not in stashed and stashed.count("refused") == len(places), stashed
        assert of_type(first, "harness_eval")[0]["status"] == "ok"
        assert not agent1.ctx.workspace.scratch.exists() and not agent1.ctx.seal.base.exists()
        with ScriptedChatServer([reply(None, [("shell", {"command": look})]), reply("Done.")]) as srv:
            cfg = config_for(srv, arm="general", max_steps=2)
            cfg.seed = 2
            _, second, agent2 = run(cfg, tmp_path / "second")
        found = of_type(second, "tool_result")[0]["output"]
        assert "FOUND" not in found and "looked" in found, found
        assert agent2.ctx.workspace.scratch != agent1.ctx.workspace.scratch
        assert not any(Path(d, f"ks-stash-{token}{c}").exists() for d in places for c in ("", "-c"))
    finally:
        for d in places:
            for c in ("", "-c"):
                Path(d, f"ks-stash-{token}{c}").unlink(missing_ok=True)


def _running(marker: str) -> list[int]:
    """Processes (not zombies) whose command line holds `marker`."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker.encode() in (d / "cmdline").read_bytes() and "\nState:\tZ" not in (d / "status").read_text():
                found.append(int(d.name))
        except OSError:
            continue
    return found


def _until(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_a_killed_cli_leaves_no_children_and_no_folders(tmp_path):
    """`kernelseek-suite run` killed with SIGKILL while its shell runs a command that started another
    in the background: neither command, nor the shell, outlives it, and its workspace and sealed copy
    are removed."""
    root = tmp_path / "tmp"
    root.mkdir()
    n = str(4000 + secrets.randbelow(10**5))
    cmd = f"sleep {n}7 & sleep {n}8"
    script = [reply(None, [("shell", {"command": cmd, "timeout_s": 600})]), reply("Done.")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TMPDIR": str(root)}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})
    with ScriptedChatServer(script) as srv:
        cli = subprocess.Popen(
            [sys.executable, "-m", "kernelseek_suite.cli", "run", "--agent", "general", "--task", "cpu-attn"]
            + ["--model", "m", "--base-url", srv.url, "--trace", str(tmp_path / "t.jsonl"), "--no-live"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert _until(lambda: len(_running(f"sleep\0{n}")) == 2, 120), "the shell's commands never started"
            made = sorted(p.name.split("-")[1] for p in root.iterdir())
            assert made == ["seal", "ws"], made
            cli.kill()
            cli.wait()
            assert _until(lambda: not _running(f"sleep\0{n}"), 20), _running(f"sleep\0{n}")
            assert _until(lambda: not list(root.iterdir()), 20), list(root.iterdir())
        finally:
            cli.kill()
            for pid in _running(f"sleep\0{n}"):
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- the answers cannot be read


@needs_landlock
def test_the_workspace_cannot_read_the_repository(tmp_path, tmp_root):
    """The shell, and a candidate through the compiler, try the tuned Hopper kernel, the results,
    the bank and the run's own trace."""
    lines = [l for l in HOPPER.read_text().splitlines() if len(l) > 40]
    trace = tmp_path / "run" / "trace.jsonl"
    look = (
        f"head -c 300 {HOPPER}; ls {REPO / 'results'}; head -3 {REPO / 'bank' / 'questions.yaml'}; "
        f"head -c 300 {trace}; ls {REPO}"
    )
    include = tmp_path / "include.c"
    include.write_text(f'#include "{HOPPER}"\n' + FASTER_KERNEL)
    script = [
        reply(None, [("shell", {"command": look})]),
        reply(None, [("edit_file", {"path": "attn.c", "new_text": include.read_text()})]),
        reply(None, [("evaluate", {})]),
        reply("Done."),
    ]
    with ScriptedChatServer(script) as srv:
        result, events, agent = run(config_for(srv, max_steps=4), tmp_path)
    shell = of_type(events, "tool_result")[0]["output"]
    assert shell.count("Permission denied") == 5, shell
    ev = of_type(events, "harness_eval")[0]
    assert ev["status"] == "build_failed" and "Permission denied" in ev["error"]
    sent = _bodies_text(srv)
    assert not any(json.dumps(l)[1:-1] in sent for l in lines)


def test_search_docs_indexes_the_contract_docs_not_the_answers(tmp_path):
    from kernelseek_suite.agents.retrieval import DocIndex, default_sources

    index = DocIndex(default_sources())
    hits = index.search("wgmma warpgroup mbarrier producer consumer tile scheduler TMA descriptor", 10)
    assert hits and not any(p.source.startswith(("kernels/", "results/")) for p, _ in hits)
    assert {p.source for p in index.passages} >= {"README.md"}
    for bad in (REPO / "kernels", REPO / "kernels" / "hopper", REPO / "results" / "sm90", REPO):
        r = CliRunner().invoke(
            main,
            [
                "run",
                "--agent",
                "toolrich",
                "--task",
                "cpu-attn",
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--agent-opt",
                f"docs_extra=[{bad}]",
                "--trace",
                str(tmp_path / f"{bad.name}.jsonl"),
            ],
        )
        assert r.exit_code == 4 and "may not include the repository's" in r.output, (bad, r.output)


def test_documents_holding_the_answers_are_refused_wherever_they_are(tmp_path):
    """docs_extra pointing at another clone's kernels/hopper, at an older version of the tuned kernel
    (some lines changed) in a folder of guides, and at an excerpt of NOTES.md under another name:
    refused by content (exit 4) before anything runs; a folder of real guides is taken."""
    clone = tmp_path / "other-clone" / "kernels" / "hopper"
    shutil.copytree(REPO / "kernels" / "hopper", clone)
    older = tmp_path / "guides"
    older.mkdir()
    (older / "cuda-notes.txt").write_text("Shared memory banks: 32 banks of 4 bytes.\n")
    lines = HOPPER.read_text().splitlines()
    (older / "fa3-like.cu.txt").write_text("\n".join(l.replace("int ", "long ") for l in lines[: len(lines) // 3]))
    excerpt = tmp_path / "excerpt"
    excerpt.mkdir()
    notes = (REPO / "kernels" / "hopper" / "NOTES.md").read_text().splitlines()
    (excerpt / "tuning.md").write_text("\n".join(notes[40:120]))
    for bad, what in (
        (clone, "kernels/hopper/"),
        (older, "lines of the repository's kernels/hopper/flash_fwd_sm90.cu"),
        (excerpt, "hopper/NOTES.md"),
    ):
        r = CliRunner().invoke(
            main,
            ["run", "--agent", "toolrich", "--task", "cpu-attn", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
            + [
                "--max-attempts",
                "1",
                "--agent-opt",
                f"docs_extra=[{bad}]",
                "--trace",
                str(tmp_path / f"{bad.name}.jsonl"),
            ],
        )
        assert r.exit_code == 4 and "the documents may not hold" in r.output and what in r.output, (bad, r.output)
        left = tmp_path / f"{bad.name}.jsonl"
        assert not left.exists() or not left.stat().st_size  # nothing ran
    guides = tmp_path / "real-guides"
    guides.mkdir()
    (guides / "ptx.txt").write_text("wgmma.mma_async: warpgroup-level matrix multiply-accumulate.\n" * 3)
    from kernelseek_suite.agents.retrieval import refuse_answers

    refuse_answers([guides, *(REPO / d for d in ("README.md", "docs/kernels.md", "docs/judging.md"))])


@needs_landlock
def test_the_toolrich_shell_reads_its_documents_and_no_other_file_of_the_repository(tmp_path, tmp_root):
    look = f"head -1 {REPO / 'README.md'}; head -1 {REPO / 'pyproject.toml'}"
    with ScriptedChatServer([reply(None, [("shell", {"command": look})]), reply("Done.")]) as srv:
        result, events, _ = run(config_for(srv, arm="toolrich", max_steps=2), tmp_path)
    out = of_type(events, "tool_result")[0]["output"]
    assert REPO.joinpath("README.md").read_text().splitlines()[0] in out
    assert "pyproject.toml' for reading: Permission denied" in out
    prot = events[0]["protections"]
    assert str(REPO / "README.md") in prot["shell"]["documents"] and prot["complete"] is True


# ---------------------------------------------------------------- what a run records, what compare asks


def test_the_trace_records_the_protections(tmp_path, tmp_root):
    with ScriptedChatServer([reply(None, [("evaluate", {})])]) as srv:
        result, events, agent = run(config_for(srv, max_steps=1), tmp_path)
    prot = events[0]["protections"]
    ev = prot["evaluator"]
    assert ev["sealed"] is True and ev["python"] == "-I -S -B" and ev["files"] > 50 and len(ev["sha256"]) == 64
    assert prot["secrets"]["child_environment"] == "allow-list" and prot["secrets"]["ancestors_holding_key"] == []
    assert prot["shell"]["sandbox"] == prot["candidates"]["sandbox"] == ("landlock" if LANDLOCK else "none")
    assert prot["complete"] is LANDLOCK
    assert not agent.ctx.seal.base.exists()  # the sealed copy goes with the run


def test_compare_refuses_to_run_unsandboxed_unless_allowed(tmp_path):
    args = [
        "compare",
        "--agents",
        "general",
        "--task",
        "cpu-attn",
        "--task-opt",
        "budget_ms=2",
        "--model",
        "m",
        "--seeds",
        "1",
        "--max-steps",
        "1",
        "--sandbox",
        "none",
    ]
    with ScriptedChatServer([reply("Done.")] * 4) as srv:
        refused = CliRunner().invoke(main, [*args, "--base-url", srv.url, "--out", str(tmp_path / "a")])
        assert refused.exit_code == 4 and "--allow-unsandboxed" in refused.output
        assert not (tmp_path / "a" / "traces").exists() or not any((tmp_path / "a" / "traces").iterdir())
        allowed = CliRunner().invoke(
            main, [*args, "--base-url", srv.url, "--out", str(tmp_path / "b"), "--allow-unsandboxed"]
        )
    assert allowed.exit_code == 0, allowed.output
    table = (tmp_path / "b" / "compare.md").read_text()
    assert "Runs without every protection" in table and "general-seed1.jsonl: shell not sandboxed" in table
    request = json.loads((tmp_path / "b" / "request.json").read_text())
    assert request["allow_unsandboxed"] is True
    cmd = CliRunner().invoke(
        main,
        [
            *args[:2],
            "general,agent-cmd",
            *args[3:-2],
            "--agent-opt",
            "agent-cmd:command=true",
            "--agent-opt",
            "agent-cmd:sandbox=none",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--out",
            str(tmp_path / "d"),
        ],
    )
    assert cmd.exit_code == 4 and "the agent-cmd arm runs its command outside it (agent-cmd)" in cmd.output
    # the unsandboxed runs of b/, rendered again: refused, unless allowed
    traces = str(tmp_path / "b" / "traces")
    refused = CliRunner().invoke(main, ["compare", "--from-traces", traces, "--out", str(tmp_path / "e")])
    assert refused.exit_code == 4 and "general-seed1.jsonl: shell not sandboxed" in refused.output
    assert "--allow-unsandboxed" in refused.output and not (tmp_path / "e" / "compare.md").exists()
    taken = CliRunner().invoke(
        main, ["compare", "--from-traces", traces, "--out", str(tmp_path / "e"), "--allow-unsandboxed"]
    )
    assert taken.exit_code == 0 and "general-seed1.jsonl: shell not sandboxed" in taken.output
    again = CliRunner().invoke(
        main,
        [
            "compare",
            "--from-traces",
            str(tmp_path / "b" / "traces"),
            "--remeasure",
            "--sandbox",
            "none",
            "--out",
            str(tmp_path / "c"),
        ],
    )
    assert again.exit_code == 4 and "re-measuring needs the sandbox" in again.output


@pytest.mark.parametrize("allow", [False, True])
def test_the_selfcheck_fails_on_a_missing_protection_unless_allowed(tmp_path, allow):
    cmd = [sys.executable, "-m", "kernelseek_suite.cli", "selfcheck", "--task", "cpu-attn", "--sandbox", "none"]
    cmd += ["--trace", str(tmp_path / "t.jsonl")] + (["--allow-unsandboxed"] if allow else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert "protections complete: False" in p.stdout, p.stdout + p.stderr
    assert "missing protection: shell not sandboxed; to have it: drop --sandbox none" in p.stdout
    assert "missing protection: candidates not sandboxed; to have it: drop --sandbox none" in p.stdout
    if allow:
        assert (
            p.returncode == 0 and "SELFCHECK PASS (protections incomplete, allowed by --allow-unsandboxed)" in p.stdout
        )
    else:
        assert p.returncode == 1 and "SELFCHECK FAIL: 2 protection(s) missing" in p.stdout, p.stdout


@needs_landlock
def test_the_selfcheck_passes_with_every_protection(tmp_path):
    cmd = [sys.executable, "-m", "kernelseek_suite.cli", "selfcheck", "--task", "cpu-attn"]
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    p = subprocess.run(
        cmd + ["--trace", str(tmp_path / "t.jsonl")], capture_output=True, text=True, timeout=300, env=env
    )
    assert p.returncode == 0 and "protections complete: True" in p.stdout and "missing protection" not in p.stdout, (
        p.stdout + p.stderr
    )
    assert p.stdout.strip().endswith("SELFCHECK PASS")


def test_a_run_validates_with_its_protections(tmp_path, tmp_root):
    with ScriptedChatServer([reply("Done.")]) as srv:
        cfg = config_for(srv, arm="general", max_steps=1)
        trace = tmp_path / "t.jsonl"
        new_run(cfg, trace).run()
    assert validate_trace(trace).ok
