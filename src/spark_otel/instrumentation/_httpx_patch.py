"""Wrapper factories for raw ``httpx2`` / ``httpx`` ``Client.send`` and ``AsyncClient.send``.

Eval runners that post to ``/v1/chat/completions`` or ``/v1/completions`` themselves get the
same span and metrics as openai SDK users. Every request goes through ``send`` (``post``,
``request`` and ``stream`` all end there); only POSTs to those two paths are traced, and none
while an instrumented openai call is running (that layer already made the span).

A non-streamed body is decoded once when ``send`` returns. A streamed body is observed by
swapping the response's byte stream for one that passes every block through unchanged while
an `SseScanner` counts and times the events; the span ends when the body is exhausted, the
response is closed, iteration fails, or the response is garbage collected unread.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .. import _semconv as sc
from .._guard import report_failure
from ._openai_patch import IN_OPENAI_CALL
from ._raw_http import (
    IN_RAW_CALL,
    BodyObserver,
    add_trace_headers,
    aobserved_blocks,
    content_encoded,
    finish_json,
    finish_sse,
    json_params,
    observed_blocks,
    operation_of,
    remove_trace_headers,
    start_request,
    suppressed,
)
from ._request import DEFAULT_PORTS, RequestTelemetry
from ._runtime import Runtime
from ._sse_scanner import SseScanner

__all__ = ["async_httpx_send", "httpx_send"]

_LAYER = "httpx"
_OWN_ATTRIBUTES = frozenset({"_inner", "_observer"})

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _start(rt: Runtime, request: Any) -> tuple[RequestTelemetry | None, list[str] | None]:
    """The request's telemetry, and the trace headers added to ``request`` (to take off again)."""
    telemetry: RequestTelemetry | None = None
    added: list[str] | None = None
    try:  # the `guard` contract, without a generator per request
        method = request.method
        if method != "POST":
            return None, None
        url = request.url
        operation = operation_of(method, url.path)
        if operation is None:
            return None, None
        port = url.port or DEFAULT_PORTS.get(url.scheme)
        telemetry = start_request(
            rt, operation, json_params(request.content), url.host or None, port, layer=_LAYER
        )
        if rt.inject_traceparent and "traceparent" not in request.headers:
            added = add_trace_headers(request.headers, telemetry.traceparent_headers())
    except Exception as exc:
        report_failure("httpx request start", exc)
    return telemetry, added


def _finish_read(request: RequestTelemetry, response: Any) -> None:
    """A response whose body ``send`` already read (``stream=False``)."""
    if response.status_code >= 400:
        request.finish(error_type=str(response.status_code))
        return
    try:  # the `guard` contract, without a generator per request
        content = response.content
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            scanner = SseScanner(capture=request.rt.capture_content, choices=request.choice_count)
            scanner.feed(content)
            finish_sse(request, scanner, None, timed=False)
        else:
            finish_json(request, content, None)
    except Exception as exc:
        report_failure("httpx response", exc)
        request.finish()


class _ObservedStream:
    """What both observed byte streams share: the wrapped stream and its observer, everything
    else read through from the wrapped stream, and the span ended if the body is dropped unread."""

    def __init__(self, inner: Any, observer: BodyObserver) -> None:
        self._inner = inner
        self._observer = observer

    def __getattr__(self, name: str) -> Any:
        if name in _OWN_ATTRIBUTES:  # not set yet (``__init__`` never ran): no recursion
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __del__(self) -> None:
        self._observer.finish(sc.ERROR_TYPE_STREAM_ABANDONED)


class _ObservedSync(_ObservedStream):
    """Passes every block through unchanged; the observer sees it on the way."""

    def __iter__(self) -> Iterator[bytes]:
        return observed_blocks(iter(self._inner), self._observer, self)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._observer.finish(sc.ERROR_TYPE_STREAM_CLOSED)


class _ObservedAsync(_ObservedStream):
    """`_ObservedSync` for ``async for``."""

    def __aiter__(self) -> AsyncIterator[bytes]:
        return aobserved_blocks(aiter(self._inner), self._observer, self)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._observer.finish(sc.ERROR_TYPE_STREAM_CLOSED)


@functools.cache
def _stream_classes(sync_base: type, async_base: type) -> tuple[type, type]:
    """Byte-stream wrappers that subclass the library's own base classes (httpx checks them);
    the observing methods come first, so they override the base's."""

    class ObservedSyncStream(_ObservedSync, sync_base):
        pass

    class ObservedAsyncStream(_ObservedAsync, async_base):
        pass

    return ObservedSyncStream, ObservedAsyncStream


def _observe_stream(request: RequestTelemetry, response: Any, module: Any, *, is_async: bool) -> None:
    """Swap the unread body for an observing stream; finalize now if that is not possible."""
    try:  # the `guard` contract, without a generator per request
        if response.status_code >= 400:
            request.finish(error_type=str(response.status_code))
            return
        sync_cls, async_cls = _stream_classes(module.SyncByteStream, module.AsyncByteStream)
        cls = async_cls if is_async else sync_cls
        headers = response.headers
        observer = BodyObserver(request, headers, encoded=content_encoded(headers), layer=_LAYER)
        response.stream = cls(response.stream, observer)
    except Exception as exc:
        report_failure("httpx stream wrap", exc)
        request.finish()


def _prepare(
    rt: Runtime, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[RequestTelemetry | None, Any, list[str] | None]:
    """The request's telemetry, the request, and the trace headers added to it; no telemetry
    while instrumentation is suppressed or ``send`` got no request."""
    if suppressed():
        return None, None, None
    request = args[0] if args else kwargs.get("request")
    if request is None:
        return None, None, None
    telemetry, added = _start(rt, request)
    return telemetry, request, added


def _make(module: Any, *, is_async: bool, rt: Runtime) -> Wrapper:
    """The ``send`` wrapper, made once per patch: each kind has its own, so no call pays for
    the choice."""
    return _async_send(module, rt) if is_async else _sync_send(module, rt)


def _sync_send(module: Any, rt: Runtime) -> Wrapper:
    """``Client.send``: the span starts before the request goes out and ends with its body."""

    def traced(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not rt.active or IN_OPENAI_CALL.get():  # the openai layer already has the span
            return wrapped(*args, **kwargs)
        telemetry, request, added = _prepare(rt, args, kwargs)
        if telemetry is None:
            return wrapped(*args, **kwargs)
        token = IN_RAW_CALL.set(True)
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            telemetry.fail(exc)
            raise
        finally:
            IN_RAW_CALL.reset(token)
            if added:
                remove_trace_headers(request.headers, added, layer=_LAYER)
        if kwargs.get("stream", False):
            _observe_stream(telemetry, response, module, is_async=False)
        else:
            _finish_read(telemetry, response)
        return response

    return traced


def _async_send(module: Any, rt: Runtime) -> Wrapper:
    """``AsyncClient.send``: `_sync_send`, awaited."""

    async def traced_async(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not rt.active or IN_OPENAI_CALL.get():  # the openai layer already has the span
            return await wrapped(*args, **kwargs)
        telemetry, request, added = _prepare(rt, args, kwargs)
        if telemetry is None:
            return await wrapped(*args, **kwargs)
        token = IN_RAW_CALL.set(True)
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            telemetry.fail(exc)
            raise
        finally:
            IN_RAW_CALL.reset(token)
            if added:
                remove_trace_headers(request.headers, added, layer=_LAYER)
        if kwargs.get("stream", False):
            _observe_stream(telemetry, response, module, is_async=True)
        else:
            _finish_read(telemetry, response)
        return response

    return traced_async


def httpx_send(module: Any, rt: Runtime) -> Wrapper:
    """``Client.send`` of ``module`` (``httpx2`` or ``httpx``)."""
    return _make(module, is_async=False, rt=rt)


def async_httpx_send(module: Any, rt: Runtime) -> Wrapper:
    """``AsyncClient.send`` of ``module`` (``httpx2`` or ``httpx``)."""
    return _make(module, is_async=True, rt=rt)
