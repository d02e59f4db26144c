"""The wire formats of real endpoints, each a recorded answer (tests/fixtures/wire/) served by the
scripted server over HTTP to the real client (agents/model.py): OpenAI's reasoning models and the
parameters they refuse, a content that is a list of parts, an answer without usage, cached prompt
tokens, every provider's context-overflow error, and streaming."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from agent_runs import config_for, of_type, run
from chat_server import WIRE, ScriptedChatServer, recorded, reply
from kernelseek_suite.agents.config import ModelConfig
from kernelseek_suite.agents.exceptions import ContextTooLong, ModelError
from kernelseek_suite.agents.model import CHARS_PER_TOKEN, OpenAIChatModel, count_tokens, is_reasoning_model

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
MESSAGES = [{"role": "system", "content": "You optimize kernels."}, {"role": "user", "content": "Make attn.c faster."}]
TOOLS = [
    {"type": "function", "function": {"name": "evaluate", "description": "evaluate", "parameters": {"type": "object"}}}
]


def _model(srv, **cfg) -> OpenAIChatModel:
    c = ModelConfig(name=cfg.pop("name", "scripted-model"), base_url=srv.url, timeout_s=5.0, max_attempts=2)
    c.backoff_initial_s = c.backoff_max_s = 0.01
    for k, v in cfg.items():
        setattr(c, k, v)
    return OpenAIChatModel(c, "sk-wire-test")


# ---------------------------------------------------------------- reasoning models


def test_a_refused_parameter_is_renamed_or_dropped_and_asked_again_not_a_model_error():
    script = [recorded("openai-reasoning-max-tokens.json"), recorded("openai-reasoning-temperature.json"), reply("ok")]
    with ScriptedChatServer([*script, reply("again")]) as srv:
        m = _model(srv, name="some-reasoning-model", temperature=0.0, max_output_tokens=256)
        r = m.query(MESSAGES, TOOLS)
        again = m.query(MESSAGES, TOOLS)
        bodies = srv.bodies()
    assert r.content == "ok" and again.content == "again"
    assert [("max_tokens" in b, "max_completion_tokens" in b, "temperature" in b) for b in bodies] == [
        (True, False, True),  # as configured: refused, max_tokens
        (False, True, True),  # renamed: refused, temperature
        (False, True, False),  # and temperature left out: answered
        (False, True, False),  # the next call sends what was accepted, at once
    ]
    assert bodies[2]["max_completion_tokens"] == 256
    assert [a["param"] for a in r.extra["adjusted"]] == ["max_tokens", "temperature"]
    assert r.extra["adjusted"][0]["instead"] == "max_completion_tokens" and r.extra["adjusted"][1]["instead"] is None
    assert "adjusted" not in again.extra
    assert m.request_params() == {"model": "some-reasoning-model", "max_completion_tokens": 256}


def test_a_reasoning_model_is_sent_max_completion_tokens_and_no_sampling_from_the_start():
    assert is_reasoning_model("o4-mini") and is_reasoning_model("gpt-5") and is_reasoning_model("openai/o3")
    assert not is_reasoning_model("gpt-4o") and not is_reasoning_model("qwen3-coder") and not is_reasoning_model(None)
    with ScriptedChatServer([reply("fine")]) as srv:
        m = _model(srv, name="o4-mini", temperature=0.0, top_p=0.9, max_output_tokens=512, seed=3)
        m.query(MESSAGES, TOOLS)
        (body,) = srv.bodies()
    assert body["max_completion_tokens"] == 512 and "max_tokens" not in body
    assert "temperature" not in body and "top_p" not in body and body["seed"] == 3


def test_a_parameter_refused_twice_ends_as_a_refusal():
    with ScriptedChatServer([recorded("openai-reasoning-temperature.json")] * 3) as srv:
        m = _model(srv, temperature=0.0)
        m.adjusted["temperature"] = None  # left out already, and still refused: not ours to fix
        m.config.temperature = 0.0
        with pytest.raises(ModelError) as e:
            m.query(MESSAGES, [])
    assert e.value.details["kind"] == "refused" and e.value.details["status_code"] == 400


@needs_gcc
def test_a_run_against_a_reasoning_model_continues_after_the_400(tmp_path):
    script = [recorded("openai-reasoning-max-tokens.json"), reply(None, [("evaluate", {})]), reply("Done.", [])]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=2)
        cfg.model.max_output_tokens = 300
        result, events, _ = run(cfg, tmp_path)
    assert result.exit_reason == "limit"
    first, second = of_type(events, "llm_call")
    assert first["adjusted"][0]["param"] == "max_tokens" and first["request"]["max_completion_tokens"] == 300
    assert "adjusted" not in second and "max_tokens" not in second["request"]


# ---------------------------------------------------------------- content, usage, cost


def test_a_content_of_parts_is_joined_and_thinking_kept_apart():
    with ScriptedChatServer([recorded("content-parts.json")]) as srv:
        r = _model(srv).query(MESSAGES, TOOLS)
    assert r.content == "I will measure the starting kernel before changing it."
    assert r.reasoning == "First measure." and [c.name for c in r.tool_calls] == ["evaluate"]
    assert r.message()["content"] == r.content


@needs_gcc
def test_a_run_whose_model_answers_in_parts_goes_on(tmp_path):
    with ScriptedChatServer([recorded("content-parts.json"), reply("That is enough for now.", [])]) as srv:
        result, events, _ = run(config_for(srv, max_steps=2), tmp_path)
    assert result.exit_reason == "limit" and of_type(events, "harness_eval")
    assert of_type(events, "llm_call")[0]["response"]["content"].startswith("I will measure")


def test_an_answer_without_usage_is_counted():
    with ScriptedChatServer([recorded("no-usage.json")]) as srv:
        r = _model(srv).query(MESSAGES, TOOLS)
    how = r.usage["estimated"]
    assert how in ("tiktoken o200k_base", f"characters / {CHARS_PER_TOKEN:g}")
    prompt, _ = count_tokens(json.dumps(MESSAGES) + json.dumps(TOOLS))
    assert r.usage["prompt_tokens"] == prompt > 0 and r.usage["completion_tokens"] > 0
    assert r.usage["total_tokens"] == r.usage["prompt_tokens"] + r.usage["completion_tokens"]


def test_the_estimate_without_a_tokenizer(monkeypatch, tmp_path):
    from kernelseek_suite.agents import model

    monkeypatch.setattr(model, "_encoder", [None])  # as where tiktoken or its encoding is not here
    assert count_tokens("x" * 35) == (10, "characters / 3.5") and count_tokens("x" * 36) == (11, "characters / 3.5")


def test_tiktoken_counts_where_its_encoding_is_here():
    tiktoken = pytest.importorskip("tiktoken")
    from kernelseek_suite.agents import model

    if model._tiktoken() is None:
        pytest.skip("tiktoken's o200k_base encoding is not cached on this machine")
    n, how = count_tokens("def f(x):\n    return x * 2\n")
    assert how == "tiktoken o200k_base" and n == len(
        tiktoken.get_encoding("o200k_base").encode("def f(x):\n    return x * 2\n")
    )


@needs_gcc
def test_max_tokens_binds_without_usage(tmp_path):
    with ScriptedChatServer([recorded("no-usage.json")] * 10) as srv:
        result, events, _ = run(config_for(srv, max_steps=10, max_tokens=300), tmp_path)
    assert result.exit_reason == "limit" and result.limit == "tokens"
    calls = of_type(events, "llm_call")
    assert all(c["usage"]["estimated"] for c in calls) and 1 <= len(calls) < 10
    assert result.totals["total_tokens"] >= 300


def test_cached_prompt_tokens_are_priced_at_the_cached_price():
    with ScriptedChatServer([recorded("cached-tokens.json")] * 2) as srv:
        priced = _model(srv, price_input_per_mtok=2.0, price_output_per_mtok=8.0, price_cached_input_per_mtok=0.5)
        r = priced.query(MESSAGES, [])
        no_discount = _model(srv, price_input_per_mtok=2.0, price_output_per_mtok=8.0).query(MESSAGES, [])
    assert r.usage["cached_tokens"] == 10240 and r.usage["prompt_tokens"] == 12000
    assert r.usage["cost"] == pytest.approx(((12000 - 10240) * 2.0 + 10240 * 0.5 + 400 * 8.0) / 1e6)
    assert no_discount.usage["cost"] == pytest.approx((12000 * 2.0 + 400 * 8.0) / 1e6)


# ---------------------------------------------------------------- the context window, in each provider's words


@pytest.mark.parametrize(
    "fixture,limit,requested",
    [
        ("context-openai.json", 128000, 131500),
        ("context-anthropic.json", 200000, 214877),
        ("context-anthropic-output.json", 200000, 193000 + 16384),
        ("context-gemini.json", 1048576, 1203311),
        ("context-openrouter.json", 131072, 139204),
        ("context-vllm.json", 32768, 36800),
        ("context-llamacpp.json", 8192, 9216),
    ],
)
def test_every_providers_context_overflow_is_recognized_with_its_numbers(fixture, limit, requested):
    assert json.loads((WIRE / fixture).read_text())["status"] == 400
    with ScriptedChatServer([recorded(fixture)]) as srv:
        with pytest.raises(ContextTooLong) as e:
            _model(srv).query(MESSAGES, [])
        assert len(srv.requests) == 1  # not retried: the loop compacts and asks again
    assert (e.value.limit_tokens, e.value.requested_tokens, e.value.status_code) == (limit, requested, 400)


# ---------------------------------------------------------------- streaming


def test_a_streamed_answer_is_put_together():
    with ScriptedChatServer([recorded("stream-tool-calls.sse")]) as srv:
        r = _model(srv, stream=True).query(MESSAGES, TOOLS)
        (body,) = srv.bodies()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert r.content == "The P.V loop reads v by columns; I will turn it inside out."
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [
        ("call_stream_0", "edit_file", {"path": "attn.c", "old_text": "a", "new_text": "b"}),
        ("call_stream_1", "evaluate", {}),
    ]
    assert r.finish_reason == "tool_calls"
    assert (r.usage["prompt_tokens"], r.usage["completion_tokens"], r.usage["total_tokens"]) == (2048, 96, 2144)


def test_a_long_generation_streams_past_the_request_time_out():
    """A generation of 2 s against a time-out of 0.6 s: streamed, the time-out applies between chunks."""
    text = "word " * 40  # 13 chunks of 16 characters, 0.15 s apart
    with ScriptedChatServer([reply(text, pace_s=0.15)]) as srv:
        m = _model(srv, stream=True, timeout_s=0.6, max_attempts=1)
        t0 = time.monotonic()
        r = m.query(MESSAGES, [])
    assert time.monotonic() - t0 > 1.5 and r.content == text and r.usage["completion_tokens"] == 20
    with ScriptedChatServer([reply(text, pace_s=0.15)]) as srv:
        m = _model(srv, stream=True, timeout_s=0.6, max_attempts=1)
        srv.script[0]["pace_s"] = 1.0  # a pause longer than the time-out between two chunks
        with pytest.raises(ModelError) as e:
            m.query(MESSAGES, [])
    assert e.value.details["kind"] == "timeout"


@needs_gcc
def test_a_streamed_run_with_tool_calls(tmp_path):
    script = [reply("Measure first.", [("evaluate", {})]), reply(None, [("shell", {"command": "ls"})])]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=2)
        cfg.model.stream = True
        result, events, _ = run(cfg, tmp_path)
        assert all(b["stream"] for b in srv.bodies())
    assert [t["tool"] for t in of_type(events, "tool_result")] == ["evaluate", "shell"]
    assert of_type(events, "llm_call")[0]["request"]["stream"] is True and result.totals["total_tokens"] == 240
