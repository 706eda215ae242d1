"""A cell whose runner marks where its grading begins (`CellState.begin_scoring`, as the Inspect
hook does): the rest of the cell is its ``scoring`` phase, and the grader's requests are counted
apart from the cell's own tokens and decode rate. A cell with no mark is as it always was."""

from __future__ import annotations

import time

import pytest
from tests.support.metric_points import metric_points

from spark_otel import _clock, cell
from spark_otel import _semconv as sc
from spark_otel.records.span_codec import cell_from_span
from spark_otel.time_budget import RequestStamps, split_elapsed

S = 1_000_000_000


def test_the_split_before_the_mark_is_as_before_and_the_rest_is_scoring() -> None:
    answer = RequestStamps(1 * S, 2 * S, 6 * S, True)
    grader = RequestStamps(8 * S, 0, 9 * S, False)  # after the mark: scoring, whatever it is
    assert split_elapsed([answer, grader], 0, 10 * S, scoring_from_ns=7 * S) == {
        "first_token": 1.0, "decode": 4.0, "unsplit": 0.0, "other": 2.0, "scoring": 3.0,
    }  # fmt: skip
    assert split_elapsed([answer], 0, 7 * S) == {
        "first_token": 1.0, "decode": 4.0, "unsplit": 0.0, "other": 2.0,
    }  # fmt: skip
    # A request still running at the mark is clipped to it; a mark outside the cell is clipped too.
    assert split_elapsed([answer], 0, 10 * S, scoring_from_ns=4 * S, scale=2.0) == {
        "first_token": 2.0, "decode": 4.0, "unsplit": 0.0, "other": 2.0, "scoring": 12.0,
    }  # fmt: skip
    assert split_elapsed([], 5 * S, 10 * S, scoring_from_ns=12 * S)["scoring"] == 0.0
    assert split_elapsed([], 5 * S, 10 * S, scoring_from_ns=1 * S)["scoring"] == 5.0


def _stamps(start_ns: int) -> RequestStamps:
    return RequestStamps(start_ns, 0, _clock.real_monotonic_ns(), False)


def test_the_graders_requests_are_counted_apart_and_scoring_is_a_phase(
    tracer_provider, meter_provider, span_exporter, metric_reader
) -> None:
    with cell(
        "golden", "c1", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider
    ) as c:
        start = _clock.real_monotonic_ns()
        time.sleep(0.01)
        c.add_request(input_tokens=10, output_tokens=20, error_type=None, stamps=_stamps(start))
        c.begin_scoring()
        assert c.request_attributes[sc.CELL_PHASE] == "scoring"  # what the grader's request spans carry
        c.begin_scoring()  # again: the first mark stays
        start = _clock.real_monotonic_ns()
        time.sleep(0.01)
        c.add_request(input_tokens=100, output_tokens=3, error_type=None, stamps=_stamps(start))
        c.add_request(input_tokens=50, output_tokens=1, error_type="500")  # no stamps: after the mark
    (span,) = span_exporter.get_finished_spans()
    recorded = cell_from_span(span)
    a = span.attributes
    assert (recorded.prompt_tokens, recorded.completion_tokens) == (10, 20)
    assert (a[sc.CELL_REQUESTS], a[sc.CELL_FAILED_REQUESTS]) == (1, 0)
    assert a[sc.CELL_SCORING_REQUESTS] == 2
    assert (a[sc.CELL_SCORING_INPUT_TOKENS], a[sc.CELL_SCORING_OUTPUT_TOKENS]) == (150, 4)
    assert a[sc.CELL_DECODE_RATE] == pytest.approx(20 / a[sc.CELL_ELAPSED_S])
    assert recorded.scoring_s == a[sc.CELL_BUDGET_SCORING_S]
    assert recorded.scoring_s >= 0.01
    assert recorded.unsplit_s >= 0.01
    assert recorded.unsplit_s + recorded.other_s + recorded.scoring_s == pytest.approx(a[sc.CELL_ELAPSED_S])
    phases = {p.attributes[sc.CELL_PHASE] for p in metric_points(metric_reader, sc.CELL_PHASE_DURATION)}
    assert phases == {"first_token", "decode", "unsplit", "other", "scoring"}


def test_a_cell_with_no_mark_has_no_scoring_phase(tracer_provider, meter_provider, span_exporter) -> None:
    with cell("golden", "c1", tracer_provider=tracer_provider, meter_provider=meter_provider) as c:
        c.add_request(input_tokens=1, output_tokens=2, error_type=None)
    (span,) = span_exporter.get_finished_spans()
    assert not any(
        key.startswith(("spark_otel.cell.scoring", sc.CELL_BUDGET_SCORING_S)) for key in span.attributes
    )
    assert cell_from_span(span).scoring_s is None
    assert sc.CELL_PHASE not in c.request_attributes


def test_a_retried_attempt_answers_again_outside_the_dropped_mark(
    tracer_provider, meter_provider, span_exporter
) -> None:
    with cell("golden", "c1", tracer_provider=tracer_provider, meter_provider=meter_provider) as c:
        c.begin_scoring()
        c.resume_answering()  # the attempt failed and is retried
        assert sc.CELL_PHASE not in c.request_attributes
        c.add_request(
            input_tokens=4, output_tokens=5, error_type=None, stamps=_stamps(_clock.real_monotonic_ns())
        )
        c.begin_scoring()
    (span,) = span_exporter.get_finished_spans()
    recorded = cell_from_span(span)
    assert (recorded.prompt_tokens, recorded.completion_tokens) == (4, 5)
    assert span.attributes[sc.CELL_SCORING_REQUESTS] == 0
    assert recorded.scoring_s is not None
