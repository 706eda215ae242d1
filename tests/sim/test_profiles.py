"""The timing profiles are the ground truth other tests compare against: check them as pure functions."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_otel import ConfigError
from spark_otel.sim import DENSE, MOE, PROFILES, Profile, draw_output_tokens, get_profile


@pytest.mark.parametrize(
    ("profile", "n", "rate"),
    [
        (DENSE, 1, 11.1),
        (DENSE, 8, 10.06),
        (DENSE, 16, 8.59),
        (DENSE, 32, 5.76),
        (MOE, 1, 82.4),
        (MOE, 2, 65.0),
        (MOE, 4, 47.0),
        (MOE, 8, 32.8),
        (MOE, 16, 11.3),
    ],
)
def test_calibration_points_are_exact(profile: Profile, n: int, rate: float) -> None:
    assert profile.per_stream_rate(n) == pytest.approx(rate)


@given(st.integers(1, 63))
def test_more_streams_never_make_a_stream_faster(n: int) -> None:
    for profile in (DENSE, MOE):
        assert profile.per_stream_rate(n + 1) <= profile.per_stream_rate(n)


@given(st.integers(1, 31))
def test_dense_aggregate_keeps_growing_to_32_streams(n: int) -> None:
    assert DENSE.aggregate_rate(n + 1) > DENSE.aggregate_rate(n)


def test_moe_aggregate_peaks_at_8_and_collapses_at_16() -> None:
    best = max(range(1, 17), key=MOE.aggregate_rate)
    assert best == 8
    assert MOE.aggregate_rate(16) / MOE.aggregate_rate(8) == pytest.approx(181 / 262, rel=0.02)


def test_cross_engine_calibration() -> None:
    # The MoE engine at 4 streams takes 54% from a serial dense stream (Act 4).
    cost = 1 - DENSE.per_stream_rate(1, MOE.memory_pressure(4)) / DENSE.per_stream_rate(1)
    assert cost == pytest.approx(0.54, abs=0.01)
    # A serial dense stream makes a lone MoE stream decode at 29 tok/s against 82 (Appendix A, co-resident).
    assert MOE.per_stream_rate(1, DENSE.memory_pressure(1)) == pytest.approx(29.0, rel=0.03)
    # Same-engine: one more stream about 5%, four more 5 to 9% (Act 4).
    assert 1 - DENSE.per_stream_rate(2) / DENSE.per_stream_rate(1) == pytest.approx(0.05, abs=0.01)
    assert 0.05 <= 1 - DENSE.per_stream_rate(5) / DENSE.per_stream_rate(1) <= 0.09
    # The more the neighbour batches, the more it costs.
    assert (
        MOE.memory_pressure(8) > MOE.memory_pressure(4) > MOE.memory_pressure(1) > MOE.memory_pressure(0) == 0
    )


def test_power_is_nearly_flat_across_the_dense_range_and_jumps_only_when_moe_thrashes() -> None:
    dense = [DENSE.power_w(n) for n in (1, 8, 16, 32)]
    assert min(dense) >= 34
    assert max(dense) <= 40
    assert MOE.power_w(8) < 42 < 65 < MOE.power_w(16)


@given(st.text(max_size=50), st.integers(0, 50), st.integers(1, 5000), st.booleans())
def test_output_lengths_are_reproducible_and_within_bounds(
    key: str, min_tokens: int, max_tokens: int, ignore_eos: bool
) -> None:
    tokens, reason = draw_output_tokens(DENSE, key, min_tokens, max_tokens, ignore_eos)
    assert (tokens, reason) == draw_output_tokens(DENSE, key, min_tokens, max_tokens, ignore_eos)
    assert 1 <= tokens <= max_tokens
    assert tokens >= min(min_tokens, max_tokens)
    assert reason == ("length" if tokens == max_tokens else "stop")
    if ignore_eos or min_tokens >= max_tokens:
        assert tokens == max_tokens


def test_unpinned_lengths_spread_around_the_median() -> None:
    drawn = sorted(draw_output_tokens(DENSE, f"k{i}", 0, 100_000, False)[0] for i in range(400))
    median = drawn[len(drawn) // 2]
    assert 0.7 * DENSE.output_tokens_median <= median <= 1.3 * DENSE.output_tokens_median
    assert drawn[0] < median < drawn[-1]


def test_profiles_by_name() -> None:
    assert get_profile("dense") is DENSE
    assert get_profile(MOE) is MOE
    assert set(PROFILES) == {"dense", "moe"}
    with pytest.raises(ConfigError, match="unknown engine profile 'x'; known profiles: dense, moe"):
        get_profile("x")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rate_curve": ((1, 10.0),)}, "at least two points"),
        ({"rate_curve": ((2, 10.0), (4, 9.0))}, "start at 1 stream"),
        ({"rate_curve": ((1, 10.0), (1, 9.0))}, "must increase"),
        ({"rate_curve": ((1, 10.0), (2, -1.0))}, "positive"),
        ({"prefill_tokens_per_s": 0}, "prefill_tokens_per_s must be positive"),
        ({"memory_pressure_base": -1}, "memory_pressure_base must not be negative"),
    ],
)
def test_invalid_profiles_are_config_errors(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(DENSE, **changes)


def test_a_custom_profile_extrapolates_past_its_last_point() -> None:
    custom = dataclasses.replace(DENSE, name="custom", rate_curve=((1, 10.0), (2, 5.0)))
    assert custom.decode_step_s(3) == pytest.approx(0.3)  # step time grows by 0.1 s a stream
    with pytest.raises(ValueError, match="at least one stream"):
        custom.decode_step_s(0)
