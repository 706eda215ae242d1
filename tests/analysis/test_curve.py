"""A rate curve on plain points: its shape checks, the rates and intervals read off it between
measured stream counts, and the curves read back from stored probe documents."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spark_otel import ConfigError
from spark_otel.analysis.curve import curves_from_documents
from spark_otel.records.rate_curve import CurvePoint, RateCurve


def _point(streams: int, rate: float, ci: tuple[float, float] | None = None) -> CurvePoint:
    low, high = ci if ci is not None else (None, None)
    return CurvePoint(
        streams=streams, per_stream_rate=rate, aggregate_rate=streams * rate, ci_low=low, ci_high=high
    )


CURVE = RateCurve(
    engine="q",
    points=[_point(8, 5.0, (4.0, 6.0)), _point(2, 9.0, (8.0, 10.0)), _point(4, 7.0, (6.0, 8.0))],
)


def test_points_are_kept_in_stream_order_one_per_count() -> None:
    assert CURVE.streams == [2, 4, 8]
    assert (CURVE.max_streams, CURVE.single_stream_rate, CURVE.measured_single_stream) == (8, 9.0, False)
    assert CURVE.peak_aggregate_streams == 8  # 40 tok/s, against 18 and 28
    with pytest.raises(ValidationError, match="a rate curve needs at least one point"):
        RateCurve(engine="q", points=[])
    with pytest.raises(ValidationError, match="a rate curve has one point per stream count"):
        RateCurve(engine="q", points=[_point(2, 9.0), _point(2, 8.0)])


def test_the_peak_is_the_fewest_streams_among_equal_aggregates() -> None:
    flat = RateCurve(engine="q", points=[_point(1, 20.0), _point(2, 10.0), _point(4, 5.0)])
    assert (flat.peak_aggregate_streams, flat.measured_single_stream, flat.single_stream_rate) == (
        1,
        True,
        20.0,
    )


@pytest.mark.parametrize(
    ("n", "rate", "interval"),
    [
        (1, 9.0, (8.0, 10.0)),  # below the fewest measured: the first point holds
        (2, 9.0, (8.0, 10.0)),
        (3, 8.0, (7.0, 9.0)),  # halfway between 2 and 4
        (4, 7.0, (6.0, 8.0)),
        (5, 6.5, (5.5, 7.5)),  # a quarter of the way from 4 to 8
        (6.0, 6.0, (5.0, 7.0)),
        (8, 5.0, (4.0, 6.0)),
    ],
)
def test_rates_and_intervals_are_read_linearly_between_measured_counts(
    n: float, rate: float, interval: tuple[float, float]
) -> None:
    assert CURVE.per_stream_rate_at(n) == pytest.approx(rate)
    assert CURVE.per_stream_interval_at(n) == pytest.approx(interval)


def test_nothing_is_read_past_the_most_streams_measured_or_below_one() -> None:
    message = "q: the curve was measured up to 8 streams, not 9"
    with pytest.raises(ConfigError, match=message):
        CURVE.per_stream_rate_at(9)
    with pytest.raises(ConfigError, match=message):
        CURVE.per_stream_interval_at(9)
    with pytest.raises(ConfigError, match=r"stream count 0\.5 must be at least 1"):
        CURVE.per_stream_rate_at(0.5)


def test_an_interval_needs_both_points_it_rests_on() -> None:
    partial = RateCurve(
        engine="q", points=[_point(1, 10.0, (9.0, 11.0)), _point(4, 7.0), _point(8, 5.0, (4.0, 6.0))]
    )
    assert partial.per_stream_interval_at(1) == (9.0, 11.0)
    assert partial.per_stream_interval_at(2) is None  # between 1 and 4: 4 has none
    assert partial.per_stream_interval_at(4) is None
    assert partial.per_stream_interval_at(6) is None
    assert partial.points[0].interval == (9.0, 11.0)
    assert _point(1, 1.0).model_copy(update={"ci_low": 0.5}).interval is None
    assert _point(1, 1.0).model_copy(update={"ci_high": 1.5}).interval is None


def test_stored_probe_documents_give_their_curves_in_order_and_name_the_ones_without() -> None:
    body = {"curve": CURVE.model_dump(mode="json")}
    other = {"curve": CURVE.model_copy(update={"engine": "n"}).model_dump(mode="json")}
    curves, problems = curves_from_documents(
        [
            {"name": "a", "body": body},
            {"name": "none", "body": {}},
            {"name": "bad", "body": {"curve": {"engine": "q", "points": []}}},
            {"name": "null", "body": None},
            {"name": "b", "body": other},
        ]
    )
    assert [c.engine for c in curves] == ["q", "n"]
    assert curves[0] == CURVE
    assert [p.split(" has no valid curve: ")[0] for p in problems] == [
        "probe document 'none'",
        "probe document 'bad'",
        "probe document 'null'",
    ]
    assert "a rate curve needs at least one point" in problems[1]
