"""The saturation knee's arithmetic: running sums that must agree with the plain formulas on any
data, and the knee found on plain points at the edges of each threshold."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_otel.analysis.gauges import Thresholds
from spark_otel.analysis.gauges.verdicts import _knee, _Sums
from spark_otel.analysis.stats import elasticity

values = st.floats(min_value=0.5, max_value=1_000, allow_nan=False)
points = st.lists(st.tuples(values, values), min_size=2, max_size=12).map(sorted)


def _misfit(pts: list[tuple[float, float]], k: int, stop: int) -> float:
    """A least-squares line through pts[:k + 1], then a constant over pts[k:stop]: squared error."""
    head, tail = pts[: k + 1], pts[k:stop]
    mt = sum(t for t, _ in head) / len(head)
    mg = sum(g for _, g in head) / len(head)
    sxx = sum((t - mt) ** 2 for t, _ in head)
    slope = sum((t - mt) * (g - mg) for t, g in head) / sxx if sxx > 0 else 0.0
    line = sum((g - (mg + slope * (t - mt))) ** 2 for t, g in head)
    mean = sum(g for _, g in tail) / len(tail)
    return line + sum((g - mean) ** 2 for _, g in tail)


@given(points, st.data())
def test_the_running_sums_give_each_runs_elasticity_and_misfit(
    pts: list[tuple[float, float]], data: st.DataObject
) -> None:
    sums = _Sums(pts)
    start = data.draw(st.integers(0, len(pts) - 2))
    stop = data.draw(st.integers(start + 2, len(pts)))
    plain = elasticity([t for t, _ in pts[start:stop]], [g for _, g in pts[start:stop]])
    fast = sums.elasticity(start, stop)
    if plain is None or fast is None:
        spread = max(t for t, _ in pts[start:stop]) - min(t for t, _ in pts[start:stop])
        assert spread <= 1e-6 * max(t for t, _ in pts[start:stop])  # only a throughput that does not vary
    else:
        assert fast == pytest.approx(plain, rel=1e-6, abs=1e-9)
    k = data.draw(st.integers(0, len(pts) - 1))
    end = data.draw(st.integers(k + 1, len(pts)))
    scale = sum(g * g for _, g in pts)
    assert math.isclose(sums.misfit(k, end), _misfit(pts, k, end), rel_tol=1e-6, abs_tol=1e-9 * scale)


def test_the_elasticity_of_one_point_or_a_zero_gauge_is_undefined() -> None:
    sums = _Sums([(1.0, 0.0), (2.0, 0.0), (3.0, 1.0)])
    assert sums.elasticity(0, 1) is None
    assert sums.elasticity(0, 2) is None  # the gauge sums to 0
    assert sums.elasticity(1, 3) == pytest.approx(elasticity([2.0, 3.0], [0.0, 1.0]))


TH = Thresholds()


def _fills(throughputs: list[float], top: float) -> list[tuple[float, float]]:
    return [(t, min(t, top)) for t in throughputs]


def test_a_knee_needs_a_span_of_load_below_and_above_it() -> None:
    # Rises to 100 at 100 tok/s, flat to 150: exactly the 1.5x span both below and above.
    assert _knee(_fills([50.0, 75.0, 100.0, 125.0, 150.0], 100.0), TH) == 2
    # Flat only to 149: under 1.5x above the knee, so no knee.
    assert _knee(_fills([50.0, 75.0, 100.0, 125.0, 149.0], 100.0), TH) is None
    # Rising only from 67 (under 1.5x below 100): no knee at 100; none at 75 either.
    assert _knee(_fills([67.0, 80.0, 100.0, 125.0, 150.0], 100.0), TH) is None


def test_a_knee_needs_the_part_below_to_track_and_the_part_above_to_stay_flat() -> None:
    falling_top = [(50.0, 50.0), (75.0, 75.0), (100.0, 100.0), (125.0, 60.0), (150.0, 30.0)]
    assert _knee(falling_top, TH) is None  # falls past the knee: not flat
    flat_below = [(10.0, 5.0), (20.0, 5.0), (40.0, 5.0), (80.0, 5.0), (160.0, 5.0)]
    assert _knee(flat_below, TH) is None
    falls_then_flat = [(t, 1000.0 / t if t < 100 else 10.0) for t in (25.0, 50.0, 100.0, 150.0, 200.0)]
    assert _knee(falls_then_flat, TH) == 2  # a gauge that falls with load, then holds
    assert _knee([(1.0, 1.0), (2.0, 2.0)], TH) is None  # no point between the ends
