"""The claimed-limit detector on phrasings written without it, by someone who read neither the rules nor
their labelled sets: how it does on wording it has not seen.

- tests/fixtures/claimed_limit_blind.yaml: the rules scored recall 0.578 and precision 0.843 here before
  they were generalized; never used to fit them.
- tests/fixtures/claimed_limit_blind_tuned.yaml: scored 0.875 / 0.875 as written, then read to generalize
  the rules; held here to what they score on it since, so that the round is not lost.
- tests/fixtures/claimed_limit_indirect.yaml: claims said indirectly; scored 0.431 / 0.885 as written,
  then read to generalize the rules; held to 0.588 / 1.000, what they score on it since.
- tests/fixtures/claimed_limit_blind2.yaml: never used to fit the rules; they score recall 0.850 and
  precision 0.971 there (0.850 / 0.944 before the two rounds above, 0.858 / 0.972 between them). Measured
  once unseen with the fallback model too (0.942 / 0.869), it has since been a training set of that model
  (tests/test_claim_model.py): no longer unseen wording, held here at the levels measured in-sample.
- tests/fixtures/claimed_limit_blind3.yaml: never used to fit the rules; measured once unseen: the rules
  alone 0.792 / 0.880, with the fallback 0.875 / 0.820; a training set of the fallback since, held here
  at the levels measured in-sample.
- tests/fixtures/claimed_limit_blind4.yaml: never used to fit the rules; measured once unseen with the
  design of the model trained on the eight sets before it (its veto of 0.2 included): the rules alone
  0.775 / 0.823, with the fallback 0.900 / 0.871 (the design before, without the veto and blind3: 0.908 /
  0.838).
- tests/fixtures/claimed_limit_blind5.yaml: measured once unseen, by the rules and the model, with the
  design of the model trained on nine sets (blind4 among them): the rules alone 0.817 / 0.866, with the
  fallback 0.908 / 0.866 (the design of eight sets: 0.901 / 0.865). A training and development set since
  (its false alarms read to generalize the rules, like those of blind2, blind3 and blind4), held here at
  the levels measured in-sample.
- tests/fixtures/claimed_limit_blind6.yaml: measured once unseen with the design of ten sets (blind5
  among them): the rules alone 0.858 / 0.858, with the fallback 0.922 / 0.872 (the design of nine sets:
  0.922 / 0.818). A training and development set since, held here at the levels measured in-sample.
- tests/fixtures/claimed_limit_blind7.yaml and claimed_limit_blind8.yaml, written apart from each other and
  from everything here: never read for tuning, by the rules or the model; each measured once with the
  design of eleven sets (blind6 among them): blind7 the rules alone 0.893 / 0.912, with the fallback
  0.971 / 0.919; blind8 the rules alone 0.779 / 0.916, with the fallback 0.964 / 0.944 (the design of ten
  sets: 0.943 / 0.923 and 0.943 / 0.943)."""

from pathlib import Path

import yaml

from kernelseek_suite.agents.config import QuestionConfig
from kernelseek_suite.agents.decisions import claimed_limit, decide_claim

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BLIND = yaml.safe_load((FIXTURES / "claimed_limit_blind.yaml").read_text())
TUNED = yaml.safe_load((FIXTURES / "claimed_limit_blind_tuned.yaml").read_text())
BLIND2 = yaml.safe_load((FIXTURES / "claimed_limit_blind2.yaml").read_text())
INDIRECT = yaml.safe_load((FIXTURES / "claimed_limit_indirect.yaml").read_text())
BLIND3 = yaml.safe_load((FIXTURES / "claimed_limit_blind3.yaml").read_text())
# measured once unseen (2026-12-05), a training set of the fallback since
BLIND4 = yaml.safe_load((FIXTURES / "claimed_limit_blind4.yaml").read_text())
# measured once unseen (2026-12-05), a training and development set since
BLIND5 = yaml.safe_load((FIXTURES / "claimed_limit_blind5.yaml").read_text())
# measured once unseen (2026-12-05), a training and development set since
BLIND6 = yaml.safe_load((FIXTURES / "claimed_limit_blind6.yaml").read_text())
# measured once (2026-12-05), never read for tuning: what they get wrong is not printed
BLIND7 = yaml.safe_load((FIXTURES / "claimed_limit_blind7.yaml").read_text())
BLIND8 = yaml.safe_load((FIXTURES / "claimed_limit_blind8.yaml").read_text())
PATTERNS = QuestionConfig().claimed_limit_patterns


def test_the_blind_set_is_large_balanced_and_has_hard_negatives():
    pos, neg = BLIND["positives"], BLIND["negatives"]
    assert min(len(pos), len(neg)) >= 80 and len(set(pos) | set(neg)) == len(pos) + len(neg)


def test_recall_and_precision_on_phrasings_the_rules_never_saw_are_at_least_0_9():
    hit = {t: claimed_limit(t, PATTERNS) is not None for t in BLIND["positives"] + BLIND["negatives"]}
    tp = sum(hit[t] for t in BLIND["positives"])
    fp = sum(hit[t] for t in BLIND["negatives"])
    recall, precision = tp / len(BLIND["positives"]), tp / (tp + fp)
    missed = [t for t in BLIND["positives"] if not hit[t]]
    false = [t for t in BLIND["negatives"] if hit[t]]
    assert recall >= 0.9 and precision >= 0.9, (recall, precision, missed, false)


def _scores(labelled: dict) -> tuple[float, float]:
    hit = {t: claimed_limit(t, PATTERNS) is not None for t in labelled["positives"] + labelled["negatives"]}
    tp = sum(hit[t] for t in labelled["positives"])
    fp = sum(hit[t] for t in labelled["negatives"])
    return tp / len(labelled["positives"]), tp / (tp + fp)


def test_the_later_blind_sets_are_balanced_distinct_and_new():
    seen = set(BLIND["positives"]) | set(BLIND["negatives"])
    for labelled in (TUNED, BLIND2, INDIRECT, BLIND3, BLIND4, BLIND5, BLIND6, BLIND7, BLIND8):
        pos, neg = labelled["positives"], labelled["negatives"]
        assert min(len(pos), len(neg)) >= 120 and len(set(pos) | set(neg)) == len(pos) + len(neg)
        assert not (set(pos) | set(neg)) & seen
        seen |= set(pos) | set(neg)


def test_the_rounds_read_from_the_tuning_sets_hold():
    recall, precision = _scores(TUNED)
    assert recall >= 0.95 and precision >= 0.99, (recall, precision)
    recall, precision = _scores(INDIRECT)
    assert recall >= 0.58 and precision >= 0.99, (recall, precision)


def test_on_blind2_now_a_training_set_of_the_fallback_rules_and_fallback_keep_their_measured_level():
    # measured: the rules alone recall 0.850 and precision 1.000 (0.971 before quotes with an apostrophe
    # inside and quoted lines were read as cited, 0.981 before a label such as "Goal for this sprint:" was
    # read with its clause); with the fallback, trained on this set since, 0.942 and 0.983 (113 of 120
    # claims, 2 false alarms)
    recall, precision = _scores(BLIND2)
    assert recall >= 0.85 and precision >= 1.0, (recall, precision)
    hit = {t: decide_claim(t, PATTERNS) is not None for t in BLIND2["positives"] + BLIND2["negatives"]}
    tp, fp = sum(hit[t] for t in BLIND2["positives"]), sum(hit[t] for t in BLIND2["negatives"])
    assert tp >= 113 and fp <= 2, (tp, fp)


def test_on_blind3_now_a_training_set_of_the_fallback_rules_and_fallback_keep_their_measured_level():
    # measured once unseen with the design of a90e72e: the rules alone 95 of 120 claims found with 13 false
    # alarms (recall 0.792, precision 0.880); with the fallback 105 with 23 (0.875, 0.820). Trained on since,
    # in-sample: the rules alone 95 with 12 (0.792, 0.888), with the fallback 111 with 12 (0.925, 0.902);
    # with the rules and the model of ten sets 95 with 7 (0.792, 0.931) and 111 with 7 (0.925, 0.941); of
    # eleven sets 95 with 6 (0.792, 0.941) and 115 with 0 (0.958, 1.000)
    _holds_counts(BLIND3, rules=(95, 6), both=(115, 0))


def test_on_blind4_now_a_training_set_of_the_fallback_rules_and_fallback_keep_their_measured_level():
    # measured once unseen with the model trained on eight sets, its veto included: the rules alone 93 of
    # 120 claims found with 20 false alarms (recall 0.775, precision 0.823); with the fallback 108 with 16
    # (0.900, 0.871). Trained on since, in-sample: the rules alone 93 with 17 (0.775, 0.845), with the
    # fallback 112 with 14 (0.933, 0.889); with the rules and the model of ten sets 93 with 7 (0.775, 0.930)
    # and 114 with 3 (0.950, 0.974); of eleven sets 93 with 5 (0.775, 0.949) and 116 with 2 (0.967, 0.983)
    _holds_counts(BLIND4, rules=(93, 5), both=(116, 2))


def test_on_blind5_now_a_training_set_of_the_fallback_rules_and_fallback_keep_their_measured_level():
    # measured once unseen with the model trained on nine sets (blind4 among them): the rules alone 116 of
    # 142 claims found with 18 false alarms among 149 (recall 0.817, precision 0.866); with the fallback
    # 129 with 20 (0.908, 0.866). The design trained on eight sets scored 116 / 20 and 128 / 20 (0.901,
    # 0.865) there. Read since to generalize the rules and trained on, in-sample: the rules alone 116 with 7
    # (0.817, 0.943), with the fallback 133 with 8 (0.937, 0.943); the design of eleven sets 118 with 6 (0.831,
    # 0.952) and 137 with 5 (0.965, 0.965)
    _holds_counts(BLIND5, rules=(118, 6), both=(137, 5))


def test_on_blind6_now_a_training_set_of_the_fallback_rules_and_fallback_keep_their_measured_level():
    # measured once unseen with the design of ten sets (blind5 among them): the rules alone 121 of 141
    # claims found with 20 false alarms among 139 (recall 0.858, precision 0.858); with the fallback 130
    # with 19 (0.922, 0.872). The design of nine sets scored 122 / 25 and 130 / 29 (0.922, 0.818) there.
    # Read since to generalize the rules and trained on, in-sample with the design of eleven sets: the rules
    # alone 123 with 8 (0.872, 0.939), with the fallback 133 with 3 (0.943, 0.978)
    _holds_counts(BLIND6, rules=(123, 8), both=(133, 3))


def test_on_blind7_never_read_for_tuning_rules_and_fallback_keep_their_measured_level():
    # measured once unseen with the design of eleven sets (blind6 among them): the rules alone 125 of 140
    # claims found with 12 false alarms among 140 (recall 0.893, precision 0.912); with the fallback 136 with
    # 12 (0.971, 0.919). The design of ten sets scored 124 / 12 and 132 / 11 (0.943, 0.923) there
    _holds_counts(BLIND7, rules=(125, 12), both=(136, 12))


def test_on_blind8_never_read_for_tuning_rules_and_fallback_keep_their_measured_level():
    # measured once unseen with the design of eleven sets: the rules alone 109 of 140 claims found with 10
    # false alarms among 140 (recall 0.779, precision 0.916); with the fallback 135 with 8 (0.964, 0.944).
    # The design of ten sets scored 108 / 11 and 132 / 8 (0.943, 0.943) there
    _holds_counts(BLIND8, rules=(109, 10), both=(135, 8))


def _holds_counts(labelled: dict, rules: tuple[int, int], both: tuple[int, int]) -> None:
    """At least the claims found and at most the false alarms measured, for the rules alone and for the rules
    with the fallback: counts only, the texts never printed."""
    for decide, (floor, ceiling) in ((claimed_limit, rules), (decide_claim, both)):
        tp = sum(decide(t, PATTERNS) is not None for t in labelled["positives"])
        fp = sum(decide(t, PATTERNS) is not None for t in labelled["negatives"])
        assert tp >= floor and fp <= ceiling, (tp, fp)
