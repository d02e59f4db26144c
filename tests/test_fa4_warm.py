"""FA4 compiled before the sweep (baselines/fa4_warm.py): the grouping, the disk-cache settings, the
processes and their reports, on the CPU with stand-in children; and the real child where FA4 is
not installed."""

import json
import subprocess
import sys

import pytest

from kernelseek_suite import scenarios as sc
from kernelseek_suite.baselines import fa4_warm

GRID = sc.grid("sm90")


def key(s):
    return (s.d_qk, s.d_v, s.heads_q // s.heads_kv, s.causal)


@pytest.mark.parametrize("jobs", [1, 3, 8, 100])
def test_groups_keep_a_configuration_together_and_cover_every_scenario_once(jobs):
    groups = fa4_warm.compile_groups(GRID, jobs)
    keys = {key(s) for s in GRID}
    assert 1 <= len(groups) <= min(jobs, len(keys))
    flat = [s.id for g in groups for s in g]
    assert sorted(flat) == sorted(s.id for s in GRID)
    owner = {}
    for i, g in enumerate(groups):
        for s in g:
            assert owner.setdefault(key(s), i) == i  # one configuration, one process
    if 1 < jobs < len(keys):
        sizes = [len(g) for g in groups]
        largest = max(sum(1 for s in GRID if key(s) == k) for k in keys)
        assert max(sizes) - min(sizes) <= largest  # balanced up to one configuration's size


def test_no_scenarios_no_groups():
    assert fa4_warm.compile_groups([], 8) == []


def test_the_disk_cache_is_switched_on_without_overriding_a_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path))
    env = {}
    fa4_warm.enable_disk_cache(env)
    assert env == {fa4_warm.CACHE_ENABLED_ENV: "1", fa4_warm.CACHE_DIR_ENV: str(tmp_path / "fa4-cute-dsl")}
    mine = {fa4_warm.CACHE_ENABLED_ENV: "0", fa4_warm.CACHE_DIR_ENV: "/elsewhere"}
    fa4_warm.enable_disk_cache(mine)
    assert mine == {fa4_warm.CACHE_ENABLED_ENV: "0", fa4_warm.CACHE_DIR_ENV: "/elsewhere"}


STAND_IN = """
import json, os, sys, time
start = time.time()
scns = json.loads(sys.stdin.read())
mode = os.environ.get("STAND_IN_MODE", "ok")
ids = [s["id"] for s in scns]
if mode == "slow":
    time.sleep(1.0)
with open(os.environ["STAND_IN_RECORD"], "a") as f:
    f.write(json.dumps({"ids": ids, "cache": [os.environ.get("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"),
                        os.environ.get("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR")], "start": start,
                        "end": time.time()}) + "\\n")
if mode == "silent" and any(s["causal"] for s in scns):
    sys.exit(3)
if mode == "hang" and any(s["causal"] for s in scns):
    time.sleep(60)
bad = [i for i in ids if i.endswith("-s512")]
print("compiling...")
print(json.dumps({"called": len(ids) - len(bad), "failed": [i + ": RuntimeError: no" for i in bad]}))
"""


def run_warm(tmp_path, monkeypatch, mode, timeout_s=60.0):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    env = {"PATH": "/usr/bin:/bin", "STAND_IN_RECORD": str(record), "STAND_IN_MODE": mode}
    scns = sc.select(GRID, "d64-*")
    res = fa4_warm.start(
        scns, env, jobs=4, timeout_s=timeout_s, log=tmp_path / "warm.log", command=[sys.executable, str(script)]
    ).finish()
    seen = [json.loads(line) for line in record.read_text().splitlines()]
    return scns, res, seen


def test_every_scenario_is_called_once_across_the_processes_with_the_cache_on(tmp_path, monkeypatch):
    scns, res, seen = run_warm(tmp_path, monkeypatch, "ok")
    assert res.scenarios == len(scns) == 56 and res.jobs == 4 and len(seen) == 4
    assert sorted(i for s in seen for i in s["ids"]) == sorted(s.id for s in scns)
    assert all(s["cache"] == ["1", str(tmp_path / "cache" / "fa4-cute-dsl")] for s in seen)
    assert (tmp_path / "cache" / "fa4-cute-dsl").is_dir()
    s512 = [s.id for s in scns if s.id.endswith("-s512")]
    assert res.called == len(scns) - len(s512)
    assert sorted(f.split(":")[0] for f in res.failed) == sorted(s512)
    d = res.to_dict()
    assert d["scenarios"] == 56 and d["called"] == res.called and len(d["failed"]) == min(10, len(s512))


def test_the_processes_run_at_the_same_time(tmp_path, monkeypatch):
    # each stand-in takes a second: every one must have started before any finished (fed through
    # pipes in turn, the processes had run one after another)
    scns, res, seen = run_warm(tmp_path, monkeypatch, "slow")
    assert len(seen) == 4 and res.called > 0 and not any("exited" in f for f in res.failed)
    assert max(s["start"] for s in seen) < min(s["end"] for s in seen)
    assert res.seconds < 3.5


def test_a_process_without_its_report_is_a_failure_not_a_crash(tmp_path, monkeypatch):
    scns, res, _ = run_warm(tmp_path, monkeypatch, "silent")
    assert any("exited 3 without its report" in f for f in res.failed)
    assert 0 < res.called < len(scns)  # the processes that reported still count


def test_a_process_past_its_time_is_stopped(tmp_path, monkeypatch):
    scns, res, _ = run_warm(tmp_path, monkeypatch, "hang", timeout_s=3.0)
    assert any("ran past 3 s" in f for f in res.failed) and res.seconds < 30
    assert 0 < res.called < len(scns)


def test_kill_from_another_thread_ends_a_finish_that_waits(tmp_path, monkeypatch):
    """A sweep cut short kills the warm-up while `finish` waits for it in another thread."""
    import threading

    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    env = {"PATH": "/usr/bin:/bin", "STAND_IN_RECORD": str(tmp_path / "record.jsonl"), "STAND_IN_MODE": "hang"}
    warming = fa4_warm.start(
        sc.select(GRID, "d64-*"), env, jobs=4, timeout_s=60.0, command=[sys.executable, str(script)]
    )
    threading.Timer(1.0, warming.kill).start()
    res = warming.finish()
    assert res.seconds < 30 and any("without its report" in f for f in res.failed)
    assert all(p.returncode is not None for p in warming.procs)


def test_the_real_child_reports_fa4_missing_and_exits_cleanly(tmp_path):
    pytest.importorskip("torch")
    try:
        import flash_attn.cute  # noqa: F401

        pytest.skip("FA4 is installed here: the child would compile on a GPU")
    except Exception:
        pass
    scn = sc.select(GRID, "d64-h32kv32-s512")
    p = subprocess.run(
        [sys.executable, "-m", "kernelseek_suite.baselines.fa4_warm"],
        input=json.dumps([s.to_dict() for s in scn]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["called"] == 0 and report["failed"][0].startswith("import: ")
