"""Wrapper factories for the openai SDK's ``chat.completions.create`` and ``completions.create``.

Each factory returns ``traced(wrapped, instance, args, kwargs)`` for `wrapt`. The wrapper opens
one span per call (covering the SDK's retries), marks the context so the raw httpx layer below
stays quiet, and wraps a returned stream in a proxy that finalizes when the stream ends.

``with_raw_response`` and ``with_streaming_response`` call the same ``create`` with an
``X-Stainless-Raw-Response`` header and hand back the HTTP response object instead of a parsed
model. Rather than proxy those response objects (the contrib instrumentation's recurring bug,
contrib#4032/#4113), the wrapper steps aside for them and the raw httpx layer, which sees the
same bytes, makes the one span.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import set_span_in_context

from .. import _semconv as sc
from .._guard import guard, report_failure
from ._foreign import foreign_request_span, past_foreign_wrappers
from ._request import DEFAULT_PORTS, ForeignSpanRequest, RequestTelemetry
from ._runtime import Runtime
from ._stream import AsyncStreamProxy, StreamState, SyncStreamProxy

__all__ = [
    "IN_OPENAI_CALL",
    "async_chat_completions_create",
    "async_completions_create",
    "chat_completions_create",
    "completions_create",
]

# Set while an instrumented openai call runs: the raw httpx layer then makes no span of its own.
IN_OPENAI_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "spark_otel_in_openai_call", default=False
)
_RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


_servers: dict[int, tuple[Any, str | None, int | None]] = {}
_MAX_SERVERS = 256


def _server(instance: Any) -> tuple[str | None, int | None]:
    """Host and port of the client's base URL (never the URL itself: it may carry a path or secrets).

    Parsed once per URL object: the cache holds the URL itself, so its id cannot be reused while
    cached, and a client whose ``base_url`` is reassigned gets a new entry.
    """
    url = instance._client.base_url  # a property: the module-level client computes it per read
    found = _servers.get(id(url))
    if found is not None and found[0] is url:
        return found[1], found[2]
    host, port = url.host or None, url.port or DEFAULT_PORTS.get(url.scheme)
    if len(_servers) >= _MAX_SERVERS:
        _servers.clear()
    _servers[id(url)] = (url, host, port)
    return host, port


def _start(
    rt: Runtime, operation: str, instance: Any, kwargs: dict[str, Any]
) -> tuple[RequestTelemetry | None, dict[str, Any]]:
    """Open the request's span and decide the kwargs to send; on any failure, the user's kwargs."""
    request: RequestTelemetry | None = None
    try:  # the `guard` contract, without a generator per call
        streaming = kwargs.get("stream") is True
        foreign = foreign_request_span()
        if foreign is not None:  # another instrumentation wraps outside: its span is the call's
            request = ForeignSpanRequest(rt, operation, kwargs, foreign, streaming=streaming)
        else:
            host, port = _server(instance)
            request = RequestTelemetry(rt, operation, kwargs, host, port, streaming=streaming, layer="openai")
        if (streaming and rt.include_usage) or rt.inject_traceparent:
            sent = dict(kwargs)
            if streaming and rt.include_usage:
                _include_usage(sent)
            if rt.inject_traceparent:
                headers = kwargs.get("extra_headers") or {}
                sent["extra_headers"] = {**request.traceparent_headers(), **headers}
            return request, sent
    except Exception as exc:
        report_failure("openai request start", exc)
    return request, kwargs


def _include_usage(kwargs: dict[str, Any]) -> None:
    """``stream_options.include_usage = True`` unless the caller set ``include_usage`` (setdefault)."""
    extra_body = kwargs.get("extra_body")
    if isinstance(extra_body, Mapping) and "stream_options" in extra_body:
        return
    options = kwargs.get("stream_options")
    if options is None or not isinstance(options, Mapping):
        kwargs["stream_options"] = {"include_usage": True}
    elif "include_usage" not in options:
        kwargs["stream_options"] = {**options, "include_usage": True}


def _raw_response_kwargs(rt: Runtime, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A raw-response call gets its span from the httpx layer; only usage injection happens here."""
    if not (rt.include_usage and kwargs.get("stream") is True):
        return kwargs
    with guard("openai include_usage"):
        sent = dict(kwargs)
        _include_usage(sent)
        return sent
    return kwargs


def _wrap_stream(request: RequestTelemetry, result: Any, proxy: type[Any]) -> Any:
    try:
        return proxy(result, StreamState(request))
    except Exception as exc:
        report_failure("openai stream wrap", exc)
    request.finish(error_type=None)
    return result


def _finish(request: RequestTelemetry, result: Any, proxy: type[Any]) -> Any:
    if request.streaming:
        return _wrap_stream(request, result, proxy)
    try:
        request.finish_response(result)  # finalizes the request
    except Exception as exc:
        report_failure("openai response", exc)
        request.finish()
    return result


def _attach(request: RequestTelemetry) -> object | None:
    """Make the request's span current for the call (the SDK's retries, a raw layer below)."""
    try:
        return otel_context.attach(set_span_in_context(request.span))
    except Exception as exc:
        report_failure("openai span context", exc)
    return None


def _detach(token: object | None) -> None:
    if token is None:
        return
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception as exc:
        report_failure("openai span context", exc)


def _make_sync(operation: str, rt: Runtime) -> Wrapper:
    def traced(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not rt.active:
            return wrapped(*args, **kwargs)
        headers = kwargs.get("extra_headers")
        if headers and _RAW_RESPONSE_HEADER in headers:  # a raw-response call
            return wrapped(*args, **_raw_response_kwargs(rt, kwargs))
        request, sent = _start(rt, operation, instance, kwargs)
        if request is None:
            return wrapped(*args, **kwargs)
        token = IN_OPENAI_CALL.set(True)
        otel_token = _attach(request)
        try:
            result = past_foreign_wrappers(wrapped)(*args, **sent)
        except BaseException as exc:
            request.fail(exc)
            raise
        finally:
            _detach(otel_token)
            IN_OPENAI_CALL.reset(token)
        return _finish(request, result, SyncStreamProxy)

    return traced


def _make_async(operation: str, rt: Runtime) -> Wrapper:
    async def traced(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not rt.active:
            return await wrapped(*args, **kwargs)
        headers = kwargs.get("extra_headers")
        if headers and _RAW_RESPONSE_HEADER in headers:  # a raw-response call
            return await wrapped(*args, **_raw_response_kwargs(rt, kwargs))
        request, sent = _start(rt, operation, instance, kwargs)
        if request is None:
            return await wrapped(*args, **kwargs)
        token = IN_OPENAI_CALL.set(True)
        otel_token = _attach(request)
        try:
            result = await past_foreign_wrappers(wrapped)(*args, **sent)
        except BaseException as exc:
            request.fail(exc)
            raise
        finally:
            _detach(otel_token)
            IN_OPENAI_CALL.reset(token)
        return _finish(request, result, AsyncStreamProxy)

    return traced


def chat_completions_create(rt: Runtime) -> Wrapper:
    return _make_sync(sc.OPERATION_CHAT, rt)


def async_chat_completions_create(rt: Runtime) -> Wrapper:
    return _make_async(sc.OPERATION_CHAT, rt)


def completions_create(rt: Runtime) -> Wrapper:
    return _make_sync(sc.OPERATION_TEXT_COMPLETION, rt)


def async_completions_create(rt: Runtime) -> Wrapper:
    return _make_async(sc.OPERATION_TEXT_COMPLETION, rt)
