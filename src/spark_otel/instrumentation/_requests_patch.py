"""Wrapper factory for ``requests``' ``HTTPAdapter.send``: the raw HTTP layer of ``requests``.

Every call (``requests.post``, ``Session.post``, ``Session.request``) ends in its adapter's
``send``, one per HTTP request. It is patched there rather than at ``Session.send``, where
contrib's requests instrumentation puts a plain function and takes it off again by its
``__wrapped__``: two patches of one attribute undo each other when removed out of order, and at
the adapter neither ever meets the other. Contrib's HTTP span, when on, is the parent of ours.

``HTTPAdapter.send`` returns once the headers are in (requests never lets urllib3 preload the
body); the body is read afterwards, by ``Session.send`` itself (``stream=False``) or by the
caller. The response's ``raw`` (urllib3's response) is wrapped in a proxy whose ``stream``
(what ``iter_content``, ``iter_lines``, ``content``, ``text`` and ``json()`` read through) and
``read`` hand every block on unchanged while a `BodyObserver` sees it; the span ends when the
body ends, the response is closed, reading fails, or the response is collected unread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import wrapt

from .. import _semconv as sc
from .._guard import report_failure
from ._openai_patch import IN_OPENAI_CALL
from ._raw_http import (
    IN_RAW_CALL,
    BodyObserver,
    add_trace_headers,
    content_encoded,
    json_params,
    observed_blocks,
    operation_of,
    remove_trace_headers,
    start_request,
    suppressed,
)
from ._request import DEFAULT_PORTS, RequestTelemetry
from ._runtime import Runtime

__all__ = ["requests_send"]

_LAYER = "requests"

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _start(rt: Runtime, request: Any) -> tuple[RequestTelemetry | None, list[str] | None]:
    """The request's telemetry, and the trace headers added to ``request`` (to take off again)."""
    telemetry: RequestTelemetry | None = None
    added: list[str] | None = None
    try:  # the `guard` contract, without a generator per request
        method = request.method
        if method != "POST":
            return None, None
        url = urlsplit(request.url)
        operation = operation_of(method, url.path)
        if operation is None:
            return None, None
        port = url.port or DEFAULT_PORTS.get(url.scheme)
        telemetry = start_request(
            rt, operation, json_params(request.body), url.hostname or None, port, layer=_LAYER
        )
        headers = request.headers
        if rt.inject_traceparent and "traceparent" not in headers:
            added = add_trace_headers(headers, telemetry.traceparent_headers())
    except Exception as exc:
        report_failure("requests request start", exc)
    return telemetry, added


class _ObservedRaw(wrapt.ObjectProxy):  # type: ignore[type-arg]  # subscripted only in wrapt 2, and >=1.16 is allowed
    """urllib3's response, every block it gives shown to the observer on the way."""

    def __init__(self, raw: Any, observer: BodyObserver, *, compressed: bool) -> None:
        super().__init__(raw)
        self._self_observer = observer
        self._self_compressed = compressed

    def _self_undecoded(self, decode_content: bool | None) -> None:
        """A read that keeps a compressed body compressed: its bytes are passed on unread."""
        if decode_content is None:
            decode_content = getattr(self.__wrapped__, "decode_content", False)
        if self._self_compressed and not decode_content:
            self._self_observer.encoded = True

    def stream(self, amt: int | None = 2**16, decode_content: bool | None = None) -> Iterator[bytes]:
        self._self_undecoded(decode_content)
        blocks = self.__wrapped__.stream(amt, decode_content=decode_content)
        return observed_blocks(blocks, self._self_observer, self)

    def read(
        self, amt: int | None = None, decode_content: bool | None = None, cache_content: bool = False
    ) -> Any:
        observer = self._self_observer
        self._self_undecoded(decode_content)
        try:
            data = self.__wrapped__.read(amt, decode_content=decode_content, cache_content=cache_content)
        except BaseException as exc:
            observer.fail(exc)
            raise
        try:
            if data:
                observer.block_hook()(data)
        except Exception as exc:
            report_failure("raw stream bookkeeping", exc)
        if amt is None or not data:
            observer.finish(None)
        return data

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_observer.finish(sc.ERROR_TYPE_STREAM_CLOSED)

    def __del__(self) -> None:
        self._self_observer.finish(sc.ERROR_TYPE_STREAM_ABANDONED)


def _observe(request: RequestTelemetry, response: Any) -> None:
    """Swap the unread body for an observing one; finalize now if that is not possible."""
    try:  # the `guard` contract, without a generator per request
        status = response.status_code
        if status >= 400:
            request.finish(error_type=str(status))
            return
        headers = response.headers
        observer = BodyObserver(request, headers, encoded=False, layer=_LAYER)
        response.raw = _ObservedRaw(response.raw, observer, compressed=content_encoded(headers))
    except Exception as exc:
        report_failure("requests stream wrap", exc)
        request.finish()


def requests_send(rt: Runtime) -> Wrapper:
    """``HTTPAdapter.send``: the span starts before the request goes out and ends with its body."""

    def traced(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not rt.active or IN_OPENAI_CALL.get() or IN_RAW_CALL.get() or suppressed(http=False):
            return wrapped(*args, **kwargs)
        request = args[0] if args else kwargs.get("request")
        if request is None:
            return wrapped(*args, **kwargs)
        telemetry, added = _start(rt, request)
        if telemetry is None:
            return wrapped(*args, **kwargs)
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            telemetry.fail(exc)
            raise
        finally:
            if added:
                remove_trace_headers(request.headers, added, layer=_LAYER)
        _observe(telemetry, response)
        return response

    return traced
