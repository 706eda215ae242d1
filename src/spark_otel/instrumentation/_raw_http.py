"""What the raw HTTP layers (httpx2/httpx, requests, aiohttp) share, written once.

Which requests are traced (POSTs to ``/v1/chat/completions`` and ``/v1/completions``), a
request's telemetry at its start (its own span, or the span of another GenAI instrumentation
wrapped outside), the W3C headers put on and taken off, and the observer of a response body: a
JSON body is kept (up to a cap) and decoded once at its end; an SSE body goes through an
`SseScanner` block by block, unchanged. Each layer only finds these in its library's objects.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context

from .. import _semconv as sc
from .._guard import report_failure
from ._foreign import foreign_request_span
from ._request import ForeignSpanRequest, RequestTelemetry, error_type_of
from ._runtime import Runtime
from ._sse_scanner import SseScanner

__all__ = [
    "IN_RAW_CALL",
    "MAX_JSON_BODY",
    "PATHS",
    "BodyObserver",
    "add_trace_headers",
    "aobserved_blocks",
    "finish_json",
    "finish_sse",
    "json_params",
    "observed_blocks",
    "operation_of",
    "remove_trace_headers",
    "start_request",
    "suppressed",
]

PATHS = {"/v1/chat/completions": sc.OPERATION_CHAT, "/v1/completions": sc.OPERATION_TEXT_COMPLETION}
MAX_JSON_BODY = 16 * 1024 * 1024
"""A JSON body longer than this is passed on unread: the call keeps its span, without usage."""

IN_RAW_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("spark_otel_in_raw_call", default=False)
"""Set while a raw layer's traced call runs: a client beneath it (an httpx transport over aiohttp,
say) makes no second span."""

_SUPPRESS_ALL = getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None)
_SUPPRESS_KEYS = tuple(
    key for key in (_SUPPRESS_ALL, getattr(otel_context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None)) if key
)


def operation_of(method: str, path: str) -> str | None:
    """The GenAI operation of a request we trace, or None for everything else."""
    if method != "POST":
        return None
    for suffix, operation in PATHS.items():
        if path.endswith(suffix):
            return operation
    return None


def suppressed(*, http: bool = True) -> bool:
    """OpenTelemetry's ``suppress_instrumentation`` keys. ``http=False`` honours only the key that
    suppresses all instrumentation: contrib's requests instrumentation sets the HTTP key around the
    send it wraps (against a second HTTP span), which must not cost the call its GenAI span."""
    get_value = otel_context.get_value
    if not http:
        return _SUPPRESS_ALL is not None and bool(get_value(_SUPPRESS_ALL))
    return any(get_value(key) for key in _SUPPRESS_KEYS)


def json_params(content: Any) -> dict[str, Any]:
    """A JSON body's parameters; {} for a body that is streamed, unread or not JSON."""
    try:
        if not content or not isinstance(content, bytes | bytearray | str):
            return {}
        params = json.loads(content)
    except Exception:
        return {}
    return params if isinstance(params, dict) else {}


def start_request(
    rt: Runtime,
    operation: str,
    params: Mapping[str, Any],
    host: str | None,
    port: int | None,
    *,
    layer: str,
) -> RequestTelemetry:
    """The request's telemetry: its own span, or the span another GenAI instrumentation made for
    this very call (see `_foreign`)."""
    streaming = params.get("stream") is True
    foreign = foreign_request_span()
    if foreign is not None:
        return ForeignSpanRequest(rt, operation, params, foreign, streaming=streaming)
    return RequestTelemetry(rt, operation, params, host, port, streaming=streaming, layer=layer)


def add_trace_headers(headers: Any, carrier: dict[str, str]) -> list[str]:
    """Put the W3C headers the request lacks on ``headers``; the names added (to take off again)."""
    added = []
    for key, value in carrier.items():
        if key not in headers:
            headers[key] = value
            added.append(key)
    return added


def remove_trace_headers(headers: Any, added: list[str], *, layer: str) -> None:
    """Sent: take the headers off the caller's request, so a reused request carries no stale parent."""
    try:
        for key in added:
            headers.pop(key, None)
    except Exception as exc:
        report_failure(f"{layer} traceparent removal", exc)


def content_encoded(headers: Any) -> bool:
    """Whether a body's bytes arrive compressed (``Content-Encoding`` other than identity)."""
    return str(headers.get("content-encoding", "identity")).lower() not in ("identity", "")


class BodyObserver:
    """The state of one response body being read; finalizes its request once.

    ``encoded``: the blocks it is shown are still compressed, so none is read (the call keeps its
    span and status, without usage).
    """

    __slots__ = ("body", "encoded", "ended", "layer", "request", "scanner", "size")

    def __init__(self, request: RequestTelemetry, headers: Any, *, encoded: bool, layer: str) -> None:
        self.request = request
        self.layer = layer
        self.encoded = encoded
        is_sse = str(headers.get("content-type", "")).startswith("text/event-stream")
        scanner = (
            SseScanner(capture=request.rt.capture_content, choices=request.choice_count) if is_sse else None
        )
        self.scanner = scanner
        if scanner is not None and not encoded:
            request.watch(scanner)
        self.body: list[bytes] | None = None if is_sse else []
        self.size = 0
        self.ended = False
        """Finalized: the close and the collection that follow a body's end decode nothing again
        (the request's own once-guard decides a race between threads)."""

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
            if self.size > MAX_JSON_BODY:
                self.body = None

    def finish(self, error_type: str | None) -> None:
        if self.ended:
            return
        self.ended = True
        try:  # the `guard` contract, without a generator per request
            if self.scanner is not None and not self.encoded:
                finish_sse(self.request, self.scanner, error_type)
            elif self.body is not None and not self.encoded:
                finish_json(self.request, b"".join(self.body), error_type)
            else:
                self.request.finish(error_type=error_type)
        except Exception as exc:
            report_failure(f"{self.layer} response finalize", exc)
            self.request.finish(error_type=error_type)

    def fail(self, exc: BaseException) -> None:
        self.finish(sc.ERROR_TYPE_STREAM_CLOSED if isinstance(exc, GeneratorExit) else error_type_of(exc))


def finish_sse(
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


def finish_json(request: RequestTelemetry, content: bytes, error_type: str | None) -> None:
    try:
        body = json.loads(content) if content else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        request.finish_response(body, error_type=error_type)
    else:
        request.finish(error_type=error_type)


def observed_blocks(blocks: Iterator[bytes], observer: BodyObserver, keep: object = None) -> Iterator[bytes]:
    """Every block of ``blocks``, unchanged; the observer sees each on the way and finalizes when
    they end, however they end. ``keep`` lives as long as the iteration (the wrapper whose
    collection would end the span as abandoned)."""
    try:
        on_block = observer.block_hook()
        for block in blocks:
            try:
                on_block(block)
            except Exception as exc:
                report_failure("raw stream bookkeeping", exc)
            yield block
    except BaseException as exc:
        observer.fail(exc)
        raise
    observer.finish(None)


async def aobserved_blocks(
    blocks: AsyncIterator[bytes], observer: BodyObserver, keep: object = None
) -> AsyncIterator[bytes]:
    """`observed_blocks` for ``async for``."""
    try:
        on_block = observer.block_hook()
        async for block in blocks:
            try:
                on_block(block)
            except Exception as exc:
                report_failure("raw stream bookkeeping", exc)
            yield block
    except BaseException as exc:
        observer.fail(exc)
        raise
    observer.finish(None)
