"""`summarize_groups` gives `summarize` of each group's values, figure for figure: quantiles,
interval ends and means equal as floats (a signed zero included), NaN and infinities skipped,
empty groups and groups of one."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from spark_otel.analysis.stats import RateSummary, summarize, summarize_groups


def _each(values: list[float], groups: list[int], n_groups: int) -> list[RateSummary]:
    return [summarize([v for v, g in zip(values, groups, strict=True) if g == k]) for k in range(n_groups)]


def _same(got: list[RateSummary], expected: list[RateSummary]) -> None:
    assert got == expected
    for a, b in zip(got, expected, strict=True):  # == holds 0.0 == -0.0; the JSON would not
        for field in RateSummary.model_fields:
            x, y = getattr(a, field), getattr(b, field)
            assert (x is None) == (y is None)
            if isinstance(x, float):
                assert math.copysign(1, x) == math.copysign(1, y), field


def test_groups_of_every_size_and_skipped_values() -> None:
    values = [3.0, 1.0, math.nan, 2.0, math.inf, 5.0, -math.inf, 7.5, 0.1, 0.2, 0.3]
    groups = [0, 0, 0, 1, 1, 3, 3, 4, 4, 4, 4]
    got = summarize_groups(np.array(values), np.array(groups), 6)
    _same(got, _each(values, groups, 6))
    assert got[2] == got[5] == RateSummary(n=0)  # groups with no value, and none past the last
    assert got[1] == RateSummary(n=1, median=2.0, p10=2.0, p90=2.0, mean=2.0)  # one value: no interval
    assert got[0].median == 2.0  # the two values, interpolated
    assert summarize_groups(np.array([]), np.array([], np.intp), 0) == []


def test_groups_of_two_to_two_hundred_values_pick_summarizes_interval_ranks() -> None:
    rng = np.random.default_rng(38)
    groups = [k for k in range(200) for _ in range(k)]
    values = rng.lognormal(2.0, 0.5, len(groups)).round(2).tolist()  # rounded: ties too
    shuffled = rng.permutation(len(groups))
    values = [values[i] for i in shuffled]
    groups = [groups[i] for i in shuffled]
    _same(summarize_groups(np.array(values), np.array(groups), 200), _each(values, groups, 200))


def test_ties_and_signed_zeros_keep_summarizes_order() -> None:
    values = [0.0, -0.0, 0.0, 1.0, -0.0, 0.0]
    groups = [0, 0, 0, 0, 1, 1]
    _same(summarize_groups(np.array(values), np.array(groups), 2), _each(values, groups, 2))


@given(
    st.lists(
        st.tuples(
            st.integers(0, 6),
            st.floats(allow_nan=True, allow_infinity=True, width=64)
            | st.sampled_from([0.0, -0.0, 1.0, 11.57, 9.2]),
        ),
        max_size=300,
    ),
    st.integers(0, 3),
)
def test_generated_groups_equal_summarize(pairs: list[tuple[int, float]], extra: int) -> None:
    n_groups = max((g for g, _v in pairs), default=-1) + 1 + extra
    groups = [g for g, _v in pairs]
    values = [v for _g, v in pairs]
    got = summarize_groups(np.array(values, np.float64), np.array(groups, np.intp), n_groups)
    _same(got, _each(values, groups, n_groups))
