"""The span encoding's edges (`records.span_codec`): a span the SDK never started or ended, or one
built without a span context (as a reader may build it), still reads back, with no invented
times or ids; and a cell that hit its ceiling with one finding salvaged is degraded."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.util.types import AttributeValue

from spark_otel import _semconv as sc
from spark_otel.model import CellStatus
from spark_otel.records.span_codec import (
    cell_end_attributes,
    cell_from_span,
    request_from_span,
    server_timing_from_span,
    window_from_span,
)

T0 = 1_760_000_000_000_000_000
PARENT = trace.SpanContext(
    trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736, span_id=0x00F067AA0BA902B7, is_remote=True
)
CELL: Mapping[str, AttributeValue] = {
    sc.SPAN_KIND_ATTR: sc.SPAN_KIND_CELL,
    sc.EVAL_NAME: "e",
    sc.CELL_ID: "c1",
}


def _span(attributes: Mapping[str, AttributeValue], start: int | None, end: int | None) -> ReadableSpan:
    """A span with no context of its own (its ids unknown), parented where it answers a request."""
    return ReadableSpan(
        name="span", context=None, parent=PARENT, attributes=attributes, start_time=start, end_time=end
    )


def test_a_span_without_times_reads_at_zero_and_one_not_ended_ends_where_it_started() -> None:
    for read in (cell_from_span, request_from_span, window_from_span):
        never = read(_span(CELL, None, None))
        assert (never.start_unix_ns, never.end_unix_ns) == (0, 0)
        open_ = read(_span(CELL, T0, None))
        assert (open_.start_unix_ns, open_.end_unix_ns) == (T0, T0)
    timing = {sc.VLLM_LATENCY_E2E: 1.0}
    assert server_timing_from_span(_span(timing, None, None)).arrival_unix_ns == 0
    assert server_timing_from_span(_span(timing, T0, None)).arrival_unix_ns == T0


def test_a_span_without_a_context_has_no_ids() -> None:
    cell = cell_from_span(_span(CELL, T0, T0 + 1))
    assert (cell.uid, cell.trace_id) == ("", None)
    request = request_from_span(_span({}, T0, T0 + 1))
    assert (request.uid, request.trace_id) == ("", None)
    timing = server_timing_from_span(_span({sc.VLLM_LATENCY_E2E: 1.0}, T0, T0 + 1))
    assert (timing.span_uid, timing.trace_id, timing.request_uid) == ("", "", "00f067aa0ba902b7")


def test_a_cell_that_hit_its_ceiling_is_degraded_from_its_first_salvaged_finding() -> None:
    def degraded(status: CellStatus, salvaged: int) -> object:
        return cell_end_attributes(status=status, elapsed_s=2.0, salvaged_findings=salvaged)[sc.CELL_DEGRADED]

    assert [degraded(CellStatus.DEADLINE, n) for n in (0, 1, 2)] == [False, True, True]
    assert degraded(CellStatus.OK, 1) is False
