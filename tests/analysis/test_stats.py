"""Percentiles and rate summaries: the method the article's figures come out of."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_otel.analysis import RateSummary, percentile, summarize
from spark_otel.analysis.stats import elasticity, rank_correlation


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [10.0, 20.0, 30.0, 40.0, 50.0]
    # rank q * (n - 1): p10 -> 0.4 -> 10 + 0.4 * 10, p90 -> 3.6 -> 40 + 0.6 * 10
    assert percentile(values, 0.1) == pytest.approx(14.0)
    assert percentile(values, 0.5) == 30.0
    assert percentile(values, 0.9) == pytest.approx(46.0)
    assert percentile(values, 0.0) == 10.0
    assert percentile(values, 1.0) == 50.0


def test_percentile_accepts_unsorted_values() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5


@pytest.mark.parametrize(("values", "q"), [([], 0.5), ([1.0], -0.1), ([1.0], 1.5)])
def test_percentile_rejects_empty_input_and_bad_quantiles(values: list[float], q: float) -> None:
    with pytest.raises(ValueError, match=r"percentile|quantile"):
        percentile(values, q)


def test_summarize_skips_cells_without_a_rate() -> None:
    summary = summarize([11.0, None, 9.0, math.nan, 10.0])
    assert summary == RateSummary(n=3, median=10.0, p10=9.2, p90=10.8, mean=10.0, ci_low=9.0, ci_high=11.0)


def test_summarize_of_nothing_has_no_statistics() -> None:
    assert summarize([None]) == RateSummary(n=0)
    assert summarize([]).median is None


def test_summarize_reproduces_the_article_serial_and_eight_worker_medians() -> None:
    # Appendix C per-cell tok/s as printed.
    serial = [11.54, 11.67, 11.52, 11.59, 11.44, 11.63]
    eight = [9.20, 8.99, 9.30, 9.38, 9.31, 8.80, 9.18]
    one, many = summarize(serial), summarize(eight)
    assert (one.n, many.n) == (6, 7)
    # "Median per-cell rate 11.57 tok/s at 1 worker, 9.20 at 8, mean 11.56 and 9.17": the
    # serial median and mean are both 11.565, which the article rounds up and down.
    assert one.median == pytest.approx(11.565)
    assert one.mean == pytest.approx(11.565)
    assert many.median == pytest.approx(9.20)
    assert round(many.mean, 2) == 9.17


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=2, max_size=60))
def test_percentile_matches_the_inclusive_method_of_the_standard_library(values: list[float]) -> None:
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    assert percentile(values, 0.1) == pytest.approx(deciles[0], rel=1e-9, abs=1e-9)
    assert percentile(values, 0.9) == pytest.approx(deciles[8], rel=1e-9, abs=1e-9)
    assert percentile(values, 0.5) == pytest.approx(statistics.median(values), rel=1e-9, abs=1e-9)


def test_analysis_public_surface_is_sorted_and_resolves() -> None:
    import spark_otel.analysis as analysis

    assert analysis.__all__ == sorted(analysis.__all__)
    for name in analysis.__all__:
        assert getattr(analysis, name) is not None, name


def test_the_median_interval_takes_the_textbook_ranks() -> None:
    from spark_otel.analysis.stats import median_interval

    values = [float(i) for i in range(1, 101)]
    assert median_interval(values) == (40.0, 61.0)  # n = 100: the 40th and 61st values
    assert median_interval([5.0]) is None
    assert median_interval([1.0, 2.0]) == (1.0, 2.0)


def test_the_median_interval_covers_the_true_median_about_95_percent_of_the_time() -> None:
    import random

    from spark_otel.analysis.stats import median_interval

    rng = random.Random(7)
    trials, covered = 2000, 0
    for _ in range(trials):
        sample = sorted(rng.expovariate(1.0) for _ in range(41))  # skewed; true median ln 2
        low, high = median_interval(sample)  # type: ignore[misc]
        covered += low <= math.log(2) <= high
    assert 0.93 <= covered / trials <= 0.98


def test_two_points_are_enough_for_a_correlation_and_an_elasticity() -> None:
    assert rank_correlation([1.0, 2.0], [3.0, 5.0]) == pytest.approx(1.0)
    assert rank_correlation([1.0, 2.0], [5.0, 3.0]) == pytest.approx(-1.0)
    assert rank_correlation([5.0, 5.0, 5.0], [1.0, 2.0, 3.0]) is None  # constant on either side
    assert elasticity([10.0, 20.0], [1.0, 2.0]) == pytest.approx(1.0)
    # A throughput that varies by less than one token still has an elasticity.
    assert elasticity([1.0, 1.5], [2.0, 3.0]) == pytest.approx(1.0)
    assert elasticity([1.0], [2.0]) is None


def test_series_of_different_lengths_are_a_bug_not_a_figure() -> None:
    with pytest.raises(ValueError, match="zip"):
        rank_correlation([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="zip"):
        elasticity([1.0, 2.0, 3.0], [1.0, 2.0])


def test_percentile_of_nothing_says_so() -> None:
    with pytest.raises(ValueError, match=r"^percentile of no values$"):
        percentile([], 0.5)
