"""A deadline stream's arguments, checked once before any request: which client, what budget,
what body."""

from __future__ import annotations

import json
import math
import sys
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx2

from .. import _clock
from .._clock import NS_PER_S
from .._exceptions import ConfigError

__all__ = ["Plan", "make_plan"]


@dataclass(frozen=True)
class Plan:
    kind: Literal["openai", "raw"]
    chat: bool
    body: dict[str, Any]
    budget_s: float | None  # model seconds from the call's start
    max_output_tokens: int | None
    request_timeout_s: float | None = None
    """The raw path: the caller's ``timeout=`` (never sent in the body); the deadline's wins."""
    raw_content: bytes = b""
    """The raw path: ``body`` as the JSON sent, encoded once here, where a body that is not JSON
    is refused before any request."""


def client_kind(client: Any, *, is_async: bool) -> Literal["openai", "raw"]:
    name = "astream_with_deadline" if is_async else "stream_with_deadline"
    openai = sys.modules.get("openai")  # an openai client means the SDK is imported already
    if openai is not None:
        if isinstance(client, openai.AsyncOpenAI if is_async else openai.OpenAI):
            return "openai"
        if isinstance(client, openai.OpenAI if is_async else openai.AsyncOpenAI):
            other = "stream_with_deadline" if is_async else "astream_with_deadline"
            raise ConfigError(f"{name}: {type(client).__name__} needs {other}")
    raw: list[type] = [httpx2.AsyncClient if is_async else httpx2.Client]
    wrong: list[type] = [httpx2.Client if is_async else httpx2.AsyncClient]
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        raw.append(httpx.AsyncClient if is_async else httpx.Client)
        wrong.append(httpx.Client if is_async else httpx.AsyncClient)
    if isinstance(client, tuple(raw)):
        if not str(getattr(client, "base_url", "")).strip("/"):
            raise ConfigError(f"{name}: the HTTP client has no base_url (e.g. http://127.0.0.1:8011)")
        return "raw"
    if isinstance(client, tuple(wrong)):
        other = "stream_with_deadline" if is_async else "astream_with_deadline"
        raise ConfigError(f"{name}: {type(client).__name__} needs {other}")
    raise ConfigError(
        f"{name}: client must be an openai client or an httpx2/httpx client, got {type(client).__name__}"
    )


def budget_s(deadline_s: float | None, deadline_at: float | datetime | None) -> float | None:
    if deadline_s is not None and deadline_at is not None:
        raise ConfigError("give deadline_s or deadline_at, not both")
    if deadline_s is not None:
        if isinstance(deadline_s, bool) or not isinstance(deadline_s, int | float):
            raise ConfigError(f"deadline_s must be a number of seconds, got {deadline_s!r}")
        if not math.isfinite(deadline_s) or deadline_s < 0:
            raise ConfigError(f"deadline_s must be a finite number >= 0, got {deadline_s!r}")
        return _timeable(float(deadline_s), f"deadline_s={deadline_s!r}")
    if deadline_at is None:
        return None
    if isinstance(deadline_at, datetime):
        try:
            at_s = deadline_at.timestamp()
        except (ValueError, OverflowError, OSError) as exc:
            raise ConfigError(
                f"deadline_at={deadline_at!r} is not a moment this platform can time: {exc}"
            ) from exc
    elif isinstance(deadline_at, int | float) and not isinstance(deadline_at, bool):
        at_s = float(deadline_at)
    else:
        raise ConfigError(f"deadline_at must be Unix seconds or a datetime, got {deadline_at!r}")
    if not math.isfinite(at_s):
        raise ConfigError(f"deadline_at must be finite, got {deadline_at!r}")
    return _timeable(at_s - _clock.wall_ns() / NS_PER_S, f"deadline_at={deadline_at!r}")


def _timeable(budget: float, given: str) -> float:
    """A budget the watchdog's timer can wait for (`threading.TIMEOUT_MAX`, centuries): longer is
    a typo, not a deadline."""
    if budget > threading.TIMEOUT_MAX:
        raise ConfigError(
            f"{given}: a deadline {budget:.3g} s away is past the longest wait this platform's timers "
            f"allow ({threading.TIMEOUT_MAX:.3g} s); leave it out for no deadline"
        )
    return budget


def make_plan(
    client: Any,
    *,
    is_async: bool,
    deadline_s: float | None,
    deadline_at: float | datetime | None,
    max_output_tokens: int | None,
    create_kwargs: dict[str, Any],
) -> Plan:
    kind = client_kind(client, is_async=is_async)
    budget = budget_s(deadline_s, deadline_at)
    if max_output_tokens is not None and (
        isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens < 1
    ):
        raise ConfigError(f"max_output_tokens must be a positive integer, got {max_output_tokens!r}")
    if budget is None and max_output_tokens is None:
        raise ConfigError(
            "give deadline_s, deadline_at or max_output_tokens: without one the stream is unbounded"
        )
    has_messages, has_prompt = "messages" in create_kwargs, "prompt" in create_kwargs
    if has_messages == has_prompt:
        raise ConfigError("give messages (a chat completion) or prompt (a text completion), exactly one")
    if not create_kwargs.get("model"):
        raise ConfigError("model is required (the served model id, as /v1/models lists it)")
    if create_kwargs.get("stream") is False:
        raise ConfigError("stream=False cannot keep what arrives; leave stream unset")
    if create_kwargs.get("n", 1) not in (1, None):
        raise ConfigError(f"n={create_kwargs['n']!r}: only one choice per stream is supported")
    body = dict(create_kwargs)
    body["stream"] = True
    given_options = body.get("stream_options") or {}
    if not isinstance(given_options, dict):
        raise ConfigError(
            f"stream_options={given_options!r}: expected a mapping, e.g. {{'include_usage': True}}"
        )
    body["stream_options"] = {**given_options, "include_usage": True}
    request_timeout, raw_content = None, b""
    if kind == "raw":
        request_timeout = _request_timeout(body.pop("timeout", None))
        try:
            raw_content = json.dumps(body, allow_nan=False, ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"the request body cannot be sent as JSON: {exc}") from exc
    return Plan(kind, has_messages, body, budget, max_output_tokens, request_timeout, raw_content)


def _request_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise ConfigError(f"timeout={timeout!r}: expected a positive finite number of seconds, or None")
    return float(timeout)
