"""Summary statistics for per-cell rates: median, p10, p90 and mean.

Percentiles use linear interpolation between closest ranks (Hyndman and Fan type 7, the default
of ``numpy.percentile`` and of Python's ``statistics.quantiles(method="inclusive")``): sort the
n values, take rank ``q * (n - 1)`` and interpolate between its two neighbours. It is the method
vLLM's bench reports with, and it reproduces the article's figures from its per-cell rows
(Appendix C: median 11.57 tok/s at one worker, 9.20 at eight). Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

__all__ = ["RateSummary", "percentile", "summarize"]


class RateSummary(BaseModel):
    """n, median, p10, p90 and mean of a set of rates; the statistics are None when n is 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int
    median: float | None = None
    p10: float | None = None
    p90: float | None = None
    mean: float | None = None


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


def summarize(values: Iterable[float | None]) -> RateSummary:
    """Summarize finite values; None and non-finite entries (cells without a rate) are skipped."""
    kept = sorted(v for v in values if v is not None and math.isfinite(v))
    if not kept:
        return RateSummary(n=0)
    return RateSummary(
        n=len(kept),
        median=percentile(kept, 0.5),
        p10=percentile(kept, 0.1),
        p90=percentile(kept, 0.9),
        mean=math.fsum(kept) / len(kept),
    )
