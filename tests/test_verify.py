from click.testing import CliRunner

from kernelseek_suite.cli import main
from kernelseek_suite.reports.verify import FASTER, INCONCLUSIVE, SAME, SLOWER, compare
from synthetic_results import default_ratio, make_rows, write_results

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
