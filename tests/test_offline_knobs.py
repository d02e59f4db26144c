"""scripts/offline-gpu-run.sh's knob variants (KNOBS): the Hopper kernel file with #defines before it, each
define one of the knobs the file declares, so that a misspelt knob cannot build the shipped kernel under
another name. The variants are built and timed on a GPU node (`kernel`, `ab`); writing them needs none."""

import os
import pathlib
import subprocess

from kernelseek_suite import config

ROOT = config.REPO_ROOT
SCRIPT = ROOT / "scripts" / "offline-gpu-run.sh"
KERNEL = ROOT / "kernels" / "hopper" / "flash_fwd_sm90.cu"


def _script_functions(*names: str) -> str:
    """The script's shell functions of these names, their text as written, to run on their own."""
    body = SCRIPT.read_text()
    out = ""
    for name in names:
        start = body.index(f"{name}() {{")
        out += body[start : body.index("\n}\n", start) + 3]
    return out


def _knobs(tmp_path, knobs: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KNOBS=knobs, KNOB_DIR=str(tmp_path), OUT=str(tmp_path / "out"))
    return subprocess.run(["bash", str(SCRIPT), "knobs"], capture_output=True, text=True, env=env, timeout=60)


def test_each_variant_is_the_kernel_file_with_its_defines_before_it(tmp_path):
    r = _knobs(tmp_path, "w2:KS_D128_WIDE_PV=2 c2k:KS_D128_WIDE_PV=1,KS_D128_CAUSAL_LONG_FROM=2048")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(tmp_path / "w2.cu"), str(tmp_path / "c2k.cu")]
    kernel = KERNEL.read_text()
    assert (tmp_path / "w2.cu").read_text() == "#define KS_D128_WIDE_PV 2\n" + kernel
    assert (tmp_path / "c2k.cu").read_text() == (
        "#define KS_D128_WIDE_PV 1\n#define KS_D128_CAUSAL_LONG_FROM 2048\n" + kernel
    )


def test_a_knob_the_kernel_does_not_declare_or_a_malformed_one_is_refused(tmp_path):
    for knobs, says in (
        ("w:KS_D128_WIDE=2", "no knob KS_D128_WIDE"),  # a misspelt knob
        ("w:D128_WIDE_PV=2", "not KS_NAME=VALUE"),
        ("w:KS_D128_WIDE_PV=", "not KS_NAME=VALUE"),
        ("w/x:KS_D128_WIDE_PV=2", "a bad name"),
    ):
        r = _knobs(tmp_path, knobs)
        assert r.returncode == 2 and says in r.stderr, (knobs, r.stderr)


def test_every_knob_the_kernel_declares_has_its_default_beside_it():
    text = KERNEL.read_text()
    declared = [line.split()[1] for line in text.splitlines() if line.startswith("#ifndef KS_")]
    assert declared == [
        "KS_D128_WIDE_PV",
        "KS_D128_WIDE_SHORT",
        "KS_D128_CAUSAL_LONG_FROM",
        "KS_D128_CAUSAL_LONG_FROM_MHA",
        "KS_D192_CAUSAL_LONG_FROM",
        "KS_D128_LONG_FROM",
        "KS_D192_LONG_FROM",
        "KS_D96_LONG_FROM",
        "KS_D96_CAUSAL_LONG_FROM",
        "KS_D64_CAUSAL_SHORT_TO",
        "KS_D128_FAST",
        "KS_Q_AHEAD",
        "KS_K_STAGES",
        "KS_TOP_P",
        "KS_D192_FAST",
        "KS_D192_CAUSAL_FAST_FROM",
        "KS_D256_FAST",
        "KS_D96_LONG_FAST",
        "KS_Q_AHEAD_MIN_GROUP",
        "KS_MASK_LIMIT",
        "KS_Q_PREFETCH",
        "KS_K_RELEASE",
        "KS_REF_BIAS",
        "KS_K_AHEAD",
        "KS_O_IN_K",
        "KS_Q_SPLIT",
        "KS_PROBE",
        "KS_DECODE_EXACT",
        "KS_DECODE_ROWS",
        "KS_FAST_DIV",
        "KS_TILE_RING",
    ]
    for name in declared:
        assert f"#define {name} " in text


def test_knobs_build_names_a_variant_the_build_refuses(tmp_path):
    """`knobs-build` builds each variant as the harness does, here (no GPU), and exits 1 naming the ones
    refused: a knob value that does not compile is refused in a second, before any GPU call."""
    import shutil
    import sys

    import pytest

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    env = dict(
        os.environ,
        KNOBS="bad:KS_D128_WIDE_PV=abc",
        KNOB_DIR=str(tmp_path),
        OUT=str(tmp_path / "out"),
        PYTHON=sys.executable,
        KERNELSEEK_CACHE=str(tmp_path / "cache"),
    )
    r = subprocess.run(["bash", str(SCRIPT), "knobs-build"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"refused: {tmp_path / 'bad.cu'}" in r.stdout and "abc" in r.stdout


def test_the_control_is_the_kernel_file_with_one_comment_line_appended(tmp_path):
    env = dict(os.environ, KNOB_DIR=str(tmp_path), OUT=str(tmp_path / "out"))
    r = subprocess.run(["bash", str(SCRIPT), "control"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(tmp_path / "control.cu")]
    text, kernel = (tmp_path / "control.cu").read_text(), KERNEL.read_text()
    assert text.startswith(kernel) and text != kernel  # other bytes: a library of its own in the build cache
    added = text[len(kernel) :]
    assert added.count("\n") == 1 and added.startswith("// ") and added.endswith("\n")


def _keep_trace(tmp_path, output: str) -> subprocess.CompletedProcess:
    """keep_trace from the script, run on its own on an output file that says `output`."""
    helper = _script_functions("keep_trace")
    (tmp_path / "results").mkdir(exist_ok=True)
    (tmp_path / "results" / "out.txt").write_text(output)
    (tmp_path / "out").mkdir(exist_ok=True)
    env = dict(os.environ, OUT=str(tmp_path / "out"))
    script = helper + '\nkeep_trace "$1" kept.jsonl\n'
    return subprocess.run(
        ["bash", "-c", script, "keep", str(tmp_path / "results" / "out.txt")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_the_sandbox_step_keeps_the_last_trace_an_output_names(tmp_path):
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text('{"seq": 0}\n')
    new.write_text('{"seq": 1}\n')
    r = _keep_trace(tmp_path, f"trace: {old}\nsome lines\ntrace: {new} (24 events); exit submitted\nSELFCHECK PASS\n")
    assert r.returncode == 0, r.stderr
    for where in (tmp_path / "results", tmp_path / "out"):
        assert (where / "kept.jsonl").read_text() == '{"seq": 1}\n'
    assert f"kept {new} as kept.jsonl" in r.stdout


def test_the_sandbox_step_says_when_no_trace_is_left(tmp_path):
    r = _keep_trace(tmp_path, f"trace: {tmp_path / 'gone.jsonl'} (3 events)\n")
    assert r.returncode == 0 and "no trace to keep" in r.stdout and "gone.jsonl" in r.stdout
    assert not (tmp_path / "results" / "kept.jsonl").exists()
    r = _keep_trace(tmp_path, "SELFCHECK FAIL\n")
    assert "no trace to keep" in r.stdout and "none named" in r.stdout


def test_knobs_pack_carries_builds_that_a_node_finds_built(tmp_path):
    """`knobs-pack` builds the variants and the kernel file here and packs their build folders (no PTX);
    `use_packed_builds` unpacks them on the node into a build cache that KERNELSEEK_CACHE names, where
    the same source is then found built: no nvcc on the node's device time."""
    import shutil
    import sys
    import tarfile

    import pytest

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    # no variants and no control: the kernel file alone, which the session's build cache (conftest, in
    # this process's environment) already holds or builds once for every test that reads it
    env = dict(
        os.environ,
        KNOBS="",
        AB_CONTROL="0",
        KC_OUT=str(tmp_path / "kc"),
        PYTHON=sys.executable,
        OUT=str(tmp_path / "out"),
    )
    r = subprocess.run(["bash", str(SCRIPT), "knobs-pack"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    archive = tmp_path / "kc" / "kc.tar.xz"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    key = names[0].split("/")[1]
    assert sorted(n.split("/")[-1] for n in names) == [
        "build.json",
        "flash_fwd_sm90.cu",
        "kernel.o",
        "kernel.so",
        "ptxas.log",
    ]
    assert all(n.startswith(f"build/{key}/") for n in names)
    assert f"packed: kernels/hopper/flash_fwd_sm90.cu (build/{key})" in r.stdout
    # the node's side: the helper from the script, on its own, then a build of the same source in the
    # cache it names is the packed one
    helper = _script_functions("use_packed_builds")
    node = tmp_path / "node"
    (node / ".pytest_cache").mkdir(parents=True)
    script = helper + '\nuse_packed_builds && echo "cache=$KERNELSEEK_CACHE"\n'
    env = dict(os.environ, KC_OUT=str(tmp_path / "kc"), KC_DIR=str(node / "kcache"))
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=node, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"cache={node / 'kcache'}" in r.stdout and "builds from" in r.stdout
    assert (node / ".pytest_cache/kernelseek-suite/build" / key / "kernel.so").is_file()
    check = (
        "import pathlib, sys; from kernelseek_suite.build import build; "
        "r = build(pathlib.Path(sys.argv[1]), 'sm90'); print(r.cached, r.library)"
    )
    out = subprocess.run(
        [sys.executable, "-c", check, str(KERNEL)],
        capture_output=True,
        text=True,
        env=dict(os.environ, KERNELSEEK_CACHE=str(node / "kcache")),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    # the library where the archive was unpacked, not where it was built
    cached, library = out.stdout.split()
    assert cached == "True" and pathlib.Path(library) == node / "kcache" / "build" / key / "kernel.so"
    assert pathlib.Path(library).is_file()


def _node_copy(tmp_path):
    """A folder laid out like the repository, with only the script in it (the script works from its
    parent folder)."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / SCRIPT.name).write_bytes(SCRIPT.read_bytes())
    return root


def _run(root, *args, **env):
    return subprocess.run(
        ["bash", "scripts/" + SCRIPT.name, *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=dict(os.environ, OUT=str(root / "out"), **env),
        timeout=120,
    )


def test_fa4_pieces_repacked_staged_over_two_calls_and_joined_in_order(tmp_path):
    """FA4's library travels in pieces small enough that each transfer also holds the working tree:
    `repack` cuts the older layout (40 MiB in p1, the rest and part2 in p2) again, `part1` leaves what
    each call carries in STAGE, and `setup`'s join finds every piece, in order, or names what is missing."""
    import random
    import shutil

    root = _node_copy(tmp_path)
    data = random.Random(7).randbytes(5 * 1024 * 1024 + 12345)
    part2 = b"the rest of the wheel"
    (root / ".carry/p1").mkdir(parents=True)
    (root / ".carry/p2").mkdir(parents=True)
    (root / ".carry/p1/part1.tar.xz.00").write_bytes(data[: 3 * 1024 * 1024])
    (root / ".carry/p2/part1.tar.xz.01").write_bytes(data[3 * 1024 * 1024 :])
    (root / ".carry/p2/part2.tar.xz").write_bytes(part2)
    (root / ".carry/p2/a.whl").write_bytes(b"wheel")
    r = _run(root, "repack", PIECE_MIB="2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in (root / ".carry/p1").iterdir()) == ["part1.tar.xz.00"]
    assert sorted(p.name for p in (root / ".carry/p1b").iterdir()) == [
        "part1.tar.xz.01",
        "part1.tar.xz.02",
        "part2.tar.xz",
    ]
    assert sorted(p.name for p in (root / ".carry/p2").iterdir()) == ["a.whl", "pieces"]
    assert (root / ".carry/p2/pieces").read_text().strip() == "3"
    assert (root / ".carry/p1/part1.tar.xz.00").stat().st_size == 2 * 1024 * 1024

    # the node: each part1 call carries one of p1, p1b (the other is not there), then setup carries p2
    node = _node_copy(tmp_path / "node")
    stage = tmp_path / "stage"
    join = _script_functions("piece_path", "joined_pieces") + "\njoined_pieces\n"
    for carried in ("p1", "p1b"):
        if carried == "p1b":  # after the first call, setup names what is still missing
            (node / ".carry/p2").mkdir()
            (node / ".carry/p2/pieces").write_text("3\n")
            early = subprocess.run(
                ["bash", "-c", join], cwd=node, capture_output=True, text=True, env=dict(os.environ, STAGE=str(stage))
            )
            assert early.returncode == 1 and "part1.tar.xz.01 part1.tar.xz.02 part2.tar.xz" in early.stderr
        (node / ".carry" / carried).mkdir(parents=True)
        for p in (root / ".carry" / carried).iterdir():
            (node / ".carry" / carried / p.name).write_bytes(p.read_bytes())
        _run(node, "part1", STAGE=str(stage))
        assert (stage / "part1.tar.xz.00").is_file()
        shutil.rmtree(node / ".carry" / carried)
    r = subprocess.run(
        ["bash", "-c", join], cwd=node, capture_output=True, text=True, env=dict(os.environ, STAGE=str(stage))
    )
    assert r.returncode == 0, r.stderr
    paths = r.stdout.split()
    names = [pathlib.Path(p).name for p in paths]
    assert names == ["part1.tar.xz.00", "part1.tar.xz.01", "part1.tar.xz.02", "part2.tar.xz"]
    assert b"".join(pathlib.Path(p).read_bytes() for p in paths[:-1]) == data
    assert pathlib.Path(paths[-1]).read_bytes() == part2


# a process that takes SIGTERM in Python (as the suite's commands do) while its main thread is held in
# C code (here a sum over a range that takes days; on a GPU node, a CUDA call on a hung kernel): the
# handler never runs, so SIGTERM alone does not end it
_HELD_IN_C = (
    "import signal, sys\n"
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
    "print('held', flush=True)\n"
    "sum(range(10 ** 15))\n"
)


def test_a_step_under_its_time_limit_ends_even_where_sigterm_is_not_taken(tmp_path):
    import signal
    import sys
    import time

    script = _script_functions("bounded") + '\nbounded 1 "$@"\n'
    env = dict(os.environ, KILL_AFTER="2")
    # the same process under a bare `timeout 1` is still there when `bounded` has killed it
    bare = subprocess.Popen(
        ["timeout", "1", sys.executable, "-c", _HELD_IN_C], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        start = time.monotonic()
        r = subprocess.run(
            ["bash", "-c", script, "bounded", sys.executable, "-c", _HELD_IN_C],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        took = time.monotonic() - start
        assert r.stdout == "held\n"
        assert r.returncode == 137, (r.returncode, r.stderr)  # killed, not ended by its handler
        assert took < 10, took
        assert bare.poll() is None, "SIGTERM alone ended it: this test would not tell the two apart"
    finally:
        os.killpg(bare.pid, signal.SIGKILL)  # timeout and the process it still waits for
        bare.wait(timeout=30)


def test_setup_fa3_puts_the_wheels_fa3_and_the_suite_in_site2(tmp_path):
    """`setup-fa3` (the FA3-only set-up of an A/B call): the carried wheels installed, FA3's archive
    unpacked and the suite linked into SITE2, where the node's steps import them from."""
    import tarfile

    from test_wheelhouse import make_wheel

    whl, site2 = tmp_path / "whl", tmp_path / "site2"
    whl.mkdir()
    make_wheel(whl, "tinywheel", "1.0", b"")
    (tmp_path / "fa3_fwd").mkdir()
    (tmp_path / "fa3_fwd" / "__init__.py").write_text("FA3 = True\n")
    with tarfile.open(whl / "fa3-fwd.tar.xz", "w:xz") as tar:
        tar.add(tmp_path / "fa3_fwd", arcname="fa3_fwd")
    env = dict(os.environ, SITE2=str(site2), WHL=str(whl), OUT=str(tmp_path / "out"))
    r = subprocess.run(["bash", str(SCRIPT), "setup-fa3"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (site2 / "tinywheel" / "__init__.py").is_file()
    assert (site2 / "fa3_fwd" / "__init__.py").read_text() == "FA3 = True\n"
    assert (site2 / "kernelseek_suite").resolve() == (ROOT / "suite").resolve()
    # no wheels carried: it says so and fails
    empty = tmp_path / "empty"
    empty.mkdir()
    env["WHL"] = str(empty)
    r = subprocess.run(["bash", str(SCRIPT), "setup-fa3"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 7 and "did not install" in r.stdout, r.stdout + r.stderr
