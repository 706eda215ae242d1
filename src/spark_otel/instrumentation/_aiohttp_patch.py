"""Wrapper factory for ``aiohttp``'s ``ClientSession._request``: the raw HTTP layer of aiohttp.

Every call of a session (``session.post``, ``session.request``, ``async with session.post(...)``)
is one ``_request``, redirects included, which returns once the headers are in. It is patched
on the class, so sessions made before `instrument()` are covered; contrib's aiohttp-client
instrumentation adds a trace config in ``ClientSession.__init__`` instead, so the two never
touch the same attribute. The JSON body is read from the ``json=`` argument as given (no
parse), or from ``data=`` bytes.

aiohttp reads every body through the response's ``content`` (a ``StreamReader``):
``response.json()``, ``text()``, ``read()``, ``content.iter_any()``, ``async for line in
response.content``. That reader is swapped for a proxy whose reads hand back exactly what the
reader gave while a `BodyObserver` sees it; the span ends when the body's end has been read,
the response is released or closed before that (``stream_closed``), a read fails, or the
response is collected unread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt
from aiohttp.streams import AsyncStreamIterator, ChunkTupleAsyncStreamIterator, EofStream
from multidict import CIMultiDict
from yarl import URL

from .. import _semconv as sc
from .._guard import report_failure
from ._openai_patch import IN_OPENAI_CALL
from ._raw_http import (
    IN_RAW_CALL,
    BodyObserver,
    add_trace_headers,
    content_encoded,
    json_params,
    operation_of,
    start_request,
    suppressed,
)
from ._request import RequestTelemetry
from ._runtime import Runtime

__all__ = ["aiohttp_request"]

_LAYER = "aiohttp"

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _url(session: Any, str_or_url: Any) -> URL:
    """The URL the session will ask: its ``base_url`` joined where one is set."""
    build = getattr(session, "_build_url", None)
    return build(str_or_url) if build is not None else URL(str_or_url)


def _params(kwargs: dict[str, Any]) -> dict[str, Any]:
    body = kwargs.get("json")
    if body is not None:
        return body if isinstance(body, dict) else {}
    return json_params(kwargs.get("data"))


def _start(
    rt: Runtime, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> RequestTelemetry | None:
    """The request's telemetry; with ``inject_traceparent``, ``kwargs`` get headers of their own
    (a copy: the caller's mapping is never changed)."""
    try:  # the `guard` contract, without a generator per request
        method = args[0] if args else kwargs.get("method")
        if not isinstance(method, str) or method.upper() != "POST":
            return None
        url = _url(session, args[1] if len(args) > 1 else kwargs.get("str_or_url"))
        operation = operation_of("POST", url.path)
        if operation is None:
            return None
        telemetry = start_request(rt, operation, _params(kwargs), url.host or None, url.port, layer=_LAYER)
    except Exception as exc:
        report_failure("aiohttp request start", exc)
        return None
    if rt.inject_traceparent:
        try:
            headers = CIMultiDict(kwargs.get("headers") or {})
            if "traceparent" not in headers and "traceparent" not in session.headers:
                add_trace_headers(headers, telemetry.traceparent_headers())
                kwargs["headers"] = headers
        except Exception as exc:
            report_failure("aiohttp request start", exc)
    return telemetry


_MAX_PENDING_LINES = 64
_BLANK_LINES = frozenset({b"\n", b"\r\n"})


class _ObservedContent(wrapt.ObjectProxy):  # type: ignore[type-arg]  # subscripted only in wrapt 2, and >=1.16 is allowed
    """The response's ``StreamReader``; every read's bytes shown to the observer on the way.

    Lines read one at a time (``async for line in response.content``) are shown an event at a
    time: an SSE event is its lines and a blank one, and the decoder takes a whole event in one
    step (its fast path) where each line alone would cost a step of its own.
    """

    def __init__(self, content: Any, observer: BodyObserver) -> None:
        super().__init__(content)
        self._self_observer = observer
        self._self_hook = observer.block_hook()
        self._self_lines: list[bytes] = []

    def _self_feed(self, block: bytes) -> None:
        if block:
            try:
                self._self_hook(block)
            except Exception as exc:
                report_failure("raw stream bookkeeping", exc)

    def _self_flush(self) -> None:
        lines = self._self_lines
        if lines:
            block = b"".join(lines)
            lines.clear()
            self._self_feed(block)

    def _self_seen(self, data: bytes) -> bytes:
        """A block read: shown, and the span finished if it was the body's last."""
        self._self_flush()
        self._self_feed(data)
        if self.__wrapped__.at_eof():
            self._self_observer.finish(None)
        return data

    def _self_failed(self, exc: BaseException) -> None:
        self._self_flush()
        self._self_observer.fail(exc)

    def _self_ended(self, error_type: str) -> None:
        self._self_flush()
        self._self_observer.finish(error_type)

    def _self_line(self, data: bytes) -> None:
        """A line read: kept until its event's blank line, then the event shown whole."""
        lines = self._self_lines
        if data and data not in _BLANK_LINES and len(lines) < _MAX_PENDING_LINES:
            lines.append(data)  # an event under way
            return
        if lines:
            lines.append(data)
            block = b"".join(lines)
            lines.clear()
        else:
            block = data
        self._self_feed(block)
        if not data:  # the body's end
            self._self_observer.finish(None)

    async def readline(self, *args: Any, **kwargs: Any) -> bytes:
        try:
            data: bytes = await self.__wrapped__.readline(*args, **kwargs)
        except BaseException as exc:
            self._self_failed(exc)
            raise
        self._self_line(data)
        return data

    async def read(self, n: int = -1) -> bytes:
        try:
            data = await self.__wrapped__.read(n)
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_seen(data)

    async def readany(self) -> bytes:
        try:
            data = await self.__wrapped__.readany()
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_seen(data)

    async def readuntil(self, *args: Any, **kwargs: Any) -> bytes:
        try:
            data = await self.__wrapped__.readuntil(*args, **kwargs)
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_seen(data)

    async def readexactly(self, n: int) -> bytes:
        try:
            data = await self.__wrapped__.readexactly(n)
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_seen(data)

    async def readchunk(self) -> tuple[bytes, bool]:
        try:
            data, end = await self.__wrapped__.readchunk()
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_seen(data), end

    def read_nowait(self, n: int = -1) -> bytes:
        try:
            data = self.__wrapped__.read_nowait(n)
        except BaseException as exc:
            self._self_failed(exc)
            raise
        return self._self_seen(data)

    def __aiter__(self) -> _ObservedLines:
        return _ObservedLines(self)

    def iter_chunked(self, n: int) -> AsyncStreamIterator[bytes]:
        self.__wrapped__.set_read_chunk_size(n)
        return AsyncStreamIterator(lambda: self.read(n))

    def iter_any(self) -> AsyncStreamIterator[bytes]:
        return AsyncStreamIterator(self.readany)

    def iter_chunks(self) -> ChunkTupleAsyncStreamIterator:
        return ChunkTupleAsyncStreamIterator(self)  # type: ignore[arg-type]  # reads through the proxy

    def set_exception(self, *args: Any, **kwargs: Any) -> None:
        """What the response calls when it is released or closed before its body's end."""
        try:
            self.__wrapped__.set_exception(*args, **kwargs)
        finally:
            self._self_ended(sc.ERROR_TYPE_STREAM_CLOSED)

    def __del__(self) -> None:
        self._self_ended(sc.ERROR_TYPE_STREAM_ABANDONED)


class _ObservedLines:
    """``async for line in response.content``: aiohttp's own line iterator with the proxy's
    `readline` folded in (one coroutine a line, not two: this runs on every line of a stream)."""

    __slots__ = ("_content", "_readline")

    def __init__(self, content: _ObservedContent) -> None:
        self._content = content
        self._readline = content.__wrapped__.readline

    def __aiter__(self) -> _ObservedLines:
        return self

    async def __anext__(self) -> bytes:
        try:
            data: bytes = await self._readline()
        except EofStream:
            data = b""
        except BaseException as exc:
            self._content._self_failed(exc)
            raise
        self._content._self_line(data)
        if not data:
            raise StopAsyncIteration
        return data


def _observe(request: RequestTelemetry, response: Any, session: Any, kwargs: dict[str, Any]) -> None:
    """Swap the unread body's reader for an observing one; finalize now if that is not possible."""
    try:  # the `guard` contract, without a generator per request
        status = response.status
        if status >= 400:
            request.finish(error_type=str(status))
            return
        decompress = kwargs.get("auto_decompress")
        if decompress is None:
            decompress = getattr(session, "auto_decompress", True)
        headers = response.headers
        observer = BodyObserver(
            request, headers, encoded=not decompress and content_encoded(headers), layer=_LAYER
        )
        response.content = _ObservedContent(response.content, observer)
    except Exception as exc:
        report_failure("aiohttp stream wrap", exc)
        request.finish()


def aiohttp_request(rt: Runtime) -> Wrapper:
    """``ClientSession._request``: the span starts before the request goes out and ends with its body."""

    async def traced(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not rt.active or IN_OPENAI_CALL.get() or IN_RAW_CALL.get() or suppressed(http=False):
            return await wrapped(*args, **kwargs)
        telemetry = _start(rt, instance, args, kwargs)
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
        _observe(telemetry, response, instance, kwargs)
        return response

    return traced
