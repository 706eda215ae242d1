"""Histograms recorded many values at a time, and the metric reader that exports them.

A stream's ``gen_ai.client.operation.time_per_output_chunk`` is one value per chunk. Through
the OpenTelemetry SDK every value is one ``Histogram.record`` call (a `Measurement`, attribute
cleaning and hashing, a lock: about 9 µs here), several times the cost of watching the chunk
itself. A `BulkHistogram` takes a whole stream's values in one call and buckets them in one
pass of C-level `bisect`; `BulkHistogramReader`, the reader `configure()` builds, adds its
points to every collection of the SDK's own. This is what the OpenTelemetry specification
calls a MetricProducer, which the Python SDK does not offer yet.

The points are the ones the SDK's explicit-bucket aggregation makes from the same values, in
either temporality, with the same cardinality limit (tested side by side). A meter provider
spark-otel did not build has no such reader; the instrumentation then records through the
SDK, one value at a time (`bulk_histograms_of` tells which).
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
from typing import Any

from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics import MeterProvider
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
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.util.types import AttributeValue

from .._clock import real_wall_ns

__all__ = ["BulkHistogram", "BulkHistogramReader", "bulk_histograms_of", "register_bulk_histograms"]

_logger = logging.getLogger(__name__)

CARDINALITY_LIMIT = 2000
"""Distinct attribute sets per histogram and reader before the overflow point (the SDK's default)."""
_OVERFLOW_ATTRIBUTES: dict[str, AttributeValue] = {"otel.metric.overflow": True}
_OVERFLOW_KEY = frozenset(_OVERFLOW_ATTRIBUTES.items())


class _Point:
    """What one attribute set received, for one reader: since its last collection (delta) or
    since its first value (cumulative)."""

    __slots__ = ("attributes", "counts", "max", "min", "start_ns", "sum")

    def __init__(self, attributes: Mapping[str, AttributeValue], buckets: int, start_ns: int) -> None:
        self.attributes = dict(attributes)
        self.counts = [0] * buckets
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.start_ns = start_ns

    def add(self, counts: Counter[int], total: float, low: float, high: float) -> None:
        own = self.counts
        for index, count in counts.items():
            own[index] += count
        self.sum += total
        self.min = min(self.min, low)
        self.max = max(self.max, high)


class _ReaderState:
    """One reader's view of one histogram: delta readers take and reset, cumulative ones keep.

    A point starts at the reader's previous delta collection, or at its first value.
    """

    __slots__ = ("points", "previous_collection_ns", "temporality")

    def __init__(self, temporality: AggregationTemporality) -> None:
        self.temporality = temporality
        self.points: dict[frozenset[tuple[str, AttributeValue]], _Point] = {}
        self.previous_collection_ns = 0

    def point(
        self,
        key: frozenset[tuple[str, AttributeValue]],
        attributes: Mapping[str, AttributeValue],
        buckets: int,
        now_ns: int,
    ) -> _Point:
        point = self.points.get(key)
        if point is None:
            if len(self.points) >= CARDINALITY_LIMIT:  # as the SDK: new sets go to one overflow point
                key, attributes = _OVERFLOW_KEY, _OVERFLOW_ATTRIBUTES
                point = self.points.get(key)
            if point is None:
                point = self.points[key] = _Point(attributes, buckets, self.previous_collection_ns or now_ns)
        return point


class BulkHistogram:
    """An explicit-bucket histogram fed a batch of values per call; thread-safe."""

    def __init__(self, name: str, *, unit: str, description: str, boundaries: Sequence[float]) -> None:
        self.name = name
        self.unit = unit
        self.description = description
        self.boundaries = tuple(float(b) for b in boundaries)
        self._bucket_of = partial(bisect_left, self.boundaries)  # (b[i-1], b[i]] as the SDK buckets
        self._lock = threading.Lock()
        self._states: list[_ReaderState] = []

    def attach(self, temporality: AggregationTemporality) -> _ReaderState:
        """A reader's own accumulation; values recorded from now on reach it."""
        state = _ReaderState(temporality)
        with self._lock:
            self._states.append(state)
        return state

    def record_many(self, values: Iterable[float], attributes: Mapping[str, AttributeValue]) -> None:
        """Record every value with the same attributes; negative and non-finite ones are dropped,
        as the SDK drops them."""
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
        key = frozenset(attributes.items())
        now = real_wall_ns()
        buckets = len(self.boundaries) + 1
        with self._lock:
            for state in self._states:
                state.point(key, attributes, buckets, now).add(counts, total, low, high)

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
                )
                for p in points
            ]
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
    time_per_output_chunk: BulkHistogram

    def all(self) -> tuple[BulkHistogram, ...]:
        return (self.time_per_output_chunk,)


class BulkHistogramReader(PeriodicExportingMetricReader):
    """A periodic reader whose every export also carries the points of `BulkHistograms`.

    They join the ResourceMetrics the SDK collected, under their own scope (merged with the
    SDK's metrics of that scope). A collection in which the SDK found nothing exports nothing
    (the SDK's `collect` is final), so bulk points wait for the next one: the instrumentation
    records each stream's bulk values just before that request's SDK duration record, so
    a waiting point always has an SDK point coming after it, the final collection included.
    """

    def __init__(
        self,
        exporter: MetricExporter,
        histograms: BulkHistograms,
        export_interval_millis: float | None = None,
    ) -> None:
        super().__init__(exporter, export_interval_millis=export_interval_millis)
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

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
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
    that `takes_bulk`."""
    _registry[meter_provider] = histograms


def bulk_histograms_of(meter_provider: object) -> BulkHistograms | None:
    """The bulk histograms ``meter_provider`` exports; None for a provider spark-otel did not build."""
    if not isinstance(meter_provider, MeterProvider):
        return None
    return _registry.get(meter_provider)
