"""Backfilled cells as spans: the ids `FixedIdGenerator` derives from a cell's uid, the scope and
names the spans carry, and a provider without an id generator.

The span id is the cell's uid, so a collector or the store exporter derives the same uid as the
store path: these pin that derivation to the digit (the first 16 hex digits of the uid; the trace
id from its SHA-256), the fallback to random ids once no uid is queued, and 1 where a derivation
would give the invalid id 0.
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from spark_otel import _semconv as sc
from spark_otel.model import Cell, CellStatus
from spark_otel.receivers.backfill import FixedIdGenerator, export_cells_as_spans
from spark_otel.receivers.backfill import spans as spans_module

UID = "0123456789abcdef0123"  # longer than a span id: its first 16 hex digits are the span id


def _cell(uid: str) -> Cell:
    start = 1_789_639_200 * 10**9
    return Cell(
        uid=uid,
        eval_name="ev",
        cell_id="c",
        start_unix_ns=start,
        end_unix_ns=start + 10**9,
        status=CellStatus.OK,
        source="backfill",
    )


def test_ids_derive_from_the_queued_uid_once_then_are_random() -> None:
    ids = FixedIdGenerator()
    # nothing queued yet (a span the provider makes before any cell): random, valid ids
    assert 0 < ids.generate_span_id() < 2**64
    assert 0 < ids.generate_trace_id() < 2**128
    ids.next_uid(UID)
    assert ids.generate_trace_id() == int(hashlib.sha256(UID.encode()).hexdigest()[:32], 16)
    assert ids.generate_span_id() == 0x0123456789ABCDEF
    # the span id used the uid up: what follows is random, and valid
    span_ids = {ids.generate_span_id() for _ in range(3)}
    trace_ids = {ids.generate_trace_id() for _ in range(3)}
    assert len(span_ids) == 3
    assert all(0 < i < 2**64 for i in span_ids)
    assert len(trace_ids) == 3
    assert all(0 < i < 2**128 for i in trace_ids)


def test_a_uid_of_zeros_gives_span_id_1() -> None:
    ids = FixedIdGenerator()
    ids.next_uid("0" * 16)
    assert ids.generate_span_id() == 1


def test_a_digest_of_zeros_gives_trace_id_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SHA-256 opening with 128 zero bits is never seen, so the digest is faked: trace id 0 is
    invalid in OTel, and the generator must never hand it out."""
    zeros = SimpleNamespace(hexdigest=lambda: "0" * 64)
    monkeypatch.setattr(spans_module, "hashlib", SimpleNamespace(sha256=lambda data: zeros))
    ids = FixedIdGenerator()
    ids.next_uid(UID)
    assert ids.generate_trace_id() == 1


def test_spans_carry_the_backfills_scope_and_the_cells_span_name() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=FixedIdGenerator())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert export_cells_as_spans([_cell("00000000000000ab")], provider) == 1
    [span] = exporter.get_finished_spans()
    assert span.name == "cell ev"
    assert span.context is not None
    assert span.context.span_id == 0xAB
    assert span.instrumentation_scope is not None
    assert (span.instrumentation_scope.name, span.instrumentation_scope.schema_url) == (
        "spark_otel.receivers.backfill",
        sc.SCHEMA_URL,
    )


def test_a_provider_without_an_id_generator_still_takes_every_cell() -> None:
    """The API's no-op provider (no SDK configured) has no ``id_generator``: the cells are still
    counted as emitted, with whatever ids it gives."""
    cells = [_cell("00000000000000ab"), _cell("00000000000000cd")]
    assert export_cells_as_spans(cells, NoOpTracerProvider()) == 2
