"""A profile's checks and curves at their edges, and the output-length draw, exactly.

test_profiles.py checks the shipped calibration; these pin what a custom profile meets: every
refusal's whole message (naming the profile and the curve), the smallest values allowed, the
curves stored as float tuples whatever was given, the extrapolation past the last point, and the
draw's four outcomes (pinned, capped at ``max_tokens``, raised to ``min_tokens``, at least one
token) for keys whose draws are known.
"""

from __future__ import annotations

import dataclasses

import pytest

from spark_otel import ConfigError
from spark_otel.sim import DENSE, Profile, draw_output_tokens

STEP = dataclasses.replace(DENSE, name="step", rate_curve=((1, 10.0), (3, 5.0)))  # 0.1 s, then 0.2 s at 3


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rate_curve": ((2, 10.0), (4, 9.0))}, "profile 'custom': rate_curve must start at 1 stream, got 2"),
        (
            {"rate_curve": ((1, 10.0), (2, 0.0))},
            "profile 'custom': rate_curve values must be positive and finite",
        ),
        ({"rate_curve": ((1, 10.0),)}, "profile 'custom': rate_curve needs at least two points, got 1"),
        (
            {"power_curve": ((1.5, 30.0), (2, 31.0))},
            "profile 'custom': power_curve must start at 1 stream, got 1.5",
        ),
        (
            {"power_curve": ((1, 30.0), (1, 31.0))},
            "profile 'custom': power_curve stream counts must increase (1 then 1)",
        ),
        ({"max_num_seqs": 0}, "profile 'custom': max_num_seqs must be positive, got 0"),
        ({"memory_sensitivity": -0.5}, "profile 'custom': memory_sensitivity must not be negative"),
    ],
)
def test_a_bad_profile_is_refused_naming_the_profile_and_the_field(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        dataclasses.replace(DENSE, name="custom", **changes)
    assert str(refused.value) == message


def test_the_smallest_values_a_profile_allows() -> None:
    slowest = dataclasses.replace(
        DENSE,
        name="slowest",
        rate_curve=[[1, 0.5], [2, 0.25]],  # any positive rate, given as lists of ints and floats
        power_curve=[(1, 1), (2, 1)],
        prefill_tokens_per_s=0.5,
        max_num_batched_tokens=1,
        max_num_seqs=1,
        max_model_len=1,
        memory_pressure_base=0,
        memory_pressure_per_stream=0,
        memory_sensitivity=0,
    )
    # The curves are stored as tuples of floats, whatever they were given as.
    assert (slowest.rate_curve, slowest.power_curve) == (((1.0, 0.5), (2.0, 0.25)), ((1.0, 1.0), (2.0, 1.0)))
    assert type(slowest.rate_curve) is type(slowest.power_curve) is tuple
    assert slowest.decode_step_s(2) == 4.0
    assert slowest.memory_pressure(5) == 0.0


def test_curves_are_extended_past_their_last_point_along_the_last_segment() -> None:
    # Step time 0.1 s at 1 stream, 0.2 s at 3: 0.05 s more a stream, also past 3.
    assert [STEP.decode_step_s(n) for n in (1, 2, 3, 5)] == pytest.approx([0.1, 0.15, 0.2, 0.3], rel=1e-12)
    power = dataclasses.replace(DENSE, name="power", power_curve=((1, 30.0), (3, 34.0)))
    assert [power.power_w(n) for n in (0, 1, 2, 3, 5)] == pytest.approx(
        [30.0, 30.0, 32.0, 34.0, 38.0], rel=1e-12
    )


def test_aggregate_rate_and_prefill_time_on_a_custom_profile() -> None:
    assert STEP.aggregate_rate(3) == pytest.approx(3 * 5.0, rel=1e-12)
    # Under a neighbour pressure of 0.5 each step takes 1.5x as long.
    assert STEP.aggregate_rate(3, 0.5) == pytest.approx(3 * 5.0 / 1.5, rel=1e-12)
    assert DENSE.prefill_s(3000) == 2.0  # at 1,500 prompt tokens a second


# Draws of DENSE (median 256) for three keys, unpinned and unbounded.
DRAWN = {"k0": 311, "k1": 650, "k2": 463}


def test_the_draw_is_pinned_capped_or_raised() -> None:
    for key, drawn in DRAWN.items():
        assert draw_output_tokens(DENSE, key, 0, 100_000, False) == (drawn, "stop")
        # min_tokens equal to max_tokens pins the length, whatever the draw.
        assert draw_output_tokens(DENSE, key, 700, 700, False) == (700, "length")
        # A cap at or below the draw ends on length.
        assert draw_output_tokens(DENSE, key, 0, drawn, False) == (drawn, "length")
        assert draw_output_tokens(DENSE, key, 0, drawn + 1, False) == (drawn, "stop")
        # min_tokens raises a shorter draw.
        assert draw_output_tokens(DENSE, key, drawn + 5, 100_000, False) == (drawn + 5, "stop")
        assert draw_output_tokens(DENSE, key, 0, 100_000, True) == (100_000, "length")


def test_a_draw_of_no_tokens_still_makes_one() -> None:
    tiny: Profile = dataclasses.replace(DENSE, name="tiny", output_tokens_median=1, output_tokens_sigma=0.8)
    # With a median of one token, key "z1" draws 0.47 (0 rounded), and key "z0" draws 1.90 (2).
    assert draw_output_tokens(tiny, "z1", 0, 10, False) == (1, "stop")
    assert draw_output_tokens(tiny, "z0", 0, 10, False) == (2, "stop")
