"""The front door: one CLI package, exit codes from one module, usage errors that exit 4 and write
nothing, and a closed pipe that exits 0 quietly."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kernelseek_suite.cli import main
from kernelseek_suite.contracts import exitcodes

SUITE = Path(__file__).resolve().parent.parent / "suite"
KERNELS = Path(__file__).parent / "kernels"


def _commands(group: click.Group, prefix=()):
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


def _with_arch():
    return [path for path, cmd in _commands(main) if any("--arch" in p.opts for p in cmd.params)]


def test_every_command_with_an_arch_option_is_found():
    found = {" ".join(p) for p in _with_arch()}
    assert {"scenarios", "build", "bench", "eval", "reproduce", "doctor", "wheelhouse", "container pin"} <= found


@pytest.mark.parametrize("path", _with_arch(), ids=lambda p: " ".join(p))
def test_a_bad_arch_is_a_usage_error_everywhere(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, [*path, "--arch", "sm75"])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert "sm75" in r.output
    assert list(tmp_path.iterdir()) == []  # a usage error writes nothing


@pytest.mark.parametrize(
    "args",
    [
        ["bogus"],
        ["traces", "bogus"],
        ["container", "bogus"],
        ["--bogus"],
        ["build", "no-such-kernel.cu"],
        ["eval", "no-such-kernel.cu"],
        ["bench"],
        ["bench", "--kernel", "no-such-kernel.cu"],
        ["scenarios", "--bogus"],
        ["run", "--max-steps", "many"],
        ["compare", "--seeds", "0"],
        ["render", "no-such-folder"],
    ],
)
def test_click_usage_errors_exit_4_and_write_nothing(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == exitcodes.USAGE, r.output
    assert "Usage:" in r.output
    assert list(tmp_path.iterdir()) == []


def test_a_bad_key_value_inside_a_command_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        main,
        ["run", "--model", "m", "--base-url", "http://127.0.0.1:9", "--task-opt", "novalue"],
        env={"OPENAI_API_KEY": None},
    )
    assert r.exit_code == exitcodes.USAGE, r.output
    assert "KEY=VALUE" in r.output


def _closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    """Run the command with its stdout read for one line and then closed, as `| head -1` does."""
    p = subprocess.Popen(
        [sys.executable, "-m", "kernelseek_suite.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=120)
    return subprocess.CompletedProcess(args, p.returncode, first, err)


@pytest.mark.parametrize("args", [["scenarios"], ["scenarios", "--extended", "--json"]])
def test_a_closed_pipe_exits_0_quietly(args):
    r = _closed_pipe(args)
    assert r.stdout.strip()  # it did write, and the reader went away
    assert r.returncode == exitcodes.OK, r.stderr
    assert r.stderr == b""


def test_scenarios_piped_into_head_exits_0(tmp_path):
    out = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{sys.executable} -m kernelseek_suite.cli scenarios --arch sm90 | head -3"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 3 and out.stderr == ""


def test_python_dash_m_is_the_same_command():
    r = subprocess.run(
        [sys.executable, "-m", "kernelseek_suite.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and "Usage: kernelseek-suite" in r.stdout


def test_exit_codes_are_defined_in_one_module():
    """No module but exitcodes.py assigns an EXIT_* name, and the commands exit with its names,
    never with a bare number."""
    assigned, literal = [], []
    for path in SUITE.rglob("*.py"):
        if path.name == "exitcodes.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for t in targets:
                names = t.elts if isinstance(t, ast.Tuple) else [t]
                assigned += [
                    f"{path.name}:{n.id}" for n in names if isinstance(n, ast.Name) and re.match(r"EXIT_", n.id)
                ]
            if (
                path.parent.name == "cli"
                and isinstance(node, ast.Call)
                and ast.unparse(node.func) == "sys.exit"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                literal.append(f"{path.name}:{node.lineno}")
    assert assigned == [] and literal == []


def test_the_codes_are_distinct_and_doctors_follow_the_common_ones():
    common = [
        exitcodes.OK,
        exitcodes.FAIL,
        exitcodes.BUILD,
        exitcodes.NO_GPU,
        exitcodes.USAGE,
        exitcodes.RUNTIME,
        exitcodes.EVALUATOR,
        exitcodes.ENDPOINT,
    ]
    assert common == [0, 1, 2, 3, 4, 5, 6, 7] and set(exitcodes.MEANING) == set(common)
    doctor = [c for k, c in exitcodes.DOCTOR.items() if k != "gpu"]
    assert len(set(doctor)) == len(doctor) and min(doctor) > max(common)
    assert exitcodes.DOCTOR["gpu"] == exitcodes.NO_GPU
    from kernelseek_suite.reproduce import doctor as doc

    assert doc.CODES is exitcodes.DOCTOR


def test_the_library_never_imports_the_cli():
    """Only suite/cli/ imports suite/cli/ (the import contracts say the same, in CI)."""
    bad = []
    for path in SUITE.rglob("*.py"):
        if path.parent.name == "cli" and path.parent.parent == SUITE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and re.match(r"(\w+\.)*cli\b", node.module)
                and (node.level > 0 or node.module.startswith("kernelseek_suite"))
            ):
                bad.append(f"{path.relative_to(SUITE)}: from {'.' * node.level}{node.module}")
    assert bad == []


def test_the_wheel_ships_py_typed(tmp_path):
    """The package says it is typed: py.typed is in the built wheel, beside the code (built from a
    copy, so that nothing is written into the checkout)."""
    import shutil
    import zipfile

    src = tmp_path / "src"
    shutil.copytree(SUITE, src / "suite", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(SUITE.parent / name, src / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("kernelseek_suite-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "kernelseek_suite/py.typed" in names and "kernelseek_suite/contracts/exitcodes.py" in names
