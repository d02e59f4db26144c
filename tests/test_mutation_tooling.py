"""The mutation-testing set-up (scripts/mutation.py, tests/mutation/) and the per-test time limits."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import conftest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
sys.modules["mutation_script"] = mutation
spec.loader.exec_module(mutation)


def test_every_module_and_its_tests_exist():
    mods, min_score = mutation.load_modules()
    assert min_score == 0.9
    assert set(mods) == {"check", "rules", "timing", "decisions", "verify"}
    for m in mods.values():
        assert (ROOT / m.path).is_file() and m.tests
        assert all((ROOT / t).is_file() for t in m.tests)


def test_every_equivalent_mutant_names_a_module_and_a_reason():
    mods, _ = mutation.load_modules()
    for e in mutation.load_equivalents():
        assert e.module in mods and len(e.reason) > 20 and e.original != e.mutant


def test_an_equivalent_without_a_reason_is_refused(tmp_path, monkeypatch):
    (tmp_path / "equivalent.yaml").write_text("- {module: check, original: 'a', mutant: 'b', reason: ' '}\n")
    monkeypatch.setattr(mutation, "CONFIG_DIR", tmp_path)
    with pytest.raises(SystemExit, match="lacks a reason"):
        mutation.load_equivalents()
    (tmp_path / "equivalent.yaml").write_text("- {module: check, original: 'a', reason: 'because'}\n")
    with pytest.raises(SystemExit, match="lacks mutant"):
        mutation.load_equivalents()


def test_the_recorded_scores_meet_the_minimum():
    mods, min_score = mutation.load_modules()
    recorded = mutation.load_scores()["modules"]
    assert set(recorded) == set(mods)
    for name, r in recorded.items():
        assert r["score"] >= min_score, name
        assert r["killed"] / (r["killed"] + r["survived"] - r["equivalent"]) == pytest.approx(r["score"], abs=1e-4)
        assert r["date"] and r["commit"] and r["path"] == mods[name].path


def test_a_survivor_is_read_from_its_diff():
    diff = (
        "--- mutation diff ---\n--- a/suite/harness/check.py\n+++ b/suite/harness/check.py\n"
        "@@ -47,7 +47,7 @@\n     x = 1\n-    if not max_err <= tol:\n+    if not max_err < tol:\n     y = 2\n"
    )
    assert mutation._diff_lines(diff) == (47, "if not max_err <= tol:", "if not max_err < tol:")
    assert mutation._diff_lines("") == (0, "", "")


def test_the_score_leaves_equivalent_mutants_out():
    s = mutation.ModuleScore("m", "p", mutants=12, killed=9, survived=3, equivalent=2)
    assert s.score == 0.9
    assert mutation.ModuleScore("m", "p").score == 1.0
    assert mutation.ModuleScore("m", "p", killed=0, survived=1).score == 0.0


def test_changed_modules_by_fingerprint(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "test_a.py").write_text("def test(): pass\n")
    mod = mutation.Module("a", "a.py", ["test_a.py"])
    fp = mutation.fingerprint(mod, tmp_path)
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    monkeypatch.setattr(mutation, "CONFIG_DIR", tmp_path)
    (tmp_path / "scores.json").write_text(json.dumps({"modules": {"a": {"fingerprint": fp}}}))
    assert mutation.changed_modules({"a": mod}, None) == []
    (tmp_path / "test_a.py").write_text("def test(): assert True\n")
    assert mutation.changed_modules({"a": mod}, None) == ["a"]
    (tmp_path / "scores.json").write_text(json.dumps({"modules": {}}))
    assert mutation.changed_modules({"a": mod}, None) == ["a"]


def test_stale_equivalents_are_those_of_a_module_run_that_matched_nothing():
    e1 = mutation.Equivalent("check", "a", "b", "why")
    e2 = mutation.Equivalent("check", "c", "d", "why")
    e3 = mutation.Equivalent("rules", "e", "f", "why")
    run = mutation.ModuleScore("check", "p", survivors=[mutation.Survivor("op", 1, "a", "b", equivalent="why")])
    assert mutation.stale_equivalents([e1, e2, e3], [run]) == [e2]


def test_every_test_has_a_time_limit_and_builds_a_longer_one():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert cfg["timeout"] == 120
    assert conftest.SLOW_TIMEOUT_S > cfg["timeout"] and conftest.GPU_TIMEOUT_S >= conftest.SLOW_TIMEOUT_S


class _Item:
    def __init__(self, *marks, timeout=None):
        self.keywords = set(marks)
        self.markers = [pytest.mark.timeout(timeout).mark] if timeout else []

    def get_closest_marker(self, name):
        return next((m for m in reversed(self.markers) if m.name == name), None)

    def add_marker(self, mark):
        self.markers.append(mark.mark)

    def timeout(self):
        m = self.get_closest_marker("timeout")
        return m.args[0] if m else None


def test_builds_and_gpu_runs_get_longer_limits_unless_they_set_their_own():
    items = {
        "plain": _Item(),
        "nvcc": _Item("nvcc"),
        "slow": _Item("slow"),
        "gpu": _Item("gpu", "nvcc"),
        "own": _Item("nvcc", timeout=5),
    }
    conftest.pytest_collection_modifyitems(None, list(items.values()))
    assert {k: i.timeout() for k, i in items.items()} == {
        "plain": None,
        "nvcc": conftest.SLOW_TIMEOUT_S,
        "slow": conftest.SLOW_TIMEOUT_S,
        "gpu": conftest.GPU_TIMEOUT_S,
        "own": 5,
    }


def test_annotation_spans_cover_annotations_only_when_they_are_not_evaluated():
    src = (
        "from __future__ import annotations\n"
        "def f(a: int | None, b=1) -> str | None:\n"
        "    x: int | None = a | b\n"
        "    return x\n"
    )
    spans = mutation.annotation_spans(src)
    assert sorted(spans) == [((2, 9), (2, 19)), ((2, 29), (2, 39)), ((3, 7), (3, 17))]
    assert not any(a <= (3, 22) < b for a, b in spans)  # `a | b` is code
    assert mutation.annotation_spans(src.split("\n", 1)[1]) == []


def _fake_run(score_killed, score_survived):
    def run(mod, equivalents, jobs=1):
        return mutation.ModuleScore(mod.name, mod.path, mutants=100, killed=score_killed, survived=score_survived)

    return run


@pytest.fixture
def no_signal_handler(monkeypatch):
    monkeypatch.setattr(mutation.signal, "signal", lambda *a: None)


def test_a_module_below_the_minimum_fails_the_run(monkeypatch, capsys, no_signal_handler):
    monkeypatch.setattr(mutation, "run_module", _fake_run(89, 11))
    assert mutation.main(["--module", "check"]) == 1
    assert "check scores 89.0%, below 90%" in capsys.readouterr().out
    monkeypatch.setattr(mutation, "run_module", _fake_run(90, 10))
    assert mutation.main(["--module", "check", "--module", "rules"]) == 0


def test_changed_runs_only_the_changed_modules(monkeypatch, capsys, no_signal_handler):
    ran = []

    def run(mod, equivalents, jobs=1):
        ran.append(mod.name)
        return mutation.ModuleScore(mod.name, mod.path, killed=1)

    monkeypatch.setattr(mutation, "run_module", run)
    monkeypatch.setattr(mutation, "changed_modules", lambda mods, base: [])
    assert mutation.main(["--changed"]) == 0 and ran == []
    assert "no module changed since its recorded score" in capsys.readouterr().out
    monkeypatch.setattr(mutation, "changed_modules", lambda mods, base: ["verify", "timing"])
    assert mutation.main(["--changed", "--jobs", "2"]) == 0 and ran == ["timing", "verify"]
