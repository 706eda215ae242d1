"""A probe level's figures from its raw timings, worked out by hand: rates in model time, errors
and mismatches, the client's CPU budget, the warnings a reader sees, mean power and the curve."""

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

S = 1_000_000_000


def _measurement(results: list[StreamTiming], **kw: object) -> LevelMeasurement:
    fields: dict[str, object] = {
        "streams": 4,
        "repeat": 1,
        "tokens": 100,
        "streaming": True,
        "results": results,
        "engine_generation_tokens": 360.0,
        "requests_running_before": 0.0,
        "requests_running_after": 1.0,
        "quiescent": False,
        "start_unix_ns": 7,
        "end_unix_ns": 8,
        "cpu_s": 0.9,
        "power_w": 35.0,
        "time_scale": 2.0,
    }
    return LevelMeasurement(**(fields | kw))  # type: ignore[arg-type]


STREAMS = [
    StreamTiming(start_ns=0, end_ns=10 * S, first_ns=1 * S, events=50, completion_tokens=100),
    StreamTiming(start_ns=0, end_ns=20 * S, first_ns=2 * S, events=60, completion_tokens=80),
    StreamTiming(start_ns=0, error="HTTP 500: boom"),
]  # and a fourth stream that never returned: timed out


def test_a_levels_figures_worked_out_by_hand() -> None:
    level = summarize_level(_measurement(STREAMS))
    # Model time runs 2x real: 100 tokens over 20 model s, 80 over 40; the level's wall is 40 s.
    assert (level.stream_rates, level.per_stream_median, level.wall_s) == ([2.0, 5.0], 3.5, 40.0)
    assert (level.per_stream_p10, level.per_stream_p90) == (pytest.approx(2.3), pytest.approx(4.7))
    assert (level.probe_tokens, level.probe_aggregate_rate) == (180, 4.5)
    assert (level.engine_generation_tokens, level.engine_aggregate_rate, level.engine_probe_ratio) == (
        360.0,
        9.0,
        2.0,
    )
    assert (level.token_mismatches, level.mismatched_counts, level.sse_events, level.ttft_s_median) == (
        1,
        [80],
        110,
        3.0,
    )
    assert (level.errors, level.error_messages) == (2, ["HTTP 500: boom", "timed out"])
    # 0.9 CPU s over 180 tokens is 5,000 us/token, 4.5% of a core over 20 real s; one decode step
    # of 4 streams at 3.5 tok/s in model time (7 in real) needs 4 x 5 ms x 7 = 14% of the step.
    assert (level.client_cpu_us_per_token, level.client_cpu_core_fraction) == (5_000.0, 0.045)
    assert level.client_cpu_step_fraction == pytest.approx(0.14)
    assert level.client_cpu_over_budget is True
    assert (level.streams, level.repeat, level.tokens_expected, level.start_unix_ns, level.end_unix_ns) == (
        4,
        1,
        100,
        7,
        8,
    )
    assert (level.quiescent, level.power_w, level.client_cpu_s) == (False, 35.0, 0.9)
    assert (level.requests_running_before, level.requests_running_after) == (0.0, 1.0)


def test_a_level_not_streamed_within_budget_and_one_that_failed_whole() -> None:
    quiet = summarize_level(_measurement(STREAMS[:2], streaming=False, cpu_s=0.0, streams=2, time_scale=1.0))
    assert (quiet.sse_events, quiet.ttft_s_median, quiet.errors) == (None, None, 0)
    assert (quiet.client_cpu_us_per_token, quiet.client_cpu_step_fraction, quiet.client_cpu_over_budget) == (
        0.0,
        None,
        False,
    )
    busy_core = summarize_level(_measurement(STREAMS[:2], cpu_s=6.0, streams=2))  # 30% of a core
    assert (busy_core.client_cpu_core_fraction, busy_core.client_cpu_over_budget) == (0.3, True)
    failed = summarize_level(_measurement([STREAMS[2]], streams=1, engine_generation_tokens=None))
    assert (failed.wall_s, failed.probe_tokens, failed.probe_aggregate_rate, failed.stream_rates) == (
        0.0,
        0,
        None,
        [],
    )
    assert (failed.per_stream_median, failed.engine_aggregate_rate, failed.engine_probe_ratio) == (
        None,
        None,
        None,
    )
    assert (failed.client_cpu_us_per_token, failed.client_cpu_core_fraction) == (None, None)


def test_the_warnings_say_what_to_distrust_and_why() -> None:
    level = summarize_level(_measurement(STREAMS))
    assert level_warnings(level) == [
        "level 4: the client is past its CPU budget (5000.0 us/token, 4% of a core, 14% of a decode step; "
        "budget 25% and 10%): its own lag may read as the engine's",
        "level 4: 1 streams did not produce exactly 100 tokens (got [80])",
        "level 4: 2 of 4 streams failed: HTTP 500: boom",
        "level 4: the engine's running count did not settle; the engine aggregate is approximate",
    ]
    clean = summarize_level(_measurement(STREAMS[:1], streams=1, cpu_s=0.0, quiescent=True))
    assert level_warnings(clean) == []
    nameless = level.model_copy(
        update={"error_messages": [], "client_cpu_over_budget": False, "token_mismatches": 0}
    )
    assert level_warnings(nameless) == [
        "level 4: 2 of 4 streams failed: unknown error",
        "level 4: the engine's running count did not settle; the engine aggregate is approximate",
    ]
    unmeasured = level.model_copy(
        update={
            "client_cpu_us_per_token": None,
            "client_cpu_core_fraction": None,
            "client_cpu_step_fraction": None,
        }
    )
    assert level_warnings(unmeasured)[0].startswith(
        "level 4: the client is past its CPU budget (0.0 us/token, 0% of a core, 0% of a decode step; "
    )


def test_mean_power_prefers_the_energy_counter_on_its_own_clock() -> None:
    before, after = (0, 30.0, 1_000.0), (10 * S, 40.0, 1_400.0)
    assert mean_power(before, after, [50.0], real_time=False) == 40.0  # 400 J over 10 s
    assert mean_power(before, after, [50.0], real_time=True, time_scale=2.0) == 80.0  # 5 real s
    assert mean_power((0, 30.0, None), after, [50.0], real_time=False) == 40.0  # the readings' mean
    assert mean_power(before, (10 * S, 40.0, 900.0), [], real_time=False) == 35.0  # the counter reset
    assert mean_power(before, (0, 40.0, 1_400.0), [], real_time=False) == 35.0  # no time between
    assert mean_power((0, None, None), (S, None, None), [], real_time=False) is None
    assert mean_power(None, after, [50.0], real_time=False) is None
    assert mean_power(before, None, [50.0], real_time=False) is None


def test_the_curve_pools_each_levels_repeats_and_says_when_another_tenant_decoded() -> None:
    one_a = summarize_level(_measurement(STREAMS[:1], streams=1, engine_generation_tokens=100.0))
    one_b = one_a.model_copy(
        update={"repeat": 2, "per_stream_median": 7.0, "stream_rates": [7.0], "probe_aggregate_rate": 7.0}
    )
    two = summarize_level(_measurement(STREAMS[:2], streams=2, engine_generation_tokens=180.0))
    curve = curve_of("q", [one_a, two, one_b], model="m", run="p1", measured_unix_ns=9)
    assert [(p.streams, p.per_stream_rate, p.aggregate_rate, p.n) for p in curve.points] == [
        (1, 6.0, 6.0, 2),  # the medians 5 and 7 of the two repeats; 5 and 7 tok/s pooled
        (2, 3.5, 4.5, 2),
    ]
    assert (curve.points[0].p10, curve.points[0].p90) == (pytest.approx(5.2), pytest.approx(6.8))
    assert (curve.engine, curve.model, curve.run, curve.measured_unix_ns, curve.source) == (
        "q",
        "m",
        "p1",
        9,
        "probe",
    )
    assert curve.under_load is None  # the engine counted what the probe sent
    beside = two.model_copy(update={"engine_probe_ratio": 2.0})
    assert under_load([one_a, beside]) == (
        "engine/probe 2.00 at 2 streams: the engine decoded more than the probe sent, so another tenant "
        "ran meanwhile"
    )
    assert under_load([one_a.model_copy(update={"engine_probe_ratio": 1.05})]) is None  # at the ratio: idle
    assert curve_of("q", [one_a, beside]).under_load == under_load([one_a, beside])


def test_no_rated_level_is_no_curve_and_says_which_levels_ran() -> None:
    failed = summarize_level(_measurement([STREAMS[2]], streams=8))
    with pytest.raises(InputError, match=r"no level measured a positive per-stream rate \(levels: 8\)"):
        curve_of("q", [failed])
    with pytest.raises(InputError, match=r"\(levels: none\)"):
        curve_of("q", [])
