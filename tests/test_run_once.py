"""`run_once --time`: the timing of one scenario beside what-if variants (GPU), and its arguments (CPU)."""

from pathlib import Path

import pytest

from kernelseek_suite.cli import run_once
from kernelseek_suite.harness import run_once as run_once_lib
from kernelseek_suite.harness.run_once import select_scenarios

REF = Path(__file__).resolve().parent.parent / "kernels" / "reference" / "attn_fwd_ref.cu"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--beside", str(REF)], "--beside needs --time (to time it) or --check --check-beside (to check it)"),
        (["--baseline", "fa3"], "--baseline needs --time"),
        (["--check", "--check-beside"], "--check-beside needs --check and at least one --beside"),
        (["--check-beside", "--beside", str(REF)], "--check-beside needs --check and at least one --beside"),
        (["--time", "--inputs", "nope"], "unknown input distribution nope"),
    ],
)
def test_what_does_not_go_together_is_refused(capsys, args, message):
    with pytest.raises(SystemExit) as e:
        run_once.main([str(REF), "d64-h32kv32-s512", *args])
    assert e.value.code == 4
    assert message in capsys.readouterr().err


def test_checking_variants_beside_needs_no_timing(monkeypatch):
    """--check --check-beside with --beside and no --time gets past the arguments (to the build)."""
    reached = []
    monkeypatch.setattr(run_once_lib, "select_scenarios", lambda spec, known: reached.append(spec) or [])
    assert run_once.main([str(REF), "d64-h32kv32-s512", "--check", "--check-beside", "--beside", str(REF)]) == 4
    assert reached == ["d64-h32kv32-s512"]


def test_an_unknown_baseline_is_refused_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as e:
        run_once.main([str(REF), "d64-h32kv32-s512", "--time", "--baseline", "fa9"])
    assert e.value.code == 4
    err = capsys.readouterr().err
    assert "unknown baseline fa9" in err and "fa3" in err


def test_an_unknown_scenario_is_refused(capsys):
    pytest.importorskip("torch")
    assert run_once.main([str(REF), "d64-h99kv99-s512"]) == 4
    assert "unknown scenario" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.nvcc
def test_time_beside_itself_gives_two_rows_near_one(capsys):
    assert (
        run_once.main(
            [
                str(REF),
                "d64-h32kv32-s1024",
                "--arch",
                "sm80",
                "--check",
                "--time",
                "--beside",
                str(REF),
                "--baseline",
                "sdpa-flash",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "d64-h32kv32-s1024: ok" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(str(REF))]  # REF, then REF'
    assert len(rows) == 2
    assert "checked:" in " ".join(rows[0]) and "not checked" in " ".join(rows[1])
    assert 0.8 < float(rows[1][-1]) < 1.25  # the same kernel, timed interleaved
    base = [line.split() for line in out.splitlines() if line.startswith("baseline sdpa-flash")]
    assert len(base) == 1 and float(base[0][-1]) > 0


def test_scenarios_are_chosen_by_ids_and_globs_in_order_each_once():
    from kernelseek_suite.scenarios import by_id

    known = by_id("sm90")
    picked = [s.id for s in select_scenarios("d96-h16kv16-s512,d96-*-s512*,d64-h32kv32-s1024", known)]
    assert picked == ["d96-h16kv16-s512", "d96-h16kv16-s512-causal", "d64-h32kv32-s1024"]
    assert select_scenarios("d96-h16kv16-s512,nomatch*", known) == []  # a part that names nothing
    assert select_scenarios("", known) == []
    assert [s.id for s in select_scenarios(" d64-h32kv32-s1024 ", known)] == ["d64-h32kv32-s1024"]


def test_a_pattern_that_names_nothing_is_refused(capsys):
    pytest.importorskip("torch")
    assert run_once.main([str(REF), "d64-h32kv32-s512,d7*"]) == 4
    assert "unknown scenario" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.nvcc
def test_several_scenarios_end_with_each_entrys_geomean_and_beside_outputs_checked(capsys):
    argv = [
        str(REF),
        "d64-h32kv32-s512,d64-h32kv32-s512-causal",
        "--arch",
        "sm80",
        "--check",
        "--check-beside",
        "--time",
        "--beside",
        str(REF),
    ]
    assert run_once.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count(f" {REF}: ok") == 2  # the beside kernel's output, checked on both scenarios
    tail = out.splitlines()[-2:]
    assert tail[0].startswith("speed relative to") and "over 2" in tail[0]
    assert tail[1].strip().startswith(f"{REF}'") and 0.8 < float(tail[1].split()[1]) < 1.25


def test_a_baseline_that_cannot_run_here_says_why_instead_of_a_row():
    from kernelseek_suite.baselines import get
    from kernelseek_suite.scenarios import by_id

    b = get("fa3")
    if b.available()[0]:
        pytest.skip("FA3 is installed here")
    call, why = run_once_lib._baseline_call("fa3", by_id("sm90")["d128-h16kv16-s1024"], (None, None, None))
    assert call is None and why.startswith("not installed") and "pip install" in why


def test_the_speed_table_has_a_row_per_scenario_and_a_column_per_entry():
    speeds = {
        "/tmp/qa.cu": {"d64-s512": 1.0123, "d96-s8192": 0.9871},
        "baseline fa3": {"d64-s512": 0.9, "d128-s1024": 1.25},
    }
    lines = run_once_lib.speed_table(speeds).splitlines()
    assert lines[0].split() == ["scenario", "qa.cu", "fa3"]
    assert [line.split() for line in lines[2:]] == [
        ["d64-s512", "1.012", "0.900"],
        ["d96-s8192", "0.987", "-"],
        ["d128-s1024", "-", "1.250"],
    ]
