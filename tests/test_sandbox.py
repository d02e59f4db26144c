"""The parts of a sealed run on their own: which paths a sandbox gets (policy.py), what the launcher
enforces (sandbox.py), the sealed copy's checks (seal.py), and the key kept out of children
(childenv.py). Complete runs through each route are in test_sealed.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek_suite import config as suite_config
from kernelseek_suite.agents import childenv, policy
from kernelseek_suite.agents import seal as seal_mod
from kernelseek_suite.agents.exceptions import HarnessTampered
from kernelseek_suite.agents.sandbox import Policy, landlock_status, wrap
from kernelseek_suite.agents.seal import OWNER_UID, SealedEvaluator, digest, user_env

LANDLOCK, LANDLOCK_DETAIL = landlock_status()
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason=f"needs Landlock, not available here: {LANDLOCK_DETAIL}")


class NoHarness:
    """A task with nothing of its own to seal."""

    def seal(self, dest: Path) -> None:
        dest.mkdir(parents=True)
        (dest / "harness.o").write_bytes(b"\x7fELF object")


# ---------------------------------------------------------------- policy


def test_an_allowed_folder_is_opened_up_around_a_forbidden_one(tmp_path):
    for d in ("opt/tool/bin", "opt/repo/kernels", "opt/repo/.venv/lib", "opt/other"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "opt" / "notes.txt").write_text("x")
    opt, repo = tmp_path / "opt", tmp_path / "opt" / "repo"
    venv = repo / ".venv"
    granted = policy.open_up(trusted=[venv], untrusted=[opt, repo / "kernels"], deny=[repo])
    assert sorted(granted) == sorted([opt / "notes.txt", opt / "other", opt / "tool", venv])


def test_a_sandbox_never_reads_the_repository_or_home(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    pol = policy.make_policy([work], [work])
    reads = [Path(p) for p in pol.read]
    for forbidden in (suite_config.REPO_ROOT.resolve(), Path.home().resolve()):
        assert not any(r == forbidden or r in forbidden.parents for r in reads), forbidden  # nor a folder above
        assert all(_toolchain(r) for r in reads if forbidden in r.parents), forbidden  # a venv inside, only
    assert pol.write == (str(work.resolve()),) and work.resolve() in reads
    assert any(r == Path(sys.prefix).resolve() or r in Path(sys.prefix).resolve().parents for r in reads)


def _toolchain(p: Path) -> bool:
    """This interpreter's own folders (a virtual environment may live inside the repository)."""
    return any(p == r or r in p.parents for r in policy.python_roots())


# ---------------------------------------------------------------- the launcher


@needs_landlock
def test_the_launcher_confines_reads_writes_and_capabilities(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("secret plans")
    command = f"cat {outside}; echo hi > {outside}; echo ok > {work}/f; grep CapEff /proc/self/status"
    r = subprocess.run(
        wrap(["bash", "-c", command], policy.make_policy([work], [work])),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=work,
    )
    assert "secret plans" not in r.stdout and r.stderr.count("Permission denied") == 2, r.stderr
    assert outside.read_text() == "secret plans" and (work / "f").read_text() == "ok\n"
    assert "CapEff:\t0000000000000000" in r.stdout


SHARED_PYTHON = Path("/usr/bin/python3")
ROOT_AND_SHARED_PYTHON = os.geteuid() == 0 and policy._reachable_by_others(SHARED_PYTHON)
SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/etc")


def _shell_as_another_user(pol: Policy, script: str) -> subprocess.CompletedProcess:
    """`sh -c script` through the launcher, run by a Python every user can run (the sandbox's user
    must be able to start it)."""
    launcher = str(Path(policy.__file__).with_name("sandbox.py"))
    return subprocess.run(
        [str(SHARED_PYTHON), "-I", "-S", "-B", launcher, *pol.argv(), "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


@needs_landlock
@pytest.mark.skipif(not ROOT_AND_SHARED_PYTHON, reason="needs root and a Python every user can run")
@pytest.mark.parametrize("proc_rule", [True, False], ids=["with-the-proc-rule", "without"])
def test_a_sandboxed_process_writes_its_own_thread_files_only_with_the_proc_rule(proc_rule):
    # CUDA's start-up writes under /proc/<pid>/task (the H200, 2026-12-05: error 304 without it); the
    # switch to another user keeps root's files under /proc (sysctls, sysrq-trigger) out of reach
    pol = Policy(SYSTEM, ("/proc",) if proc_rule else (), uid=policy.SANDBOX_UID)
    r = _shell_as_another_user(
        pol, "id -u; echo t > /proc/thread-self/comm && echo WROTE; [ -w /proc/sys/kernel/sysrq ] && echo SYSCTL"
    )
    assert r.stdout.splitlines()[0] == str(policy.SANDBOX_UID), r.stderr
    assert ("WROTE" in r.stdout) == proc_rule, r.stderr
    assert "SYSCTL" not in r.stdout


@needs_landlock
@pytest.mark.skipif(not ROOT_AND_SHARED_PYTHON, reason="needs root and a Python every user can run")
def test_the_profiler_runs_as_the_other_user_and_keeps_only_its_capability():
    # Nsight Compute reads the GPU's counters with CAP_SYS_ADMIN where the driver keeps them for
    # administrators: kept through the user switch (ambient, so the command it execs has it), alone
    pol = Policy(SYSTEM, ("/proc",), keep_caps=(21,), uid=policy.SANDBOX_UID)
    r = _shell_as_another_user(pol, "id -u; grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status")
    lines = r.stdout.splitlines()
    assert lines[0] == str(policy.SANDBOX_UID), r.stderr
    caps = dict(line.split(":\t") for line in lines[1:])
    assert caps == {"CapPrm": f"{1 << 21:016x}", "CapEff": f"{1 << 21:016x}", "CapAmb": f"{1 << 21:016x}"}


def test_the_seal_asks_about_paths_the_other_user_can_reach_then(tmp_path, monkeypatch):
    # the copy lies in a private folder until an evaluation hands it over: asking about the copy
    # itself at creation would always answer "no switch"
    asked = []

    def run_as(extra=()):
        asked.append([(p, os.stat(p).st_mode) for p in extra])
        return policy.SANDBOX_UID

    monkeypatch.setattr(policy, "run_as", run_as)
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    s = SealedEvaluator.create(NoHarness(), parent=open_dir)
    try:
        assert asked and all(mode & 0o001 for _, mode in asked[0]), asked
        assert not any(s.base == p or s.base in p.parents for p, _ in asked[0])
        assert s.run_as == policy.SANDBOX_UID or not s.sandboxed
    finally:
        s.close()


def test_cuda_gets_proc_writable_only_where_the_process_is_not_root(tmp_path, monkeypatch):
    monkeypatch.setattr(policy.os, "geteuid", lambda: 0)
    assert "/proc" not in policy.make_policy([tmp_path], [tmp_path], cuda=True).write  # root stays root
    with_uid = policy.make_policy([tmp_path], [tmp_path], cuda=True, uid=policy.SANDBOX_UID)
    assert "/proc" in with_uid.write and with_uid.uid == policy.SANDBOX_UID
    assert "/proc" not in policy.make_policy([tmp_path], [tmp_path], uid=policy.SANDBOX_UID).write  # no CUDA
    monkeypatch.setattr(policy.os, "geteuid", lambda: 1000)
    assert "/proc" in policy.make_policy([tmp_path], [tmp_path], cuda=True).write


def test_the_evaluation_switches_user_only_where_that_user_can_run_this_python(tmp_path, monkeypatch):
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    (hidden / "python").write_text("")
    assert not policy._reachable_by_others(hidden / "python")
    assert policy._reachable_by_others(Path("/usr/bin/env")) and policy._reachable_by_others(Path("/usr/bin"))
    monkeypatch.setattr(policy, "python_roots", lambda: [])
    monkeypatch.setattr(policy.os, "geteuid", lambda: 0)
    monkeypatch.setattr(policy.sys, "executable", "/usr/bin/env")
    assert policy.run_as() == policy.SANDBOX_UID != OWNER_UID  # never the sealed copy's owner
    assert policy.run_as([hidden]) is None
    monkeypatch.setattr(policy.sys, "executable", str(hidden / "python"))
    assert policy.run_as() is None
    monkeypatch.setattr(policy.sys, "executable", "/usr/bin/env")
    monkeypatch.setattr(policy.os, "geteuid", lambda: 1000)
    assert policy.run_as() is None  # not root: nothing to switch


def test_the_launcher_refuses_a_malformed_command_line():
    r = subprocess.run(
        [sys.executable, "-I", "-B", str(Path(policy.__file__).with_name("sandbox.py")), "--read"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "usage" in r.stderr  # sys.exit(message): it ran nothing


# ---------------------------------------------------------------- the sealed copy


@pytest.fixture
def seal(tmp_path):
    s = SealedEvaluator.create(NoHarness(), parent=tmp_path)
    yield s
    s.close()


def test_the_copy_holds_the_suite_without_bytecode(seal):
    files = set(seal.manifest)
    assert "lib/kernelseek_suite/agents/seal.py" in files and "run.py" in files and "task/harness.o" in files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    assert seal.command("m", ["a"])[1:7] == ["-I", "-S", "-B", str(seal.snapshot / "run.py"), "-m", "m"]


@pytest.mark.parametrize("change", ["object", "bytecode", "source", "added", "link", "removed", "pipe"])
def test_every_change_to_the_copy_is_caught(seal, change):
    seal.check()
    snap = seal.snapshot
    os.chmod(snap / "task", 0o755)
    os.chmod(snap / "lib" / "kernelseek_suite", 0o755)
    if change == "object":
        (snap / "task" / "harness.o").chmod(0o644)
        (snap / "task" / "harness.o").write_bytes(b"\x7fELF evil")
    elif change == "bytecode":
        (snap / "lib" / "kernelseek_suite" / "__pycache__").mkdir()
        (snap / "lib" / "kernelseek_suite" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"x")
    elif change == "source":
        p = snap / "lib" / "kernelseek_suite" / "__init__.py"
        p.chmod(0o644)
        p.write_text(p.read_text() + "\n# changed\n")
    elif change == "added":
        (snap / "task" / "extra.so").write_bytes(b"")
    elif change == "link":
        (snap / "task" / "harness.o").unlink()
        (snap / "task" / "harness.o").symlink_to("/dev/null")
    elif change == "removed":
        (snap / "task" / "harness.o").unlink()
    elif change == "pipe":  # a reader of the copy must not block on it
        os.mkfifo(snap / "task" / "harness.so")
    with pytest.raises(HarnessTampered) as e:
        seal.check("before an evaluation")
    assert e.value.reason == "harness_tampered" and e.value.details["files"]


def test_a_change_of_mode_is_caught(seal):
    """`chmod u+w` of a sealed file (done here by its owner, or root), its content unchanged."""
    seal.check()
    os.chmod(seal.path("task/harness.o"), 0o644)
    with pytest.raises(HarnessTampered) as e:
        seal.check("before an evaluation")
    assert e.value.details["files"] == ["task/harness.o"]


def test_the_copy_is_read_only_and_owned_by_an_unprivileged_user_where_we_are_root(seal):
    for p in [seal.snapshot, *seal.snapshot.rglob("*")]:
        st = p.lstat()
        assert st.st_mode & 0o222 == 0 and st.st_mode & 0o444 == 0o444, p
        assert st.st_uid == (65534 if os.geteuid() == 0 else os.geteuid()), p
    assert os.access(seal.path("bin/python"), os.X_OK)


def test_the_bootstrap_runs_the_copy_in_isolated_mode(seal):
    """`python -m site` through the bootstrap: the copy first on sys.path, PYTHONPATH and the user's
    site folder ignored, the repository nowhere."""
    ran = seal.run(seal.command("site", []), seal.new_scratch(), 60, env={"PYTHONPATH": str(suite_config.REPO_ROOT)})
    assert ran.returncode == 0, ran.stderr
    path = [l.strip().strip("',") for l in ran.stdout.split("sys.path = [")[1].split("]")[0].splitlines() if l.strip()]
    assert path[0] == str(seal.snapshot / "lib")
    assert not any(
        p == str(suite_config.REPO_ROOT) or p.startswith(str(suite_config.REPO_ROOT / "suite")) for p in path
    )
    assert "ENABLE_USER_SITE: True" not in ran.stdout and "ENABLE_USER_SITE: " in ran.stdout
    assert not list(seal.snapshot.rglob("__pycache__"))  # and it wrote no bytecode
    seal.check()


def test_a_python_the_evaluator_starts_runs_sealed_too(seal):
    """bin/python of the copy (sys.executable inside it, so a sweep's worker): isolated, no site folder,
    the copy first, and `-c`, `-m` and the interpreter's own options as python takes them."""
    shim = str(seal.path("bin/python"))
    code = "import sys, kernelseek_suite as k; print(sys.flags.isolated, sys.flags.no_site, sys.executable, k.__file__)"
    ran = seal.run([shim, "-u", "-X", "utf8", "-c", code], seal.new_scratch(), 60)
    assert ran.returncode == 0, ran.stderr
    isolated, no_site, exe, where = ran.stdout.split()
    assert (isolated, no_site, exe) == ("1", "1", shim) and where.startswith(str(seal.snapshot / "lib"))
    ran = seal.run([shim, "-m", "json.tool", "--help"], seal.new_scratch(), 60)
    assert ran.returncode == 0 and "usage" in ran.stdout, ran.stderr
    seal.check()


def test_digest_names_links_by_target(tmp_path):
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").symlink_to("a")
    d = digest(tmp_path)
    sha, mode = d["a"].split()
    assert d["b"] == "link:a" and len(sha) == 64 and mode == f"{(tmp_path / 'a').stat().st_mode & 0o7777:o}"


def test_a_missing_protection_says_what_gives_it_back():
    from kernelseek_suite.agents.protections import missing

    none = {"sandbox": "none", "detail": "disabled by configuration"}
    kernel = "this kernel has no Landlock (it needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)"
    prot = {
        "shell": {"sandbox": "none", "detail": kernel},
        "candidates": {"sandbox": "none"},
        "evaluator": {"sealed": True, "sandbox": "none", "sandbox_detail": kernel},
        "secrets": {"agent_non_dumpable": True, "ancestors_holding_key": ["bash (12)"]},
        "agent_command": none,
    }
    got = {m.what: m.remedy for m in missing(prot)}
    assert set(got) == {
        "shell not sandboxed",
        "candidates not sandboxed",
        "agent command not sandboxed",
        "key in the environment of bash (12)",
    }
    assert got["shell not sandboxed"].startswith(kernel) and "lsm=" in got["shell not sandboxed"]
    assert "seccomp" in got["candidates not sandboxed"]
    assert got["agent command not sandboxed"].startswith("drop --sandbox none")
    assert "unset OPENAI_API_KEY" in got["key in the environment of bash (12)"]
    full = {**prot, "shell": {"sandbox": "landlock"}, "candidates": {"sandbox": "landlock"}}
    full = {**full, "evaluator": {"sealed": True, "sandbox": "landlock"}, "agent_command": {"sandbox": "landlock"}}
    assert missing({**full, "secrets": {"agent_non_dumpable": True, "ancestors_holding_key": []}}) == []


def test_the_gpu_rules_resolve_against_a_gpu_nodes_layout(tmp_path):
    """The GPU rule set (sandbox_rules/gpu.json, not yet verified on a GPU node) against a stand-in of
    a node's filesystem: placeholders filled, globs expanded to what exists, never a shared place."""
    from kernelseek_suite.agents import gpu_rules

    root = tmp_path / "node"
    for f in (
        "dev/nvidiactl",
        "dev/nvidia0",
        "dev/nvidia7",
        "dev/nvidia-uvm",
        "dev/nvidia-caps/nvidia-cap1",
        "dev/shm/stash",
        "proc/driver/nvidia/params",
        "usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
        "opt/cuda/bin/nvcc",
        "opt/cuda/nvvm/bin/cicc",
        "opt/nsight/ncu",
    ):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("")
    data = gpu_rules.load()
    assert data["verified_on_gpu"] is False and data["status"].startswith("NOT YET VERIFIED ON A GPU NODE")
    values = {"cuda_home": "/opt/cuda", "ncu_root": "/opt/nsight", "scratch": "/s"}
    r = gpu_rules.resolve(data, values, root=str(root))
    rel = lambda paths: sorted("/" + str(Path(p).relative_to(root)) for p in paths)  # noqa: E731
    assert rel(r.device) == ["/dev/nvidia-caps", "/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia7", "/dev/nvidiactl"]
    assert rel(r.read) == [
        "/opt/cuda/bin",
        "/opt/cuda/nvvm",
        "/opt/nsight",
        "/proc/driver/nvidia",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
    ]
    assert r.write == [] and r.refused == [] and r.not_granted == ["/dev/shm"]
    assert r.env == {"CUDA_CACHE_PATH": "/s/cache/nv", "TMPDIR": "/s/tmp"}
    only_nvcc = gpu_rules.resolve(data, values, root=str(root), tools=("nvcc",))
    assert rel(only_nvcc.read) == ["/opt/cuda/bin", "/opt/cuda/nvvm"] and not only_nvcc.device
    # without the toolkit here, its rules give nothing (no placeholder, no path)
    assert gpu_rules.resolve(data, {"scratch": "/s"}, root=str(root), tools=("nvcc", "ncu")).read == []
    # a rule that asks for a shared place, the repository or the home folder is refused, whatever it says
    shared = {"rules": [{"tool": "x", "access": "device", "paths": ["/dev/shm", "/dev/shm/*"], "why": "."}]}
    r = gpu_rules.resolve(shared, {}, root=str(root))
    assert r.device == [] and rel(r.refused) == ["/dev/shm", "/dev/shm/stash"]
    answers = {"rules": [{"tool": "x", "access": "read", "paths": [str(suite_config.REPO_ROOT), "/"], "why": "."}]}
    r = gpu_rules.resolve(answers, {})
    assert r.read == [] and len(r.refused) == 2
    with pytest.raises(ValueError):
        (tmp_path / "no-why.json").write_text('{"rules": [{"tool": "cuda", "access": "read", "paths": ["/x"]}]}')
        gpu_rules.load(tmp_path / "no-why.json")


def test_the_evaluator_gets_the_gpu_rules_environment_and_says_they_are_unverified(seal):
    ran = seal.run(["sh", "-c", "echo $CUDA_CACHE_PATH"], seal.new_scratch(), 30)
    assert ran.stdout.strip().endswith("/cache/nv") and "/scratch/" in ran.stdout
    assert seal.describe()["gpu_rules"]["verified_on_gpu"] is False


def test_a_user_the_user_database_does_not_know_gets_a_name_of_its_own():
    assert user_env(None) == {}  # the evaluation runs as this process: its own USER and LOGNAME are inherited
    assert user_env(0) == {"USER": "root", "LOGNAME": "root"}
    unknown = next(u for u in range(64000, 65534) if u not in {e.pw_uid for e in __import__("pwd").getpwall()})
    assert user_env(unknown) == {"USER": f"kernelseek-{unknown}", "LOGNAME": f"kernelseek-{unknown}"}


def test_an_evaluation_run_as_another_user_is_told_its_name_and_caches_in_its_scratch(seal, monkeypatch):
    # FA3's custom op imports torch._dynamo, which names torch's caches with getpass.getuser(): for a user
    # without a passwd entry, and no USER or LOGNAME, that raised KeyError in every sandboxed evaluation on
    # a GPU node (2026-12-05), and FA3 was reported as not measured
    seen = {}

    def run_in_group(argv, cwd, env, out, err, timeout_s):
        seen.update(env)
        return 0

    monkeypatch.setattr(seal_mod, "run_in_group", run_in_group)
    monkeypatch.setattr(seal, "sandboxed", True)
    monkeypatch.setattr(seal, "run_as", policy.SANDBOX_UID)
    monkeypatch.setattr(seal, "_hand_over", lambda scratch, uid: None)
    scratch = seal.new_scratch()
    seal.run(["true"], scratch, 10)
    assert seen["USER"] == seen["LOGNAME"] == user_env(policy.SANDBOX_UID)["USER"]
    assert seen["TORCHINDUCTOR_CACHE_DIR"] == str(scratch / "cache" / "torchinductor")
    monkeypatch.setattr(seal, "run_as", None)
    monkeypatch.setenv("USER", "someone")
    seal.run(["true"], seal.new_scratch(), 10)
    assert seen["USER"] == "someone"  # run as this user: its own name


@needs_landlock
@pytest.mark.skipif(not ROOT_AND_SHARED_PYTHON, reason="needs root and a Python every user can run")
def test_getuser_works_in_an_evaluation_run_as_the_sandboxs_user(seal, monkeypatch):
    monkeypatch.setattr(seal, "run_as", policy.SANDBOX_UID)
    code = "import getpass, os; print(getpass.getuser(), os.getuid(), os.environ['TORCHINDUCTOR_CACHE_DIR'])"
    ran = seal.run([str(SHARED_PYTHON), "-I", "-S", "-c", code], seal.new_scratch(), 60)
    assert ran.returncode == 0, ran.stderr
    name, uid, cache = ran.stdout.split()
    assert uid == str(policy.SANDBOX_UID) and name == user_env(policy.SANDBOX_UID)["USER"]
    assert "/scratch/" in cache


# ---------------------------------------------------------------- the key


def test_children_get_an_allow_listed_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-123456789")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-1")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("CC", "sk-123456789")
    env = childenv.child_env({"HOME": "/h"}, secrets=("sk-123456789",))
    assert {"OPENAI_API_KEY", "GITHUB_TOKEN", "PYTHONPATH", "CC"}.isdisjoint(env) and env["HOME"] == "/h"
    assert env["PATH"] == os.environ["PATH"]


def test_the_key_is_taken_out_of_the_environment_and_the_environ_block(tmp_path):
    code = (
        "import os; from kernelseek_suite.agents import childenv as c\n"
        "before = b'sk-abcdefgh1234' in open('/proc/self/environ', 'rb').read()\n"
        "key = c.take_api_key()\n"
        "after = b'sk-abcdefgh1234' in open('/proc/self/environ', 'rb').read()\n"
        "print(before, key, after, 'OPENAI_API_KEY' in os.environ, c.held_api_key(), c.make_non_dumpable())"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENAI_API_KEY": "sk-abcdefgh1234"},
    )
    assert r.stdout.split() == ["True", "sk-abcdefgh1234", "False", "False", "sk-abcdefgh1234", "True"], r.stderr


def test_ancestors_holding_the_key_are_named(tmp_path):
    code = (
        "from kernelseek_suite.agents.childenv import ancestors_holding; print(ancestors_holding('sk-parent-9876543'))"
    )
    inner = f'{sys.executable} -c "{code}"; true'  # bash stays: the command is not its last
    r = subprocess.run(
        ["bash", "-c", inner],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENAI_API_KEY": "sk-parent-9876543"},
    )
    assert "bash (" in r.stdout, r.stderr


def test_files_left_in_the_trace_folder_are_redacted(tmp_path):
    from kernelseek_suite.agents.trace import TraceWriter

    trace = TraceWriter(tmp_path / "t.jsonl", secrets=("sk-hidden-123456",))
    out = trace.artifacts / "evals" / "0001"
    out.mkdir(parents=True)
    (out / "harness.out").write_text("key sk-hidden-123456 printed\n")
    (out / "clean.txt").write_text("nothing\n")
    log = trace.artifacts / "invocations" / "0001.log"
    log.parent.mkdir()
    log.write_bytes(b"\x00binary sk-hidden-123456")
    assert trace.redact_tree(out) == ["harness.out"] and trace.redact_tree(log) == ["0001.log"]
    assert (out / "harness.out").read_text() == "key [redacted] printed\n"
    assert log.read_bytes() == b"\x00binary [redacted]"
    assert trace.redact("a sk-hidden-123456 b") == "a [redacted] b"
    trace.close()
