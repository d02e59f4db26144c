"""Exit codes a script can trust: every case of the README's table checked against the command that
gives it, a closed pipe that costs the output but never the code, filters that match nothing and
files that are not traces refused as bad arguments, and `--json` beside every verdict."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite import config
from kernelseek_suite.cli import main
from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.gpu import list_gpus
from kernelseek_suite.reproduce.pipeline import ReproduceRequest, reproduce
from synthetic_results import default_ratio, make_rows, write_results

ROOT = config.REPO_ROOT
README = ROOT / "README.md"
REFERENCE = ROOT / config.REFERENCE_KERNEL
SELFCHECK_TRACE = ROOT / "results" / "sm90" / "agents-selfcheck" / "trace.jsonl"
CLI = [sys.executable, "-m", "kernelseek_suite.cli"]


def _no_gpu_wanted(monkeypatch):
    """The GPU must not even be looked for."""

    def looked(*a, **k):
        raise AssertionError("the GPU was looked for")

    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", looked)


# ---- filters that match nothing: 4, as bench, and before anything else ----


def test_scenarios_with_a_filter_that_matches_nothing_exits_4():
    r = CliRunner().invoke(main, ["scenarios", "--scenarios", "nomatch*"])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert r.stderr.strip() == "error: no scenario matches 'nomatch*'"
    assert r.stdout == ""
    ok = CliRunner().invoke(main, ["scenarios", "--scenarios", "d64-h32kv32-s512*"])
    assert ok.exit_code == exitcodes.OK and "2 scenarios" in ok.stdout


def test_reproduce_with_a_filter_that_matches_nothing_exits_4_before_the_gpu(tmp_path, monkeypatch):
    _no_gpu_wanted(monkeypatch)
    out = reproduce(ReproduceRequest(arch="sm90", root=tmp_path, scenario_filter="nomatch*"))
    assert out.exit_code == exitcodes.USAGE and out.status == "failed"
    assert out.messages == ["no scenario matches 'nomatch*'"]
    # an id of the extended set is a match only where the extended set runs
    ext = "ext-d64-h32kv32-b3-q1-k1"
    out = reproduce(ReproduceRequest(arch="sm90", root=tmp_path, scenario_filter=ext, extended=False))
    assert out.exit_code == exitcodes.USAGE

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["reproduce", "--root", str(tmp_path), "--scenarios", "nomatch*"])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert "no scenario matches 'nomatch*'" in r.output
    assert list(tmp_path.iterdir()) == []  # nothing written, no partial run


# ---- traces show: a file that is not a trace is a bad argument, said once ----


@pytest.mark.parametrize(
    "name, content, why",
    [
        ("bad.jsonl", "not json\n{broken\n", "none of its 2 lines is a JSON object"),
        ("empty.jsonl", "", "it is empty"),
        ("events.jsonl", '{"type": "llm_call"}\n', "its first event is 'llm_call', not run_start"),
        ("binary.jsonl", b"\xff\xfe\x00\x01", "not UTF-8 text"),
    ],
)
def test_traces_show_refuses_a_file_that_is_not_a_trace(tmp_path, name, content, why):
    f = tmp_path / name
    f.write_bytes(content) if isinstance(content, bytes) else f.write_text(content)
    r = CliRunner().invoke(main, ["traces", "show", str(f)])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert r.stderr.splitlines() == [f"error: {f}: not a trace ({why})"]
    r = CliRunner().invoke(main, ["traces", "show", "--json", str(f)])
    assert r.exit_code == exitcodes.USAGE
    assert json.loads(r.stdout) == {"file": str(f), "error": f"{f}: not a trace ({why})"}


def test_traces_show_on_a_kernel_source_is_one_clear_line():
    """The issue's case: a .cu file gave 1,218 warnings and exit 0."""
    r = CliRunner().invoke(main, ["traces", "show", str(REFERENCE)])
    assert r.exit_code == exitcodes.USAGE
    assert len(r.stderr.splitlines()) == 1 and "not a trace" in r.stderr and r.stdout == ""


def test_traces_show_caps_the_warnings_about_lines_that_are_not_events(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text(SELFCHECK_TRACE.read_text() + "garbage\n" * 25)
    r = CliRunner().invoke(main, ["traces", "show", str(f)])
    assert r.exit_code == exitcodes.OK
    warnings = r.stderr.splitlines()
    assert len(warnings) == 11 and warnings[-1] == "warning: ... and 15 more lines that are not events"


def test_traces_show_json_gives_the_run_and_its_end():
    r = CliRunner().invoke(main, ["traces", "show", "--json", str(SELFCHECK_TRACE)])
    assert r.exit_code == exitcodes.OK, r.output
    d = json.loads(r.stdout)
    events = [json.loads(line) for line in SELFCHECK_TRACE.read_text().splitlines() if line.strip()]
    end = events[-1]
    assert end["type"] == "run_end"
    assert d["run_id"] == events[0]["run_id"] and d["arm"] == events[0]["arm"]
    assert d["events"] == len(events) and d["finished"] is True
    assert d["goal_met"] == end["goal_met"] and d["best"] == end["best"] and d["totals"] == end["totals"]
    assert d["exit"]["reason"] == next(e for e in events if e["type"] == "exit")["reason"]
    assert d["problems"] == [] and d["cut_short"] is False
    plain = CliRunner().invoke(main, ["traces", "show", str(SELFCHECK_TRACE)])
    assert d["timeline"] == plain.stdout.splitlines()


# ---- verify --json ----


def test_verify_json_gives_the_same_verdict_and_exit_code(tmp_path):
    shipped = write_results(tmp_path / "shipped")
    same = write_results(tmp_path / "same")
    r = CliRunner().invoke(main, ["verify", str(shipped), "--against", str(same), "--json"])
    assert r.exit_code == exitcodes.OK, r.output
    d = json.loads(r.stdout)
    assert d["reproduced"] is True and d["baseline"] == "fa3" and d["tolerance"] == config.VERIFY_TOLERANCE
    assert d["counts"] == {"same": 182, "faster": 0, "slower": 0, "inconclusive": 0}
    assert len(d["scenarios"]) == 182 and {"scenario", "shipped", "fresh", "change", "verdict", "why"} <= set(
        d["scenarios"][0]
    )
    assert any(c["claim"].startswith("geomean vs fa3") and c["verdict"] == "same" for c in d["claims"])

    slower = write_results(tmp_path / "slower", make_rows(ratio=lambda s, b: default_ratio(s, b) * 0.8))
    r = CliRunner().invoke(main, ["verify", str(shipped), "--against", str(slower), "--json"])
    assert r.exit_code == exitcodes.FAIL
    d = json.loads(r.stdout)
    assert d["reproduced"] is False and d["counts"]["slower"] == 182
    assert all(abs(s["change"] + 0.2) < 1e-3 for s in d["scenarios"])

    r = CliRunner().invoke(main, ["verify", str(tmp_path / "same"), "--against", str(tmp_path), "--json"])
    assert r.exit_code == exitcodes.USAGE
    assert json.loads(r.stdout)["reproduced"] is None


# ---- a closed pipe costs the output, never the exit code ----


def _checkout(tmp_path) -> Path:
    """A checkout with only the reference kernel and no shipped results: a quick partial run."""
    root = tmp_path / "repo"
    (root / "kernels" / "reference").mkdir(parents=True)
    shutil.copy(REFERENCE, root / config.REFERENCE_KERNEL)
    return root


def _reader_gone(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the command with stdout and stderr on a pipe whose reader has already gone."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([*CLI, *args], stdout=w, stderr=w, cwd=cwd, timeout=600)
    finally:
        os.close(w)
    return p


@pytest.mark.parametrize(
    "args, code",
    [
        (["scenarios"], exitcodes.OK),
        (["scenarios", "--scenarios", "nomatch*"], exitcodes.USAGE),
        (["bench", "--kernel", str(REFERENCE), "--scenarios", "nomatch*"], exitcodes.USAGE),
        (["bench", "--kernel", str(REFERENCE), "--baseline", "nosuch"], exitcodes.USAGE),
        (["traces", "show", str(REFERENCE)], exitcodes.USAGE),
        (["verify", "--against", ".", "."], exitcodes.USAGE),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else str(a),
)
def test_a_command_whose_reader_has_gone_exits_with_its_own_code(tmp_path, args, code):
    assert _reader_gone(args, tmp_path).returncode == code


@pytest.mark.slow
def test_reproduce_piped_into_head_keeps_its_code(tmp_path):
    """The issue's case: `reproduce --arch sm90 2>&1 | head -2` exited 1 ("not correct"), every time."""
    if list_gpus():
        pytest.skip("a GPU is here")
    root = _checkout(tmp_path)
    command = " ".join([*CLI, "reproduce", "--arch", "sm90", "--root", str(root), "--out", str(tmp_path / "out")])
    p = subprocess.run(
        ["bash", "-c", f"{command} 2>&1 | head -2; exit ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert p.returncode == exitcodes.NO_GPU, p.stdout + p.stderr
    assert len(p.stdout.splitlines()) == 2 and p.stdout.startswith("cannot measure sm90 here")
    assert json.loads((tmp_path / "out" / "static.json").read_text())  # the run went on to its end


# ---- the README's table is true for the command it documents ----


def _scripted_reproduce_command() -> str:
    """The command the README gives for scripts: the one whose code is the table's."""
    text = README.read_text()
    section = text[text.index("Exit codes, the same for every command") :]
    line = next(line for line in section.splitlines() if "for a script" in line.lower())
    return line.split("`")[1]


def test_the_readme_names_the_command_whose_code_reproduce_documents():
    cmd = _scripted_reproduce_command()
    assert cmd.startswith("make setup && .venv/bin/kernelseek-suite reproduce --arch sm90"), cmd
    assert "make exits 2" in README.read_text()


@pytest.mark.slow
def test_the_documented_reproduce_command_exits_3_without_a_gpu(tmp_path):
    """`make setup && .venv/bin/kernelseek-suite reproduce --arch sm90`, as the README gives it (the
    venv being the one these tests run in, already set up): 3, not make's 2. On the quick partial run's
    checkout (only the reference kernel): the partial run of this one (its kernels built, its shipped
    results rendered) ends in 3 in test_reproduce.py's test_make_reproduce_without_a_gpu."""
    if list_gpus():
        pytest.skip("a GPU is here")
    cmd = _scripted_reproduce_command()
    venv = Path(sys.prefix)
    cmd = cmd.replace("make setup", f"make -o {venv / '.ready'} setup VENV={venv}").replace(
        ".venv/bin/kernelseek-suite", str(venv / "bin" / "kernelseek-suite")
    )
    root = _checkout(tmp_path)
    p = subprocess.run(
        ["bash", "-c", f"{cmd} --root {root} --out {tmp_path / 'out'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == exitcodes.NO_GPU, p.stdout + p.stderr
    assert "reproduce sm90: partial run, nothing measured (no suitable GPU); runtime none; exit 3" in p.stdout


def test_make_reproduce_says_the_commands_own_code(tmp_path):
    """make exits 2 for any failed recipe; its last words give the command's code."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".ready").touch()
    fake = venv / "bin" / "kernelseek-suite"
    fake.write_text('#!/bin/sh\necho "reproduce $*"\nexit 3\n')
    fake.chmod(0o755)
    p = subprocess.run(
        ["make", "-o", str(venv / ".ready"), "reproduce", f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert "reproduce --arch sm90 --runtime auto" in p.stdout
    assert "make reproduce: kernelseek-suite reproduce exited 3 (README.md, exit codes)" in p.stderr, p.stderr
