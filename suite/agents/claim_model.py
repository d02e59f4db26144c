"""A small learned stand-in for the run's model on the claimed-limit question: logistic regression over
hashed features of the text, read from claim_model.json. decisions.py asks it only where there is no
classification verdict (`decide_claim`): where the rules found no claim, whether a candidate sentence
claims one (its probability at least `threshold`); where they found one, whether to overrule them (every
candidate's probability below `veto`: the words matched, the sense is not a claim).

The features of a text, lower-cased, its numbers made tokens (a percentage of at least 85 one token,
a lower one another, any other number a third): its words, its pairs of adjacent words and the
character n-grams of each word with its spaces; the words after a denial in its clause, marked as such,
with their pairs (a negation's scope: "not at the roofline"); and cues of the structure, each as many
features as CUE_COPIES (so that one cue weighs as much as several words): a denial, a condition or goal,
a third party or another kernel, a quotation, and whether two of its numbers are within 15% of each
other (a rate against its limit) or not. Each is hashed into one of `buckets` weights (crc32, so
that the same text gives the same features everywhere). The weights are trained by
scripts/train-claim-model.py on the labelled sets named in the file, with their sha256, so that a
test sees when a set has changed since."""

from __future__ import annotations

import json
import math
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

WEIGHTS = Path(__file__).with_name("claim_model.json")
VERSION = 2

_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[a-z_]+(?:'[a-z]+)?|[?!]")
HIGH_PERCENT = 85.0  # decisions.HIGH_SHARE, as a percentage: a share this high is a limit's


def normalize(text: str) -> str:
    """Lower case, curly apostrophes straight, percentages and numbers as tokens, whitespace single."""
    text = text.replace("\u2019", "'").lower()
    text = _PERCENT.sub(lambda m: " pct_high " if float(m.group(1)) >= HIGH_PERCENT else " pct_low ", text)
    return " ".join(_NUMBER.sub(" num ", text).split())


def words(text: str) -> list[str]:
    return _WORD.findall(normalize(text))


# a word that denies what follows it in its clause (one list for the negation's scope and the denial cue),
# and a word or mark that ends the clause
_DENIALS = "not|no|never|nowhere|none|nothing|neither|nor|without|hardly|cannot|doubt"
_NEGATOR = re.compile(rf"^(?:{_DENIALS})$|n't$")
_CLAUSE_END = re.compile(r"^(?:but|so|because|since|although|though|while|whereas|and|then|[?!])$")
# the cues of the structure, read on the normalized text (the quotation on the text as written)
_CUES = {
    "denial": re.compile(rf"\b(?:{_DENIALS}|far from)\b|n't\b"),
    "condition": re.compile(
        r"\b(?:if|whether|would|could|should|goal|want|aim|target|hope|wonder\w*|assum\w*|to (?:get|reach|hit))\b"
    ),
    "other": re.compile(
        r"\b(?:reviewer|someone|they|their|vendor|library|docs|blog|said|says|claims?|insist\w*|reports?|according|"
        r"reference|baseline)\b"
    ),
}
_QUOTATION = re.compile(r"^\s*>|['\"\u2018\u201c]\w[^'\"]*\w['\"\u2019\u201d]")
_PLAIN_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(%?)")
CUE_COPIES = 4  # the buckets of each cue: one cue weighs as much as this many words
CLOSE_NUMBERS = 0.85  # two numbers this close (the smaller over the larger) are a rate near its limit


def negation_scope(ws: list[str]) -> list[str]:
    """The words, each after a denial in its clause marked `_neg` ("not at the roofline": "at_neg",
    "the_neg", "roofline_neg")."""
    out, denied = [], False
    for w in ws:
        if _CLAUSE_END.match(w):
            denied = False
        out.append(f"{w}_neg" if denied and not _NEGATOR.search(w) else w)
        denied = denied or bool(_NEGATOR.search(w))
    return out


def cues(text: str) -> list[str]:
    """The cues of the structure that the text holds (see the module's docstring)."""
    norm = normalize(text)
    found = [name for name, pattern in _CUES.items() if pattern.search(norm)]
    if _QUOTATION.search(text):
        found.append("quotation")
    numbers = [float(n) for n, pct in _PLAIN_NUMBER.findall(text) if not pct and float(n) > 0]
    if len(numbers) >= 2:
        closest = max(min(a, b) / max(a, b) for i, a in enumerate(numbers) for b in numbers[i + 1 :])
        found.append("numbers close" if closest >= CLOSE_NUMBERS else "numbers apart")
    return found


def features(text: str, buckets: int, char_sizes: tuple[int, ...] = (3, 4, 5)) -> list[int]:
    """The distinct buckets that the text's words, word pairs, character n-grams, denied words and pairs,
    and cues hash to, sorted."""
    ws = words(text)
    grams = [f"w {w}" for w in ws] + [f"b {a} {b}" for a, b in zip(["^", *ws], [*ws, "$"])]
    for w in ws:
        padded = f" {w} "
        grams += [f"c {padded[i : i + n]}" for n in char_sizes for i in range(len(padded) - n + 1)]
    scoped = negation_scope(ws)
    grams += [f"w {w}" for w in scoped if w.endswith("_neg")]
    grams += [f"b {a} {b}" for a, b in zip(["^", *scoped], [*scoped, "$"]) if a.endswith("_neg") or b.endswith("_neg")]
    grams += [f"k {cue} {i}" for cue in cues(text) for i in range(CUE_COPIES)]
    return sorted({zlib.crc32(g.encode()) % buckets for g in grams})


def logit(weights: list[float], bias: float, active: list[int]) -> float:
    """The model's log-odds for a text's active buckets (each feature weighs 1/sqrt(their number))."""
    return bias + sum(weights[j] for j in active) / math.sqrt(len(active)) if active else bias


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def dense(sparse: dict[str, float], buckets: int) -> list[float]:
    """The weights, one per bucket, from the file's {bucket: weight} of those that are not zero."""
    weights = [0.0] * buckets
    for k, v in sparse.items():
        weights[int(k)] = float(v)
    return weights


@dataclass(frozen=True)
class ClaimModel:
    buckets: int
    char_sizes: tuple[int, ...]
    bias: float
    weights: list[float]  # one per bucket
    threshold: float  # a probability at least this high claims a limit
    veto: float = 0.0  # where the rules found a claim, a probability below this on every candidate overrules them

    @classmethod
    def from_dict(cls, d: dict) -> ClaimModel:
        if d.get("version") != VERSION:
            raise ValueError(f"claim model version {d.get('version')!r}, expected {VERSION}")
        return cls(
            buckets=int(d["buckets"]),
            char_sizes=tuple(d["char_sizes"]),
            bias=float(d["bias"]),
            weights=dense(d["weights"], int(d["buckets"])),
            threshold=float(d["threshold"]),
            veto=float(d.get("veto", 0.0)),
        )

    def probability(self, text: str) -> float:
        """The model's probability that `text` claims a limit."""
        return sigmoid(logit(self.weights, self.bias, features(text, self.buckets, self.char_sizes)))


@lru_cache(maxsize=1)
def load(path: Path = WEIGHTS) -> ClaimModel:
    """The committed model (read once)."""
    return ClaimModel.from_dict(json.loads(path.read_text()))
