import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite.cli import main
from kernelseek_suite.reports.data import ArchResults
from kernelseek_suite.reports.verify import (
    FASTER,
    INCONCLUSIVE,
    SAME,
    SLOWER,
    VERDICTS,
    Claim,
    ScenarioVerdict,
    Verdict,
    _classify,
    _rel_spread,
    compare,
    kernel_sha,
    kernel_warnings,
    scenario_verdict,
)
from kernelseek_suite.results import ScenarioResult, geomean
from synthetic_results import DISTRIBUTIONS, default_ratio, make_rows, write_results
from synthetic_results import SLOW as DATA_DEPENDENT_ROW

FAST = "d128-h16kv16-s4096"
SLOW = "d64-h32kv8-s1024-causal"
NOISY = "d256-h8kv8-s8192"


def _fresh_ratio(s, b):
    q = default_ratio(s, b)
    if s.id == FAST:
        return q * 1.20
    if s.id == SLOW:
        return q * 0.80
    if s.id == NOISY:
        return q * 1.08
    return q * 1.01  # within the tolerance


def test_each_scenario_gets_a_verdict(tmp_path):
    shipped = write_results(tmp_path / "shipped")
    fresh_rows = make_rows(ratio=_fresh_ratio, wrong={"d96-h16kv16-s512"})
    for r in fresh_rows:
        if r.scenario == NOISY:  # a measurement whose spread is larger than its change
            for t in r.times_ms.values():
                t["iqr_ms"] = 0.12 * t["median_ms"]
    fresh = write_results(tmp_path / "fresh", fresh_rows)
    v = compare(shipped, fresh, tolerance=0.05)
    by = {s.scenario: s for s in v.scenarios}
    assert v.baseline == "fa3"
    assert by[FAST].verdict == FASTER and abs(by[FAST].change - 0.20) < 1e-3
    assert by[SLOW].verdict == SLOWER
    assert by[NOISY].verdict == INCONCLUSIVE and "spread" in by[NOISY].why
    assert by["d96-h16kv16-s512"].verdict == INCONCLUSIVE and "fresh run: wrong" in by["d96-h16kv16-s512"].why
    assert by["d64-h32kv32-s512"].verdict == SAME
    assert v.counts() == {SAME: 178, FASTER: 1, SLOWER: 1, INCONCLUSIVE: 2}
    claims = {c.claim.split(" over")[0]: c for c in v.claims}
    assert claims["correct on the timed scenarios"].verdict == "not reproduced"
    assert claims["geomean vs fa3"].verdict == SAME  # +1% overall, within 5%
    assert not v.reproduced


def test_identical_runs_reproduce_and_cli_exit_codes(tmp_path):
    shipped = write_results(tmp_path / "shipped")
    same = write_results(tmp_path / "same")
    v = compare(shipped, same)
    assert v.reproduced and v.counts()[SAME] == 182
    runner = CliRunner()
    r = runner.invoke(main, ["verify", str(shipped), "--against", str(same)])
    assert r.exit_code == 0, r.output
    assert "182 same" in r.output and "claim: geomean vs fa3" in r.output

    slower = write_results(tmp_path / "slower", make_rows(ratio=lambda s, b: default_ratio(s, b) * 0.8))
    r = runner.invoke(main, ["verify", str(shipped), "--against", str(slower / "flash_fwd_sm90")])
    assert r.exit_code == 1
    assert "claim: geomean vs fa3 over 182 common scenarios: shipped 0.925x, fresh 0.740x (-20.0%): slower" in r.output
    assert "slower" in r.output


def test_missing_baseline_is_inconclusive(tmp_path):
    shipped = write_results(tmp_path / "a")
    fresh = write_results(tmp_path / "b", make_rows(ratio=lambda s, b: None if b == "fa3" else default_ratio(s, b)))
    v = compare(shipped, fresh)
    assert v.counts()[INCONCLUSIVE] == 182
    assert "no ratio in the fresh run (unsupported (synthetic))" in v.scenarios[0].why
    fa3 = [c for c in v.claims if "fa3" in c.claim][0]
    assert fa3.verdict == INCONCLUSIVE


# ---- verdicts on constructed pairs -------------------------------------------------------------------


def row(sid="s1", ratio=1.0, status="ok", reason="", spread=0.0, baseline="fa3", extended=False, why="ok"):
    r = ScenarioResult(sid, "h", 1, 64, 64, False, extended, 1.0, status, reason=reason)
    if extended:
        return r
    r.times_ms["kernel"] = {"median_ms": 1.0, "iqr_ms": spread}
    r.baselines[baseline] = why
    if ratio is not None:
        r.ratio[baseline] = ratio
        r.times_ms[baseline] = {"median_ms": 2.0, "iqr_ms": 2.0 * spread}
    return r


def arch(rows, baselines=("fa3",), summary=None):
    return ArchResults(Path("."), Path("."), "sm90", list(rows), summary or {}, {"baselines": list(baselines)})


@pytest.mark.parametrize(
    "change,tol,noise,want",
    [
        (0.0, 0.05, 0.0, "same"),
        (0.25, 0.25, 0.0, "same"),
        (-0.25, 0.25, 0.0, "same"),
        (0.5, 0.25, 0.5, "inconclusive"),
        (-0.5, 0.25, 0.5, "inconclusive"),
        (0.5, 0.25, 0.25, "faster"),
        (-0.5, 0.25, 0.25, "slower"),
        (0.375, 0.25, 0.0, "faster"),
    ],
)
def test_classify_at_its_edges(change, tol, noise, want):
    verdict, why = _classify(change, tol, noise)
    assert verdict == want
    if want == "same":
        assert why == f"within {tol:.0%}"
    elif want == "inconclusive":
        assert why == f"the timings' spread ({noise:.0%}) is larger than the change"
    else:
        assert why == f"{change:+.1%}"


def test_the_relative_spread_of_a_timing():
    r = row(spread=0.5)
    assert _rel_spread(r, "kernel") == 0.5 and _rel_spread(r, "fa3") == 0.5
    assert _rel_spread(r, "cudnn") == 0.0
    r.times_ms["kernel"] = {"median_ms": 0.0, "iqr_ms": 1.0}
    assert _rel_spread(r, "kernel") == 0.0
    r.times_ms["kernel"] = {"median_ms": 2.0, "iqr_ms": None}
    assert _rel_spread(r, "kernel") == 0.0
    r.times_ms["kernel"] = {"median_ms": 4.0, "iqr_ms": 0.0}
    assert _rel_spread(r, "kernel") == 0.0


def test_a_scenario_within_the_tolerance_is_the_same_and_beyond_it_moved():
    assert scenario_verdict(row(ratio=1.0), row(ratio=1.25), "fa3", 0.25).verdict == "same"
    v = scenario_verdict(row(ratio=1.0), row(ratio=1.5), "fa3", 0.25)
    assert (v.scenario, v.shipped, v.fresh, v.verdict, v.why) == ("s1", 1.0, 1.5, "faster", "+50.0%")
    assert v.change == 0.5
    assert scenario_verdict(row(ratio=1.0), row(ratio=0.5), "fa3", 0.25).verdict == "slower"


def test_the_noise_adds_the_four_relative_spreads_in_quadrature():
    # each side's kernel and baseline spread 0.25: noise sqrt(4 x 0.0625) = 0.5
    v = scenario_verdict(row(ratio=1.0, spread=0.25), row(ratio=1.5, spread=0.25), "fa3", 0.25)
    assert v.verdict == "inconclusive" and "(50%)" in v.why
    v = scenario_verdict(row(ratio=1.0, spread=0.25), row(ratio=1.625, spread=0.25), "fa3", 0.25)
    assert v.verdict == "faster"
    # one side noisy: sqrt(2 x 0.25) = 0.707
    v = scenario_verdict(row(ratio=1.0), row(ratio=1.625, spread=0.5), "fa3", 0.25)
    assert v.verdict == "inconclusive" and "(71%)" in v.why
    v = scenario_verdict(row(ratio=1.0, spread=0.5), row(ratio=1.75), "fa3", 0.25)
    assert v.verdict == "faster"


def test_a_scenario_missing_on_one_side_is_inconclusive():
    v = scenario_verdict(row("a", ratio=1.2), None, "fa3", 0.05)
    assert (v.scenario, v.shipped, v.fresh, v.verdict, v.why) == (
        "a",
        1.2,
        None,
        "inconclusive",
        "not in the fresh run",
    )
    v = scenario_verdict(None, row("b", ratio=1.3), "fa3", 0.05)
    assert (v.scenario, v.shipped, v.fresh, v.verdict, v.why) == ("b", None, 1.3, "inconclusive", "not shipped")
    assert v.change is None


def test_an_incorrect_side_is_inconclusive_and_says_which():
    v = scenario_verdict(row(ratio=1.0), row(ratio=2.0, status="wrong", reason="x" * 200), "fa3", 0.05)
    assert (v.shipped, v.fresh, v.verdict) == (1.0, None, "inconclusive")
    assert v.why == "fresh run: wrong: " + "x" * 120
    v = scenario_verdict(row(ratio=1.0, status="crashed"), row(ratio=2.0), "fa3", 0.05)
    assert (v.shipped, v.fresh, v.verdict, v.why) == (None, 2.0, "inconclusive", "shipped run: crashed")
    v = scenario_verdict(row(status="wrong"), row(status="crashed", reason="boom"), "fa3", 0.05)
    assert v.why == "fresh run: crashed: boom"


def test_a_side_without_a_ratio_is_inconclusive_with_the_baselines_reason():
    v = scenario_verdict(row(ratio=None, why="y" * 150), row(ratio=1.0), "fa3", 0.05)
    assert v.verdict == "inconclusive" and v.why == f"no ratio in the shipped run ({'y' * 100})"
    v = scenario_verdict(row(ratio=1.0), row(ratio=None, why="unsupported"), "fa3", 0.05)
    assert v.why == "no ratio in the fresh run (unsupported)"
    v = scenario_verdict(row(ratio=1.0), row(ratio=1.0, baseline="fa4"), "fa3", 0.05)
    assert v.why == "no ratio in the fresh run (not timed)"


def test_change_needs_both_numbers():
    assert ScenarioVerdict("s", 2.0, 3.0, "faster").change == 0.5
    assert ScenarioVerdict("s", None, 3.0, "inconclusive").change is None
    assert ScenarioVerdict("s", 2.0, None, "inconclusive").change is None
    assert ScenarioVerdict("s", 0.0, 3.0, "inconclusive").change is None


def test_reproduced_means_no_claim_came_out_worse():
    v = Verdict("fa3", 0.05)
    assert v.reproduced and v.counts() == {k: 0 for k in VERDICTS}
    for good in ("same", "faster", "reproduced", "inconclusive"):
        v.claims = [Claim("c", "1", "1", good)]
        assert v.reproduced
    for bad in ("slower", "not reproduced"):
        v.claims = [Claim("a", "1", "1", "same"), Claim("c", "1", "1", bad)]
        assert not v.reproduced
    v.scenarios = [
        ScenarioVerdict("a", 1, 1, "same"),
        ScenarioVerdict("b", 1, 1, "same"),
        ScenarioVerdict("c", 1, 1, "slower"),
    ]
    assert v.counts() == {"same": 2, "faster": 0, "slower": 1, "inconclusive": 0}


def test_compare_covers_every_scenario_of_both_runs_in_order():
    old = arch([row("a"), row("b"), row("c")])
    new = arch([row("c"), row("d"), row("a")])
    v = compare(old, new, tolerance=0.05)
    assert [(s.scenario, s.verdict) for s in v.scenarios] == [
        ("a", "same"),
        ("b", "inconclusive"),
        ("c", "same"),
        ("d", "inconclusive"),
    ]
    assert v.baseline == "fa3" and v.tolerance == 0.05


def test_the_baseline_can_be_chosen():
    old = arch([row("a", baseline="cudnn", ratio=1.0)], baselines=("fa3", "cudnn"))
    new = arch([row("a", baseline="cudnn", ratio=2.0)], baselines=("fa3", "cudnn"))
    assert compare(old, new).baseline == "fa3"
    v = compare(old, new, baseline="cudnn")
    assert v.baseline == "cudnn" and v.scenarios[0].verdict == "faster"


@pytest.mark.parametrize(
    "old_ok,new_ok,want",
    [
        ((1, 2), (2, 4), "reproduced"),  # the same share with more scenarios
        ((1, 2), (3, 4), "reproduced"),
        ((2, 2), (3, 4), "not reproduced"),
        ((1, 2), (1, 4), "not reproduced"),
        ((0, 2), (0, 1), "reproduced"),
    ],
)
def test_the_correctness_claim_compares_shares(old_ok, new_ok, want):
    def rows(ok, n, extended):
        return [
            row(f"{'e' if extended else 'g'}{i}", status="ok" if i < ok else "wrong", extended=extended)
            for i in range(n)
        ]

    old = arch(rows(*old_ok, False) + rows(*old_ok, True))
    new = arch(rows(*new_ok, False) + rows(*new_ok, True))
    claims = {c.claim: c for c in compare(old, new).claims}
    for label in ("correct on the timed scenarios", "correct on the extended set"):
        c = claims[label]
        assert (c.shipped, c.fresh, c.verdict) == (f"{old_ok[0]}/{old_ok[1]}", f"{new_ok[0]}/{new_ok[1]}", want)


def test_a_set_the_fresh_run_did_not_run_is_inconclusive_and_one_not_shipped_is_no_claim():
    old = arch([row("g"), row("e", extended=True)])
    claims = {c.claim: c for c in compare(old, arch([row("g")])).claims}
    assert (claims["correct on the extended set"].fresh, claims["correct on the extended set"].verdict) == (
        "not run",
        "inconclusive",
    )
    claims = {c.claim: c for c in compare(arch([row("g")]), arch([row("g"), row("e", extended=True)])).claims}
    assert "correct on the extended set" not in claims and "correct on the timed scenarios" in claims


def test_the_geomean_claim_of_every_baseline():
    def both(sid, a_fa3, a_cu, b_fa3, b_cu, ok=("ok", "ok")):
        a, b = row(sid, ratio=a_fa3, status=ok[0]), row(sid, ratio=b_fa3, status=ok[1])
        a.ratio["cudnn"], b.ratio["cudnn"] = a_cu, b_cu
        return a, b

    pairs = [
        both("s1", 1.0, 2.0, 1.0, 2.0),
        both("s2", 4.0, 8.0, 4.0, 8.0 * 1.5**2),
        both("s3", 9.0, 9.0, 1.0, 1.0, ok=("ok", "wrong")),
        both("s4", 9.0, 9.0, 1.0, 1.0, ok=("wrong", "ok")),
        both("s5", None, 3.0, 1.0, 0.0),
    ]
    old = arch([p[0] for p in pairs], baselines=("fa3", "cudnn"))
    new = arch([p[1] for p in pairs] + [row("s6", ratio=5.0)], baselines=("fa3", "cudnn"))
    claims = [c for c in compare(old, new, tolerance=0.25).claims if c.claim.startswith("geomean")]
    assert [(c.claim, c.shipped, c.fresh, c.verdict) for c in claims] == [
        ("geomean vs fa3 over 2 common scenarios", "2.000x", "2.000x (within 25%)", "same"),
        ("geomean vs cudnn over 2 common scenarios", "4.000x", "6.000x (+50.0%)", "faster"),
    ]


def test_a_baseline_with_no_common_scenario_does_not_stop_the_next_ones():
    old = arch([row("s1", ratio=None)], baselines=("fa3", "fa4", "cudnn"), summary={"geomean": {"fa3": 0.925}})
    old.rows[0].ratio.update({"cudnn": 1.0})
    new = arch([row("s1", ratio=1.0)], baselines=("fa3", "fa4", "cudnn"))
    new.rows[0].ratio.update({"cudnn": 0.5})
    claims = [(c.claim, c.shipped, c.fresh, c.verdict) for c in compare(old, new).claims if "geomean" in c.claim]
    assert claims == [
        ("geomean vs fa3", "0.925x", "no common scenario", "inconclusive"),
        ("geomean vs fa4", "not measured", "no common scenario", "inconclusive"),
        ("geomean vs cudnn over 1 common scenarios", "1.000x", "0.500x (-50.0%)", "slower"),
    ]
    assert not compare(old, new).reproduced


def test_change_is_the_relative_change_either_way():
    assert ScenarioVerdict("s", 1.0, 0.5, "slower").change == -0.5
    assert ScenarioVerdict("s", 1.0, 3.0, "faster").change == 2.0


def test_counts_compare_verdicts_by_value():
    # verdicts read back from a file are equal strings, not the same objects
    v = Verdict("fa3", 0.05, [ScenarioVerdict("a", 1, 1, "".join(["sa", "me"])), ScenarioVerdict("b", 1, 1, "same")])
    assert v.counts()["same"] == 2


def test_a_run_with_only_an_extended_set_still_gets_its_claim():
    old = arch([row("e1", extended=True), row("e2", extended=True)])
    new = arch([row("e1", extended=True), row("e2", status="wrong", extended=True)])
    claims = {c.claim: c for c in compare(old, new).claims}
    assert "correct on the timed scenarios" not in claims
    assert (claims["correct on the extended set"].fresh, claims["correct on the extended set"].verdict) == (
        "1/2",
        "not reproduced",
    )


@pytest.mark.parametrize("tolerance", [-0.01, float("nan")])
def test_a_negative_tolerance_is_refused(tolerance):
    with pytest.raises(ValueError, match="non-negative"):
        compare(arch([row()]), arch([row()]), tolerance=tolerance)
    assert compare(arch([row()]), arch([row()]), tolerance=0.0).scenarios[0].verdict == "same"


# ---- the kernels the two runs measured --------------------------------------------------------------

# two sources' sha256, each built at run time so that equal hashes are equal strings, never one object
SHA_A = "".join(["0123456789abcdef"] * 4)
SHA_B = "".join(["fedcba9876543210"] * 4)


def kernel_run(sha=None, path=None, where="summary"):
    """A run whose kernel's sha256 (and path) is recorded where results record it: in summary.json's
    kernel, or in provenance.json (older runs)."""
    summary, prov = {}, {"baselines": ["fa3"]}
    if where == "summary":
        summary["kernel"] = {"path": path, "sha256": sha}
    else:
        prov.update({"kernel": path, "kernel_sha256": sha})
    return ArchResults(Path("."), Path("."), "sm90", [row()], summary, prov)


def test_the_kernels_sha256_is_read_from_the_summary_else_the_provenance():
    assert kernel_sha(kernel_run(SHA_A)) == SHA_A
    assert kernel_sha(kernel_run(SHA_B, where="provenance")) == SHA_B
    both = kernel_run(SHA_A)
    both.provenance["kernel_sha256"] = SHA_B
    assert kernel_sha(both) == SHA_A
    no_sha = kernel_run(None)
    no_sha.provenance["kernel_sha256"] = SHA_B
    assert kernel_sha(no_sha) == SHA_B
    for empty in (kernel_run(None), kernel_run(""), kernel_run("", where="provenance"), arch([row()])):
        assert kernel_sha(empty) is None


def test_runs_of_the_same_kernel_give_no_warning():
    old, new = kernel_run(SHA_A, "kernels/hopper/a.cu"), kernel_run("".join(["0123456789abcdef"] * 4), "k.cu")
    assert kernel_sha(old) == kernel_sha(new) and kernel_sha(old) is not kernel_sha(new)
    assert kernel_warnings(old, new) == []
    assert compare(old, new).warnings == []
    # the same hash, one run recording it in its summary and the other in its provenance
    assert kernel_warnings(kernel_run(SHA_B), kernel_run("".join(["fedcba9876543210"] * 4), where="provenance")) == []


@pytest.mark.parametrize("shipped,fresh", [(SHA_A, SHA_B), (SHA_B, SHA_A)])
def test_runs_of_different_kernels_are_warned_about_by_path_and_hash(shipped, fresh):
    old = kernel_run(shipped, "kernels/hopper/v9.cu")
    new = kernel_run(fresh, "kernels/hopper/v10.cu", where="provenance")
    want = (
        f"the runs are of different kernels: shipped kernels/hopper/v9.cu (sha256 {shipped[:16]}), "
        f"fresh kernels/hopper/v10.cu (sha256 {fresh[:16]}); a change below may be the kernel's, not the run's"
    )
    assert kernel_warnings(old, new) == [want]
    assert compare(old, new).warnings == [want]


def test_a_kernel_without_a_path_is_named_by_a_question_mark():
    (w,) = kernel_warnings(kernel_run(SHA_A), kernel_run(SHA_B, "kernels/hopper/v10.cu"))
    assert w.startswith("the runs are of different kernels: shipped ? (sha256 0123456789abcdef), ")
    assert "fresh kernels/hopper/v10.cu (sha256 fedcba9876543210);" in w
    (w,) = kernel_warnings(kernel_run(SHA_A, "a.cu"), kernel_run(SHA_B))
    assert "shipped a.cu (sha256 0123456789abcdef), fresh ? (sha256 fedcba9876543210);" in w


@pytest.mark.parametrize(
    "shipped,fresh,side",
    [(None, SHA_A, "shipped"), (SHA_A, None, "fresh"), (None, None, "shipped"), ("", SHA_B, "shipped")],
)
def test_a_run_without_its_kernels_hash_is_said_not_compared(shipped, fresh, side):
    old, new = kernel_run(shipped, "a.cu"), kernel_run(fresh, "b.cu")
    want = [f"the kernel's sha256 is not recorded in the {side} run: not compared"]
    assert kernel_warnings(old, new) == want
    assert compare(old, new).warnings == want


def _set_kernel_sha(run_dir: Path, sha: str) -> None:
    for name in ("summary.json", "provenance.json"):
        p = run_dir / name
        d = json.loads(p.read_text())
        if isinstance(d.get("kernel"), dict):
            d["kernel"]["sha256"] = sha
        if "kernel_sha256" in d:
            d["kernel_sha256"] = sha
        p.write_text(json.dumps(d))


def test_the_warning_goes_to_stderr_and_leaves_the_exit_code_to_the_claims(tmp_path):
    rows = make_rows()[:4]
    shipped = write_results(tmp_path / "shipped", rows)
    other = write_results(tmp_path / "other", rows)
    _set_kernel_sha(other / "flash_fwd_sm90", SHA_B)
    slower = write_results(tmp_path / "slower", make_rows(ratio=lambda s, b: default_ratio(s, b) * 0.8)[:4])
    _set_kernel_sha(slower / "flash_fwd_sm90", SHA_B)
    warning = (
        "warning: the runs are of different kernels: shipped kernels/hopper/flash_fwd_sm90.cu (sha256 "
        f"{'0' * 16}), fresh kernels/hopper/flash_fwd_sm90.cu (sha256 {SHA_B[:16]}); a change below may be "
        "the kernel's, not the run's\n"
    )
    runner = CliRunner()
    r = runner.invoke(main, ["verify", str(shipped), "--against", str(shipped)])
    assert (r.exit_code, r.stderr) == (0, "")
    r = runner.invoke(main, ["verify", str(shipped), "--against", str(other)])
    assert (r.exit_code, r.stderr) == (0, warning)
    assert "warning" not in r.stdout and "scenarios: 4 same" in r.stdout
    r = runner.invoke(main, ["verify", str(shipped), "--against", str(slower)])
    assert (r.exit_code, r.stderr) == (1, warning)
    assert "claim: geomean vs fa3 over 4 common scenarios" in r.stdout and ": slower" in r.stdout


# ---- a fresh run that lacks scenarios the shipped run has --------------------------------------------


def test_a_fresh_run_with_one_of_the_shipped_scenarios_is_not_a_reproduction(tmp_path):
    rows = make_rows()
    shipped = write_results(tmp_path / "shipped", rows)
    fresh = write_results(tmp_path / "fresh", rows[:1])
    ids = [r.scenario for r in rows if not r.extended]
    r = CliRunner().invoke(main, ["verify", str(shipped), "--against", str(fresh)])
    assert r.exit_code == 1, r.output
    missing = f"181 missing: {', '.join(ids[1:4])}, ..."
    assert f"claim: every timed scenario run again: shipped 182, fresh 1/182 ({missing}): not reproduced" in r.output
    v = compare(shipped, fresh)
    assert not v.reproduced
    assert v.counts()[INCONCLUSIVE] == 181 and v.counts()[SAME] == 1


def test_a_fresh_run_with_every_shipped_scenario_has_the_claim_reproduced():
    old = arch([row("a"), row("b"), row("e", extended=True)])
    new = arch([row("b"), row("a"), row("x"), row("e", extended=True)])
    claims = {c.claim: c for c in compare(old, new).claims}
    c = claims["every timed scenario run again"]
    assert (c.shipped, c.fresh, c.verdict) == ("2", "2/2", "reproduced")
    c = claims["every scenario of the extended set run again"]
    assert (c.shipped, c.fresh, c.verdict) == ("1", "1/1", "reproduced")
    assert compare(old, new).reproduced


@pytest.mark.parametrize("n_missing,listed", [(1, "b"), (3, "b, c, d"), (4, "b, c, d, ...")])
def test_the_missing_scenarios_are_counted_and_the_first_three_named(n_missing, listed):
    names = ["a", "b", "c", "d", "e"][: 1 + n_missing]
    old = arch([row(s) for s in names])
    v = compare(old, arch([row("a")]))
    (c,) = [c for c in v.claims if c.claim == "every timed scenario run again"]
    n = len(names)
    assert (c.shipped, c.fresh, c.verdict) == (str(n), f"1/{n} ({n_missing} missing: {listed})", "not reproduced")
    assert not v.reproduced


def test_an_extended_set_run_in_part_is_not_reproduced_and_one_not_run_stays_inconclusive():
    old = arch([row("g"), row("e1", extended=True), row("e2", extended=True)])
    v = compare(old, arch([row("g"), row("e2", extended=True)]))
    claims = {c.claim: c for c in v.claims}
    c = claims["every scenario of the extended set run again"]
    assert (c.shipped, c.fresh, c.verdict) == ("2", "1/2 (1 missing: e1)", "not reproduced")
    assert not v.reproduced
    v = compare(old, arch([row("g")]))
    claims = {c.claim: c for c in v.claims}
    c = claims["every scenario of the extended set run again"]
    assert (c.shipped, c.fresh, c.verdict) == ("2", "not run", "inconclusive")
    assert claims["correct on the extended set"].verdict == "inconclusive"
    assert v.reproduced


def test_a_fresh_run_of_no_timed_scenario_is_not_a_reproduction():
    old = arch([row("g1"), row("g2"), row("e", extended=True)])
    v = compare(old, arch([row("e", extended=True)]))
    c = {c.claim: c for c in v.claims}["every timed scenario run again"]
    assert (c.shipped, c.fresh, c.verdict) == ("2", "0/2 (2 missing: g1, g2)", "not reproduced")
    assert not v.reproduced


# ---- runs timed on several input distributions (summary.json 3) ----------------------------------


def test_the_geomean_on_each_distribution_both_runs_have_is_a_claim(tmp_path):
    (slow,) = DATA_DEPENDENT_ROW
    shipped = write_results(tmp_path / "shipped", make_rows(by_distribution=True))
    fresh = write_results(tmp_path / "fresh", make_rows(by_distribution=True, slow={}))  # no longer slow on rising
    v = compare(shipped, fresh, tolerance=0.001)
    claims = {c.claim: c for c in v.claims}
    for d in DISTRIBUTIONS:
        c = claims[f"geomean vs fa3 on {d} over 182 common scenarios"]
        want = "faster" if d == "rising" else "same"
        assert c.verdict == want, (d, c)
    shipped_rows = {r.scenario: r for r in make_rows(by_distribution=True)}
    fresh_rows = {r.scenario: r for r in make_rows(by_distribution=True, slow={})}
    ga = geomean([r.ratio_by_distribution["rising"]["cudnn"] for r in shipped_rows.values() if not r.extended])
    gb = geomean([r.ratio_by_distribution["rising"]["cudnn"] for r in fresh_rows.values() if not r.extended])
    c = claims["geomean vs cudnn on rising over 182 common scenarios"]
    assert (c.shipped, c.fresh.split(" ")[0]) == (f"{ga:.3f}x", f"{gb:.3f}x")
    assert v.reproduced  # faster is no failure to reproduce
    # the other way round, the rising claims come out slower: not reproduced, exit 1
    back = {c.claim: c.verdict for c in compare(fresh, shipped, tolerance=0.001).claims}
    assert back["geomean vs fa3 on rising over 182 common scenarios"] == "slower"
    assert back["geomean vs fa3 on standard over 182 common scenarios"] == "same"
    r = CliRunner().invoke(main, ["verify", str(fresh), "--against", str(shipped), "--tolerance", "0.001"])
    assert r.exit_code == 1
    assert "claim: geomean vs fa3 on rising over 182 common scenarios: shipped" in r.stdout
    (line,) = [l for l in r.stdout.splitlines() if l.startswith(slow)]  # the row whose kernel time moved
    assert "slower" in line


def test_no_distribution_claim_unless_both_runs_have_the_distribution(tmp_path):
    shipped = write_results(tmp_path / "shipped", make_rows())
    fresh = write_results(tmp_path / "fresh", make_rows(by_distribution=True))
    for a, b in ((shipped, fresh), (fresh, shipped)):
        assert [c.claim for c in compare(a, b).claims if c.claim.startswith("geomean")] == [
            f"geomean vs {base} over 182 common scenarios" for base in ("fa3", "fa4", "cudnn")
        ]


def test_a_baseline_with_no_ratio_on_a_distribution_does_not_stop_the_next_ones(tmp_path):
    def no_fa4(s, b):
        return None if b == "fa4" else default_ratio(s, b)

    shipped = write_results(tmp_path / "shipped", make_rows(no_fa4, by_distribution=True))
    fresh = write_results(tmp_path / "fresh", make_rows(no_fa4, by_distribution=True))
    on = [c.claim for c in compare(shipped, fresh).claims if c.claim.startswith("geomean") and " on " in c.claim]
    assert on == [f"geomean vs {b} on {d} over 182 common scenarios" for d in DISTRIBUTIONS for b in ("fa3", "cudnn")]
