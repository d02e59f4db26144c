"""The head-to-head from a protocol: the smoke protocol end to end on the scripted server (both arms,
the final bench, the table with spread and the interval), the paper protocol's plan without a model,
arms named on the command line (an agent command among them), and the statistics on their own."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_runs import FASTER_KERNEL, WRONG_KERNEL
from chat_server import ScriptedChatServer, reply
from kernelseek_suite.cli import main
from kernelseek_suite.config import REPO_ROOT
from kernelseek_suite.contracts.traces import read_trace, validate_trace
from kernelseek_suite.headtohead.protocol import ProtocolError, load_protocol
from kernelseek_suite.headtohead.report import intervals, read_runs
from kernelseek_suite.headtohead.runstats import stats_from_trace
from kernelseek_suite.headtohead.stats import Sample, median_difference, spread
from trace_builder import TraceBuilder

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
SMOKE, PAPER = str(REPO_ROOT / "protocols" / "smoke.yaml"), str(REPO_ROOT / "protocols" / "paper.yaml")
STANDIN = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('standin_agent.py')))}"


def respond(body):
    """Evaluate, improve, evaluate, break it, claim a limit: the same plan for either arm."""
    step = sum(m["role"] == "assistant" for m in body["messages"]) + 1
    return {
        1: reply(None, [("evaluate", {})]),
        2: reply("Turn the loop.", [("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL})]),
        3: reply(None, [("evaluate", {})]),
        4: reply(None, [("edit_file", {"path": "attn.c", "new_text": WRONG_KERNEL}), ("evaluate", {})]),
    }.get(step, reply("It is memory-bound now; it cannot be improved further.", [("shell", {"command": "true"})]))


def respond_unchanged(body):
    """As `respond`, but the kernel is looked at instead of improved: every run's best kernel is the
    starting file, evaluated twice (as in the issue's runs whose best kernels were all the same file)."""
    step = sum(m["role"] == "assistant" for m in body["messages"]) + 1
    if step == 2:
        return reply("Look first.", [("view_file", {"path": "attn.c"})])
    return respond(body)


def _cli(args, env=None):
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke") / "compare"
    with ScriptedChatServer([respond_unchanged] * 100) as srv:
        r = _cli(
            ["compare", "--protocol", SMOKE, "--model", "scripted-model", "--base-url", srv.url, "--out", str(out)],
            env={"OPENAI_API_KEY": None},
        )
        bodies = srv.bodies()
    return out, r, bodies


@needs_gcc
def test_the_smoke_protocol_runs_both_arms_end_to_end_and_prints_the_interval(smoke):
    out, r, bodies = smoke
    assert r.exit_code == 0, r.output
    proto = load_protocol(SMOKE)
    assert f"protocol smoke ({SMOKE}, sha256 {proto.sha256[:12]})" in r.output
    traces = sorted((out / "traces").glob("*.jsonl"))
    assert [t.name for t in traces] == [
        "kernelseek-aa-seed1.jsonl",
        "kernelseek-aa-seed2.jsonl",
        "kernelseek-seed1.jsonl",
        "kernelseek-seed2.jsonl",
        "toolrich-seed1.jsonl",
        "toolrich-seed2.jsonl",
    ]
    for t in traces:
        assert validate_trace(t).ok
        cfg = read_trace(t).events[0]["config"]
        # what the protocol fixes, in every run
        assert cfg["limits"]["max_steps"] == 5 and cfg["limits"]["max_evals"] == 3
        assert cfg["limits"]["max_wall_s"] == 600 and cfg["context"]["window_tokens"] == 32000
        assert cfg["model"]["temperature"] == 0.0 and cfg["model"]["max_output_tokens"] == 1024
        assert cfg["model"]["stream"] is True
        assert cfg["task_options"] == {"budget_ms": 2, "goal": 1000}
        if cfg["arm"] == "kernelseek":
            assert cfg["questions"]["plateau_evals"] == 2 and cfg["questions"]["min_steps_between"] == 1
    # the A/A copy is the same arm with the same options under another label
    copy, arm = (
        read_trace(out / "traces" / f"{n}-seed1.jsonl").events[0]["config"] for n in ("kernelseek-aa", "kernelseek")
    )
    assert copy.pop("label") == "kernelseek-aa" and arm.pop("label") is None and copy == arm
    # four steps each: the third evaluation (step 4) spends the evaluation budget
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 1024 for b in bodies) and len(bodies) == 6 * 4
    assert all(b["stream"] is True and b["stream_options"] == {"include_usage": True} for b in bodies)
    # the table: per-arm median and spread, the interval of the difference, each run's final bench
    assert "## Difference between the arms" in r.output
    assert any(
        l.startswith("| best over the timed scenarios ") and "| toolrich - kernelseek" in l
        for l in r.output.splitlines()
    )
    assert "| best kernel on the full grid" in r.output
    stats = json.loads((out / "stats.json").read_text())
    ivs = {(iv["b"], iv["a"]): iv for iv in stats["intervals"]["best"]}
    assert set(ivs) == {("toolrich", "kernelseek"), ("kernelseek-aa", "kernelseek")} and stats["min_runs"] == 2
    for iv in ivs.values():
        assert iv["paired"] == 2 and iv["low"] is not None and iv["low"] <= iv["difference"] <= iv["high"]
    runs = read_runs(out / "runs.jsonl")
    assert all(x.final_status == "ok" and x.final_geomean > 0 for x in runs)
    finals = [json.loads(l) for l in (out / "final.jsonl").read_text().splitlines()]
    assert {f["label"] for f in finals} == {"kernelseek", "kernelseek-aa", "toolrich"}
    assert all(f["scenarios_total"] == 6 for f in finals)
    assert all("20 ms" in f["note"] for f in finals)
    request = json.loads((out / "request.json").read_text())
    assert request["protocol"]["sha256"] == proto.sha256 and request["final_bench"]["enabled"] is True


def test_the_paper_protocol_plan_needs_no_model(tmp_path):
    r = _cli(["compare", "--protocol", PAPER, "--plan", "--out", str(tmp_path)], env={"OPENAI_API_KEY": None})
    assert r.exit_code == 0, r.output
    rows = {l.split("|")[1].strip(): l.split("|")[2].strip() for l in r.output.splitlines() if l.startswith("| ")}
    assert rows["runs"] == "10" and rows["evaluations"] == "400 (40 per run)"
    assert rows["evaluation time (one H100/H200 (sm90))"] == "5.7 h to 6.6 h"  # 400 x 51-59 s
    assert rows["final full-grid bench (one H100/H200 (sm90))"] == "1.3 h"  # 10 x 3 x 152 s
    assert rows["A/A control (one H100/H200 (sm90))"] == "4.9 min"  # 5 x 59 s
    assert rows["GPU-hours"] == "7.0 to 7.9" and rows["tokens"] == "not bounded" and rows["cost"] == "not estimated"
    assert "measured: one evaluation, 59 s" in r.output and "a2a7894" in r.output
    assert "chosen here (model): not disclosed here" in r.output and "disclosed: the comparison" in r.output
    assert not (tmp_path / "traces").exists()


def _plan_rows(output: str) -> dict[str, tuple[str, str]]:
    return {
        l.split("|")[1].strip(): (l.split("|")[2].strip(), l.split("|")[3].strip())
        for l in output.splitlines()
        if l.startswith("| ")
    }


def test_the_plan_gives_no_cost_bound_while_output_tokens_are_unbounded():
    """The paper protocol sets no max_output_tokens: the prompts are bounded by the window, the answers
    are not, so neither are the tokens or the cost (it used to print 'at most $3,200.00')."""
    from kernelseek_suite.agents.decisions import CLASSIFY_INSTRUCTIONS, CLASSIFY_MAX_CHARS

    r = _cli(["compare", "--protocol", PAPER, "--plan", "--price", "1.25", "10", "--context-tokens", "128000"])
    assert r.exit_code == 0, r.output
    rows = _plan_rows(r.output)
    classify = len(CLASSIFY_INSTRUCTIONS) + CLASSIFY_MAX_CHARS + 16  # one classification call's prompt, at most
    prompts = 5 * (200 * 128000 + 200 * 128000 + 200 * classify)  # toolrich, kernelseek with its classifications
    assert rows["tokens"][0] == "not bounded" and rows["cost"][0] == "not bounded"
    assert "at most $" not in r.output
    assert f"the prompts alone come to up to {prompts:,}" in rows["tokens"][1]
    assert f"the prompts alone come to up to ${prompts * 1.25 / 1e6:,.2f} at $1.25 per million" in rows["cost"][1]
    assert "set max_output_tokens, or a max_tokens or max_cost budget" in rows["cost"][1]


def test_the_plan_bounds_tokens_and_cost_when_every_call_is_bounded(tmp_path):
    from kernelseek_suite.agents.decisions import CLASSIFY_INSTRUCTIONS, CLASSIFY_MAX_CHARS

    r = _cli(["compare", "--protocol", SMOKE, "--plan", "--price", "2", "8"])
    rows = _plan_rows(r.output)
    classify = len(CLASSIFY_INSTRUCTIONS) + CLASSIFY_MAX_CHARS + 16
    plain = 5 * 32000 + 5 * 1024  # toolrich: 5 steps, each a window in and 1024 out
    asking = 5 * 32000 + 5 * classify + 10 * 1024  # kernelseek and its A/A copy: and a classification a step
    assert rows["tokens"][0] == f"at most {2 * (plain + 2 * asking):,} ({plain:,} or {asking:,} per run)"
    cost = 2 * ((5 * 32000 * 2 + 5 * 1024 * 8) + 2 * ((5 * 32000 + 5 * classify) * 2 + 10 * 1024 * 8)) / 1e6
    assert rows["cost"] == (f"at most ${cost:,.2f}", "at $2 in / $8 out per million tokens")
    capped = tmp_path / "p.yaml"
    capped.write_text(
        Path(PAPER).read_text().replace("  max_wall_min: 240\n", "  max_wall_min: 240\n  max_tokens: 1000000\n")
    )
    rows = _plan_rows(_cli(["compare", "--protocol", str(capped), "--plan", "--price", "1", "4"]).output)
    assert rows["tokens"][0] == "at most 10,000,000 (1,000,000 per run)" and rows["cost"][0] == "at most $40.00"


def test_the_plan_says_how_the_budget_is_held_equal_for_each_kind_of_arm(tmp_path):
    r = _cli(
        [
            "compare",
            "--agents",
            "kernelseek,toolrich,codex=agent-cmd",
            "--task",
            "cpu-attn",
            "--max-steps",
            "10",
            "--agent-opt",
            "codex:command=codex exec",
            "--plan",
        ]
    )
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "A step is one call of the agent loop to the model, whatever tools it asks for" in text
    assert (
        "toolrich: profile and disassemble are tool calls, not evaluations: they do not count against max_evals" in text
    )
    assert "kernelseek: a claimed-limit classification call (at most one per step) is not a step" in text
    assert "codex: an agent command's step is a whole session" in text and "so max_steps counts sessions" in text
    assert "read from the command's own usage report after each session" in text


def test_a_protocol_fixes_what_it_fixes(tmp_path):
    r = _cli(["compare", "--protocol", SMOKE, "--max-steps", "50", "--plan"])
    assert r.exit_code == 4 and "fixes --max-steps" in r.output
    r = _cli(["compare", "--protocol", SMOKE, "--context-tokens", "8000", "--plan"])
    assert r.exit_code == 4 and "fixes the context window (32000 tokens)" in r.output
    bad = tmp_path / "p.yaml"
    bad.write_text(
        "version: 1\nname: x\ntask: {name: cpu-attn}\nmodel: {}\nseeds: 2\narms: {a: {agent: kernelseek}}\n"
        "budget: {max_evals: 0}\n"
    )
    with pytest.raises(ProtocolError, match="budget/max_evals: 0 is less than the minimum of 1"):
        load_protocol(bad)
    r = _cli(["compare", "--protocol", str(bad), "--plan"])
    assert r.exit_code == 4 and "max_evals" in r.output
    bad.write_text(
        "version: 1\nname: x\ntask: {name: cpu-attn}\nmodel: {}\nseeds: 2\n"
        "arms: {a: {agent: toolrich, options: {plateau_evals: 3}}}\nbudget: {}\n"
    )
    r = _cli(["compare", "--protocol", str(bad), "--plan"])
    assert r.exit_code == 4 and "unknown option(s) for the toolrich agent: plateau_evals" in r.output


def test_arms_and_their_options_are_checked_before_anything_runs(tmp_path):
    base = [
        "compare",
        "--task",
        "cpu-attn",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--out",
        str(tmp_path),
    ]
    r = _cli([*base, "--agents", "toolrich,general", "--plateau", "3"])
    assert r.exit_code == 4 and "no arm takes the question settings (plateau_evals)" in r.output
    r = _cli([*base, "--agents", "kernelseek,toolrich", "--agent-opt", "toolrich:categories=[information]"])
    assert r.exit_code == 4 and "unknown option(s) for the toolrich agent: categories" in r.output
    r = _cli([*base, "--agents", "kernelseek,kernelseek"])
    assert r.exit_code == 4 and "each label once" in r.output
    r = _cli(
        [
            *base,
            "--agents",
            "ks=kernelseek,info=kernelseek",
            "--agent-opt",
            "info:categories=[information]",
            "--plateau",
            "3",
            "--plan",
        ]
    )
    assert r.exit_code == 0 and "2 arms (ks, info)" in r.output
    assert not (tmp_path / "traces").exists()


@needs_gcc
def test_an_agent_command_is_an_arm_of_compare(tmp_path):
    out = tmp_path / "cmp"
    with ScriptedChatServer([respond] * 20) as srv:
        r = _cli(
            [
                "compare",
                "--agents",
                "kernelseek,standin=agent-cmd",
                "--task",
                "cpu-attn",
                "--task-opt",
                "budget_ms=2",
                "--goal",
                "1000",
                "--model",
                "scripted-model",
                "--base-url",
                srv.url,
                "--seeds",
                "1",
                "--max-steps",
                "2",
                "--agent-opt",
                f"standin:command={STANDIN}",
                "--agent-opt",
                "standin:start={cmd} start {prompt}",
                "--agent-opt",
                "standin:resume={cmd} resume {prompt}",
                "--agent-opt",  # the stand-in and the suite it imports, read from the sandbox
                f"standin:read=[{Path(__file__).parent},{REPO_ROOT / 'suite'}]",
                "--no-final-bench",
                "--out",
                str(out),
            ],
            env={"OPENAI_API_KEY": None},
        )
    assert r.exit_code == 0, r.output
    assert "agent command not sandboxed" not in r.output  # in the sandbox, as the built-in arms
    assert read_trace(out / "traces" / "standin-seed1.jsonl").events[0]["protections"]["complete"] is True
    runs = {x.arm: x for x in read_runs(out / "runs.jsonl")}
    assert set(runs) == {"kernelseek", "standin"} and runs["standin"].agent == "agent-cmd"
    assert runs["standin"].evals == 2 and runs["standin"].steps == 2 and runs["standin"].questions == 1
    events = read_trace(out / "traces" / "standin-seed1.jsonl").events
    assert [e["mode"] for e in events if e["type"] == "invocation"] == ["start", "resume"]
    assert events[0]["config"]["label"] == "standin" and events[0]["arm"] == "agent-cmd"
    assert "| standin" in r.output and "insufficient runs" in r.output


def test_final_bench_without_a_gpu_is_skipped_with_a_note(tmp_path):
    from kernelseek_suite.gpu import list_gpus
    from kernelseek_suite.headtohead.final import bench_best

    if list_gpus():
        pytest.skip("a GPU is here: the bench would run")
    b = TraceBuilder(tmp_path / "t.jsonl", "toolrich", "r", task="fa-fwd-sm90")
    b.step().evaluate(0.25, sha="ab" * 32)
    blobs = tmp_path / "t.d" / "blobs"
    (blobs / ("ab" * 32)).write_bytes((REPO_ROOT / "kernels" / "reference" / "attn_fwd_ref.cu").read_bytes())
    row = bench_best(b.end(), tmp_path / "out")
    assert row.status == "no_gpu" and row.note.startswith("skipped:") and "--final-bench" in row.note
    assert row.candidate_sha256 == "ab" * 32 and row.geomean is None


def test_spread_and_the_bootstrap_interval():
    s = spread([1.0, 2.0, 3.0, 4.0, None])
    assert (s.n, s.median, s.q1, s.q3, s.low, s.high) == (4, 2.5, 1.75, 3.25, 1.0, 4.0)
    a = {1: 1.0, 2: 1.1, 3: 0.9, 4: 1.05, 5: 0.95}
    b = {k: v + 0.5 for k, v in a.items()}  # every pair differs by exactly 0.5
    iv = median_difference(a, b, "a", "b")
    assert iv.difference == pytest.approx(0.5) and iv.paired == 5
    assert iv.low == pytest.approx(0.5) and iv.high == pytest.approx(0.5)  # paired: no spread in the difference
    noisy = median_difference(a, {1: 2.0, 2: 0.5, 3: 1.5, 4: 0.7, 5: 1.9}, "a", "c")
    assert noisy.low < noisy.difference < noisy.high and noisy.low < 0 < noisy.high
    assert median_difference(a, b) == median_difference(a, b)  # a fixed seed
    one = median_difference({1: 1.0}, {1: 2.0})
    assert one.difference == 1.0 and one.low is None and one.verdict == "insufficient runs"
    assert "insufficient runs: 1 and 1 with a value, fewer than 3 per arm" in one.note


def test_the_agents_never_import_the_head_to_head():
    import ast

    for path in sorted((REPO_ROOT / "suite" / "agents").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else ([a.name for a in node.names] if isinstance(node, ast.Import) else [])
            )
            assert not any("headtohead" in n for n in names), f"{path} imports the head-to-head"


# ---------------------------------------------------------------- noise: the A/A control and the interval


@needs_gcc
def test_the_smoke_protocols_aa_pair_shows_no_significant_difference_and_the_noise_band(smoke):
    out, r, _ = smoke
    assert r.exit_code == 0, r.output
    md = (out / "compare.md").read_text()
    aa = next(l for l in md.splitlines() if l.startswith("| best over the timed scenarios (A/A control)"))
    assert "kernelseek-aa - kernelseek" in aa and "no significant difference" in aa
    grid = next(l for l in md.splitlines() if l.startswith("| best kernel on the full grid (A/A control)"))
    assert "no significant difference" in grid
    # every run's best kernel is the starting file: identical best kernels, a difference of exactly 0, said so
    stats = json.loads((out / "stats.json").read_text())
    for iv in stats["intervals"]["best"] + stats["intervals"]["full_grid"]:
        assert iv["identical_kernels"] and iv["difference"] == 0.0 and (iv["low"], iv["high"]) == (0.0, 0.0)
        assert iv["verdict"] == "no significant difference" and "identical best kernels" in iv["note"]
    # the noise: the starting kernel evaluated 5 times as in a run, each best kernel benched 3 times
    assert "## Noise (A/A control)" in md and "the starting kernel evaluated 5 times as a run evaluates it" in md
    noise = json.loads((out / "noise.json").read_text())
    (aa_set,) = [x for x in noise["repeats"] if x["source"] == "aa"]
    start = read_trace(out / "traces" / "kernelseek-seed1.jsonl").events[0]["workspace"]["attn.c"]
    assert aa_set["candidate_sha256"] == start and len(aa_set["values"]) == 5 and aa_set["kind"] == "evaluation"
    found = {(b["task"], b["kind"]): b for b in noise["bands"]}
    assert found[("cpu-attn", "evaluation")]["band"] >= 0 and found[("cpu-attn", "full_grid")]["band"] >= 0
    finals = [json.loads(l) for l in (out / "final.jsonl").read_text().splitlines()]
    assert all(f["repeats"] == 3 and len(f["geomeans"]) == 3 for f in finals)
    assert all(f["geomean"] == sorted(f["geomeans"])[1] for f in finals)  # the median of the three


@needs_gcc
def test_fewer_runs_than_the_protocols_minimum_say_insufficient_runs(tmp_path):
    one_seed = tmp_path / "smoke1.yaml"
    one_seed.write_text(Path(SMOKE).read_text().replace("seeds: 2", "seeds: 1"))
    out = tmp_path / "cmp"
    with ScriptedChatServer([respond] * 100) as srv:
        r = _cli(
            [
                "compare",
                "--protocol",
                str(one_seed),
                "--model",
                "scripted-model",
                "--base-url",
                srv.url,
                "--out",
                str(out),
                "--no-final-bench",
            ],
            env={"OPENAI_API_KEY": None},
        )
    assert r.exit_code == 0, r.output
    rows = [l for l in r.output.splitlines() if l.startswith("| best over the timed scenarios")]
    assert len(rows) == 2 and all("| insufficient runs |" in l for l in rows)
    assert all("insufficient runs: 1 and 1 with a value, fewer than 2 per arm" in l for l in rows)
    stats = json.loads((out / "stats.json").read_text())
    assert all(iv["low"] is None and iv["high"] is None for iv in stats["intervals"]["best"])


def _runs_with_best(tmp_path, values: dict[str, list[float]], best_sha) -> list:
    runs = []
    for arm, vals in values.items():
        for seed, v in enumerate(vals, 1):
            b = TraceBuilder(tmp_path / f"{arm}-{seed}.jsonl", arm, f"{arm}-{seed}", seed=seed)
            b.step().evaluate(0.5, sha="a0" * 32)
            b.step(edit="x").evaluate(v, sha=best_sha(arm, seed))
            runs.append(stats_from_trace(b.end()))
    return runs


def test_identical_best_kernels_across_arms_differ_by_exactly_zero(tmp_path):
    """The same file as every run's best, measured with noise (the issue's case: 4 runs, 2 seeds, a
    difference of -0.173 whose interval excluded 0)."""
    runs = _runs_with_best(
        tmp_path, {"kernelseek": [1.05, 1.12], "toolrich": [0.89, 0.91]}, lambda arm, seed: "b1" * 32
    )
    (iv,) = intervals(runs, min_runs=2)["best"]
    assert iv.difference == 0.0 and (iv.low, iv.high) == (0.0, 0.0) and iv.identical_kernels
    assert iv.verdict == "no significant difference"
    assert "identical best kernels (sha256 b1b1b1b1b1b1) in every run: the difference is 0" in iv.note


def test_the_same_kernel_in_a_pair_of_runs_has_one_value_whatever_its_measurements(tmp_path):
    # seed 1: both arms found the same file; seed 2: different files
    runs = _runs_with_best(
        tmp_path,
        {"a": [1.00, 1.30], "b": [1.20, 1.50]},
        lambda arm, seed: "c1" * 32 if seed == 1 else f"{arm}{seed}".ljust(64, "0"),
    )
    (iv,) = intervals(runs, min_runs=2)["best"]
    # seed 1 counts 1.10 for both (the median of the file's two measurements), seed 2 is 1.30 vs 1.50
    assert iv.difference == pytest.approx((1.10 + 1.50) / 2 - (1.10 + 1.30) / 2) and not iv.identical_kernels


def test_the_interval_draws_from_the_remeasurements_not_only_the_seeds():
    # each run's kernel benched three times: the arms' medians differ by 0.1, the benches spread 0.3
    a = {s: Sample(f"a{s}", [1.0 + d, 0.85 + d, 1.15 + d]) for s, d in ((1, 0.0), (2, 0.02), (3, 0.01), (4, 0.03))}
    b = {s: Sample(f"b{s}", [v + 0.1 for v in x.values]) for s, x in a.items()}
    seeds_only = median_difference(
        {s: x.values[0] for s, x in a.items()}, {s: x.values[0] for s, x in b.items()}, "a", "b"
    )
    assert seeds_only.low == pytest.approx(0.1) and seeds_only.verdict == "b higher"  # one number a run: exact
    noisy = median_difference(a, b, "a", "b")
    assert noisy.difference == pytest.approx(0.1) and noisy.low < 0 < noisy.high
    assert noisy.verdict == "no significant difference" and noisy.measurements == 24
    # a kernel measured once takes the deviations of the kernels measured several times (the A/A control's)
    once = median_difference(
        {s: x.values[0] for s, x in a.items()},
        {s: x.values[0] for s, x in b.items()},
        "a",
        "b",
        noise_sets=[[1.0, 0.85, 1.15]],
    )
    assert once.low < 0 < once.high
