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
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from opentelemetry import context as otel_context

from .. import _semconv as sc
from .._guard import report_failure
from ._foreign import foreign_request_span
from ._openai_patch import IN_OPENAI_CALL
from ._request import DEFAULT_PORTS, ForeignSpanRequest, RequestTelemetry, error_type_of
from ._runtime import Runtime
from ._sse_scanner import SseScanner

__all__ = ["async_httpx_send", "httpx_send"]

_PATHS = {"/v1/chat/completions": sc.OPERATION_CHAT, "/v1/completions": sc.OPERATION_TEXT_COMPLETION}
_MAX_JSON_BODY = 16 * 1024 * 1024
_SUPPRESS_KEYS = tuple(
    key
    for key in (
        getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None),
        getattr(otel_context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None),
    )
    if key is not None
)
_OWN_ATTRIBUTES = frozenset({"_inner", "_observer"})

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _operation(request: Any) -> str | None:
    """The GenAI operation of a request we trace, or None for everything else."""
    if request.method != "POST":
        return None
    path: str = request.url.path
    for suffix, operation in _PATHS.items():
        if path.endswith(suffix):
            return operation
    return None


def _suppressed() -> bool:
    """OpenTelemetry's ``suppress_instrumentation`` keys (`IN_OPENAI_CALL` is checked before)."""
    get_value = otel_context.get_value
    return any(get_value(key) for key in _SUPPRESS_KEYS)


def _request_params(request: Any) -> dict[str, Any]:
    """The JSON body's parameters; {} for a body that is streamed, unread or not JSON."""
    try:
        params = json.loads(request.content) if request.content else {}
    except Exception:
        return {}
    return params if isinstance(params, dict) else {}


def _start(rt: Runtime, request: Any) -> tuple[RequestTelemetry | None, list[str] | None]:
    """The request's telemetry, and the trace headers added to ``request`` (to take off again)."""
    telemetry: RequestTelemetry | None = None
    added: list[str] | None = None
    try:  # the `guard` contract, without a generator per request
        operation = _operation(request)
        if operation is None:
            return None, None
        params = _request_params(request)
        streaming = params.get("stream") is True
        foreign = foreign_request_span()
        if foreign is not None:  # another instrumentation made this call's span above the SDK
            telemetry = ForeignSpanRequest(rt, operation, params, foreign, streaming=streaming)
        else:
            url = request.url
            port = url.port or DEFAULT_PORTS.get(url.scheme)
            telemetry = RequestTelemetry(
                rt, operation, params, url.host or None, port, streaming=streaming, layer="httpx"
            )
        if rt.inject_traceparent and "traceparent" not in request.headers:
            added = _add_trace_headers(request.headers, telemetry.traceparent_headers())
    except Exception as exc:
        report_failure("httpx request start", exc)
    return telemetry, added


def _add_trace_headers(headers: Any, carrier: dict[str, str]) -> list[str]:
    added = []
    for key, value in carrier.items():
        if key not in headers:
            headers[key] = value
            added.append(key)
    return added


def _remove_trace_headers(request: Any, added: list[str]) -> None:
    """Sent: take the headers off the caller's request, so a reused request carries no stale parent."""
    try:
        headers = request.headers
        for key in added:
            headers.pop(key, None)
    except Exception as exc:
        report_failure("httpx traceparent removal", exc)


class _Observer:
    """The state of one raw response body being read; finalizes its request once."""

    __slots__ = ("body", "encoded", "request", "scanner", "size")

    def __init__(self, request: RequestTelemetry, response: Any) -> None:
        self.request = request
        headers = response.headers
        self.encoded = headers.get("content-encoding", "identity").lower() not in ("identity", "")
        is_sse = headers.get("content-type", "").startswith("text/event-stream")
        scanner = (
            SseScanner(capture=request.rt.capture_content, choices=request.choice_count) if is_sse else None
        )
        self.scanner = scanner
        self.body: list[bytes] | None = None if is_sse else []
        self.size = 0

    def block_hook(self) -> Callable[[bytes], None]:
        """What to call per block: the scanner's own `feed` for an SSE body (one call, not two)."""
        if self.scanner is not None and not self.encoded:
            return self.scanner.feed
        return self.on_block

    def on_block(self, block: bytes) -> None:
        """A JSON body's block (an unencoded SSE body goes to the scanner's `feed` directly)."""
        if self.encoded:
            return
        if self.body is not None:
            self.body.append(block)
            self.size += len(block)
            if self.size > _MAX_JSON_BODY:
                self.body = None

    def finish(self, error_type: str | None) -> None:
        try:  # the `guard` contract, without a generator per request
            if self.scanner is not None:
                _finish_sse(self.request, self.scanner, error_type)
            elif self.body is not None and not self.encoded:
                _finish_json(self.request, b"".join(self.body), error_type)
            else:
                self.request.finish(error_type=error_type)
        except Exception as exc:
            report_failure("httpx response finalize", exc)
            self.request.finish(error_type=error_type)

    def fail(self, exc: BaseException) -> None:
        self.finish(sc.ERROR_TYPE_STREAM_CLOSED if isinstance(exc, GeneratorExit) else error_type_of(exc))


def _finish_sse(
    request: RequestTelemetry, scanner: SseScanner, error_type: str | None, *, timed: bool = True
) -> None:
    """``timed=False``: the body arrived in one read, so its events carry no timing of their own
    (no time to first chunk, no per-chunk intervals); counts, reasons and usage still hold."""
    scanner.flush()
    summary = scanner.summary(chat=request.operation == sc.OPERATION_CHAT)
    request.finish(
        error_type=error_type or summary.error_type,
        response_id=summary.response_id,
        response_model=summary.response_model,
        reasons=summary.reasons,
        input_tokens=summary.input_tokens,
        output_tokens=summary.output_tokens,
        first_ns=scanner.first_ns if timed else 0,
        intervals=scanner.intervals if timed else None,
        chunks=scanner.chunks,
        texts=summary.texts,
    )


def _finish_json(request: RequestTelemetry, content: bytes, error_type: str | None) -> None:
    try:
        body = json.loads(content) if content else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        request.finish_response(body, error_type=error_type)
    else:
        request.finish(error_type=error_type)


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
            _finish_sse(request, scanner, None, timed=False)
        else:
            _finish_json(request, content, None)
    except Exception as exc:
        report_failure("httpx response", exc)
        request.finish()


class _ObservedStream:
    """What both observed byte streams share: the wrapped stream and its observer, everything
    else read through from the wrapped stream, and the span ended if the body is dropped unread."""

    def __init__(self, inner: Any, observer: _Observer) -> None:
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
        observer = self._observer
        try:
            on_block = observer.block_hook()
            for block in self._inner:
                try:
                    on_block(block)
                except Exception as exc:
                    report_failure("raw stream bookkeeping", exc)
                yield block
        except BaseException as exc:
            observer.fail(exc)
            raise
        observer.finish(None)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._observer.finish(sc.ERROR_TYPE_STREAM_CLOSED)


class _ObservedAsync(_ObservedStream):
    """`_ObservedSync` for ``async for``."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        observer = self._observer
        try:
            on_block = observer.block_hook()
            async for block in self._inner:
                try:
                    on_block(block)
                except Exception as exc:
                    report_failure("raw stream bookkeeping", exc)
                yield block
        except BaseException as exc:
            observer.fail(exc)
            raise
        observer.finish(None)

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
        response.stream = cls(response.stream, _Observer(request, response))
    except Exception as exc:
        report_failure("httpx stream wrap", exc)
        request.finish()


def _prepare(
    rt: Runtime, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[RequestTelemetry | None, Any, list[str] | None]:
    """The request's telemetry, the request, and the trace headers added to it; no telemetry
    while instrumentation is suppressed or ``send`` got no request."""
    if _suppressed():
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
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            telemetry.fail(exc)
            raise
        finally:
            if added:
                _remove_trace_headers(request, added)
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
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            telemetry.fail(exc)
            raise
        finally:
            if added:
                _remove_trace_headers(request, added)
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
