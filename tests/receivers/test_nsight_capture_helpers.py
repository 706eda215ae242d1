"""The pure helpers' refusals: `percentile_from_counts` given counts that cannot hold the rank,
and `NsightSummary.metric` asked for a metric it lacks.

The property test compares percentiles with numpy for well-formed input only; these pin that a
q outside 0..100 and a values list shorter than its counts raise rather than return a made-up
figure, and that the KeyError names the metric asked for (a caller's message quotes it).
"""

from __future__ import annotations

import math
import re

import pytest

from spark_otel.receivers.nsight import NsightLayout, NsightSummary, percentile_from_counts


@pytest.mark.parametrize("q", [-0.5, 100.5, 200, math.nan])
def test_a_percentile_outside_0_to_100_is_refused(q: float) -> None:
    with pytest.raises(ValueError, match=rf"^percentile {re.escape(repr(q))} is outside 0\.\.100$"):
        percentile_from_counts([1.0, 2.0], [1, 1], q)


@pytest.mark.parametrize(("q", "expected"), [(0, 1.0), (100, 2.0)])
def test_the_bounds_0_and_100_are_the_first_and_last_values(q: float, expected: float) -> None:
    assert percentile_from_counts([1.0, 2.0], [1, 1], q) == expected


def test_values_shorter_than_their_counts_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^zip\(\) argument 2 is longer than argument 1$"):
        percentile_from_counts([1.0], [1, 1], 50)


def test_a_metric_the_summary_lacks_is_a_key_error_naming_it() -> None:
    summary = NsightSummary(
        capture="c.sqlite",
        path="/c.sqlite",
        uid="0" * 24,
        layout=NsightLayout.RAW,
        product_version=None,
        schema_version=None,
        session_start_unix_ns=0,
        start_unix_ns=0,
        end_unix_ns=0,
        duration_s=0.0,
        interval_ms=100.0,
        metrics=[],
    )
    with pytest.raises(KeyError) as caught:
        summary.metric("SM Issue")
    assert caught.value.args == ("SM Issue",)
