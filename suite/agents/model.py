"""The model: chat completions with tool calling on any OpenAI-compatible endpoint, through the
official `openai` client, with retries (tenacity) that are counted and reported.

Retried, with exponential backoff and jitter (and the server's Retry-After when it sends one):
429, 5xx, timeouts, connection failures, and responses whose tool calls are not valid JSON.
Not retried: other 4xx (a bad key, an unknown model, a request the server refuses).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit, urlunsplit

from .config import ModelConfig
from .exceptions import ModelError, RetryableModelFault

openai = None   # imported when the first client is made (it is slow to import, and optional)


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

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


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
            msg["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.raw_arguments}} for c in self.tool_calls]
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


class OpenAIChatModel:
    def __init__(self, config: ModelConfig, api_key: str | None, on_retry: Callable[[dict], None] | None = None):
        _import_client()
        if not config.name:
            raise ValueError("no model name given")
        self.config = config
        self.on_retry = on_retry
        self.client = openai.OpenAI(api_key=api_key or "not-needed", base_url=config.base_url, max_retries=0,
                                    timeout=config.timeout_s)
        self.calls = 0

    def describe(self) -> dict:
        c = self.config
        return {"name": c.name, "base_url": public_url(c.base_url) or "https://api.openai.com/v1",
                "sampling": {"temperature": c.temperature, "top_p": c.top_p, "max_output_tokens": c.max_output_tokens,
                             "seed": c.seed}}

    def request_params(self) -> dict:
        c = self.config
        params = {"model": c.name}
        for key, value in (("temperature", c.temperature), ("top_p", c.top_p), ("seed", c.seed),
                           ("max_tokens", c.max_output_tokens)):
            if value is not None:
                params[key] = value
        return params

    # ---- one call, with retries ----
    def query(self, messages: list[dict], tools: list[dict]) -> ModelResponse:
        from tenacity import (RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential,
                              wait_random)

        c = self.config
        base_wait = wait_exponential(multiplier=c.backoff_initial_s, max=c.backoff_max_s) + \
            wait_random(0, c.backoff_initial_s / 2)

        def wait(state: "RetryCallState") -> float:
            exc = state.outcome.exception()
            hint = getattr(exc, "retry_after_s", None) or 0.0
            return min(max(base_wait(state), hint), c.backoff_max_s)

        def before_sleep(state: "RetryCallState") -> None:
            exc = state.outcome.exception()
            if self.on_retry:
                self.on_retry({"attempt": state.attempt_number, "kind": exc.kind, "error": str(exc)[:500],
                               "status_code": exc.status_code, "wait_s": round(state.next_action.sleep, 3),
                               "usage": exc.usage})

        retrying = Retrying(retry=retry_if_exception_type(RetryableModelFault), stop=stop_after_attempt(c.max_attempts),
                            wait=wait, before_sleep=before_sleep, reraise=True)
        t0 = time.monotonic()
        try:
            response = retrying(self._once, messages, tools)
        except RetryableModelFault as e:
            raise ModelError(f"the model endpoint failed {c.max_attempts} times; last: {e.kind}: {e}",
                             kind=e.kind, status_code=e.status_code, attempts=c.max_attempts) from e
        response.attempts = retrying.statistics.get("attempt_number", 1)
        response.latency_s = round(time.monotonic() - t0, 3)
        self.calls += 1
        return response

    def _once(self, messages: list[dict], tools: list[dict]) -> ModelResponse:
        params = self.request_params()
        if tools:
            params["tools"] = tools
        try:
            raw = self.client.chat.completions.create(messages=messages, **params)
        except openai.RateLimitError as e:
            raise RetryableModelFault("rate_limit", str(e), 429, _retry_after(e)) from e
        except openai.APITimeoutError as e:
            raise RetryableModelFault("timeout", str(e) or "request timed out") from e
        except openai.APIConnectionError as e:
            raise RetryableModelFault("connection", str(e) or "connection failed") from e
        except openai.APIStatusError as e:
            if e.status_code >= 500 or e.status_code == 408:
                raise RetryableModelFault("server_error", str(e), e.status_code, _retry_after(e)) from e
            raise ModelError(f"the model endpoint refused the request ({e.status_code}): {e}",
                             kind="refused", status_code=e.status_code) from e
        except openai.APIResponseValidationError as e:
            raise RetryableModelFault("server_error", f"unreadable response: {e}") from e
        return self._parse(raw)

    def _parse(self, raw) -> ModelResponse:
        data = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
        usage = data.get("usage") or {}
        usage = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                 "completion_tokens": int(usage.get("completion_tokens") or 0),
                 "total_tokens": int(usage.get("total_tokens") or 0), "cost": self._cost(usage)}
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0].get("message"), dict):
            raise RetryableModelFault("server_error", "the response has no message", usage=usage)
        msg, finish = choices[0]["message"], choices[0].get("finish_reason")
        calls = []
        for i, tc in enumerate(msg.get("tool_calls") or []):
            fn = tc.get("function") or {}
            raw_args = fn.get("arguments") or "{}"
            try:
                args = json.loads(raw_args)
                if not isinstance(args, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                raise RetryableModelFault("malformed_tool_call", f"tool call {fn.get('name')!r} has arguments that "
                                          f"are not a JSON object ({e}): {raw_args[:200]}", usage=usage) from e
            if not fn.get("name"):
                raise RetryableModelFault("malformed_tool_call", "a tool call has no function name", usage=usage)
            calls.append(ToolCall(tc.get("id") or f"call_{self.calls}_{i}", fn["name"], args, raw_args))
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        return ModelResponse(msg.get("content"), calls, finish, usage, 0.0,
                             reasoning=reasoning if isinstance(reasoning, str) else None)

    def _cost(self, usage: dict) -> float | None:
        if isinstance(usage.get("cost"), (int, float)):
            return float(usage["cost"])
        c = self.config
        if c.price_input_per_mtok is None and c.price_output_per_mtok is None:
            return None
        return ((usage.get("prompt_tokens") or 0) * (c.price_input_per_mtok or 0.0)
                + (usage.get("completion_tokens") or 0) * (c.price_output_per_mtok or 0.0)) / 1e6
