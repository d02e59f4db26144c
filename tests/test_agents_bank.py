"""The question bank: the shipped one, the schema's errors, and how questions are chosen."""

from __future__ import annotations

import json

import pytest

from kernelseek_suite.agents import layers
from kernelseek_suite.agents.bank import AskedRecord, BankError, bank_schema, choose, load_bank


def test_the_shipped_bank_is_valid_and_covers_the_domain():
    bank = load_bank()
    assert len(bank.questions) >= 30
    cats = {q.category for q in bank.questions}
    assert cats == {"layer-shift", "limit-rejection", "information"}
    shift_layers = {layer for q in bank.questions if q.category == "layer-shift" for layer in q.layers}
    assert shift_layers == set(layers.LAYER_IDS)  # every layer can be moved to
    for q in bank.questions:
        if "claimed-limit" in q.triggers:
            assert q.category in ("limit-rejection", "information"), q.id
    triggers = {t for q in bank.questions if q.category != "information" for t in q.triggers}
    assert triggers == {"early-stop", "plateau", "claimed-limit", "repeated-failure", "layer-dwell"}


def test_the_schema_and_the_classifier_name_the_same_layers():
    enum = bank_schema()["$defs"]["question"]["properties"]["layers"]["items"]["enum"]
    assert tuple(enum) == layers.LAYER_IDS


def _write(tmp_path, text):
    p = tmp_path / "bank.yaml"
    p.write_text(text)
    return p


GOOD = """version: 1
questions:
  - id: q-one
    text: Where does the time actually go?
    category: layer-shift
    triggers: [plateau]
    layers: [measurement]
"""


@pytest.mark.parametrize(
    "edit,expected",
    [
        (
            lambda t: t.replace("layer-shift", "layer-shfit"),
            ["entry questions[0] (id 'q-one')", "field 'category'", "layer-shfit"],
        ),
        (
            lambda t: t.replace("    triggers: [plateau]\n", ""),
            ["entry questions[0] (id 'q-one')", "'triggers' is a required"],
        ),
        (lambda t: t.replace("[measurement]", "[memroy]"), ["field 'layers.0'", "memroy"]),
        (lambda t: t.replace("[plateau]", "[whenever]"), ["field 'triggers.0'", "whenever"]),
        (lambda t: t + t.split("questions:\n")[1], ["entry questions[1] (id 'q-one')", "duplicate id"]),
        (lambda t: t.replace("version: 1", "version: 2"), ["top level, field 'version'"]),
        (lambda t: t + "  - [not, a, mapping\n", ["not valid YAML"]),
        (lambda t: "just a string\n", ["top level"]),
    ],
)
def test_a_malformed_bank_names_file_entry_and_problem(tmp_path, edit, expected):
    p = _write(tmp_path, edit(GOOD))
    with pytest.raises(BankError) as err:
        load_bank(p)
    msg = str(err.value)
    assert msg.startswith(str(p))
    for part in expected:
        assert part in msg, msg


def test_a_missing_bank_is_a_clear_error(tmp_path):
    with pytest.raises(BankError, match="cannot read the question bank"):
        load_bank(tmp_path / "nope.yaml")


def test_choice_follows_the_trigger_and_category():
    bank = load_bank()
    for trigger in ("plateau", "claimed-limit", "early-stop", "repeated-failure", "layer-dwell"):
        q = choose(
            bank,
            trigger,
            [],
            categories=("layer-shift", "limit-rejection"),
            current_layer=None,
            no_repeat_within=8,
            seed=1,
        )
        assert q is not None and trigger in q.triggers and q.category != "information"
    info = choose(bank, "plateau", [], categories=("information",), current_layer=None, no_repeat_within=8, seed=1)
    assert info.category == "information"


def test_questions_are_not_repeated_too_soon_and_rotate_across_layers():
    bank = load_bank()
    history: list[AskedRecord] = []
    asked = []
    for _ in range(8):
        q = choose(
            bank, "plateau", history, categories=("layer-shift",), current_layer="memory", no_repeat_within=8, seed=3
        )
        assert "memory" not in q.layers  # away from the layer the agent dwells in
        asked.append(q)
        history.append(AskedRecord(q.id, q.layers))
    assert len({q.id for q in asked}) == 8
    # the first few questions each open a layer not asked about before
    seen = set()
    for q in asked[:4]:
        assert not seen.intersection(q.layers), [a.id for a in asked]
        seen.update(q.layers)


def test_choice_is_deterministic_for_a_seed_and_relaxes_when_the_pool_is_spent():
    bank = load_bank()
    a = choose(
        bank, "claimed-limit", [], categories=("limit-rejection",), current_layer=None, no_repeat_within=50, seed=11
    )
    b = choose(
        bank, "claimed-limit", [], categories=("limit-rejection",), current_layer=None, no_repeat_within=50, seed=11
    )
    assert a == b
    pool = [q for q in bank.questions if "claimed-limit" in q.triggers and q.category == "limit-rejection"]
    history = [AskedRecord(q.id, q.layers) for q in pool]
    again = choose(
        bank,
        "claimed-limit",
        history,
        categories=("limit-rejection",),
        current_layer=None,
        no_repeat_within=50,
        seed=11,
    )
    assert again.id == pool[0].id  # the least recently asked comes back first


def test_the_bank_schema_is_itself_valid():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(bank_schema())
    json.dumps(bank_schema())
