"""A running cell's live progress: the rate window over its streams' chunk counts, and what
`CellState.live_progress` says as its streams run and end (tokens so far, no rate without a
stream)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from spark_otel import _clock, cell
from spark_otel.live_progress import WINDOW_S, LiveProgress, RateWindow
from spark_otel.time_budget import RequestStamps

S = 1_000_000_000


def test_a_steady_stream_reads_its_rate_from_the_first_chunk_on() -> None:
    window = RateWindow()
    assert window.rate(5 * S, 0, 0) is None  # no chunk yet: no rate
    # 10 chunks a second from t=10 s; publishes once a second.
    assert window.rate(10 * S + S // 4, 3, 10 * S) is None  # under MIN_SPAN_S since the first chunk
    rates = [window.rate(t * S, 1 + 10 * (t - 10), 10 * S) for t in range(11, 20)]
    assert rates == [pytest.approx(10.0)] * 9


def test_the_window_forgets_what_streamed_before_it_and_sees_a_stall() -> None:
    window = RateWindow()
    # 100 chunks a second for 10 s (t = 0..10), then nothing.
    for t in range(1, 11):
        window.rate(t * S, 1 + 100 * t, 1)
    # From the publish at t=6 (the window's start): 4 s of chunks over its 5 s.
    assert window.rate(11 * S, 1001, 1) == pytest.approx(400 / WINDOW_S)
    # Three seconds into the stall, the window (from the publish at t=8) holds 2 s of chunks.
    window.rate(12 * S, 1001, 1)
    assert window.rate(13 * S, 1001, 1) == pytest.approx(200 / 5)
    assert window.rate(19 * S, 1001, 1) == 0.0  # the stream stalled: its rate is 0, not its last


def test_the_rate_is_per_second_of_the_cells_clock() -> None:
    window = RateWindow()
    window.rate(1 * S, 1, 1 * S, scale=20.0)
    assert window.rate(2 * S, 201, 1 * S, scale=20.0) == pytest.approx(10.0)  # 200 a real s at 20x


@dataclass
class Stream:
    """What a stream being read says so far (`ChunkStamps`)."""

    first_ns: int = 0
    chunks: int = 0


def test_a_cells_progress_counts_its_running_streams_chunks_then_its_reported_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100 * S]
    monkeypatch.setattr(_clock, "real_monotonic_ns", lambda: now[0])
    monkeypatch.setattr(_clock, "perf_ns", lambda: now[0])
    with cell("ev", "c1", tracer_provider=TracerProvider(), meter_provider=MeterProvider()) as state:
        assert state.live_progress() == LiveProgress(0.0, None, None)
        stream = Stream()
        state.watch_stream(stream)
        now[0] += S
        assert state.live_progress() == LiveProgress(1.0, 0, None)  # asked, nothing back yet
        stream.first_ns, stream.chunks = now[0], 1
        now[0] += 2 * S
        stream.chunks = 41
        assert state.live_progress() == LiveProgress(3.0, 41, 20.0)
        # It ends: the server's count replaces the chunks, whose rate still counts in the window.
        state.add_request(
            input_tokens=12,
            output_tokens=40,
            error_type=None,
            stamps=RequestStamps(101 * S, 101 * S, now[0], True),
            stream=stream,
        )
        now[0] += 2 * S
        assert state.live_progress() == LiveProgress(5.0, 40, pytest.approx(40 / 4))
        # A grader's stream, after the mark, is not the cell's.
        state.begin_scoring()
        state.watch_stream(Stream(now[0], 500))
        now[0] += S
        assert state.live_progress().tokens == 40


def test_a_cell_that_never_streams_has_progress_and_no_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100 * S]
    monkeypatch.setattr(_clock, "real_monotonic_ns", lambda: now[0])
    monkeypatch.setattr(_clock, "perf_ns", lambda: now[0])
    with cell("ev", "c2", tracer_provider=TracerProvider(), meter_provider=MeterProvider()) as state:
        now[0] += 7 * S
        state.add_request(
            input_tokens=5,
            output_tokens=300,
            error_type=None,
            stamps=RequestStamps(100 * S, 0, now[0], False),
        )
        assert state.live_progress() == LiveProgress(7.0, 300, None)
