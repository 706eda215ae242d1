"""The saturation knee at its edges: the running sums in any units and on runs without spread, and
each of the knee's tests (spans, flatness, tracking below it) exactly at its threshold."""

from __future__ import annotations

import pytest

from spark_otel.analysis.gauges import Thresholds
from spark_otel.analysis.gauges.verdicts import _knee, _Sums
from spark_otel.analysis.stats import elasticity

TH = Thresholds()
# (1, 1), (2, 3), (3, 2), (4, 4). Over the first three: means 2 and 2, sxx 2, sxy 1, syy 2, so a
# slope of 0.5 and elasticity 0.5 * 2 / 2 = 0.5; the line leaves 2 - 1 * 1 / 2 = 1.5 of squared error.
POINTS = [(1.0, 1.0), (2.0, 3.0), (3.0, 2.0), (4.0, 4.0)]


@pytest.mark.parametrize("scale", [1.0, 1e-20], ids=["plain", "tiny-units"])
def test_a_runs_elasticity_and_misfit_depend_only_on_its_own_points_in_any_units(scale: float) -> None:
    """The sums start from nothing and the line is fitted wherever throughput varies at all, so
    points in units 1e20 times smaller (every figure far under 1) give the same elasticity and
    the misfit times the square of the scale."""
    sums = _Sums([(t * scale, g * scale) for t, g in POINTS])
    assert sums.elasticity(0, 3) == pytest.approx(0.5)
    # k = 1: a line through two points fits exactly; the constant over (3, 2) misses each by 0.5.
    assert sums.misfit(1, 3) / scale**2 == pytest.approx(0.5)
    # k = 2: the line's 1.5, then the constant 3 over (2, 4) misses each by 1: 1.5 + 2.
    assert sums.misfit(2, 4) / scale**2 == pytest.approx(3.5)


def test_a_run_without_throughput_spread_has_no_elasticity_as_the_plain_formula_says() -> None:
    """Undefined, never a division by zero or a figure made of rounding: an empty run, a run at
    zero throughput, and one at a single throughput whose sums leave a sliver of spread."""
    assert _Sums(POINTS).elasticity(2, 2) is None
    at_zero = [(0.0, 1.0), (0.0, 2.0)]
    assert elasticity([t for t, _ in at_zero], [g for _, g in at_zero]) is None
    assert _Sums(at_zero).elasticity(0, 2) is None
    # 3 x 123.456 tok/s: stt - st * st / n comes to about 7e-12 in floating point, not 0.
    one_rate = [(123.456, 1.0), (123.456, 2.0), (123.456, 3.0)]
    assert elasticity([t for t, _ in one_rate], [g for _, g in one_rate]) is None
    assert _Sums(one_rate).elasticity(0, 3) is None


def test_a_single_point_or_none_has_no_knee() -> None:
    assert _knee([(1.0, 1.0)], TH) is None
    assert _knee([], TH) is None


def test_the_span_below_a_knee_is_measured_in_throughput_not_in_the_gauges_units() -> None:
    """Rising only from 67 tok/s (under 1.5x below 100) leaves no knee, whatever the gauge reads
    at the lowest load: here 0.67, a 100th of the throughput."""
    assert _knee([(67.0, 0.67), (80.0, 0.8), (100.0, 1.0), (125.0, 1.0), (150.0, 1.0)], TH) is None


def test_a_level_within_the_span_of_the_lowest_is_passed_over_not_the_end_of_the_search() -> None:
    """60 tok/s is under 1.5x of 50, so no knee there; 100 is 2x, and the gauge holds 100 from it to 150."""
    points = [(t, min(t, 100.0)) for t in (50.0, 60.0, 100.0, 125.0, 150.0)]
    assert _knee(points, TH) == 2


def test_an_elasticity_of_exactly_the_flat_threshold_above_the_knee_is_not_flat() -> None:
    """Flat is elasticity under 0.1. From 100 to 200 tok/s the gauge goes 29 to 31: slope 0.02, at
    the means 150 and 30, exactly 0.1; to 30.9 it is 0.019 * 150 / 29.95 = 0.095, flat."""
    assert _knee([(60.0, 14.5), (100.0, 29.0), (200.0, 31.0)], TH) is None
    assert _knee([(60.0, 14.5), (100.0, 29.0), (200.0, 30.9)], TH) == 1


def test_a_part_below_the_knee_that_moves_exactly_half_as_fast_tracks() -> None:
    """Below the knee 3 to 5 over 100 to 300 tok/s: slope 0.01 at the means 200 and 4, elasticity
    exactly 0.5, the threshold for tracking; above it 5 from 300 to 450 tok/s, flat."""
    assert _knee([(100.0, 3.0), (300.0, 5.0), (450.0, 5.0)], TH) == 1


def test_the_part_below_the_knee_ends_at_it_so_a_dip_just_above_does_not_count_against_the_rise() -> None:
    """5 then 10 at the knee (100 tok/s), then 9.9 to 200 tok/s (elasticity -0.015): flat. The
    ranks below the knee are in step; with the 9.9 just above it they would not be (0.5)."""
    assert _knee([(50.0, 5.0), (100.0, 10.0), (150.0, 9.9), (200.0, 9.9)], TH) == 1


def test_the_part_below_the_knee_must_rank_in_step_with_load_not_merely_rise() -> None:
    """2, 1, 10 at 10, 12, 20 tok/s rises (elasticity 2.88) but its ranks 2, 1, 3 correlate 0.5
    with load's, under 0.8: no knee at 20 tok/s, though the gauge holds 10 from there to 30."""
    assert _knee([(10.0, 2.0), (12.0, 1.0), (20.0, 10.0), (30.0, 10.0)], TH) is None


def test_a_rank_correlation_of_exactly_the_threshold_below_the_knee_tracks() -> None:
    """Ranks 1, 3, 2, 4 against 1, 2, 3, 4: 1 - 6 * 2 / (4 * 15) = 0.8, the threshold itself. The
    knee is at 20 tok/s (the first level 1.5x above 10) and 10 holds to 30."""
    assert _knee([(10.0, 1.0), (11.0, 3.0), (12.0, 2.0), (20.0, 10.0), (30.0, 10.0)], TH) == 3
