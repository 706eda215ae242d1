"""Backfilled cells as spans with their historical start and end, for a collector or the store."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from ... import _semconv as sc
from ...model import Cell
from ...records.span_codec import cell_error, cell_span_attributes, cell_span_name

__all__ = ["FixedIdGenerator", "UnsentCounter", "export_cells_as_spans"]


def export_cells_as_spans(cells: Iterable[Cell], tracer_provider: Any) -> int:
    """Emit each cell as a span with its historical start and end (span id = the cell's uid).

    ``tracer_provider`` should be one made for the backfill with `FixedIdGenerator`, so the
    span ids (and so the uids the store exporter or collector derive) are the cells' uids.
    """
    tracer = tracer_provider.get_tracer("spark_otel.receivers.backfill", schema_url=sc.SCHEMA_URL)
    ids = getattr(tracer_provider, "id_generator", None)
    count = 0
    for cell in cells:
        if isinstance(ids, FixedIdGenerator):
            ids.next_uid(cell.uid)
        span = tracer.start_span(
            cell_span_name(cell.eval_name),
            start_time=cell.start_unix_ns,
            attributes=cell_span_attributes(cell),
        )
        error = cell_error(cell.status)  # ends as a live cell's span does (error.type is in its attributes)
        if error is not None:
            span.set_status(error[1])
        span.end(end_time=cell.end_unix_ns)
        count += 1
    return count


class FixedIdGenerator(IdGenerator):
    """Span and trace ids derived from the next cell's uid; random once none is queued."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._uid: str | None = None

    def next_uid(self, uid: str) -> None:
        self._uid = uid

    def generate_span_id(self) -> int:
        if self._uid is None:
            return self._random.generate_span_id()
        uid, self._uid = self._uid, None
        return int(uid[:16], 16) or 1

    def generate_trace_id(self) -> int:
        if self._uid is None:
            return self._random.generate_trace_id()
        return int(hashlib.sha256(self._uid.encode()).hexdigest()[:32], 16) or 1


class UnsentCounter(SpanExporter):
    """``inner``, counting the spans it could not send (a collector down or refusing them): the
    SDK's batch processor only logs them, and a backfill must not say it sent what it lost."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.unsent = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.unsent += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)
