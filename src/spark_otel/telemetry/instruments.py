"""The histograms and counters spark-otel records, created once per meter provider.

Bucket boundaries are given as advice (``explicit_bucket_boundaries_advisory``), so an SDK
view the user configures still wins.
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass

from opentelemetry import metrics
from opentelemetry.metrics import Counter, Histogram, MeterProvider, UpDownCounter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from .. import _semconv as sc
from .._version import __version__
from .bulk_histogram import BulkHistogram, BulkHistograms

_cache: weakref.WeakKeyDictionary[object, Instruments] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Instruments:
    operation_duration: Histogram
    token_usage: Histogram
    time_to_first_chunk: Histogram
    time_per_output_chunk: Histogram
    cell_duration: Histogram
    cell_tokens: Histogram
    cell_decode_rate: Histogram
    cells: Counter
    cell_deadline_hits: Counter
    cell_salvaged_findings: Counter
    cells_in_flight: UpDownCounter


_TPOC_DESCRIPTION = "Time between consecutive chunks of a streaming response, after the first."


def bulk_histograms() -> BulkHistograms:
    """The histograms a provider spark-otel builds takes in bulk: the per-chunk one.

    Same name, unit, description, buckets and scope as the SDK instrument it stands in for."""
    return BulkHistograms(
        scope=InstrumentationScope(sc.SCOPE_NAME, __version__, sc.SCHEMA_URL),
        time_per_output_chunk=BulkHistogram(
            sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK,
            unit="s",
            description=_TPOC_DESCRIPTION,
            boundaries=sc.DURATION_BUCKETS_S,
        ),
    )


def _create(meter_provider: MeterProvider | None) -> Instruments:
    meter = metrics.get_meter(
        sc.SCOPE_NAME, __version__, meter_provider=meter_provider, schema_url=sc.SCHEMA_URL
    )
    duration = list(sc.DURATION_BUCKETS_S)
    return Instruments(
        operation_duration=meter.create_histogram(
            sc.GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=duration,
        ),
        token_usage=meter.create_histogram(
            sc.GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(sc.TOKEN_BUCKETS),
        ),
        time_to_first_chunk=meter.create_histogram(
            sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time from issuing a streaming request to receiving its first chunk.",
            explicit_bucket_boundaries_advisory=duration,
        ),
        time_per_output_chunk=meter.create_histogram(
            sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK,
            unit="s",
            description=_TPOC_DESCRIPTION,
            explicit_bucket_boundaries_advisory=duration,
        ),
        cell_duration=meter.create_histogram(
            sc.CELL_DURATION,
            unit="s",
            description="Wall-clock duration of one eval cell.",
            explicit_bucket_boundaries_advisory=list(sc.CELL_DURATION_BUCKETS_S),
        ),
        cell_tokens=meter.create_histogram(
            sc.CELL_TOKENS,
            unit="{token}",
            description="Prompt (input) and completion (output) tokens of one cell.",
            explicit_bucket_boundaries_advisory=list(sc.TOKEN_BUCKETS),
        ),
        cell_decode_rate=meter.create_histogram(
            sc.CELL_DECODE_RATE_METRIC,
            unit="{token}/s",
            description="Completion tokens over the cell's wall clock: the cell's own load gauge.",
            explicit_bucket_boundaries_advisory=list(sc.DECODE_RATE_BUCKETS),
        ),
        cells=meter.create_counter(sc.CELL_COUNT, unit="{cell}", description="Cells finished, by status."),
        cell_deadline_hits=meter.create_counter(
            sc.CELL_DEADLINE_HITS, unit="{cell}", description="Cells cut off at their wall-clock ceiling."
        ),
        cell_salvaged_findings=meter.create_counter(
            sc.CELL_SALVAGED_FINDINGS_METRIC,
            unit="{finding}",
            description="Complete findings kept from cut-off streams.",
        ),
        cells_in_flight=meter.create_up_down_counter(
            sc.CELLS_IN_FLIGHT, unit="{cell}", description="Cells running now, per eval and engine."
        ),
    )


@functools.cache
def _global_instruments() -> Instruments:
    return _create(None)


def instruments(meter_provider: MeterProvider | None = None) -> Instruments:
    """The instruments for ``meter_provider`` (the global one when None), created on first use."""
    with _lock:
        if meter_provider is None:
            return _global_instruments()
        found = _cache.get(meter_provider)
        if found is None:
            found = _cache[meter_provider] = _create(meter_provider)
        return found
