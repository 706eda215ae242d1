"""The receiver's bins at their cap (`analysis.gauges.intervals`): scrapes that make exactly
`MAX_RECEIVER_INTERVALS` whole bins of the default width, plus part of one, keep that width; only
one bin more widens it."""

from __future__ import annotations

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import MAX_RECEIVER_INTERVALS, fitting_bin_s, receiver_intervals
from spark_otel.model import MetricSample

S = 1_000_000_000
T0 = 1_760_000_000 * S


def _scrapes(*seconds: int) -> list[MetricSample]:
    return [
        MetricSample(
            name=sc.ENGINE_GENERATION_TOKENS, unix_ns=T0 + t * S, value=10.0 * t, attributes={sc.ENGINE: "q"}
        )
        for t in seconds
    ]


def test_scrapes_spanning_the_cap_of_bins_and_part_of_one_keep_the_bin() -> None:
    at_cap = _scrapes(0, MAX_RECEIVER_INTERVALS * 30 + 15)
    assert fitting_bin_s(at_cap, 30.0) == 30.0
    assert len(receiver_intervals(at_cap, 30.0)) == MAX_RECEIVER_INTERVALS
    past = _scrapes(0, (MAX_RECEIVER_INTERVALS + 1) * 30)
    assert fitting_bin_s(past, 30.0) == 31.0
