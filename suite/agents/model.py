"""The model: chat completions with tool calling on any OpenAI-compatible endpoint, through the
official `openai` client, with retries (tenacity) that are counted and reported.

Retried, with exponential backoff and jitter (and the server's Retry-After when it sends one):
429, 5xx, timeouts and connection failures, within `max_attempts` and `retry_budget_s`, and never past
the run's wall limit (`time_left`: the wait is cut to it, a request's time-out too, and the limit
ends the call). A tool call the model got wrong (arguments that are not a JSON object, no name) is
not a fault of the endpoint: it comes back as a ToolCall with `error` set, for the loop to answer.
A request longer than the model's context window raises ContextTooLong (the loop compacts and asks
again), whichever provider's wording says it (OpenAI, Anthropic, Gemini, OpenRouter, vLLM,
llama.cpp). Not retried: other 4xx (a bad key, an unknown model, a request the server refuses).

The wire formats around that: OpenAI's reasoning models take `max_completion_tokens` and no
`temperature` or `top_p` (sent so for their names; for another model that refuses a parameter with
the documented 400, `unsupported_parameter` or `unsupported_value`, the parameter is renamed or
dropped, the request sent again at once and the change kept for the run's later calls, and said in
the llm_call event's `adjusted`); a message `content` that is a list of parts is joined; an answer
without `usage` is counted (tiktoken's o200k_base where it is installed and its encoding is on this
machine, else characters / 3.5) and marked `estimated`, so that --max-tokens binds; cached prompt
tokens (`prompt_tokens_details.cached_tokens`) are priced at the cached-input price; with `stream`
the answer comes as server-sent events, so that a long generation is not cut by the time-out, which
then applies between chunks.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..contracts.extras import MissingExtra
from .config import ModelConfig
from .exceptions import ContextTooLong, LimitExceeded, ModelError, RetryableModelFault

openai = None  # imported when the first client is made (it is slow to import, and optional)


def _import_client():
    global openai
    if openai is None:
        try:
            import openai as _openai
        except ImportError as e:
            raise MissingExtra("the agents' model client", "agents", "openai") from e
        openai = _openai


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict
    raw_arguments: str
    error: str | None = None  # the call cannot be carried out as sent (it goes back to the model)

    def to_dict(self) -> dict:
        d = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.error:
            d.update(error=self.error, raw_arguments=self.raw_arguments[:2000])
        return d

    def wire_arguments(self) -> str:
        """The arguments as they go back into the conversation: a malformed call's as an empty object,
        so that no endpoint refuses the history (the error result quotes what was sent)."""
        return "{}" if self.error else self.raw_arguments


@dataclass
class ModelResponse:
    content: str | None
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: dict
    latency_s: float
    attempts: int = 1
    reasoning: str | None = None
    extra: dict = field(default_factory=dict)

    def message(self) -> dict:
        """The assistant message as it goes back into the conversation."""
        msg: dict = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.wire_arguments()}}
                for c in self.tool_calls
            ]
        return msg


def public_url(url: str | None) -> str | None:
    """The base URL without user info or query (which can carry credentials)."""
    if not url:
        return url
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host += f":{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


def _retry_after(exc) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, ValueError, TypeError):
        return None


# OpenAI, Azure, DeepSeek, vLLM, OpenRouter ("maximum context length"), Anthropic ("prompt is too long",
# "exceed context limit"), Gemini ("input token count ... exceeds the maximum number of tokens"), llama.cpp
# ("exceeds the available context size", exceed_context_size_error), Mistral, Bedrock ("input is too long")
_CONTEXT_ERROR = re.compile(
    r"context[_ ]length|context (window|size)|maximum context|prompt is too long|too many (input )?tokens|"
    r"request too large|exceed(?:s|ed)? (?:the )?(?:available )?context|input is too long|"
    r"exceeds the maximum number of tokens|exceed_context_size",
    re.IGNORECASE,
)
_LIMIT_NUMBER = (
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"(\d+) maximum", re.I),
    re.compile(r"\d+ \+ \d+ > (\d+)", re.I),
    re.compile(r"maximum number of tokens allowed \((\d+)\)", re.I),
    re.compile(r"context (?:window|size|length) (?:is |of )?(\d+)", re.I),
    re.compile(r"[\"']n_ctx[\"']: (\d+)", re.I),
)
_REQUESTED_NUMBER = (
    re.compile(r"(?:requested|resulted in|has|have) (?:about )?(\d+)( input)? tokens", re.I),
    re.compile(r"(\d+) tokens >", re.I),
    re.compile(r"input token count \((\d+)\)", re.I),
    re.compile(r"[\"']n_prompt_tokens[\"']: (\d+)", re.I),
)
_SUM_REQUESTED = re.compile(r"(\d+) \+ (\d+) > \d+")


def _first_int(patterns, text: str) -> int | None:
    for pat in patterns:
        m = pat.search(text)
        if m:
            return int(m.group(1))
    return None


def context_error(status_code: int | None, message: str, code: str | None = None) -> ContextTooLong | None:
    """A ContextTooLong when an endpoint's refusal says the request is longer than the context window."""
    if status_code not in (400, 413, 422) and code != "context_length_exceeded":
        return None
    if code != "context_length_exceeded" and not _CONTEXT_ERROR.search(message) and status_code != 413:
        return None
    requested = _first_int(_REQUESTED_NUMBER, message)
    both = _SUM_REQUESTED.search(message)  # Anthropic: input + max_tokens > the window
    if requested is None and both:
        requested = int(both.group(1)) + int(both.group(2))
    return ContextTooLong(message[:1000], _first_int(_LIMIT_NUMBER, message), requested, status_code)


# ---------------------------------------------------------------- parameters a model refuses

# OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 ...): max_completion_tokens, no temperature or top_p
_REASONING_NAME = re.compile(r"^(?:[\w.-]+/)?(?:o\d+(?:-[\w.-]+)?|gpt-5(?:[\w.-]*)?)$", re.IGNORECASE)
SAMPLING_FIXED = ("temperature", "top_p")  # what a reasoning model takes only at its default
_UNSUPPORTED = re.compile(r"unsupported (parameter|value):?\s*'(\w+)'", re.IGNORECASE)
# a refused parameter -> the one to send instead (None: leave it out)
_INSTEAD = {
    "max_tokens": "max_completion_tokens",
    "temperature": None,
    "top_p": None,
    "seed": None,
    "stream_options": None,
    "presence_penalty": None,
    "frequency_penalty": None,
}


def is_reasoning_model(name: str | None) -> bool:
    return bool(name) and bool(_REASONING_NAME.match(name or ""))


def refused_parameter(status_code: int | None, body, message: str) -> str | None:
    """The parameter a 400 says the model does not take (OpenAI's `unsupported_parameter` and
    `unsupported_value` errors, by their `param` field or their message), when it is one that can be
    renamed or left out."""
    if status_code != 400:
        return None
    err = body.get("error", body) if isinstance(body, dict) else {}
    err = err if isinstance(err, dict) else {}
    param = err.get("param") if err.get("code") in ("unsupported_parameter", "unsupported_value") else None
    if not param:
        m = _UNSUPPORTED.search(str(err.get("message") or message))
        param = m.group(2) if m else None
    return param if param in _INSTEAD else None


# ---------------------------------------------------------------- counting tokens without usage

CHARS_PER_TOKEN = 3.5  # the estimate where no tokenizer is at hand (as compaction.py's default)
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_encoder: list = []  # [encoding or None], decided once


def _tiktoken():
    """tiktoken's o200k_base encoding where tiktoken is installed and the encoding file is already in
    its cache (a first use fetches it from the network; this never does); else None."""
    if not _encoder:
        enc = None
        try:
            import tiktoken

            cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
            cache = cache or str(Path(tempfile.gettempdir()) / "data-gym-cache")
            if (Path(cache) / hashlib.sha1(_TIKTOKEN_URL.encode()).hexdigest()).is_file():
                enc = tiktoken.get_encoding("o200k_base")
        except Exception:  # not installed, or its cache unreadable: the estimate
            enc = None
        _encoder.append(enc)
    return _encoder[0]


def count_tokens(text: str) -> tuple[int, str]:
    """(tokens, how they were counted)."""
    enc = _tiktoken()
    if enc is not None:
        return len(enc.encode(text, disallowed_special=())), "tiktoken o200k_base"
    return math.ceil(len(text) / CHARS_PER_TOKEN), f"characters / {CHARS_PER_TOKEN:g}"


def estimated_usage(messages: list[dict], tools: list[dict], content: str | None, calls: list[dict]) -> dict:
    """Usage counted here for an answer that came without it: the request's messages and tools, and
    the answer's text and tool calls."""
    prompt, how = count_tokens(json.dumps(messages) + json.dumps(tools) if tools else json.dumps(messages))
    completion, _ = count_tokens((content or "") + "".join(json.dumps(c) for c in calls))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "estimated": how,
    }


def message_text(content) -> tuple[str | None, str | None]:
    """(text, reasoning) of a message's `content`: a string, or a list of parts (text parts joined,
    refusals kept as text, reasoning or thinking parts apart)."""
    if content is None or isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        return str(content), None
    text, thought = [], []
    for part in content:
        if isinstance(part, str):
            text.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in ("reasoning", "thinking"):
                thought.append(str(part.get("text") or part.get("thinking") or part.get("reasoning") or ""))
            else:
                value = part.get("text") if part.get("text") is not None else part.get("refusal")
                if isinstance(value, dict):  # {"text": {"value": ...}}
                    value = value.get("value")
                if value is not None:
                    text.append(str(value))
    return ("".join(text) if text else None), ("".join(thought) if thought else None)


# the fields endpoints use for a model's context window in their model list
_WINDOW_KEYS = ("context_length", "max_model_len", "context_window", "max_context_length", "max_input_tokens")


def window_from_model_info(info: dict) -> int | None:
    for key in _WINDOW_KEYS:
        v = info.get(key)
        if isinstance(v, int) and v > 0:
            return v
    top = info.get("top_provider")
    return window_from_model_info(top) if isinstance(top, dict) else None


class OpenAIChatModel:
    def __init__(
        self,
        config: ModelConfig,
        api_key: str | None,
        on_retry: Callable[[dict], None] | None = None,
        time_left: Callable[[], float | None] | None = None,
    ):
        _import_client()
        if not config.name:
            raise ValueError("no model name given")
        self.config = config
        self.on_retry = on_retry
        # seconds the run has left (None: no limit); raises LimitExceeded when none is left
        self.time_left = time_left or (lambda: None)
        self.client = openai.OpenAI(
            api_key=api_key or "not-needed", base_url=config.base_url, max_retries=0, timeout=config.timeout_s
        )
        self.calls = 0
        self.adjusted: dict[str, str | None] = {}  # parameters the endpoint refused -> sent instead (None: left out)

    def describe(self) -> dict:
        c = self.config
        return {
            "name": c.name,
            "base_url": public_url(c.base_url) or "https://api.openai.com/v1",
            "sampling": {
                "temperature": c.temperature,
                "top_p": c.top_p,
                "max_output_tokens": c.max_output_tokens,
                "seed": c.seed,
            },
        }

    def token_param(self) -> str:
        c = self.config
        return c.token_param or ("max_completion_tokens" if is_reasoning_model(c.name) else "max_tokens")

    def request_params(self) -> dict:
        """What is sent beside the messages: the configured sampling, less what the model does not take
        (a reasoning model's fixed sampling; parameters it refused earlier in the run)."""
        c = self.config
        params: dict = {"model": c.name}
        fixed = SAMPLING_FIXED if is_reasoning_model(c.name) and not c.token_param else ()
        for key, value in (
            ("temperature", c.temperature),
            ("top_p", c.top_p),
            ("seed", c.seed),
            (self.token_param(), c.max_output_tokens),
        ):
            if value is not None and key not in fixed:
                params[key] = value
        if c.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        for key, instead in self.adjusted.items():
            if key in params:
                value = params.pop(key)
                if instead:
                    params[instead] = value
        return params

    def context_window(self) -> int | None:
        """The model's context window where the endpoint's model list says it (vLLM's max_model_len,
        OpenRouter's context_length, ...); None when it does not, or cannot be asked."""
        try:
            listing = self.client.with_options(timeout=min(10.0, self.config.timeout_s)).models.list()
            for m in listing.data:
                info = m.model_dump() if hasattr(m, "model_dump") else dict(m)
                if info.get("id") == self.config.name:
                    return window_from_model_info(info)
        except Exception:  # an endpoint without a model list, or one that refuses it: not known
            return None
        return None

    # ---- one call, with retries ----
    def query(self, messages: list[dict], tools: list[dict]) -> ModelResponse:
        from tenacity import (
            RetryCallState,
            Retrying,
            retry_if_exception_type,
            stop_after_attempt,
            stop_after_delay,
            wait_exponential,
            wait_random,
        )

        c = self.config
        base_wait = wait_exponential(multiplier=c.backoff_initial_s, max=c.backoff_max_s) + wait_random(
            0, c.backoff_initial_s / 2
        )

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception()
            hint = getattr(exc, "retry_after_s", None) or 0.0
            w = min(max(base_wait(state), hint), c.backoff_max_s)
            left = self.time_left()  # raises LimitExceeded when the run's wall time is spent
            return w if left is None else max(0.0, min(w, left))

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception()
            if self.on_retry:
                self.on_retry(
                    {
                        "attempt": state.attempt_number,
                        "kind": exc.kind,
                        "error": str(exc)[:500],
                        "status_code": exc.status_code,
                        "wait_s": round(state.next_action.sleep, 3),
                        "usage": exc.usage,
                    }
                )

        stop = stop_after_attempt(c.max_attempts)
        if c.retry_budget_s is not None:
            stop = stop | stop_after_delay(c.retry_budget_s)
        retrying = Retrying(
            retry=retry_if_exception_type(RetryableModelFault),
            stop=stop,
            wait=wait,
            before_sleep=before_sleep,
            reraise=True,
        )
        t0 = time.monotonic()
        try:
            response = retrying(self._once, messages, tools)
        except RetryableModelFault as e:
            n = retrying.statistics.get("attempt_number", c.max_attempts)
            budget = f" within the retry budget of {c.retry_budget_s:g}s" if n < c.max_attempts else ""
            raise ModelError(
                f"the model endpoint failed {n} times{budget}; last: {e.kind}: {e}",
                kind=e.kind,
                status_code=e.status_code,
                attempts=n,
            ) from e
        response.attempts = retrying.statistics.get("attempt_number", 1)
        response.latency_s = round(time.monotonic() - t0, 3)
        self.calls += 1
        return response

    def _once(self, messages: list[dict], tools: list[dict]) -> ModelResponse:
        changes: list[dict] = []
        while True:
            params = self.request_params()
            try:
                response = self._send(messages, tools, params)
            except _Refused as r:
                if r.param in self.adjusted or len(changes) >= len(_INSTEAD):
                    raise r.error from r.cause
                self.adjusted[r.param] = _INSTEAD[r.param]
                changes.append({"param": r.param, "instead": _INSTEAD[r.param], "error": str(r.cause)[:300]})
                continue
            if changes:
                response.extra["adjusted"] = changes
            return response

    def _send(self, messages: list[dict], tools: list[dict], params: dict) -> ModelResponse:
        assert openai is not None  # imported when the client was made
        if tools:
            params["tools"] = tools
        left = self.time_left()
        timeout = self.config.timeout_s if left is None else max(0.1, min(self.config.timeout_s, left + 0.5))
        try:
            raw = self.client.chat.completions.create(messages=messages, timeout=timeout, **params)
            if params.get("stream"):
                return self._parse(_read_stream(raw, self.time_left), messages, tools)
        except openai.RateLimitError as e:
            raise RetryableModelFault("rate_limit", str(e), 429, _retry_after(e)) from e
        except openai.APITimeoutError as e:
            raise RetryableModelFault("timeout", str(e) or "request timed out") from e
        except openai.APIConnectionError as e:
            raise RetryableModelFault("connection", str(e) or "connection failed") from e
        except openai.APIStatusError as e:
            if e.status_code >= 500 or e.status_code == 408:
                raise RetryableModelFault("server_error", str(e), e.status_code, _retry_after(e)) from e
            too_long = context_error(e.status_code, _error_text(e), getattr(e, "code", None))
            if too_long:
                raise too_long from e
            err = ModelError(
                f"the model endpoint refused the request ({e.status_code}): {e}",
                kind="refused",
                status_code=e.status_code,
            )
            param = refused_parameter(e.status_code, getattr(e, "body", None), str(e))
            if param and param in params:
                raise _Refused(param, err, e) from e
            raise err from e
        except openai.APIResponseValidationError as e:
            raise RetryableModelFault("server_error", f"unreadable response: {e}") from e
        except openai.APIError as e:  # an error event in a stream
            raise RetryableModelFault("server_error", f"the stream failed: {e}") from e
        return self._parse(raw, messages, tools)

    def _parse(self, raw, messages: list[dict] | None = None, tools: list[dict] | None = None) -> ModelResponse:
        data = raw.model_dump(warnings=False) if hasattr(raw, "model_dump") else dict(raw)
        reported = data.get("usage") or {}
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0].get("message"), dict):
            raise RetryableModelFault("server_error", "the response has no message", usage=self._usage(reported))
        msg, finish = choices[0]["message"], choices[0].get("finish_reason")
        content, thought = message_text(msg.get("content"))
        raw_calls = msg.get("tool_calls") or []
        calls = [parse_tool_call(tc, f"call_{self.calls}_{i}") for i, tc in enumerate(raw_calls)]
        if not reported.get("prompt_tokens") and not reported.get("completion_tokens") and messages is not None:
            reported = {**reported, **estimated_usage(messages, tools or [], content, raw_calls)}
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or thought
        return ModelResponse(
            content,
            calls,
            finish,
            self._usage(reported),
            0.0,
            reasoning=reasoning if isinstance(reasoning, str) else None,
        )

    def _usage(self, reported: dict) -> dict:
        details = reported.get("prompt_tokens_details") or {}
        cached = (
            details.get("cached_tokens")
            or reported.get("prompt_cache_hit_tokens")  # DeepSeek
            or reported.get("cache_read_input_tokens")  # Anthropic's compatible endpoint
            or 0
        )
        usage: dict = {
            "prompt_tokens": int(reported.get("prompt_tokens") or 0),
            "completion_tokens": int(reported.get("completion_tokens") or 0),
            "total_tokens": int(
                reported.get("total_tokens")
                or int(reported.get("prompt_tokens") or 0) + int(reported.get("completion_tokens") or 0)
            ),
        }
        if cached:
            usage["cached_tokens"] = int(cached)
        if reported.get("estimated"):
            usage["estimated"] = reported["estimated"]
        usage["cost"] = self._cost({**reported, **usage})
        return usage

    def _cost(self, usage: dict) -> float | None:
        return priced(usage, self.config)


def priced(usage: dict, config: ModelConfig) -> float | None:
    """A call's cost: the one reported (`usage.cost`), else its tokens at the configured prices (cached
    prompt tokens at the cached-input price, the input price when none is given); None without prices."""
    if isinstance(usage.get("cost"), (int, float)):
        return float(usage["cost"])
    c = config
    if c.price_input_per_mtok is None and c.price_output_per_mtok is None:
        return None
    cached = min(int(usage.get("cached_tokens") or 0), int(usage.get("prompt_tokens") or 0))
    pin = c.price_input_per_mtok or 0.0
    pcached = pin if c.price_cached_input_per_mtok is None else c.price_cached_input_per_mtok
    return (
        ((usage.get("prompt_tokens") or 0) - cached) * pin
        + cached * pcached
        + (usage.get("completion_tokens") or 0) * (c.price_output_per_mtok or 0.0)
    ) / 1e6


def _error_text(e) -> str:
    """An error's message and the body it came with (some providers, Gemini's among them, send a list
    whose message the client does not put in its own)."""
    body = getattr(e, "body", None)
    if body is None:
        return str(e)
    try:
        return f"{e} {json.dumps(body)}"
    except (TypeError, ValueError):
        return f"{e} {body}"


class _Refused(Exception):
    """A 400 that names a parameter the model does not take (renamed or left out, and sent again)."""

    def __init__(self, param: str, error: ModelError, cause: Exception):
        super().__init__(param)
        self.param, self.error, self.cause = param, error, cause


def _read_stream(stream, time_left: Callable[[], float | None]) -> dict:
    """_collect_stream, with the HTTP library's own errors while reading (a read time-out between
    chunks, a dropped connection) as retryable faults."""
    assert openai is not None
    try:
        return _collect_stream(stream, time_left)
    except (openai.APIError, LimitExceeded, KeyboardInterrupt):
        raise
    except Exception as e:
        if not type(e).__module__.split(".")[0].startswith("httpx"):
            raise
        kind = "timeout" if "Timeout" in type(e).__name__ else "connection"
        raise RetryableModelFault(kind, f"the stream broke off: {type(e).__name__}: {e}") from e


def _collect_stream(stream, time_left: Callable[[], float | None]) -> dict:
    """A streamed answer (server-sent events of chat.completion.chunk) put together as one
    chat.completion: the content and reasoning deltas joined, each tool call's deltas (by index) joined,
    the finish reason, and the usage of the last chunk (sent with stream_options.include_usage). The
    run's wall limit is checked at every chunk."""
    content: list = []
    reasoning: list[str] = []
    calls: dict[int, dict] = {}
    finish, usage = None, None
    try:
        for chunk in stream:
            time_left()  # raises LimitExceeded when the run's wall time is spent
            d = chunk.model_dump(warnings=False) if hasattr(chunk, "model_dump") else dict(chunk)
            if d.get("usage"):
                usage = d["usage"]
            for choice in d.get("choices") or []:
                delta = choice.get("delta") or {}
                part = delta.get("content")
                if isinstance(part, list):
                    content.extend(part)
                elif part:
                    content.append(part)
                r = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(r, str):
                    reasoning.append(r)
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(
                        tc.get("index", len(calls)), {"id": None, "type": "function", "function": {}}
                    )
                    if tc.get("id"):
                        slot["id"] = tc["id"]
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        slot["function"]["name"] = slot["function"].get("name", "") + fn["name"]
                    if fn.get("arguments"):
                        slot["function"]["arguments"] = slot["function"].get("arguments", "") + fn["arguments"]
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()
    text = content if any(not isinstance(p, str) for p in content) else ("".join(content) if content else None)
    message: dict = {"role": "assistant", "content": text}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def parse_tool_call(tc: dict, default_id: str) -> ToolCall:
    """A tool call as the endpoint sent it; one that cannot be carried out carries its `error`."""
    fn = tc.get("function") if isinstance(tc, dict) and isinstance(tc.get("function"), dict) else {}
    raw = fn.get("arguments")
    raw = raw if isinstance(raw, str) else ("{}" if raw is None else json.dumps(raw))
    name = fn.get("name") if isinstance(fn.get("name"), str) and fn.get("name") else ""
    call_id = tc.get("id") if isinstance(tc, dict) and isinstance(tc.get("id"), str) and tc.get("id") else default_id
    if not name:
        return ToolCall(call_id, "unnamed", {}, raw, "the tool call has no function name")
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError as e:
        return ToolCall(call_id, name, {}, raw, f"its arguments are not valid JSON ({e})")
    if not isinstance(args, dict):
        return ToolCall(call_id, name, {}, raw, f"its arguments are a JSON {type(args).__name__}, not an object")
    return ToolCall(call_id, name, args, raw)
