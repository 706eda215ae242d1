"""One request's span and metrics: opened when the call starts, finalized exactly once.

Both patch layers (openai and raw httpx) describe a call the same way: the request parameters
at start, then an outcome (a response, a stream's totals, or an error) at the end. Everything
that costs (attribute dicts, histogram records, message JSON) happens here, once per request,
never per chunk.
"""

from __future__ import annotations

import asyncio
import threading
from array import array
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from .. import _clock
from .. import _semconv as sc
from .._clock import NS_PER_S
from .._guard import report_failure
from ..cells import CellState, current_cell
from ..live_progress import ChunkStamps
from ..telemetry.instruments import Instruments
from ..time_budget import RequestStamps
from ._content import get_field, is_mapping, output_content_messages, request_content_messages
from ._runtime import MetricSets, RequestHistograms, Runtime
from .request_notes import RequestNotes, current_request_notes

__all__ = [
    "DEFAULT_PORTS",
    "ForeignSpanRequest",
    "RequestTelemetry",
    "error_type_of",
]

_PROPAGATOR = TraceContextTextMapPropagator()
DEFAULT_PORTS = {"https": 443, "http": 80}
"""``server.port`` when the URL names none."""


def error_type_of(exc: BaseException) -> str:
    """Low-cardinality ``error.type``: the HTTP status for API errors (openai's and httpx's
    ``status_code``, requests' ``response.status_code``, aiohttp's ``status``), else the
    exception's name."""
    if isinstance(exc, asyncio.CancelledError):
        return sc.ERROR_TYPE_CANCELLED
    status = getattr(exc, "status_code", None)
    if status is None:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        if status is None:
            status = getattr(exc, "status", None)
    if isinstance(status, int):
        return str(status)
    return type(exc).__qualname__ or sc.ERROR_TYPE_OTHER


def _finish_reasons(reasons: Mapping[int, str] | None, expected: int) -> list[str]:
    """One reason per choice position; a position with none received reports ``error``."""
    count = expected
    if reasons:
        count = max(count, max(reasons) + 1)
    if not reasons:
        return [sc.FINISH_REASON_ERROR] * count
    return [str(reasons.get(i) or sc.FINISH_REASON_ERROR) for i in range(count)]


class RequestTelemetry:
    """The span and metric attributes of one request, and its exactly-once finalization."""

    __slots__ = (
        "_once",
        "cell",
        "choice_count",
        "input_messages",
        "metric_attributes",
        "notes",
        "operation",
        "rt",
        "shape",
        "span",
        "start_ns",
        "start_wall_ns",
        "stream",
        "streaming",
    )

    def __init__(
        self,
        rt: Runtime,
        operation: str,
        params: Mapping[str, Any],
        host: str | None,
        port: int | None,
        *,
        streaming: bool,
        layer: str,
    ) -> None:
        self.rt = rt
        self.operation = operation
        self.streaming = streaming
        # A lock as a test-and-set flag: a deadline watchdog may close a stream from another
        # thread while the consumer's iteration fails, and only one of them may finalize.
        self._once = threading.Lock()
        get = params.get
        model = get("model")
        shape_key = (operation, model if isinstance(model, str) else None, host, port, layer, streaming)
        shape = rt.shapes.get(shape_key) or rt.shape(shape_key)
        self.shape = shape
        self.metric_attributes = shape.metric
        attrs = shape.span.copy()
        max_tokens = get("max_tokens")
        if max_tokens is None:
            max_tokens = get("max_completion_tokens")
        if isinstance(max_tokens, int):
            attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
        for key, name in _NUMERIC_PARAMS:
            value = get(key)
            if value is not None and isinstance(value, _NUMBER) and not isinstance(value, bool):
                attrs[name] = value
        n = get("n")
        self.choice_count = n if isinstance(n, int) and n > 0 else 1
        if self.choice_count != 1:
            attrs[sc.GEN_AI_REQUEST_CHOICE_COUNT] = self.choice_count
        stop = get("stop")
        if stop is not None:
            if isinstance(stop, str):
                attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [stop]
            elif isinstance(stop, list | tuple) and all(isinstance(s, str) for s in stop):
                attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = list(stop)
        self.cell: CellState | None = current_cell()
        self.stream: ChunkStamps | None = None
        if self.cell is not None:
            attrs.update(self.cell.request_attributes)
        self.notes: RequestNotes | None = current_request_notes()
        if rt.follows:
            rt.refresh()
        self.input_messages = request_content_messages(operation, params) if rt.capture_content else None
        self.start_wall_ns = _clock.wall_ns()
        self.span: Span = rt.tracer.start_span(
            shape.name, kind=SpanKind.CLIENT, attributes=attrs, start_time=self.start_wall_ns
        )
        self.start_ns = _clock.real_monotonic_ns()

    # -- during the call ---------------------------------------------------------------------------
    def traceparent_headers(self) -> dict[str, str]:
        """The W3C headers that make the engine's server span a child of this request's span."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier

    def watch(self, stream: ChunkStamps) -> None:
        """The response is a stream read through ``stream``: its chunks count in the cell's live
        progress while it runs (once per stream, not per chunk)."""
        self.stream = stream
        if self.cell is not None:
            self.cell.watch_stream(stream)

    # -- outcomes ----------------------------------------------------------------------------------
    def fail(self, exc: BaseException) -> None:
        """The call raised before a response (or stream) came back."""
        self.finish(error_type=error_type_of(exc))

    def finish_response(self, response: Any, *, error_type: str | None = None) -> None:
        """A complete (non-streamed) response: an SDK model or the decoded JSON body."""
        if is_mapping(response):  # the decoded JSON body (raw layer)
            get = response.get
            choices, usage, response_id, response_model = (
                get("choices"),
                get("usage"),
                get("id"),
                get("model"),
            )
        else:  # an SDK model (openai layer)
            choices = getattr(response, "choices", None)
            usage = getattr(response, "usage", None)
            response_id = getattr(response, "id", None)
            response_model = getattr(response, "model", None)
        reasons: dict[int, str] = {}
        texts: dict[int, list[str]] | None = {} if self.rt.capture_content else None
        for position, choice in enumerate(choices or ()):
            index = get_field(choice, "index")
            index = index if isinstance(index, int) else position
            reason = get_field(choice, "finish_reason")
            if reason is not None:
                reasons[index] = str(reason)
            if texts is not None:
                if self.operation == sc.OPERATION_CHAT:
                    text = get_field(get_field(choice, "message"), "content")
                else:
                    text = get_field(choice, "text")
                texts[index] = [text] if isinstance(text, str) else []
        self.finish(
            error_type=error_type,
            response_id=response_id,
            response_model=response_model,
            reasons=reasons,
            input_tokens=get_field(usage, "prompt_tokens"),
            output_tokens=get_field(usage, "completion_tokens"),
            texts=texts,
        )

    def finish(
        self,
        *,
        error_type: str | None = None,
        response_id: Any = None,
        response_model: Any = None,
        reasons: Mapping[int, str] | None = None,
        input_tokens: Any = None,
        output_tokens: Any = None,
        first_ns: int = 0,
        intervals: array[int] | None = None,
        chunks: int | None = None,
        texts: Mapping[int, list[str]] | None = None,
    ) -> None:
        """Record everything once; later calls (close after exhaustion, GC) do nothing."""
        if not self._once.acquire(blocking=False):
            return
        end_ns = _clock.real_monotonic_ns()
        span = self.span
        try:
            self._record(
                end_ns=end_ns,
                error_type=error_type,
                response_id=response_id,
                response_model=response_model,
                reasons=reasons,
                input_tokens=input_tokens if isinstance(input_tokens, int) else None,
                output_tokens=output_tokens if isinstance(output_tokens, int) else None,
                first_ns=first_ns,
                intervals=intervals,
                chunks=chunks,
                texts=texts,
            )
        except Exception as exc:  # the `guard` contract, without a generator per request
            report_failure("request finalize", exc)
        finally:
            try:  # a span processor that raises (the user's own) must not reach the user's call
                # From the same stamps as the duration metric: the span lasts exactly what it records.
                span.end(end_time=self.start_wall_ns + _clock.to_clock_ns(end_ns - self.start_ns))
            except Exception as exc:
                report_failure("request span end", exc)

    def _record(
        self,
        *,
        end_ns: int,
        error_type: str | None,
        response_id: Any,
        response_model: Any,
        reasons: Mapping[int, str] | None,
        input_tokens: int | None,
        output_tokens: int | None,
        first_ns: int,
        intervals: array[int] | None,
        chunks: int | None,
        texts: Mapping[int, list[str]] | None,
    ) -> None:
        """The outcome, from one set of stamps: on the span, in the metrics, in the cell."""
        notes = self.notes
        if notes is not None and notes.error_type is not None:
            error_type = notes.error_type
        model_key = response_model if isinstance(response_model, str) else None
        shape = self.shape
        sets = shape.outcomes.get(model_key) or shape.outcome(model_key)
        if not self.streaming:
            first_ns = 0  # only a stream has a first chunk
        first_chunk_s = _clock.to_clock_ns(first_ns - self.start_ns) / NS_PER_S if first_ns else None
        if self.span.is_recording():
            self._set_span_outcome(
                error_type=error_type,
                response_id=response_id,
                response_model=response_model,
                reasons=reasons,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                first_chunk_s=first_chunk_s,
                chunks=chunks,
                texts=texts,
            )
        rt = self.rt
        if first_ns and intervals and rt.chunk_metrics:
            try:  # a failure here must not cost the request's other metrics
                self._record_chunk_intervals(intervals, sets.attributes)
            except Exception as exc:
                report_failure("chunk metrics", exc)
        duration_s = _clock.to_clock_ns(end_ns - self.start_ns) / NS_PER_S
        if rt.bulk is None:
            self._record_sdk(
                rt.instruments,
                sets,
                error_type=error_type,
                duration_s=duration_s,
                first_chunk_s=first_chunk_s,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
            )
        else:
            self._record_bulk(
                rt.bulk,
                sets,
                error_type=error_type,
                duration_s=duration_s,
                first_chunk_s=first_chunk_s,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
            )
        if self.cell is not None:
            self.cell.add_request(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                error_type=error_type,
                stamps=RequestStamps(self.start_ns, first_ns, end_ns, self.streaming),
                stream=self.stream,
            )

    def _set_span_outcome(
        self,
        *,
        error_type: str | None,
        response_id: Any,
        response_model: Any,
        reasons: Mapping[int, str] | None,
        input_tokens: int | None,
        output_tokens: int | None,
        first_chunk_s: float | None,
        chunks: int | None,
        texts: Mapping[int, list[str]] | None,
    ) -> None:
        """The response's attributes in one `set_attributes` call (a recording span only: the
        dict, reasons and message JSON cost, and a dropped span would throw them away)."""
        attrs: dict[str, AttributeValue] = {
            sc.GEN_AI_RESPONSE_FINISH_REASONS: _finish_reasons(reasons, self.choice_count),
        }
        if isinstance(response_id, str):
            attrs[sc.GEN_AI_RESPONSE_ID] = response_id
        if isinstance(response_model, str):
            attrs[sc.GEN_AI_RESPONSE_MODEL] = response_model
        if input_tokens is not None:
            attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
        if first_chunk_s is not None:
            attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = first_chunk_s
        if self.streaming and chunks is not None:
            attrs[sc.REQUEST_CHUNKS] = chunks
        if self.input_messages is not None:
            attrs[sc.GEN_AI_INPUT_MESSAGES] = self.input_messages
        if texts is not None:
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = output_content_messages(texts, reasons)
        notes = self.notes
        if notes is not None and notes.attributes:
            attrs.update(notes.attributes)
        if error_type is not None:
            attrs[sc.ERROR_TYPE] = error_type
        span = self.span
        span.set_attributes(attrs)
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR, error_type))

    def _record_sdk(
        self,
        inst: Instruments,
        sets: MetricSets,
        *,
        error_type: str | None,
        duration_s: float,
        first_chunk_s: float | None,
        input_tokens: int | None,
        output_tokens: int | None,
    ) -> None:
        """The user's own providers: one SDK record per value."""
        attrs = sets.attributes
        inst.operation_duration.record(
            duration_s, attrs if error_type is None else {**attrs, sc.ERROR_TYPE: error_type}
        )
        if input_tokens is not None:
            inst.token_usage.record(input_tokens, sets.input_tokens)
        if output_tokens is not None:
            inst.token_usage.record(output_tokens, sets.output_tokens)
        if first_chunk_s is not None:
            inst.time_to_first_chunk.record(first_chunk_s, attrs)

    def _record_bulk(
        self,
        bulk: RequestHistograms,
        sets: MetricSets,
        *,
        error_type: str | None,
        duration_s: float,
        first_chunk_s: float | None,
        input_tokens: int | None,
        output_tokens: int | None,
    ) -> None:
        """A provider spark-otel built: each value in one bulk record, keyed once per shape, with
        the request's own span as its exemplar (see `telemetry.bulk_histogram`)."""
        span = self.span.get_span_context()
        if error_type is None:
            bulk.duration.record(duration_s, sets.attributes, sets.key, span)
        else:
            bulk.duration.record(duration_s, {**sets.attributes, sc.ERROR_TYPE: error_type}, None, span)
        if input_tokens is not None:
            bulk.tokens.record(input_tokens, sets.input_tokens, sets.input_key, span)
        if output_tokens is not None:
            bulk.tokens.record(output_tokens, sets.output_tokens, sets.output_key, span)
        if first_chunk_s is not None:
            bulk.first_chunk.record(first_chunk_s, sets.attributes, sets.key, span)

    def _record_chunk_intervals(self, intervals: array[int], metric_attrs: dict[str, AttributeValue]) -> None:
        rt = self.rt
        scale = _clock.rate() / NS_PER_S
        if rt.bulk is not None:  # a provider spark-otel built: the whole stream at once
            rt.bulk.chunks.record_many(
                [i * scale for i in intervals], metric_attrs, None, self.span.get_span_context()
            )
        else:  # one SDK record per chunk; the same attributes object every time
            record = rt.instruments.time_per_output_chunk.record
            for interval in intervals:
                record(interval * scale, metric_attrs)


class ForeignSpanRequest(RequestTelemetry):
    """A call whose span another GenAI instrumentation made (it wrapped outside spark-otel's).

    spark-otel puts the cell's attributes (and a deadline helper's notes) on that span and
    counts the call in the cell; it records no span attribute of its own, no metric, and never
    ends the span, so the call has one span and one set of GenAI metrics (see `_foreign`).
    """

    __slots__ = ()

    def __init__(
        self, rt: Runtime, operation: str, params: Mapping[str, Any], span: Span, *, streaming: bool
    ) -> None:
        self.rt = rt
        self.operation = operation
        self.streaming = streaming
        self._once = threading.Lock()
        n = params.get("n")
        self.choice_count = n if isinstance(n, int) and n > 0 else 1
        self.cell = current_cell()
        self.notes = current_request_notes()
        self.input_messages = None
        self.span = span
        if self.cell is not None:
            span.set_attributes(self.cell.request_attributes)
        self.start_ns = _clock.real_monotonic_ns()

    def finish(
        self,
        *,
        error_type: str | None = None,
        input_tokens: Any = None,
        output_tokens: Any = None,
        **_outcome: Any,
    ) -> None:
        if not self._once.acquire(blocking=False):
            return
        try:
            notes = self.notes
            if notes is not None and notes.attributes:
                self.span.set_attributes(notes.attributes)
            if self.cell is not None:
                self.cell.add_request(
                    input_tokens=input_tokens if isinstance(input_tokens, int) else None,
                    output_tokens=output_tokens if isinstance(output_tokens, int) else None,
                    error_type=notes.error_type if notes is not None and notes.error_type else error_type,
                    # The other instrumentation saw the chunks: in the budget the call is unsplit.
                    stamps=RequestStamps(self.start_ns, 0, _clock.real_monotonic_ns(), streaming=False),
                )
        except Exception as exc:  # the `guard` contract, without a generator per request
            report_failure("request finalize beside another instrumentation", exc)


_NUMBER = (int, float)
_NUMERIC_PARAMS = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE),
    ("top_p", sc.GEN_AI_REQUEST_TOP_P),
    ("seed", sc.GEN_AI_REQUEST_SEED),
)
