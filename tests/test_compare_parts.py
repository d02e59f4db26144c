"""The pieces `compare` is built from, without a model: the arms (parsing, the A/A copy, the question
settings, the checks), the sandbox policy, a request from a protocol, and the options `run` and
`compare` declare once and read back into small dataclasses."""

from __future__ import annotations

import click
import pytest

from kernelseek_suite.cli.agents import run_cmd
from kernelseek_suite.cli.common import (
    SHARED_OPTIONS,
    LimitOptions,
    ModelOptions,
    QuestionOptions,
    RunOptions,
    shared_options,
)
from kernelseek_suite.cli.compare import compare_cmd
from kernelseek_suite.headtohead.arms import ArmError, parse_arms, settle_arms
from kernelseek_suite.headtohead.protocol import ProtocolError, load_protocol
from kernelseek_suite.headtohead.request import FIXED_BY_PROTOCOL, protocol_request
from kernelseek_suite.headtohead.sandbox_policy import UNSANDBOXED, runs_sandbox, sandbox_refusal


def test_parse_arms_keeps_the_order_and_names_each_agent():
    arms = parse_arms(" kernelseek, info=kernelseek ,codex=agent-cmd,,")
    assert arms.labels == ["kernelseek", "info", "codex"]
    assert arms.agents == {"kernelseek": "kernelseek", "info": "kernelseek", "codex": "agent-cmd"}


def test_settle_arms_adds_the_aa_copy_and_gives_questions_to_the_arms_that_take_them():
    arms = parse_arms("kernelseek,toolrich")
    arms.options = {"kernelseek": {"plateau_evals": 7}}
    settle_arms(arms, "kernelseek", {"plateau_evals": 3, "repeated_failure": 2})
    assert arms.labels == ["kernelseek", "toolrich", "kernelseek-aa"]
    assert arms.agents["kernelseek-aa"] == "kernelseek"
    # an arm's own options win over the question settings; toolrich takes none of them
    assert arms.options["kernelseek"] == {"plateau_evals": 7, "repeated_failure": 2}
    assert arms.options["kernelseek-aa"] == {"plateau_evals": 7, "repeated_failure": 2}
    assert "toolrich" not in arms.options


@pytest.mark.parametrize(
    "spec, options, aa, questions, option, message",
    [
        ("bogus", {}, None, {}, "--agents", "arms are "),
        ("kernelseek,kernelseek", {}, None, {}, "--agents", "each label once"),
        ("kernelseek", {"zz": {"x": 1}}, None, {}, "--agent-opt", "'zz' is not one of the arms (kernelseek)"),
        ("kernelseek", {"kernelseek": {"nosuch": 1}}, None, {}, "--agent-opt", "kernelseek: unknown option(s)"),
        ("kernelseek", {}, "toolrich", {}, None, "the A/A arm 'toolrich' is not one of the arms (kernelseek)"),
        ("toolrich", {}, None, {"plateau_evals": 3}, None, "no arm takes the question settings (plateau_evals)"),
    ],
)
def test_settle_arms_says_what_is_wrong_and_which_option_gave_it(spec, options, aa, questions, option, message):
    arms = parse_arms(spec)
    arms.options = options
    with pytest.raises(ArmError) as e:
        settle_arms(arms, aa, questions)
    assert e.value.option == option and message in str(e.value)


def test_sandbox_policy():
    assert runs_sandbox(None, allow_unsandboxed=False) == "landlock"  # fails rather than falls back
    assert runs_sandbox(None, allow_unsandboxed=True) == "auto"
    assert runs_sandbox("none", allow_unsandboxed=False) == "none"
    assert sandbox_refusal("compare", "none", allow_unsandboxed=True) is None
    refusal = sandbox_refusal("re-measuring", "none", allow_unsandboxed=False)
    assert refusal == UNSANDBOXED.format(what="re-measuring", why="--sandbox none turns it off")


def test_a_protocol_request_takes_what_the_protocol_leaves_open_and_nothing_it_fixes(tmp_path):
    proto = load_protocol("protocols/smoke.yaml")
    fills = {"base_url": None, "price": (1.0, 2.0), "context_tokens": None, "final_bench": False}
    req = protocol_request(proto, {}, model_name=None, out_dir=tmp_path, allow_unsandboxed=True, **fills)
    assert req.protocol["sha256"] == proto.sha256 and req.arms[: len(proto.arms())] == list(proto.arms())
    assert req.model["price_input_per_mtok"] == 1.0 and req.final_bench["enabled"] is False
    assert req.tools == {"sandbox": proto.data.get("sandbox") or "auto"}
    given = dict.fromkeys(FIXED_BY_PROTOCOL)
    given.update(task="x", task_opts=("a=1",), stream=False)
    with pytest.raises(ProtocolError, match="fixes --task, --task-opts; edit a copy"):
        protocol_request(proto, given, model_name=None, out_dir=tmp_path, allow_unsandboxed=True, **fills)


def test_run_and_compare_declare_each_shared_option_alike():
    def options(cmd):
        return {p.opts[0]: p.to_info_dict() for p in cmd.params if isinstance(p, click.Option)}

    run, compare = options(run_cmd), options(compare_cmd)
    for name in SHARED_OPTIONS:
        assert {**run[name], "help": None} == {**compare[name], "help": None}, name


def test_shared_options_take_a_commands_own_help_and_keep_the_order():
    @click.command()
    @shared_options(("--max-wall", "--max-cost"), {"--max-cost": "USD per run"})
    def cmd(**params):
        pass

    assert [p.opts[0] for p in cmd.params] == ["--max-wall", "--max-cost"]
    assert [p.help for p in cmd.params] == [None, "USD per run"]


def _params(**given):
    names = ("model_name", "base_url", "price", "price_cached", "stream", "temperature", "context_tokens")
    names += ("max_attempts", "retry_budget", "max_steps", "max_evals", "max_wall", "max_tokens", "max_cost")
    names += ("kernel", "goal", "categories", "plateau", "repeats", "spacing")
    return {**dict.fromkeys(names), "task_opts": (), **given}


def test_the_option_groups_read_back_as_the_library_takes_them():
    params = _params(max_wall=1.5, max_steps=4, price=(1.0, 2.0), max_attempts=2, categories="a, b,", spacing=0)
    shared = RunOptions.of(params)
    assert shared.limits == LimitOptions.of(params)
    assert shared.limits.limits() == {"max_steps": 4, "max_wall_s": 90.0}
    assert shared.questions.arm_options() == {"categories": ["a", "b"], "min_steps_between": 0}
    assert QuestionOptions.of(_params(categories="")).arm_options() == {}
    model = ModelOptions.of(params)
    assert model.request_model() == {
        "name": None,
        "base_url": None,
        "temperature": None,
        "stream": False,
        "price_input_per_mtok": 1.0,
        "price_output_per_mtok": 2.0,
    }
    assert model.call_settings() == {"max_attempts": 2}
    assert model.resume_overrides() == {"max_attempts": 2, "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0}


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "cannot read the protocol: No such file or directory"),
        ("name: [unclosed\n", "not valid YAML"),
        ("- a list\n", "expected a mapping"),
        ("name: x\n", "top level: 'version' is a required property (and "),
    ],
)
def test_a_protocol_that_cannot_be_used_says_why_naming_the_file(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ProtocolError) as e:
        load_protocol(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)
