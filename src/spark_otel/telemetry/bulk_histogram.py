"""Histograms recorded outside the SDK's per-value path, and the metric reader that exports them.

Through the OpenTelemetry SDK every value is one ``Histogram.record`` call (a `Measurement`,
attribute cleaning and hashing, a lock: about 9 µs here, more inside a real call). A request
records four histograms (duration, two token counts, time to first chunk) and a stream one more
per chunk, so those records cost more than the rest of the instrumentation together. A
`BulkHistogram` takes a value (`record`, attributes keyed once per shape by the caller) or a
whole stream's values (`record_many`, one pass of C-level `bisect`); `BulkHistogramReader`, the
reader `configure()` builds, adds its points to every collection, and exports them when the
SDK itself collected nothing. This is what the OpenTelemetry specification calls a
MetricProducer, which the Python SDK does not offer yet.

The points are the ones the SDK's explicit-bucket aggregation makes from the same values, in
either temporality, with the same cardinality limit and the same exemplars (the last value per
bucket, with the request's span; the provider's exemplar filter decides, as for the SDK's own),
tested side by side. A meter provider spark-otel did not build has no such reader; the
instrumentation then records through the SDK, one value at a time (`bulk_histograms_of`).
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, AlwaysOnExemplarFilter, Exemplar, MeterProvider
from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricExporter,
    MetricsData,
    PeriodicExportingMetricReader,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.metrics.view import DefaultAggregation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext
from opentelemetry.util.types import AttributeValue

from .._clock import real_wall_ns

__all__ = [
    "BulkHistogram",
    "BulkHistogramReader",
    "attributes_key",
    "bulk_histograms_of",
    "register_bulk_histograms",
]

_logger = logging.getLogger(__name__)

CARDINALITY_LIMIT = 2000
"""Distinct attribute sets per histogram and reader before the overflow point (the SDK's default)."""
_OVERFLOW_ATTRIBUTES: dict[str, AttributeValue] = {"otel.metric.overflow": True}
_OVERFLOW_KEY = frozenset(_OVERFLOW_ATTRIBUTES.items())


ExemplarPolicy = Literal["off", "on", "trace_based"]
"""Which values become exemplars, as the provider's exemplar filter says (always off, always
on, or while the request's span is sampled: the SDK's default)."""
Key = frozenset[tuple[str, AttributeValue]]
_Sample = tuple[float, int, int | None, int | None]
"""An exemplar as recorded: (value, time ns, span id, trace id); made an `Exemplar` at collection."""


class _Point:
    """What one attribute set received, for one reader: since its last collection (delta) or
    since its first value (cumulative); exemplars since the last collection either way."""

    __slots__ = ("attributes", "counts", "exemplars", "max", "min", "start_ns", "sum")

    def __init__(self, attributes: Mapping[str, AttributeValue], buckets: int, start_ns: int) -> None:
        self.attributes = dict(attributes)
        self.counts = [0] * buckets
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.start_ns = start_ns
        self.exemplars: dict[int, _Sample] = {}

    def add(self, counts: Counter[int], total: float, low: float, high: float) -> None:
        own = self.counts
        for index, count in counts.items():
            own[index] += count
        self.sum += total
        self.min = min(self.min, low)
        self.max = max(self.max, high)

    def add_one(self, index: int, value: float) -> None:
        self.counts[index] += 1
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)


class _ReaderState:
    """One reader's view of one histogram: delta readers take and reset, cumulative ones keep.

    A point starts at the reader's previous delta collection, or at its first value.
    """

    __slots__ = ("points", "previous_collection_ns", "temporality")

    def __init__(self, temporality: AggregationTemporality) -> None:
        self.temporality = temporality
        self.points: dict[Key, _Point] = {}
        self.previous_collection_ns = 0

    def point(self, key: Key, attributes: Mapping[str, AttributeValue], buckets: int, now_ns: int) -> _Point:
        point = self.points.get(key)
        if point is None:
            if len(self.points) >= CARDINALITY_LIMIT:  # as the SDK: new sets go to one overflow point
                key, attributes = _OVERFLOW_KEY, _OVERFLOW_ATTRIBUTES
                point = self.points.get(key)
            if point is None:
                point = self.points[key] = _Point(attributes, buckets, self.previous_collection_ns or now_ns)
        return point


def attributes_key(attributes: Mapping[str, AttributeValue]) -> Key:
    """The key a set of attributes accumulates under: callers that reuse one attribute dict
    compute it once."""
    return frozenset(attributes.items())


class BulkHistogram:
    """An explicit-bucket histogram fed one value or a batch of values per call; thread-safe."""

    def __init__(self, name: str, *, unit: str, description: str, boundaries: Sequence[float]) -> None:
        self.name = name
        self.unit = unit
        self.description = description
        self.boundaries = tuple(float(b) for b in boundaries)
        self._bucket_of = partial(bisect_left, self.boundaries)  # (b[i-1], b[i]] as the SDK buckets
        self._buckets = len(self.boundaries) + 1
        self._lock = threading.Lock()
        self._states: list[_ReaderState] = []
        self.exemplars: ExemplarPolicy = "trace_based"
        """Set from the provider's exemplar filter when its readers attach (`register_bulk_histograms`)."""

    def _exemplar(self, value: float, span: SpanContext | None, now_ns: int) -> _Sample | None:
        policy = self.exemplars
        if policy == "off" or (policy == "trace_based" and (span is None or not span.trace_flags.sampled)):
            return None
        if span is None or not span.is_valid:
            return (value, now_ns, None, None)
        return (value, now_ns, span.span_id, span.trace_id)

    def record(
        self,
        value: float,
        attributes: Mapping[str, AttributeValue],
        key: Key | None = None,
        span: SpanContext | None = None,
    ) -> None:
        """Record one value; ``key`` is `attributes_key` of ``attributes`` when the caller keeps
        it, ``span`` the request's span for an exemplar. A negative or non-finite value is
        dropped, as the SDK drops it."""
        if not 0 <= value < math.inf:  # NaN fails both comparisons
            return
        index = self._bucket_of(value)
        if key is None:
            key = frozenset(attributes.items())
        now = real_wall_ns()
        exemplar = self._exemplar(value, span, now) if span is not None or self.exemplars == "on" else None
        buckets = self._buckets
        with self._lock:
            for state in self._states:
                point = state.points.get(key)
                if point is None:
                    point = state.point(key, attributes, buckets, now)
                point.add_one(index, value)
                if exemplar is not None:
                    point.exemplars[index] = exemplar

    def attach(self, temporality: AggregationTemporality) -> _ReaderState:
        """A reader's own accumulation; values recorded from now on reach it."""
        state = _ReaderState(temporality)
        with self._lock:
            self._states.append(state)
        return state

    def record_many(
        self,
        values: Iterable[float],
        attributes: Mapping[str, AttributeValue],
        key: Key | None = None,
        span: SpanContext | None = None,
    ) -> None:
        """Record every value with the same attributes; negative and non-finite ones are dropped,
        as the SDK drops them. The last value is the exemplar of its bucket."""
        batch = values if isinstance(values, list) else list(values)
        if not batch:
            return
        low, total = min(batch), sum(batch)
        if low < 0 or not math.isfinite(total):  # a NaN hides from min and max, not from sum
            batch = [v for v in batch if v >= 0 and math.isfinite(v)]
            if not batch:
                return
            low, total = min(batch), sum(batch)
        high = max(batch)
        counts = Counter(map(self._bucket_of, batch))
        if key is None:
            key = frozenset(attributes.items())
        now = real_wall_ns()
        last = batch[-1]
        exemplar = self._exemplar(last, span, now) if span is not None or self.exemplars == "on" else None
        buckets = self._buckets
        with self._lock:
            for state in self._states:
                point = state.point(key, attributes, buckets, now)
                point.add(counts, total, low, high)
                if exemplar is not None:
                    point.exemplars[self._bucket_of(last)] = exemplar

    def collect(self, state: _ReaderState, now_ns: int) -> Metric | None:
        """The reader's points as the SDK would report them at ``now_ns``; None when it has none."""
        delta = state.temporality is AggregationTemporality.DELTA
        with self._lock:
            points = list(state.points.values())
            if delta:
                state.points = {}
                state.previous_collection_ns = now_ns
            data = [
                HistogramDataPoint(
                    attributes=p.attributes,  # the point's own copy, never changed after
                    start_time_unix_nano=p.start_ns,
                    time_unix_nano=now_ns,
                    count=sum(p.counts),
                    sum=p.sum,
                    bucket_counts=tuple(p.counts),
                    explicit_bounds=self.boundaries,
                    min=p.min,
                    max=p.max,
                    exemplars=[Exemplar({}, *p.exemplars[i]) for i in sorted(p.exemplars)],
                )
                for p in points
            ]
            for p in points:  # exemplars are what came since the last collection, in both temporalities
                p.exemplars = {}
        if not data:
            return None
        return Metric(
            name=self.name,
            description=self.description,
            unit=self.unit,
            data=Histogram(data_points=data, aggregation_temporality=state.temporality),
        )


@dataclass(frozen=True)
class BulkHistograms:
    """The bulk histograms one meter provider's readers export, under one instrumentation scope."""

    scope: InstrumentationScope
    histograms: tuple[BulkHistogram, ...]

    def all(self) -> tuple[BulkHistogram, ...]:
        return self.histograms

    def named(self, name: str) -> BulkHistogram:
        """The histogram of metric ``name``."""
        return next(h for h in self.histograms if h.name == name)


class BulkHistogramReader(PeriodicExportingMetricReader):
    """A periodic reader whose every export also carries the points of `BulkHistograms`.

    They join the ResourceMetrics the SDK collected, under their own scope (merged with the
    SDK's metrics of that scope); when the SDK collected nothing, they are exported on their
    own, under ``resource`` (the provider's).
    """

    def __init__(
        self,
        exporter: MetricExporter,
        histograms: BulkHistograms,
        export_interval_millis: float | None = None,
        *,
        export_timeout_millis: float | None = None,
        resource: Resource | None = None,
    ) -> None:
        super().__init__(
            exporter,
            export_interval_millis=export_interval_millis,
            export_timeout_millis=export_timeout_millis,
        )
        self._resource = resource or Resource.get_empty()
        self._collection = threading.local()  # per collecting thread: did the SDK export this time?
        temporality = next(  # the temporality the exporter prefers for histograms
            (t for cls, t in self._instrument_class_temporality.items() if issubclass(cls, SdkHistogram)),
            AggregationTemporality.CUMULATIVE,
        )
        aggregation = next(
            (a for cls, a in self._instrument_class_aggregation.items() if issubclass(cls, SdkHistogram)),
            DefaultAggregation(),
        )
        self.takes_bulk = isinstance(aggregation, DefaultAggregation)
        """False when the exporter wants histograms aggregated otherwise (e.g. exponential buckets,
        ``OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION``): its provider then records
        every value through the SDK instead (see `build_providers`)."""
        self._bulk = histograms
        self._states = [(h, h.attach(temporality)) for h in histograms.all()] if self.takes_bulk else []

    def collect(self, timeout_millis: float = 10_000) -> None:  # type: ignore[misc]
        """The SDK's collection (its `collect` is final only in its typing), then, when the SDK
        found nothing to export, the bulk points on their own: a runner that records only
        requests has nothing else."""
        self._collection.sdk_exported = False
        super().collect(timeout_millis)
        if self._collection.sdk_exported:
            return
        try:
            produced = self._produce()
        except Exception:  # as below: never raise into the SDK's export thread
            _logger.exception("spark_otel: collecting the bulk histograms failed")
            return
        if produced:
            scope = self._bulk.scope
            alone = ScopeMetrics(scope=scope, metrics=produced, schema_url=scope.schema_url or "")
            metrics = MetricsData(
                resource_metrics=[
                    ResourceMetrics(resource=self._resource, scope_metrics=[alone], schema_url="")
                ]
            )
            super()._receive_metrics(metrics, timeout_millis=timeout_millis)

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        self._collection.sdk_exported = True
        try:
            metrics = self._produce()
            if metrics:
                metrics_data = self._merge(metrics_data, metrics)
        except Exception:  # never cost the SDK's own points
            _logger.exception("spark_otel: adding the bulk histograms to a metric export failed")
        super()._receive_metrics(metrics_data, timeout_millis, **kwargs)

    def _produce(self) -> list[Metric]:
        now = real_wall_ns()
        produced = (histogram.collect(state, now) for histogram, state in self._states)
        return [m for m in produced if m is not None]

    def _merge(self, metrics_data: MetricsData, metrics: list[Metric]) -> MetricsData:
        scope = self._bulk.scope
        first, *rest = metrics_data.resource_metrics
        scopes = list(first.scope_metrics)
        for i, scoped in enumerate(scopes):
            if scoped.scope.name == scope.name and scoped.scope.version == scope.version:
                scopes[i] = ScopeMetrics(
                    scope=scoped.scope, metrics=[*scoped.metrics, *metrics], schema_url=scoped.schema_url
                )
                break
        else:
            scopes.append(ScopeMetrics(scope=scope, metrics=metrics, schema_url=scope.schema_url or ""))
        merged = ResourceMetrics(resource=first.resource, scope_metrics=scopes, schema_url=first.schema_url)
        return MetricsData(resource_metrics=[merged, *rest])


_registry: weakref.WeakKeyDictionary[MeterProvider, BulkHistograms] = weakref.WeakKeyDictionary()


def register_bulk_histograms(meter_provider: MeterProvider, histograms: BulkHistograms) -> None:
    """Declare that every reader of ``meter_provider`` is a `BulkHistogramReader` of ``histograms``
    that `takes_bulk`; the histograms take the provider's exemplar filter."""
    exemplar_filter = getattr(getattr(meter_provider, "_sdk_config", None), "exemplar_filter", None)
    policy: ExemplarPolicy = "trace_based"
    if isinstance(exemplar_filter, AlwaysOffExemplarFilter):
        policy = "off"
    elif isinstance(exemplar_filter, AlwaysOnExemplarFilter):
        policy = "on"
    for histogram in histograms.all():
        histogram.exemplars = policy
    _registry[meter_provider] = histograms


def bulk_histograms_of(meter_provider: object) -> BulkHistograms | None:
    """The bulk histograms ``meter_provider`` exports; None for a provider spark-otel did not build."""
    if not isinstance(meter_provider, MeterProvider):
        return None
    return _registry.get(meter_provider)
