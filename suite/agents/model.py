"""The model: chat completions with tool calling on any OpenAI-compatible endpoint, through the
official `openai` client, with retries (tenacity) that are counted and reported.

Retried, with exponential backoff and jitter (and the server's Retry-After when it sends one):
429, 5xx, timeouts and connection failures, within `max_attempts` and `retry_budget_s`, and never past
the run's wall limit (`time_left`: the wait is cut to it, a request's time-out too, and the limit
ends the call). A tool call the model got wrong (arguments that are not a JSON object, no name) is
not a fault of the endpoint: it comes back as a ToolCall with `error` set, for the loop to answer.
A request longer than the model's context window raises ContextTooLong (the loop compacts and asks
again). Not retried: other 4xx (a bad key, an unknown model, a request the server refuses).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from .config import ModelConfig
from .exceptions import ContextTooLong, ModelError, RetryableModelFault

openai = None  # imported when the first client is made (it is slow to import, and optional)


def _import_client():
    global openai
    if openai is None:
        try:
            import openai as _openai
        except ImportError as e:
            raise ImportError("the agents need the 'agents' extra: pip install 'kernelseek-suite[agents]'") from e
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


_CONTEXT_ERROR = re.compile(
    r"context[_ ]length|context (window|size)|maximum context|prompt is too long|too many (input )?tokens|"
    r"request too large|exceeds? the (available )?context|input is too long",
    re.IGNORECASE,
)
_LIMIT_NUMBER = (
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"(\d+) maximum", re.I),
    re.compile(r"context (?:window|size|length) (?:is |of )?(\d+)", re.I),
)
_REQUESTED_NUMBER = (
    re.compile(r"(?:requested|resulted in|has|have) (\d+)( input)? tokens", re.I),
    re.compile(r"(\d+) tokens >", re.I),
)


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
    return ContextTooLong(
        message[:1000], _first_int(_LIMIT_NUMBER, message), _first_int(_REQUESTED_NUMBER, message), status_code
    )


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

    def request_params(self) -> dict:
        c = self.config
        params = {"model": c.name}
        for key, value in (
            ("temperature", c.temperature),
            ("top_p", c.top_p),
            ("seed", c.seed),
            ("max_tokens", c.max_output_tokens),
        ):
            if value is not None:
                params[key] = value
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
        params = self.request_params()
        if tools:
            params["tools"] = tools
        left = self.time_left()
        timeout = self.config.timeout_s if left is None else max(0.1, min(self.config.timeout_s, left + 0.5))
        try:
            raw = self.client.chat.completions.create(messages=messages, timeout=timeout, **params)
        except openai.RateLimitError as e:
            raise RetryableModelFault("rate_limit", str(e), 429, _retry_after(e)) from e
        except openai.APITimeoutError as e:
            raise RetryableModelFault("timeout", str(e) or "request timed out") from e
        except openai.APIConnectionError as e:
            raise RetryableModelFault("connection", str(e) or "connection failed") from e
        except openai.APIStatusError as e:
            if e.status_code >= 500 or e.status_code == 408:
                raise RetryableModelFault("server_error", str(e), e.status_code, _retry_after(e)) from e
            too_long = context_error(e.status_code, str(e), getattr(e, "code", None))
            if too_long:
                raise too_long from e
            raise ModelError(
                f"the model endpoint refused the request ({e.status_code}): {e}",
                kind="refused",
                status_code=e.status_code,
            ) from e
        except openai.APIResponseValidationError as e:
            raise RetryableModelFault("server_error", f"unreadable response: {e}") from e
        return self._parse(raw)

    def _parse(self, raw) -> ModelResponse:
        data = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
        usage = data.get("usage") or {}
        usage = {
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "total_tokens": int(usage.get("total_tokens") or 0),
            "cost": self._cost(usage),
        }
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0].get("message"), dict):
            raise RetryableModelFault("server_error", "the response has no message", usage=usage)
        msg, finish = choices[0]["message"], choices[0].get("finish_reason")
        calls = [parse_tool_call(tc, f"call_{self.calls}_{i}") for i, tc in enumerate(msg.get("tool_calls") or [])]
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        return ModelResponse(
            msg.get("content"), calls, finish, usage, 0.0, reasoning=reasoning if isinstance(reasoning, str) else None
        )

    def _cost(self, usage: dict) -> float | None:
        if isinstance(usage.get("cost"), (int, float)):
            return float(usage["cost"])
        c = self.config
        if c.price_input_per_mtok is None and c.price_output_per_mtok is None:
            return None
        return (
            (usage.get("prompt_tokens") or 0) * (c.price_input_per_mtok or 0.0)
            + (usage.get("completion_tokens") or 0) * (c.price_output_per_mtok or 0.0)
        ) / 1e6


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
