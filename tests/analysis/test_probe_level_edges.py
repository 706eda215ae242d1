"""A probe level's figures at their edges, worked out by hand: streams that start late, report no
tokens or take no time, a level shorter than a second, the client's CPU budget exactly met, mean
power over a short or idle window, and the curve's intervals, gaps and message."""

from __future__ import annotations

import pytest

from spark_otel import InputError
from spark_otel.analysis.probe_levels import (
    LevelMeasurement,
    StreamTiming,
    curve_of,
    level_warnings,
    mean_power,
    summarize_level,
    under_load,
)
from spark_otel.records.probe_report import ProbeLevel

S = 1_000_000_000


def _measurement(results: list[StreamTiming], **kw: object) -> LevelMeasurement:
    """A quiescent level of ``len(results)`` streams of 100 tokens in real time, no CPU spent."""
    fields: dict[str, object] = {
        "streams": len(results),
        "repeat": 1,
        "tokens": 100,
        "streaming": True,
        "results": results,
        "engine_generation_tokens": None,
        "requests_running_before": 0.0,
        "requests_running_after": 0.0,
        "quiescent": True,
        "start_unix_ns": 0,
        "end_unix_ns": 1,
        "cpu_s": 0.0,
        "time_scale": 1.0,
    }
    return LevelMeasurement(**(fields | kw))  # type: ignore[arg-type]


def _level(streams: int, seconds: float, tokens: int, **kw: object) -> ProbeLevel:
    """A level of ``streams`` streams, each ``tokens`` tokens in ``seconds`` from the same start."""
    ns = int(seconds * S)
    results = [
        StreamTiming(start_ns=0, end_ns=ns, first_ns=1, completion_tokens=tokens) for _ in range(streams)
    ]
    return summarize_level(_measurement(results, **kw))


def test_each_stream_is_timed_from_its_own_start_and_the_level_from_the_first() -> None:
    """Monotonic clocks do not start at 0: a stream's rate and first token count from its own
    start, the level's wall from the earliest start to the last end."""
    level = summarize_level(
        _measurement(
            [
                StreamTiming(
                    start_ns=10 * S, end_ns=20 * S, first_ns=12 * S, events=3, completion_tokens=100
                ),
                StreamTiming(start_ns=12 * S, end_ns=30 * S, first_ns=16 * S, events=4, completion_tokens=90),
            ],
            engine_generation_tokens=190.0,
        )
    )
    # 100 tokens in 10 s and 90 in 18 s; the level ran from 10 s to 30 s: 190 tokens over 20 s.
    assert (level.stream_rates, level.per_stream_median, level.wall_s) == ([5.0, 10.0], 7.5, 20.0)
    assert (level.probe_aggregate_rate, level.engine_aggregate_rate, level.engine_probe_ratio) == (
        9.5,
        9.5,
        1.0,
    )
    assert (level.ttft_s_median, level.sse_events) == (3.0, 7)  # first tokens after 2 s and 4 s


def test_a_stream_that_reported_zero_tokens_is_a_mismatch_of_zero() -> None:
    """An engine's usage of 0 tokens is a count of 0, not a missing one: it adds nothing to the
    level's tokens and is listed as 0 in the warning."""
    level = summarize_level(
        _measurement(
            [
                StreamTiming(start_ns=0, end_ns=10 * S, first_ns=S, completion_tokens=100),
                StreamTiming(start_ns=0, end_ns=10 * S, first_ns=S, completion_tokens=0),
            ]
        )
    )
    assert (level.probe_tokens, level.probe_aggregate_rate, level.stream_rates) == (100, 10.0, [0.0, 10.0])
    assert (level.token_mismatches, level.mismatched_counts) == (1, [0])
    assert level_warnings(level) == ["level 2: 1 streams did not produce exactly 100 tokens (got [0])"]


def test_a_stream_that_took_no_time_has_no_rate_but_its_tokens_count() -> None:
    """A stream whose end reads its start has no duration to divide by: it gives no rate, while
    its tokens still count toward the level's aggregate."""
    level = summarize_level(
        _measurement(
            [
                StreamTiming(start_ns=0, end_ns=10 * S, first_ns=S, completion_tokens=100),
                StreamTiming(start_ns=5 * S, end_ns=5 * S, first_ns=5 * S, completion_tokens=100),
            ]
        )
    )
    assert (level.stream_rates, level.probe_tokens, level.wall_s, level.probe_aggregate_rate) == (
        [10.0],
        200,
        10.0,
        20.0,
    )


def test_a_level_shorter_than_a_second_still_has_its_rates_and_cpu_share() -> None:
    """Half a second of wall is a wall: the probe's and the engine's aggregates and the share of
    a core are figures, not missing."""
    level = summarize_level(
        _measurement(
            [StreamTiming(start_ns=0, end_ns=S // 2, first_ns=S // 10, completion_tokens=50)],
            engine_generation_tokens=60.0,
            cpu_s=0.025,
        )
    )
    # 50 tokens and the engine's 60 over 0.5 s; 0.025 CPU s over 0.5 s is 5% of a core.
    assert (level.wall_s, level.probe_aggregate_rate, level.engine_aggregate_rate) == (0.5, 100.0, 120.0)
    assert level.engine_probe_ratio == pytest.approx(1.2)
    assert level.client_cpu_core_fraction == pytest.approx(0.05)
    # 500 us per token; one step of 1 stream at 100 tok/s is 10 ms: 5% of it.
    assert (level.client_cpu_us_per_token, level.client_cpu_step_fraction) == (500.0, pytest.approx(0.05))
    assert level.client_cpu_over_budget is False


def test_the_client_exactly_at_its_cpu_budget_is_within_it() -> None:
    """The budget is at most a quarter of a core and at most a tenth of a decode step: a client
    using exactly that much is within budget."""
    # Three streams over 20 s, two nearly idle: the median rate is 0.05 tok/s, so one step of the
    # three costs 3 x 5 s / 1,002 tokens x 0.05 = 0.07% of it; 5 CPU s over 20 s is 25% of a core.
    quarter = summarize_level(
        _measurement(
            [
                StreamTiming(start_ns=0, end_ns=20 * S, first_ns=S, completion_tokens=1),
                StreamTiming(start_ns=0, end_ns=20 * S, first_ns=S, completion_tokens=1),
                StreamTiming(start_ns=0, end_ns=20 * S, first_ns=S, completion_tokens=1_000),
            ],
            cpu_s=5.0,
        )
    )
    assert (quarter.per_stream_median, quarter.client_cpu_core_fraction) == (0.05, 0.25)
    assert quarter.client_cpu_step_fraction == pytest.approx(3 * 5.0 / 1_002 * 0.05)
    assert quarter.client_cpu_over_budget is False
    # One stream of 10 tokens in 1 s: 0.1 CPU s is 10 ms a token, a tenth of its 100 ms step.
    tenth = summarize_level(
        _measurement([StreamTiming(start_ns=0, end_ns=S, first_ns=1, completion_tokens=10)], cpu_s=0.1)
    )
    assert (tenth.client_cpu_us_per_token, tenth.client_cpu_step_fraction) == (10_000.0, 0.1)
    assert (tenth.client_cpu_core_fraction, tenth.client_cpu_over_budget) == (0.1, False)


def test_mean_power_over_a_late_short_or_idle_window() -> None:
    """The energy counter's delta over the window's own length, however short, wherever the
    window starts, and even when it did not move; model time is real time by default."""
    assert mean_power((10 * S, 30.0, 1_000.0), (20 * S, 40.0, 1_400.0), [], real_time=False) == 40.0
    assert (
        mean_power((0, 30.0, 1_000.0), (S // 2, 40.0, 1_010.0), [], real_time=False) == 20.0
    )  # 10 J in 0.5 s
    assert mean_power((0, 30.0, 1_000.0), (10 * S, 40.0, 1_000.0), [50.0], real_time=False) == 0.0
    assert mean_power((0, 30.0, 1_000.0), (10 * S, 40.0, 1_400.0), [], real_time=True) == 40.0


def test_the_curve_carries_each_levels_interval_and_skips_an_unrated_level() -> None:
    """A level with no rate leaves a gap, not the end of the curve; a slow level (under 1 tok/s)
    is still a point; each point carries the 95% interval on its pooled rates."""
    failed = summarize_level(_measurement([StreamTiming(start_ns=0, error="HTTP 500: boom")]))
    slow = _level(2, 2.0, 1)  # 1 token in 2 s: 0.5 tok/s a stream
    fast = _level(4, 10.0, 100).model_copy(update={"stream_rates": [5.0, 10.0, 10.0, 10.0]})
    curve = curve_of("q", [failed, slow, fast])
    assert [(p.streams, p.per_stream_rate, p.aggregate_rate, p.n) for p in curve.points] == [
        (2, 0.5, 1.0, 2),
        (4, 10.0, 40.0, 4),
    ]
    # Two rates: the interval spans both; four: ranks max(1, round(2 - 1.96)) = 1 to 4.
    assert [p.interval for p in curve.points] == [(0.5, 0.5), (5.0, 10.0)]


def test_no_rated_level_names_every_level_that_ran() -> None:
    """The message lists the levels tried, comma-separated, and says what to check."""
    one = summarize_level(_measurement([StreamTiming(start_ns=0, error="HTTP 500: boom")]))
    two = _level(2, 10.0, 0)  # both streams reported 0 tokens
    with pytest.raises(InputError) as raised:
        curve_of("q", [one, two])
    assert str(raised.value) == (
        "no level measured a positive per-stream rate (levels: 1, 2), so there is no curve: did every "
        "stream report 0 completion tokens or fail?"
    )


def test_of_several_levels_under_load_the_worst_is_named() -> None:
    """The highest engine/probe ratio is the one quoted, wherever it falls among the levels."""
    one = _level(1, 10.0, 100).model_copy(update={"engine_probe_ratio": 1.5})
    two = _level(2, 10.0, 100).model_copy(update={"engine_probe_ratio": 2.0})
    four = _level(4, 10.0, 100).model_copy(update={"engine_probe_ratio": 1.2})
    assert under_load([one, two, four]) == (
        "engine/probe 2.00 at 2 streams: the engine decoded more than the probe sent, so another tenant "
        "ran meanwhile"
    )
