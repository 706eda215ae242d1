"""What one `instrument()` call set up: where requests record, and the attribute sets they share."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from .. import _semconv as sc
from .._version import __version__
from ..telemetry import Telemetry, current_telemetry
from ..telemetry.bulk_histogram import BulkHistogram, BulkHistograms, attributes_key, bulk_histograms_of
from ..telemetry.instruments import Instruments, instruments
from ._config import InstrumentationConfig

__all__ = ["MetricSets", "RequestHistograms", "RequestShape", "Runtime", "ShapeKey"]

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
