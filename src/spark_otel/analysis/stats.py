"""Summary statistics for per-cell rates: median, p10, p90, mean and an interval on the median.

Percentiles use linear interpolation between closest ranks (Hyndman and Fan type 7, the default
of ``numpy.percentile`` and of Python's ``statistics.quantiles(method="inclusive")``): sort the
n values, take rank ``q * (n - 1)`` and interpolate between its two neighbours. It is the method
vLLM's bench reports with, and it reproduces the article's figures from its per-cell rows
(Appendix C: median 11.57 tok/s at one worker, 9.20 at eight).

The interval on the median is the distribution-free one from order statistics: the values at
ranks ``n/2 -+ 1.96 sqrt(n)/2`` (the binomial count of values below the median, normally
approximated), a 95% interval whatever the rates' distribution, exact in the ranks it picks and
cheap once the values are sorted. With fewer than 6 values it spans them all, and covers less.
`rank_correlation` (Spearman) and `elasticity` (at the means) grade a gauge against throughput
(`analysis.instruments`). `summarize_groups` is `summarize` of many groups at once over numpy
arrays (the ``cli`` extra's, imported only there), figure for figure.
Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "RateSummary",
    "elasticity",
    "median_interval",
    "percentile",
    "rank_correlation",
    "summarize",
    "summarize_groups",
]

_Z95 = 1.959964


class RateSummary(BaseModel):
    """n, median, p10, p90 and mean of a set of rates; the statistics are None when n is 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int
    median: float | None = None
    p10: float | None = None
    p90: float | None = None
    mean: float | None = None
    ci_low: float | None = None
    """Low end of the 95% interval on the median (None below two values)."""
    ci_high: float | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` (any order), by linear interpolation (type 7).

    >>> percentile([4.0, 1.0, 3.0, 2.0], 0.5)
    2.5
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside 0..1")
    sorted_values = sorted(values)  # linear time when already sorted
    rank = q * (len(sorted_values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    frac = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * frac


def median_interval(sorted_values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% distribution-free interval on the median of ``sorted_values`` (ascending)."""
    n = len(sorted_values)
    if n < 2:
        return None
    half_width = _Z95 * math.sqrt(n) / 2
    low = max(1, round(n / 2 - half_width))  # 1-based ranks
    high = min(n, round(1 + n / 2 + half_width))
    return sorted_values[low - 1], sorted_values[high - 1]


def summarize(values: Iterable[float | None]) -> RateSummary:
    """Summarize finite values; None and non-finite entries (cells without a rate) are skipped."""
    kept = sorted(v for v in values if v is not None and math.isfinite(v))
    if not kept:
        return RateSummary(n=0)
    interval = median_interval(kept)
    return RateSummary(
        n=len(kept),
        median=percentile(kept, 0.5),
        p10=percentile(kept, 0.1),
        p90=percentile(kept, 0.9),
        mean=math.fsum(kept) / len(kept),
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
    )


def summarize_groups(
    values: NDArray[np.float64], groups: NDArray[np.intp], n_groups: int
) -> list[RateSummary]:
    """`summarize` of each group's values: ``groups[k]`` (0 to ``n_groups`` - 1) is the group of
    ``values[k]``; NaN and infinite values are skipped as `summarize` skips them.

    The same figures as `summarize` on each group's values in their order: one stable sort by
    group and value, then each quantile, interval rank and mean with the same float operations in
    the same order (``numpy.rint`` rounds half to even as `round` does; the mean is `math.fsum`'s,
    a slice per group). Each group's `RateSummary` is still one Python object."""
    import numpy as np

    kept = np.isfinite(values)
    order = np.lexsort((values[kept], groups[kept]))  # stable: equal values keep their order
    ordered = values[kept][order]
    n = np.bincount(groups[kept], minlength=n_groups).astype(np.int64)
    first = np.zeros(n_groups, np.int64)
    np.cumsum(n[:-1], out=first[1:])
    filled = n > 0
    last = np.maximum(n - 1, 0)

    def quantile(q: float) -> NDArray[np.float64]:
        rank = q * last
        low = np.floor(rank).astype(np.int64)
        high = np.minimum(low + 1, last)
        at_low = ordered[np.where(filled, first + low, 0)] if len(ordered) else np.zeros(n_groups)
        at_high = ordered[np.where(filled, first + high, 0)] if len(ordered) else np.zeros(n_groups)
        out: NDArray[np.float64] = at_low + (at_high - at_low) * (rank - low)
        return out

    median, p10, p90 = quantile(0.5), quantile(0.1), quantile(0.9)
    half_width = _Z95 * np.sqrt(n) / 2
    ci_low = np.maximum(1, np.rint(n / 2 - half_width)).astype(np.int64)
    ci_high = np.minimum(n, np.rint(1 + n / 2 + half_width)).astype(np.int64)
    sorted_values = ordered.tolist()
    starts, counts = first.tolist(), n.tolist()

    def at_rank(ranks: NDArray[np.int64]) -> list[float | None]:  # 1-based; None below two values
        return [
            sorted_values[a + r - 1] if c >= 2 else None
            for a, r, c in zip(starts, ranks.tolist(), counts, strict=True)
        ]

    lows, highs = at_rank(ci_low), at_rank(ci_high)
    return [
        RateSummary(
            n=c,
            median=m,
            p10=lo,
            p90=hi,
            mean=math.fsum(sorted_values[a : a + c]) / c,
            ci_low=cl,
            ci_high=ch,
        )
        if c
        else RateSummary(n=0)
        for a, c, m, lo, hi, cl, ch in zip(
            starts, counts, median.tolist(), p10.tolist(), p90.tolist(), lows, highs, strict=True
        )
    ]


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def rank_correlation(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation; None below two points or when either side is constant."""
    return _pearson(_ranks(x), _ranks(y))


def elasticity(throughput: Sequence[float], gauge: Sequence[float]) -> float | None:
    """The gauge's elasticity at the means: least-squares slope of gauge on throughput, times
    mean throughput over mean gauge. None when throughput does not vary or the gauge averages 0."""
    n = len(throughput)
    if n < 2:
        return None
    mt, mg = sum(throughput) / n, sum(gauge) / n
    stt = sum((t - mt) ** 2 for t in throughput)
    if stt <= 0 or mg == 0:
        return None
    slope = sum((t - mt) * (g - mg) for t, g in zip(throughput, gauge, strict=True)) / stt
    return slope * mt / mg
