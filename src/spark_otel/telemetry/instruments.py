"""The histograms and counters spark-otel records, declared in one table (`SPECS`) and created
once per meter provider.

Bucket boundaries are given as advice (``explicit_bucket_boundaries_advisory``), so an SDK
view the user configures still wins.
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Literal

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
    cell_phase_duration: Histogram
    cell_tokens: Histogram
    cell_decode_rate: Histogram
    cells: Counter
    cell_deadline_hits: Counter
    cell_salvaged_findings: Counter
    cells_in_flight: UpDownCounter
    governor_wait: Histogram
    governor_slots: UpDownCounter
    governor_queue: UpDownCounter
    governor_lease_lapses: Counter
    governor_adaptive_holds: Counter


@dataclass(frozen=True, slots=True)
class InstrumentSpec:
    """One instrument: the `Instruments` field that holds it, its kind, name, unit and buckets."""

    field: str
    kind: Literal["histogram", "counter", "up_down_counter"]
    name: str
    unit: str
    description: str
    buckets: tuple[float, ...] = ()
    bulk: bool = False
    """Also taken in bulk on the providers spark-otel builds (`bulk_histograms`)."""


SPECS: tuple[InstrumentSpec, ...] = (
    InstrumentSpec(
        "operation_duration", "histogram", sc.GEN_AI_CLIENT_OPERATION_DURATION, "s",
        "GenAI operation duration.", sc.DURATION_BUCKETS_S, bulk=True,
    ),
    InstrumentSpec(
        "token_usage", "histogram", sc.GEN_AI_CLIENT_TOKEN_USAGE, "{token}",
        "Number of input and output tokens used.", sc.TOKEN_BUCKETS, bulk=True,
    ),
    InstrumentSpec(
        "time_to_first_chunk", "histogram", sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK, "s",
        "Time from issuing a streaming request to receiving its first chunk.", sc.DURATION_BUCKETS_S,
        bulk=True,
    ),
    InstrumentSpec(
        "time_per_output_chunk", "histogram", sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK, "s",
        "Time between consecutive chunks of a streaming response, after the first.", sc.DURATION_BUCKETS_S,
        bulk=True,
    ),
    InstrumentSpec(
        "cell_duration", "histogram", sc.CELL_DURATION, "s",
        "Wall-clock duration of one eval cell.", sc.CELL_DURATION_BUCKETS_S,
    ),
    InstrumentSpec(
        "cell_phase_duration", "histogram", sc.CELL_PHASE_DURATION, "s",
        "One phase of one cell's time budget (admission, first_token, decode, unsplit, other, scoring).",
        sc.CELL_DURATION_BUCKETS_S,
    ),
    InstrumentSpec(
        "cell_tokens", "histogram", sc.CELL_TOKENS, "{token}",
        "Prompt (input) and completion (output) tokens of one cell.", sc.TOKEN_BUCKETS,
    ),
    InstrumentSpec(
        "cell_decode_rate", "histogram", sc.CELL_DECODE_RATE_METRIC, "{token}/s",
        "Completion tokens over the cell's wall clock: the cell's own load gauge.", sc.DECODE_RATE_BUCKETS,
    ),
    InstrumentSpec("cells", "counter", sc.CELL_COUNT, "{cell}", "Cells finished, by status."),
    InstrumentSpec(
        "cell_deadline_hits", "counter", sc.CELL_DEADLINE_HITS, "{cell}",
        "Cells cut off at their wall-clock ceiling.",
    ),
    InstrumentSpec(
        "cell_salvaged_findings", "counter", sc.CELL_SALVAGED_FINDINGS_METRIC, "{finding}",
        "Complete findings kept from cut-off streams.",
    ),
    InstrumentSpec(
        "cells_in_flight", "up_down_counter", sc.CELLS_IN_FLIGHT, "{cell}",
        "Cells running now, per eval and engine.",
    ),
    InstrumentSpec(
        "governor_wait", "histogram", sc.GOVERNOR_QUEUE_WAIT, "s",
        "How long a governed cell waited for its lane before it started.", sc.CELL_DURATION_BUCKETS_S,
    ),
    InstrumentSpec(
        "governor_slots", "up_down_counter", sc.GOVERNOR_SLOTS, "{cell}",
        "Governed cells admitted and running, per engine (this process's; sum over processes).",
    ),
    InstrumentSpec(
        "governor_queue", "up_down_counter", sc.GOVERNOR_QUEUE, "{cell}",
        "Governed cells waiting for their lane, per engine (this process's; sum over processes).",
    ),
    InstrumentSpec(
        "governor_lease_lapses", "counter", sc.GOVERNOR_LEASE_LAPSES, "{cell}",
        "Governed cells whose lease lapsed while they ran (their process stopped or starved past "
        "it), per engine and eval; slot_taken: another cell was admitted in their slot meanwhile.",
    ),
    InstrumentSpec(
        "governor_adaptive_holds", "counter", sc.GOVERNOR_ADAPTIVE_HOLDS, "{cell}",
        "Cells the deadline-slack law held, per engine and reason (each cell once per reason).",
    ),
)  # fmt: skip
"""Every instrument spark-otel records, in one table: `Instruments` and the bulk histograms
are both made from it, so the two can never disagree on a name, unit or bucket."""


def bulk_histograms() -> BulkHistograms:
    """The histograms a provider spark-otel builds takes in bulk (the `SPECS` marked ``bulk``),
    with the same name, unit, description, buckets and scope as the SDK instruments they stand in for."""
    return BulkHistograms(
        InstrumentationScope(sc.SCOPE_NAME, __version__, sc.SCHEMA_URL),
        tuple(
            BulkHistogram(spec.name, unit=spec.unit, description=spec.description, boundaries=spec.buckets)
            for spec in SPECS
            if spec.bulk
        ),
    )


def _create(meter_provider: MeterProvider | None) -> Instruments:
    meter = metrics.get_meter(
        sc.SCOPE_NAME, __version__, meter_provider=meter_provider, schema_url=sc.SCHEMA_URL
    )
    made: dict[str, Any] = {}
    for spec in SPECS:
        if spec.kind == "histogram":
            made[spec.field] = meter.create_histogram(
                spec.name,
                unit=spec.unit,
                description=spec.description,
                explicit_bucket_boundaries_advisory=list(spec.buckets),
            )
        elif spec.kind == "counter":
            made[spec.field] = meter.create_counter(spec.name, unit=spec.unit, description=spec.description)
        else:
            made[spec.field] = meter.create_up_down_counter(
                spec.name, unit=spec.unit, description=spec.description
            )
    return Instruments(**made)


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
