"""One request's span and metrics: opened when the call starts, finalized exactly once.

Both patch layers (openai and raw httpx) describe a call the same way: the request parameters
at start, then an outcome (a response, a stream's totals, or an error) at the end. Everything
that costs (attribute dicts, histogram records, message JSON) happens here, once per request,
never per chunk.
"""

from __future__ import annotations

import asyncio
import json
import threading
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from .. import _clock
from .. import _semconv as sc
from .._clock import NS_PER_S
from .._guard import report_failure
from .._version import __version__
from ..cells import CellState, current_cell
from ..telemetry import Telemetry, current_telemetry
from ..telemetry.bulk_histogram import BulkHistogram, BulkHistograms, attributes_key, bulk_histograms_of
from ..telemetry.instruments import Instruments, instruments
from ._config import InstrumentationConfig
from .request_notes import RequestNotes, current_request_notes

__all__ = ["DEFAULT_PORTS", "RequestTelemetry", "Runtime", "error_type_of", "request_content_messages"]

_PROPAGATOR = TraceContextTextMapPropagator()
DEFAULT_PORTS = {"https": 443, "http": 80}
"""``server.port`` when the URL names none."""
_MAX_SHAPES = 1024
ShapeKey = tuple[str, str | None, str | None, int | None, str, bool]
"""Operation, request model, server host and port, layer, streaming: what `RequestShape` keys on."""


class Runtime:
    """What one `instrument()` call set up; `active` is the gate every wrapper checks first.

    Wrappers outlive `uninstrument()` in bound methods the SDK caches (``with_raw_response``),
    so turning `active` off is what makes them pass-throughs. The switches of `config` are
    copied to plain slots, and the attribute sets requests share are built once and kept in
    `shapes` (see `RequestShape`), so a request reads no setting and rebuilds no common dict.

    A provider `instrument()` was not given is not captured: the runtime follows spark-otel's
    telemetry in force (`current_telemetry()`), or, with none, the global providers. Each
    request compares the telemetry in force with the one `tracer` and `instruments` were made
    for (one identity check) and re-resolves both after a `spark_otel.configure()`, so a
    reconfigure never leaves requests writing to shut-down providers.
    """

    __slots__ = (
        "_meter_provider",
        "_tracer_provider",
        "active",
        "bound",
        "bulk",
        "capture_content",
        "chunk_metrics",
        "config",
        "follows",
        "include_usage",
        "inject_traceparent",
        "instruments",
        "provider_name",
        "shapes",
        "tracer",
    )

    def __init__(
        self,
        config: InstrumentationConfig,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
    ) -> None:
        self.config = config
        self.capture_content = config.capture_content
        self.include_usage = config.include_usage
        self.inject_traceparent = config.inject_traceparent
        self.chunk_metrics = config.chunk_metrics
        self.provider_name = config.provider_name
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self.follows = tracer_provider is None or meter_provider is None
        self.bound: Telemetry | None = None
        self.tracer: Tracer
        self.instruments: Instruments
        self.bulk: RequestHistograms | None
        self._bind(current_telemetry() if self.follows else None)
        self.shapes: dict[ShapeKey, RequestShape] = {}
        self.active = True

    def refresh(self) -> None:
        """Re-resolve the tracer and instruments if the telemetry in force changed; hot path."""
        telemetry = current_telemetry()
        if telemetry is not self.bound:
            self._bind(telemetry)

    def _bind(self, telemetry: Telemetry | None) -> None:
        tracer_provider, meter_provider = self._tracer_provider, self._meter_provider
        if tracer_provider is None:  # a global placeholder hands over to the provider set later
            tracer_provider = trace.get_tracer_provider() if telemetry is None else telemetry.tracer_provider
        if meter_provider is None:
            meter_provider = metrics.get_meter_provider() if telemetry is None else telemetry.meter_provider
        self.tracer = trace.get_tracer(  # one scope for a request's span and its metrics
            sc.SCOPE_NAME,
            __version__,
            tracer_provider=tracer_provider,
            schema_url=sc.SCHEMA_URL,
        )
        self.instruments = instruments(meter_provider)
        bulk = bulk_histograms_of(meter_provider)  # None: the user's own provider, SDK records
        self.bulk = None if bulk is None else RequestHistograms.of(bulk)
        self.bound = telemetry  # last: a thread that sees it also sees the tracer and instruments

    def shape(self, key: ShapeKey) -> RequestShape:
        """The shared attributes of requests like this one, built on first use."""
        found = self.shapes.get(key)
        if found is None:
            found = RequestShape(self.provider_name, key)
            if len(self.shapes) < _MAX_SHAPES:  # a runner with unbounded models or hosts: no cache
                self.shapes[key] = found
        return found


@dataclass(frozen=True, slots=True)
class RequestHistograms:
    """The histograms a request records, taken in bulk on a provider spark-otel built."""

    duration: BulkHistogram
    tokens: BulkHistogram
    first_chunk: BulkHistogram
    chunks: BulkHistogram

    @classmethod
    def of(cls, bulk: BulkHistograms) -> RequestHistograms:
        return cls(
            duration=bulk.named(sc.GEN_AI_CLIENT_OPERATION_DURATION),
            tokens=bulk.named(sc.GEN_AI_CLIENT_TOKEN_USAGE),
            first_chunk=bulk.named(sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK),
            chunks=bulk.named(sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK),
        )


class RequestShape:
    """Span name and attribute dicts every request to one model, server and layer shares.

    Built once (`Runtime.shape`) and never mutated afterwards: the SDK copies the dicts it is
    given, so the same objects are handed to every span start and histogram record.
    """

    __slots__ = ("metric", "name", "outcomes", "span")

    def __init__(self, provider_name: str, key: ShapeKey) -> None:
        operation, model, host, port, layer, streaming = key
        metric: dict[str, AttributeValue] = {
            sc.GEN_AI_OPERATION_NAME: operation,
            sc.GEN_AI_PROVIDER_NAME: provider_name,
        }
        if model is not None:
            metric[sc.GEN_AI_REQUEST_MODEL] = model
        if host:
            metric[sc.SERVER_ADDRESS] = host
            if port is not None:
                metric[sc.SERVER_PORT] = port
        self.metric = metric
        span = dict(metric)
        span[sc.REQUEST_LAYER] = layer
        if streaming:
            span[sc.GEN_AI_REQUEST_STREAM] = True
        self.span = span
        self.name = f"{operation} {model}" if model is not None else operation
        self.outcomes: dict[str | None, MetricSets] = {}

    def outcome(self, response_model: str | None) -> MetricSets:
        """The metric attribute sets for answers from ``response_model`` (None: no model known)."""
        found = self.outcomes.get(response_model)
        if found is None:
            found = MetricSets(self.metric, response_model)
            if len(self.outcomes) < _MAX_SHAPES:
                self.outcomes[response_model] = found
        return found


class MetricSets:
    """The three attribute dicts a request's histograms are recorded with, and their bulk keys."""

    __slots__ = ("attributes", "input_key", "input_tokens", "key", "output_key", "output_tokens")

    def __init__(self, metric: dict[str, AttributeValue], response_model: str | None) -> None:
        attrs = metric if response_model is None else {**metric, sc.GEN_AI_RESPONSE_MODEL: response_model}
        self.attributes = attrs
        self.input_tokens = {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT}
        self.output_tokens = {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT}
        self.key = attributes_key(attrs)
        self.input_key = attributes_key(self.input_tokens)
        self.output_key = attributes_key(self.output_tokens)


def error_type_of(exc: BaseException) -> str:
    """Low-cardinality ``error.type``: the HTTP status for API errors, else the exception's name."""
    if isinstance(exc, asyncio.CancelledError):
        return sc.ERROR_TYPE_CANCELLED
    status = getattr(exc, "status_code", None)
    if status is None:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return str(status)
    return type(exc).__qualname__ or sc.ERROR_TYPE_OTHER


_mapping_types: dict[type, bool] = {dict: True}


def _is_mapping(obj: Any) -> bool:
    cls = type(obj)
    is_mapping = _mapping_types.get(cls)
    if is_mapping is None:  # an ABC check is slow; a type's answer never changes
        is_mapping = _mapping_types[cls] = isinstance(obj, Mapping)
    return is_mapping


def _get(obj: Any, key: str) -> Any:
    """Read ``key`` from an SDK model or a decoded JSON dict alike."""
    if _is_mapping(obj):
        return obj.get(key)
    return getattr(obj, key, None)


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, Sequence):
        parts: list[dict[str, Any]] = []
        for part in content:
            if _get(part, "type") == "text":
                parts.append({"type": "text", "content": _get(part, "text")})
            else:
                parts.append({"type": str(_get(part, "type") or "unknown")})
        return parts
    return []


def request_content_messages(operation: str, params: Mapping[str, Any]) -> str | None:
    """``gen_ai.input.messages`` JSON (semconv message shape) from the request parameters."""
    if operation == sc.OPERATION_CHAT:
        messages = params.get("messages")
        if not isinstance(messages, Sequence):
            return None
        shaped = [{"role": _get(m, "role"), "parts": _text_parts(_get(m, "content"))} for m in messages]
    else:
        prompt = params.get("prompt")
        if prompt is None:
            return None
        shaped = [{"role": "user", "parts": _text_parts(prompt if isinstance(prompt, str) else str(prompt))}]
    return json.dumps(shaped, default=str)


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
        if self.cell is not None:
            attrs.update(self.cell.request_attributes)
        self.notes: RequestNotes | None = current_request_notes()
        if rt.follows:
            rt.refresh()
        self.input_messages = request_content_messages(operation, params) if rt.capture_content else None
        self.span: Span = rt.tracer.start_span(
            shape.name, kind=SpanKind.CLIENT, attributes=attrs, start_time=_clock.wall_ns()
        )
        self.start_ns = _clock.real_monotonic_ns()

    # -- during the call ---------------------------------------------------------------------------
    def traceparent_headers(self) -> dict[str, str]:
        """The W3C headers that make the engine's server span a child of this request's span."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier

    # -- outcomes ----------------------------------------------------------------------------------
    def fail(self, exc: BaseException) -> None:
        """The call raised before a response (or stream) came back."""
        self.finish(error_type=error_type_of(exc))

    def finish_response(self, response: Any, *, error_type: str | None = None) -> None:
        """A complete (non-streamed) response: an SDK model or the decoded JSON body."""
        if _is_mapping(response):  # the decoded JSON body (raw layer)
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
            index = _get(choice, "index")
            index = index if isinstance(index, int) else position
            reason = _get(choice, "finish_reason")
            if reason is not None:
                reasons[index] = str(reason)
            if texts is not None:
                if self.operation == sc.OPERATION_CHAT:
                    text = _get(_get(choice, "message"), "content")
                else:
                    text = _get(choice, "text")
                texts[index] = [text] if isinstance(text, str) else []
        self.finish(
            error_type=error_type,
            response_id=response_id,
            response_model=response_model,
            reasons=reasons,
            input_tokens=_get(usage, "prompt_tokens"),
            output_tokens=_get(usage, "completion_tokens"),
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
            span.end(end_time=_clock.wall_ns())

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
        notes = self.notes
        if notes is not None and notes.error_type is not None:
            error_type = notes.error_type
        span = self.span
        model_key = response_model if isinstance(response_model, str) else None
        shape = self.shape
        sets = shape.outcomes.get(model_key) or shape.outcome(model_key)
        metric_attrs = sets.attributes
        if span.is_recording():
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
            if self.streaming:
                if first_ns:
                    attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (
                        _clock.to_model_ns(first_ns - self.start_ns) / NS_PER_S
                    )
                if chunks is not None:
                    attrs[sc.REQUEST_CHUNKS] = chunks
            if self.input_messages is not None:
                attrs[sc.GEN_AI_INPUT_MESSAGES] = self.input_messages
            if texts is not None:
                attrs[sc.GEN_AI_OUTPUT_MESSAGES] = self._output_messages(texts, reasons)
            if notes is not None and notes.attributes:
                attrs.update(notes.attributes)
            if error_type is not None:
                attrs[sc.ERROR_TYPE] = error_type
            span.set_attributes(attrs)
            if error_type is not None:
                span.set_status(Status(StatusCode.ERROR, error_type))

        rt = self.rt
        if self.streaming and first_ns and intervals and rt.chunk_metrics:
            try:  # a failure here must not cost the request's other metrics
                self._record_chunk_intervals(intervals, metric_attrs)
            except Exception as exc:
                report_failure("chunk metrics", exc)
        duration_s = _clock.to_model_ns(end_ns - self.start_ns) / NS_PER_S
        first_chunk_s = (
            _clock.to_model_ns(first_ns - self.start_ns) / NS_PER_S if self.streaming and first_ns else None
        )
        if rt.bulk is None:  # the user's own providers: one SDK record per value
            inst = rt.instruments
            duration_attrs = (
                metric_attrs if error_type is None else {**metric_attrs, sc.ERROR_TYPE: error_type}
            )
            inst.operation_duration.record(duration_s, duration_attrs)
            if input_tokens is not None:
                inst.token_usage.record(input_tokens, sets.input_tokens)
            if output_tokens is not None:
                inst.token_usage.record(output_tokens, sets.output_tokens)
            if first_chunk_s is not None:
                inst.time_to_first_chunk.record(first_chunk_s, metric_attrs)
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
                input_tokens=input_tokens, output_tokens=output_tokens, error_type=error_type
            )

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
        scale = _clock.time_scale() / NS_PER_S
        if rt.bulk is not None:  # a provider spark-otel built: the whole stream at once
            rt.bulk.chunks.record_many(
                [i * scale for i in intervals], metric_attrs, None, self.span.get_span_context()
            )
        else:  # one SDK record per chunk; the same attributes object every time
            record = rt.instruments.time_per_output_chunk.record
            for interval in intervals:
                record(interval * scale, metric_attrs)

    def _output_messages(self, texts: Mapping[int, list[str]], reasons: Mapping[int, str] | None) -> str:
        reasons = reasons or {}
        shaped = [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "".join(texts[index])}],
                "finish_reason": reasons.get(index, sc.FINISH_REASON_ERROR),
            }
            for index in sorted(texts)
        ]
        return json.dumps(shaped)


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
                )
        except Exception as exc:  # the `guard` contract, without a generator per request
            report_failure("request finalize beside another instrumentation", exc)


_NUMBER = (int, float)
_NUMERIC_PARAMS = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE),
    ("top_p", sc.GEN_AI_REQUEST_TOP_P),
    ("seed", sc.GEN_AI_REQUEST_SEED),
)
