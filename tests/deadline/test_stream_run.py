"""One stream's run on plain chunks and a stepped clock: what it keeps, when it stops, the status
it ends with and the notes it leaves for the request span, figure for figure."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.deadline_server import DOC, FINDINGS
from tests.support.finished_spans import cell_span

import spark_otel
import spark_otel._guard
import spark_otel.cells
from spark_otel import _clock
from spark_otel import _semconv as sc
from spark_otel._clock import NS_PER_S
from spark_otel.deadline import DeadlineResult, DeadlineStatus
from spark_otel.deadline.arguments import Plan
from spark_otel.deadline.results import Timings, TokenUsage
from spark_otel.deadline.run import StreamRun
from spark_otel.deadline.salvage import Extractor
from spark_otel.instrumentation.request_notes import RequestNotes
from spark_otel.sim.clock import model_time


class Clock:
    """`_clock.perf_ns` and `real_monotonic_ns`, moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, start_s: float) -> None:
        self.now_ns = int(start_s * NS_PER_S)
        monkeypatch.setattr(_clock, "perf_ns", lambda: self.now_ns)
        monkeypatch.setattr(_clock, "real_monotonic_ns", lambda: self.now_ns)

    def at(self, seconds: float) -> None:
        self.now_ns = int(seconds * NS_PER_S)


def _run(
    *, budget_s: float | None = 30.0, cap: int | None = None, extractor: Any = "json", chat: bool = True
) -> tuple[StreamRun, RequestNotes]:
    run = StreamRun(Plan("raw", chat, {}, budget_s, cap), extractor)
    run.notes = RequestNotes()
    return run, run.notes


def test_a_finished_answer_keeps_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch, 10)
    run, notes = _run()
    half = len(DOC) // 2
    clock.at(11)
    assert run.take(None, None, None, None, "first-model")  # a role-only chunk: no token
    clock.at(12)
    assert run.take("", "thinking", None, None, None)  # reasoning is the first token
    clock.at(13)
    assert run.take(DOC[:half], None, None, None, "second-model")
    assert run.take(DOC[half:], None, "stop", None, None)
    assert notes.attributes == {sc.REQUEST_DEADLINE_STATUS: "complete", sc.REQUEST_SALVAGED_FINDINGS: 4}
    assert run.take(None, None, None, (5, 9), None)
    clock.at(20)
    assert run.result() == DeadlineResult(
        status=DeadlineStatus.COMPLETE,
        text=DOC,
        reasoning="thinking",
        usage=TokenUsage(prompt_tokens=5, completion_tokens=9, source="usage"),
        timings=Timings(time_to_first_token_s=2.0, elapsed_s=10.0, decode_rate=0.9),
        findings=FINDINGS,
        error=None,
        finish_reason="stop",
        model="first-model",
        deadline_s=30.0,
    )
    assert notes.attributes[sc.REQUEST_TOKENS_SOURCE] == "usage"
    assert notes.error_type is None


def test_a_stream_cut_at_its_deadline_keeps_what_arrived_and_takes_nothing_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock(monkeypatch, 1)
    run, notes = _run()
    cut = DOC.index('"id": 3')
    clock.at(3)
    assert run.take(DOC[:cut], None, None, None, None)
    assert run.take(DOC[cut : cut + 5], None, None, None, None)
    run.expire()
    assert notes.error_type == sc.ERROR_TYPE_DEADLINE
    assert notes.attributes == {
        sc.REQUEST_SALVAGED_FINDINGS: 2,
        sc.REQUEST_DEADLINE_STATUS: "deadline",
        sc.REQUEST_TOKENS_SOURCE: "streamed",
    }
    assert not run.take("more", None, "stop", (1, 50), "m")
    run.fail(ConnectionError("the socket the watchdog shut"))
    clock.at(5)
    result = run.result()
    assert (result.status, result.error, result.finish_reason, result.model) == (
        DeadlineStatus.DEADLINE, None, None, None,
    )  # fmt: skip
    assert result.text == DOC[: cut + 5]
    assert result.usage == TokenUsage(prompt_tokens=None, completion_tokens=2, source="streamed")
    assert result.timings == Timings(time_to_first_token_s=2.0, elapsed_s=4.0, decode_rate=0.5)
    assert result.findings == FINDINGS[:2]
    assert result.degraded


def test_an_answer_finished_before_the_deadline_fired_stays_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, notes = _run()
    run.take("done", None, "stop", None, None)
    run.expire()  # only the usage chunk was outstanding
    assert notes.error_type is None
    assert notes.attributes[sc.REQUEST_DEADLINE_STATUS] == "complete"
    assert run.result().status is DeadlineStatus.COMPLETE


def test_the_token_cap_stops_the_stream_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, notes = _run(cap=2)
    assert run.take("a", None, None, None, None)
    assert not run.take("b", None, None, None, None)
    assert notes.error_type is None
    assert notes.attributes == {
        sc.REQUEST_DEADLINE_STATUS: "length_cap",
        sc.REQUEST_SALVAGED_FINDINGS: 0,
        sc.REQUEST_TOKENS_SOURCE: "streamed",
    }
    run.fail("a close after the cap")
    run.expire()
    result = run.result()
    assert (result.status, result.error, result.text) == (DeadlineStatus.LENGTH_CAP, None, "ab")
    assert notes.error_type is None


def test_usage_counts_toward_the_cap_and_a_finished_chunk_is_not_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, _ = _run(cap=5)
    assert not run.take(None, None, None, (1, 5), None)
    assert run.result().status is DeadlineStatus.LENGTH_CAP
    run, notes = _run(cap=1)
    assert run.take("a", None, "stop", None, None)
    assert run.result().status is DeadlineStatus.COMPLETE
    assert notes.attributes[sc.REQUEST_DEADLINE_STATUS] == "complete"


def test_the_server_s_length_finish_is_a_length_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, notes = _run()
    run.take("a", None, "length", None, None)
    assert notes.attributes[sc.REQUEST_DEADLINE_STATUS] == "length_cap"
    assert run.result().status is DeadlineStatus.LENGTH_CAP


def test_a_failure_is_kept_short_and_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, notes = _run()
    run.take("a", None, None, None, None)
    run.fail(ValueError("x" * 600))
    assert notes.attributes[sc.REQUEST_DEADLINE_STATUS] == "error"
    result = run.result()
    assert result.status is DeadlineStatus.ERROR
    assert result.error == ("ValueError: " + "x" * 600)[:500]
    run, _ = _run()
    run.fail("server error mid-stream: boom")
    assert run.result().error == "server error mid-stream: boom"


def test_a_stream_that_just_ends_is_an_error_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, _ = _run(extractor=None)
    run.take("half an answer", None, None, None, None)
    result = run.result()
    assert result.status is DeadlineStatus.ERROR
    assert result.error == "the stream ended before the server finished the answer"
    assert result.timings.decode_rate is None  # no time passed on the stepped clock
    assert result.findings == []


def test_nothing_arrived_has_no_first_token_and_no_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch, 1)
    run, _ = _run()
    run.expire()
    clock.at(2)
    assert run.result().timings == Timings(time_to_first_token_s=None, elapsed_s=1.0, decode_rate=None)


class Failing(Extractor):
    """Declares the protocol it follows (mutmut's copy adds names a structural check reads)."""

    def __init__(self, *, on_feed: bool, on_close: bool) -> None:
        self.findings: list[Any] = []
        self.on_feed, self.on_close = on_feed, on_close

    def feed(self, chunk: str) -> list[Any]:
        if self.on_feed:
            raise RuntimeError(f"feed {chunk}")
        return []

    def close(self, *, cut_off: bool = False) -> list[Any]:
        if self.on_close:
            raise RuntimeError("close")
        return []


def test_a_failing_extractor_is_reported_once_and_never_ends_the_stream(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    Clock(monkeypatch, 1)
    run, _ = _run(extractor=Failing(on_feed=True, on_close=True))
    with caplog.at_level(logging.WARNING, logger="spark_otel.deadline.run"):
        assert run.take("a", None, None, None, None)
        assert run.take("b", None, "stop", None, None)
        result = run.result()
    assert [r.getMessage() for r in caplog.records] == [
        "spark_otel: findings extractor failed: RuntimeError('feed a')",
        "spark_otel: findings extractor failed: RuntimeError('close')",
    ]
    assert (result.status, result.text) == (DeadlineStatus.COMPLETE, "ab")
    assert result.error == "extractor failed: RuntimeError('feed a')"  # the first failure
    run, _ = _run(extractor=Failing(on_feed=False, on_close=True))
    run.take("a", None, "stop", None, None)
    assert run.result().error == "extractor failed: RuntimeError('close')"


def test_the_extractor_is_told_whether_the_answer_was_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    told: list[bool] = []

    class Listening(Failing):
        def close(self, *, cut_off: bool = False) -> list[Any]:
            told.append(cut_off)
            return []

    for finish in ("stop", "length", None):
        run, _ = _run(extractor=Listening(on_feed=False, on_close=False))
        run.take("a", None, finish, None, None)
        run.result()
    assert told == [False, True, True]


def test_a_run_without_notes_keeps_its_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run = StreamRun(Plan("raw", True, {}, 30.0, 1), "json")
    assert not run.take("a", None, None, (2, 1), None)
    run.expire()
    run.fail("late")
    assert run.result().usage == TokenUsage(prompt_tokens=2, completion_tokens=1, source="usage")


def test_the_time_left_is_real_seconds_and_the_timeout_a_grace_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock(monkeypatch, 100)
    run, _ = _run(budget_s=10.0)
    clock.at(104)
    assert run.wall_left_s() == pytest.approx(6.0)
    assert run.timeout_s() == pytest.approx(6.02)
    with model_time(10.0):
        assert run.wall_left_s() == pytest.approx(0.6)  # 6 model seconds at 10x
    clock.at(112)
    assert (run.wall_left_s(), run.timeout_s()) == (0.0, pytest.approx(0.02))
    unbounded, _ = _run(budget_s=None, cap=5)
    assert (unbounded.wall_left_s(), unbounded.timeout_s()) == (None, None)


def test_reasoning_parts_join_as_they_came(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch, 1)
    run, _ = _run()
    run.take(None, "first ", None, None, None)
    run.take("x", "second", "stop", None, None)
    clock.at(1.5)  # under a second, still a rate
    result = run.result()
    assert result.reasoning == "first second"
    assert result.timings.decode_rate == pytest.approx(4.0)  # two tokens in half a second


def test_a_cut_after_the_usage_came_notes_the_usage_as_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, notes = _run()
    run.take("a", None, None, (4, 1), None)  # continuous usage stats: usage on every chunk
    run.expire()
    assert notes.attributes[sc.REQUEST_TOKENS_SOURCE] == "usage"


def test_a_finished_run_is_out_of_the_watchdog_s_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    Clock(monkeypatch, 1)
    run, notes = _run()
    run.take("a", None, None, None, None)
    assert run.result().status is DeadlineStatus.ERROR
    run.expire()  # the deadline fires after the result was taken
    assert (run.expired, notes.error_type) == (False, None)
    assert notes.attributes == {}


def test_a_cut_off_stream_says_how_it_ended_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(monkeypatch, 1)
    with caplog.at_level(logging.DEBUG, logger="spark_otel.deadline.run"):
        run, _ = _run()
        run.take(DOC[: DOC.index('"id": 3')], None, None, None, None)
        run.take("x", None, None, None, None)
        run.expire()
        clock.at(5)
        run.result()
        done, _ = _run()
        done.take("a", None, "stop", None, None)
        done.result()
    assert [r.getMessage() for r in caplog.records] == [
        "spark_otel: stream ended deadline after 4.0 s with 2 tokens and 2 findings"
    ]


def test_the_extractor_s_failures_are_logged_with_their_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    Clock(monkeypatch, 1)
    run, _ = _run(extractor=Failing(on_feed=True, on_close=True))
    with caplog.at_level(logging.WARNING, logger="spark_otel.deadline.run"):
        run.take("a", None, "stop", None, None)
        run.result()
    assert len(caplog.records) == 2
    assert all(r.exc_info is not None and r.exc_info[0] is RuntimeError for r in caplog.records)


@pytest.fixture
def in_cell(
    monkeypatch: pytest.MonkeyPatch,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> Callable[[Callable[[Clock], None]], dict[str, Any]]:
    """Runs ``steps`` inside a cell from 1 s to 6 s on a stepped clock; the cell span's attributes."""

    def run(steps: Callable[[Clock], None]) -> dict[str, Any]:
        clock = Clock(monkeypatch, 1)
        with spark_otel.cell(
            "finder", "seed", tracer_provider=tracer_provider, meter_provider=meter_provider
        ):
            steps(clock)
            clock.at(6)
        return dict(cell_span(span_exporter).attributes or {})

    return run


def test_a_cut_off_stream_counts_in_its_cell_once_without_tokens(
    in_cell: Callable[[Callable[[Clock], None]], dict[str, Any]],
) -> None:
    def cut_off(clock: Clock) -> None:
        run, _ = _run()
        clock.at(3)
        run.take(DOC[: DOC.index('"id": 3')], None, None, None, None)
        run.take("x", None, None, None, None)
        clock.at(5)
        run.expire()
        run.result()

    a = in_cell(cut_off)
    assert (a[sc.CELL_STATUS], a[sc.CELL_DEADLINE_HIT], a[sc.CELL_DEGRADED]) == ("deadline", True, True)
    assert a[sc.CELL_SALVAGED_FINDINGS] == 2
    assert (a[sc.CELL_REQUESTS], a[sc.CELL_FAILED_REQUESTS]) == (1, 1)
    assert sc.CELL_COMPLETION_TOKENS not in a  # only server-reported tokens count in a cell
    assert sc.CELL_PROMPT_TOKENS not in a
    assert (a[sc.CELL_BUDGET_FIRST_TOKEN_S], a[sc.CELL_BUDGET_DECODE_S]) == (2.0, 2.0)
    assert a[sc.CELL_BUDGET_OTHER_S] == 1.0


def test_a_finished_stream_counts_its_reported_tokens_in_its_cell(
    in_cell: Callable[[Callable[[Clock], None]], dict[str, Any]],
) -> None:
    def finished(clock: Clock) -> None:
        run, _ = _run()
        run.take("done", None, "stop", (5, 9), None)
        run.result()

    a = in_cell(finished)
    assert (a[sc.CELL_STATUS], a[sc.CELL_DEADLINE_HIT]) == ("ok", False)
    assert (a[sc.CELL_PROMPT_TOKENS], a[sc.CELL_COMPLETION_TOKENS]) == (5, 9)
    assert (a[sc.CELL_REQUESTS], a[sc.CELL_FAILED_REQUESTS]) == (1, 0)


def test_a_stream_that_failed_counts_as_a_failed_request(
    in_cell: Callable[[Callable[[Clock], None]], dict[str, Any]],
) -> None:
    def failed(clock: Clock) -> None:
        run, _ = _run()
        run.fail("server error mid-stream: boom")
        run.result()

    a = in_cell(failed)
    assert (a[sc.CELL_STATUS], a[sc.CELL_REQUESTS], a[sc.CELL_FAILED_REQUESTS]) == ("error", 1, 1)


@pytest.mark.parametrize("who", ["no-notes", "instrumented"])
def test_a_request_someone_else_counts_is_not_counted_again(
    who: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    in_cell: Callable[[Callable[[Clock], None]], dict[str, Any]],
) -> None:
    """Without notes no request was made under this run's watch; instrumented, the request span
    counts it in the cell."""
    if who == "instrumented":
        spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    def uncounted(clock: Clock) -> None:
        run, _ = _run()
        if who == "no-notes":
            run.notes = None
        run.take("done", None, "stop", (5, 9), None)
        run.result()

    try:
        a = in_cell(uncounted)
    finally:
        if who == "instrumented":
            spark_otel.uninstrument()
    assert (a[sc.CELL_STATUS], a[sc.CELL_REQUESTS]) == ("ok", 0)
    assert sc.CELL_COMPLETION_TOKENS not in a


def test_a_stream_cut_before_its_first_token_spent_its_time_waiting_for_it(
    in_cell: Callable[[Callable[[Clock], None]], dict[str, Any]],
) -> None:
    def silent(clock: Clock) -> None:
        run, _ = _run()
        clock.at(5)
        run.expire()
        run.result()

    a = in_cell(silent)
    assert (a[sc.CELL_BUDGET_FIRST_TOKEN_S], a[sc.CELL_BUDGET_DECODE_S], a[sc.CELL_BUDGET_OTHER_S]) == (
        4.0,
        0.0,
        1.0,
    )
    assert (a[sc.CELL_REQUESTS], a[sc.CELL_FAILED_REQUESTS]) == (1, 1)


def test_a_failing_cell_account_is_reported_once_and_the_result_still_returned(
    monkeypatch: pytest.MonkeyPatch,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    Clock(monkeypatch, 1)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("accounting bug")

    monkeypatch.setattr(spark_otel.cells.CellState, "record_deadline_result", broken)
    with (
        caplog.at_level(logging.WARNING, logger="spark_otel"),
        spark_otel.cell("finder", "seed", tracer_provider=tracer_provider, meter_provider=meter_provider),
    ):
        run, _ = _run()
        run.take("done", None, "stop", None, None)
        assert run.result().status is DeadlineStatus.COMPLETE
    assert caplog.messages == ["spark_otel: deadline cell accounting failed; the call goes on untouched"]
