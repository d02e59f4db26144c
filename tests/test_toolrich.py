"""The tool-rich arm: complete runs on the CPU task through the loopback chat server, its tools one
by one (profiler, disassembly, retrieval, lessons, population), and what it says where a tool cannot
run."""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_runs import FASTER_KERNEL, config_for, of_type, run, user_texts
from chat_server import ScriptedChatServer, reply
from kernelseek_suite.agents import RunConfig, new_run, resume_run
from kernelseek_suite.agents.lessons import LessonStore
from kernelseek_suite.agents.population import Member, Population
from kernelseek_suite.agents.profiler_tools import find_executable
from kernelseek_suite.agents.selfcheck import ScriptedModel
from kernelseek_suite.cli import main
from kernelseek_suite.contracts.traces import read_trace, validate_trace

FIX = Path(__file__).parent / "fixtures"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
TOOLS = [
    "shell",
    "view_file",
    "edit_file",
    "evaluate",
    "profile",
    "disassemble",
    "search_docs",
    "record_lesson",
    "population",
    "checkout",
]


def _tool_results(events, name):
    return [e for e in of_type(events, "tool_result") if e["tool"] == name]


@needs_gcc
def test_a_toolrich_run_keeps_lineage_lessons_and_the_goal(tmp_path):
    lesson = "Reading v by columns in the innermost loop is slow; walk rows of v contiguously instead."
    script = [
        reply(None, [("evaluate", {"note": "the starting code"})]),
        reply(None, [("record_lesson", {"text": lesson})]),
        reply("Turn the P.V loop inside out.", [("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL})]),
        reply(None, [("evaluate", {})]),
        reply(None, [("population", {}), ("checkout", {"id": "c1", "path": "parent_b.c"})]),
        reply(None, [("evaluate", {"note": "kept the rows of c2, took nothing from c1"})]),
        reply("I am done."),
        reply(None, [("shell", {"command": "true"})]),
    ]
    with ScriptedChatServer(script) as srv:
        result, events, agent = run(config_for(srv, arm="toolrich", max_steps=8), tmp_path)
        bodies = srv.bodies()
    start = events[0]
    assert start["arm"] == "toolrich" and start["tools"] == TOOLS
    assert start["toolrich"]["docs"]["passages"] > 0 and start["toolrich"]["lessons"].endswith("lessons.sqlite")
    assert "record_lesson" in start["config"]["system_prompt"]
    # lineage: a seed, a mutation of it, a recombination of both
    metas = [e["meta"] for e in of_type(events, "harness_eval")]
    assert [(m["candidate_id"], m["parents"], m["generation"], m["operator"]) for m in metas] == [
        ("c1", [], 0, "seed"),
        ("c2", ["c1"], 1, "mutate"),
        ("c3", ["c2", "c1"], 2, "recombine"),
    ]
    pops = of_type(events, "x-population")
    assert [p["candidate_id"] for p in pops] == ["c1", "c2", "c3"] and all(p["admitted"] for p in pops)
    assert {m["id"] for m in pops[-1]["top"]} == {"c1", "c2", "c3"}
    # the checked-out parent is the first candidate, byte for byte
    evals = of_type(events, "harness_eval")
    step5 = next(e for e in of_type(events, "step") if e["step"] == 5)
    assert step5["workspace"]["parent_b.c"] == evals[0]["candidate_sha256"]
    assert step5["workspace"]["attn.c"] == evals[1]["candidate_sha256"]
    # the lesson is in SQLite in the run's folder, tied to its evaluation ...
    db = agent.ctx.trace.artifacts / "lessons.sqlite"
    rows = sqlite3.connect(db).execute("SELECT eval_index, candidate_id, status, text FROM lessons").fetchall()
    assert rows == [(1, "c1", "ok", lesson)]
    # ... and comes back into the prompt after a later evaluation, not before
    shown = of_type(events, "x-lessons")
    assert shown and shown[0]["lesson_ids"] == [1] and shown[0]["step"] == 4
    assert not any(lesson in t for t in user_texts(bodies[3]))
    assert any(t.startswith("Lessons recorded earlier") and lesson in t for t in user_texts(bodies[4]))
    # the stop is refused while the goal is unmet, without a question
    assert not of_type(events, "question") and of_type(events, "x-stop-refused")
    refusal = bodies[7]["messages"][-1]
    assert refusal["role"] == "user" and "not met" in refusal["content"] and refusal["content"].endswith("Continue.")
    assert result.exit_reason == "limit" and validate_trace(agent.ctx.trace.path).ok


@needs_gcc
def test_tools_that_cannot_run_on_the_cpu_task_say_so(tmp_path):
    with ScriptedChatServer([reply(None, [("profile", {}), ("disassemble", {})])]) as srv:
        _, events, _ = run(config_for(srv, arm="toolrich", max_steps=1), tmp_path)
    for name in ("profile", "disassemble"):
        (r,) = _tool_results(events, name)
        assert r["is_error"] and "cannot run here" in r["output"] and "Nothing was measured" in r["output"]
        assert r["data"] == {"available": False, "reason": r["data"]["reason"]} and "cpu-attn" in r["data"]["reason"]


def _fa_run(tmp_path, steps, **arm_options):
    cfg = RunConfig(arm="toolrich", task="fa-fwd-sm90", arm_options=arm_options, seed=1)
    cfg.model.name = "script"
    cfg.limits.max_steps = len(steps)
    agent = new_run(cfg, tmp_path / "t.jsonl", model=ScriptedModel(steps))
    agent.run()
    return read_trace(tmp_path / "t.jsonl").events, agent


def test_the_profiler_without_ncu_or_a_gpu_measures_nothing(tmp_path):
    events, _ = _fa_run(tmp_path, [[("profile", {})]], ncu=str(tmp_path / "no-such-ncu"))
    (r,) = _tool_results(events, "profile")
    assert r["is_error"] and r["data"]["available"] is False and "ncu" in r["data"]["reason"]
    assert "%" not in r["output"] and not (tmp_path / "t.d" / "profiles").exists()


REPLAY_NCU = """#!{python}
# replays a capture of real ncu output; says how it was called on stderr (kept as ncu.log)
import json, sys
sys.stderr.write(json.dumps(sys.argv[1:]) + "\\n")
if {reject!r} and "--metrics" in sys.argv:
    print("==ERROR== Failed to find metric sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active")
    sys.exit(1)
sys.stdout.write(open({capture!r}).read())
"""


@pytest.mark.parametrize("reject_metrics", [False, True])
def test_the_profiler_runs_ncu_on_run_once_and_gives_the_compact_table(tmp_path, monkeypatch, reject_metrics):
    from kernelseek_suite.agents import profiler_tools

    monkeypatch.setattr(profiler_tools, "gpu_problem", lambda arch: None)  # as on a machine with an H200
    bin_dir = tmp_path / "nsight"
    bin_dir.mkdir()
    fake = bin_dir / "ncu"
    shutil.copyfile(FIX / "ncu_ref_d128_s4096.csv", bin_dir / "capture.csv")
    fake.write_text(
        REPLAY_NCU.format(python=sys.executable, reject=reject_metrics, capture=str(bin_dir / "capture.csv"))
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    events, agent = _fa_run(tmp_path, [[("profile", {})], [("profile", {"scenario": "d999-nonsense"})]], ncu=str(fake))
    first, second = _tool_results(events, "profile")
    assert not first["is_error"] and first["data"]["scenario"] == "d128-h16kv16-s4096"
    out = first["output"]
    assert "kernel void attn_fwd_ref_kernel<128, 128>(ks_attn_params)" in out
    assert (
        "registers per thread                129" in out and "tensor pipe                         not reported" in out
    )
    assert ("refused the tensor-pipe and stall metrics" in out) == reject_metrics
    prof = agent.ctx.trace.artifacts / first["data"]["dir"]
    argv = json.loads((prof / "ncu.log").read_text().splitlines()[0])  # the last call
    assert ("--metrics" in argv) != reject_metrics
    assert argv[argv.index("--nvtx-include") + 1] == "kernel:d128-h16kv16-s4096/"
    # the target: run-once of the sealed copy of the suite, isolated and without site, on a copy of the kernel
    target = argv[argv.index("-I") - 1 :]
    assert target[1:4] == ["-I", "-S", "-B"] and target[4].endswith("/snapshot/run.py")
    assert target[5:8] == ["-m", "kernelseek_suite.cli", "run-once"] and Path(target[8]).name == "attn_fwd_ref.cu"
    assert target[9:] == ["d128-h16kv16-s4096", "--arch", "sm90", "--reps", "1"]
    assert (prof / "attn_fwd_ref.cu").read_bytes() == agent.ctx.task.start.read_bytes()  # kept with the output
    assert json.loads((prof / "summary.json").read_text())[0]["registers_per_thread"] == 129
    assert second["is_error"] and "unknown scenario" in second["output"]


@pytest.mark.nvcc
@pytest.mark.skipif(find_executable("cuobjdump") is None, reason="needs cuobjdump")
def test_disassemble_builds_the_workspace_kernel_and_summarizes_it(tmp_path, monkeypatch):
    from kernelseek_suite.build import build

    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    steps = [
        [("disassemble", {"function": "<128, 128>", "listing": True})],
        [("edit_file", {"path": "attn_fwd_ref.cu", "new_text": "int broken( {\n"})],
        [("disassemble", {})],
    ]
    events, agent = _fa_run(tmp_path, steps)
    ok, broken = _tool_results(events, "disassemble")
    assert not ok["is_error"] and len(ok["data"]["functions"]) == 1
    f = ok["data"]["functions"][0]
    built = {x.name: x.registers for x in build(agent.ctx.task.start, "sm90").functions}
    assert "<128, 128>" in f["name"] and f["registers"] in built.values() and f["mix"]["tensor"] > 0
    assert "inner loop of attn_fwd_ref_kernel<128, 128>" in ok["output"] and "HMMA.16816.F32.BF16" in ok["output"]
    assert (agent.ctx.trace.artifacts / ok["data"]["dir"] / "kernel.sass").stat().st_size > 10_000
    assert broken["is_error"] and "does not build" in broken["output"]


def test_search_docs_finds_passages_in_documents_the_user_adds(tmp_path):
    docs = tmp_path / "guides"
    docs.mkdir()
    (docs / "ptx.html").write_text(
        "<html><style>p {color: red}</style><body><h2>Asynchronous warpgroup MMA</h2>"
        "<p>wgmma.mma_async runs on a warpgroup of 128 threads.</p></body></html>"
    )
    (docs / "notes.md").write_text("# Tiling\n\nLarger tiles reuse each loaded K block more often.\n")
    steps = [[("search_docs", {"query": "warpgroup mma_async"})], [("search_docs", {"query": "zebra giraffe"})]]
    events, _ = _fa_run(tmp_path, steps, docs=[str(docs)])
    assert events[0]["toolrich"]["docs"]["files"] == 2
    hit, miss = _tool_results(events, "search_docs")
    assert hit["output"].startswith("[1] guides/ptx.html:")
    assert "wgmma.mma_async runs on a warpgroup" in hit["output"] and "color: red" not in hit["output"]
    assert hit["data"]["hits"][0]["source"] == "guides/ptx.html"
    assert "no passage matches" in miss["output"] and miss["data"]["hits"] == []


def test_unknown_arm_options_are_a_usage_error(tmp_path):
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
            "populaton_size=3",
            "--trace",
            str(tmp_path / "t.jsonl"),
        ],
    )
    assert r.exit_code == 4 and "unknown option(s) for the toolrich agent: populaton_size" in r.output


@needs_gcc
def test_a_resumed_toolrich_run_keeps_its_population_and_lessons(tmp_path):
    class Interrupting(ScriptedModel):
        def query(self, messages, tools):
            if self.calls == 2:
                raise KeyboardInterrupt
            return super().query(messages, tools)

    with ScriptedChatServer([]) as srv:
        cfg = config_for(srv, arm="toolrich", max_steps=10)
    trace = tmp_path / "t.jsonl"
    model = Interrupting([[("evaluate", {})], [("record_lesson", {"text": "the start is correct"})]])
    assert new_run(cfg, trace, model=model).run().exit_reason == "interrupted"
    # a lesson written by a step that never reached its checkpoint (the process died in it)
    store = LessonStore(trace.with_suffix(".d") / "lessons.sqlite")
    store.add("written by a step that died", step=3)
    store.close()
    steps = [
        [("population", {})],
        [("record_lesson", {"text": "second session", "eval_index": 1})],
        [("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL}), ("evaluate", {})],
    ]
    agent = resume_run(trace, limits={"max_steps": 5}, model=ScriptedModel(steps))
    agent.run()
    events = read_trace(trace).events
    assert "c1:" in _tool_results(events, "population")[-1]["output"]
    assert _tool_results(events, "record_lesson")[-1]["data"]["lesson"]["candidate_id"] == "c1"
    assert of_type(events, "harness_eval")[-1]["meta"]["parents"] == ["c1"]
    texts = [
        r[0]
        for r in sqlite3.connect(trace.with_suffix(".d") / "lessons.sqlite").execute(
            "SELECT text FROM lessons ORDER BY id"
        )
    ]
    assert texts == ["the start is correct", "second session"]
    assert validate_trace(trace).ok


# ---------------------------------------------------------------- the parts on their own


def _member(i, gm, parents=(), gen=0, correct=True):
    return Member(
        f"c{i}",
        i,
        f"{i:064x}",
        "ok" if correct else "wrong",
        correct,
        gm,
        gen,
        list(parents),
        "seed" if not parents else "mutate",
        i,
    )


def test_the_population_keeps_the_best_k_and_checks_parents():
    pop = Population(size=2)
    for m in (
        _member(1, 1.0),
        _member(2, 1.5, ["c1"], 1),
        _member(3, None, ["c2"], 2, correct=False),
        _member(4, 1.2, ["c1"], 1),
    ):
        pop.add(m)
    assert [m.id for m in pop.top()] == ["c2", "c4"]
    assert pop.lineage_for(["c2", "c4"]) == (["c2", "c4"], 2, "recombine")
    assert pop.lineage_for(None) == (["c4"], 2, "mutate")  # the workspace descends from the last evaluated
    with pytest.raises(Exception, match="no candidate 'c9'"):
        pop.lineage_for(["c9"])
    again = Population()
    again.load_state(json.loads(json.dumps(pop.state())))
    assert again.state() == pop.state()


def test_lessons_are_ranked_by_relevance(tmp_path):
    store = LessonStore(tmp_path / "l.sqlite")
    store.add("Unrolling the dot-product loop by four helped the compiler vectorize it.", 1, 1, "c1", "ok", 1.2)
    store.add("A larger tile in shared memory overflowed and the kernel crashed.", 2, 2, "c2", "crash")
    store.add("Skipping fully masked blocks halves the causal work.", 3, 3, "c3", "ok", 1.9)
    assert [l.id for l in store.relevant("unroll the dot product loop", 2)][:1] == [1]
    assert [l.id for l in store.relevant("masked causal blocks", 3)][0] == 3
    assert 3 not in [l.id for l in store.relevant("masked causal blocks", 3, exclude={3})]
    assert store.relevant("zebra", 3) == []
    assert store.drop_after(1) == 2 and [l.id for l in store.all()] == [1]
    store.close()
