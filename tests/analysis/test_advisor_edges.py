"""The advisor's texts and rules at their edges, worked out by hand: a curve's date on a box whose
clock is not UTC, a lane of one level at two streams, a lane below 1 tok/s, the cross-engine rule
for one window, for the costliest of two and beside a harmless single cell, the gauge rule at its
boundaries, and what an engine with a single-level curve and no usable cells is told."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.neighbour_reports import neighbour_report, window_cost

from spark_otel.analysis.advisor import AdvisorConfig, advise, lane_shape
from spark_otel.analysis.advisor.advice_model import Evidence, QueueRule, RuleKind
from spark_otel.analysis.advisor.queue_rules import cross_engine_rules, gauge_rule, lane_rule
from spark_otel.model import Cell, CellStatus
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.views.curves import describe_curve, lane_evidence
from spark_otel.views.rules import rule_evidence, rule_text

S = 1_000_000_000
CONFIG = AdvisorConfig()


def said(rule: QueueRule) -> tuple[str, str, QueueRule]:
    """The rule's words, as `views.rules` writes them, and its facts without the records they rest
    on (the curve, the class's prediction, the lane's shape, the window): what a test pins whole."""
    bare = rule.model_copy(
        update={"curve": None, "advice": None, "shape": None, "missing": None, "cross": None, "gauge": None}
    )
    return rule_text(rule), rule_evidence(rule), bare


def expected(rule: str, evidence: str, **facts: Any) -> tuple[str, str, QueueRule]:
    """What `said` gives for a rule with these words and facts."""
    return rule, evidence, QueueRule(**facts)


def _curve(*points: tuple[int, float, float], **kw: object) -> RateCurve:
    """Engine q's curve from (streams, per-stream rate, aggregate rate)."""
    return RateCurve(
        engine="q",
        points=[CurvePoint(streams=s, per_stream_rate=r, aggregate_rate=a) for s, r, a in points],
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.usefixtures("india_local_time")
def test_a_curves_date_is_in_utc_whatever_the_local_zone() -> None:
    """The text says UTC, so the time it prints is UTC, not the box's local time."""
    curve = _curve((1, 10.0, 10.0), measured_unix_ns=1_700_000_000 * S)  # 2023-11-14 22:13:20 UTC
    assert describe_curve(curve) == "probe of 2023-11-14 22:13 UTC, idle, at 1 stream"


def test_one_level_at_two_streams_is_plural_and_says_to_measure_past_it() -> None:
    """Two streams are "streams", in the shape's evidence and in the rule."""
    curve = _curve((2, 5.0, 10.0))
    shape = lane_shape(curve, CONFIG.flat_gain)
    assert (shape.kind, shape.streams, lane_evidence(shape)) == (
        "single",
        2,
        "one level measured (2 streams)",
    )
    assert said(lane_rule(curve, CONFIG, {})) == expected(
        rule="q: no lane cap yet, measure past 2 streams",
        evidence=(
            "one level measured (2 streams) (probe, idle, at 2 streams); "
            "run: spark-otel probe --engine q=URL --streams 2,4,8"
        ),
        kind=RuleKind.MEASURE,
        engine="q",
        command="spark-otel probe --engine q=URL --streams 2,4,8",
        figures=Evidence(levels=[2], under_load=False),
    )


def test_a_lane_below_one_token_a_second_gains_by_its_own_ratio() -> None:
    """A slow engine's gain is its aggregate's ratio like any other's: 0.5 to 0.9 tok/s is +80%."""
    curve = _curve((1, 0.5, 0.5), (2, 0.45, 0.9))
    shape = lane_shape(curve, CONFIG.flat_gain)
    assert (shape.kind, shape.streams, shape.gain) == ("rising", 2, pytest.approx(0.8))
    assert lane_evidence(shape) == (
        "aggregate still rising at 2 streams, the most measured: 0 tok/s at 1, 1 at 2 (+80%)"
    )


def test_one_costly_window_is_the_whole_evidence() -> None:
    """One window past the threshold names no further windows, and the load yields when nothing
    at one worker beside the eval was measured."""
    (rule,) = cross_engine_rules([neighbour_report([window_cost("w", 0.5)])], set(), 0.2)
    assert (rule_text(rule), rule.workers) == ("nemotron yields while g runs on q", 0)
    assert rule_evidence(rule) == (
        "run w: g decoded 4.00 tok/s (n=5) against its 10.00 baseline (n=20), cost 50% "
        "(95% CI 44% to 73%) > 20%; 2 of 5 cells in the window timed out; nemotron at one worker "
        "beside it was not measured under the threshold: it yields"
    )


def test_the_costliest_window_is_the_evidence_wherever_it_comes() -> None:
    """Of two windows past the threshold the costlier is quoted, though it came second."""
    report = neighbour_report([window_cost("w1", 0.3), window_cost("w2", 0.5)])
    (rule,) = cross_engine_rules([report], set(), 0.2)
    assert rule_evidence(rule) == (
        "run w2: g decoded 4.00 tok/s (n=5) against its 10.00 baseline (n=20), cost 50% "
        "(95% CI 44% to 73%) > 20%; 2 of 5 cells in the window timed out; 1 more window on nemotron "
        "past the threshold; nemotron at one worker beside it was not measured under the threshold: it yields"
    )
    assert rule.figures.neighbour_cost == 0.5


def test_narrowed_to_the_load_engine_a_window_of_another_engine_hides_none_after_it() -> None:
    """Narrowing to nemotron skips a window of another engine and still reads the next one."""
    report = neighbour_report([window_cost("x", 0.9, engine="other"), window_cost("w", 0.5)])
    rules = cross_engine_rules([report], set(), 0.2, engine="nemotron")
    assert [(r.engine, r.eval_name, r.figures.neighbour_cost) for r in rules] == [("nemotron", "g", 0.5)]


def test_a_single_cell_at_no_cost_or_exactly_the_threshold_lets_one_run() -> None:
    """One worker of the load costing nothing, or exactly the threshold (at most it), limits the
    load to one cell, and the evidence quotes that cost."""
    for alone, said in ((0.0, "0%"), (0.2, "20%")):
        report = neighbour_report([window_cost("w", 0.5), window_cost("one", alone, streams=1)])
        (rule,) = cross_engine_rules([report], set(), 0.2)
        assert (rule_text(rule), rule.workers) == ("Do not batch nemotron while g runs on q", 1)
        assert rule_evidence(rule).endswith(f"; beside one nemotron cell it cost {said}: at most 1 there")


def test_the_gauge_rule_at_its_boundaries() -> None:
    """A fraction gauge pinned at exactly 1.0 is 100%; a percent gauge reading 2 is 2% and one
    reading 50 is 50%, neither pinned; a token rate under 1 tok/s is a rate; no rate, no rule."""
    pinned = gauge_rule([1.0, 1.0, 1.0], [0.5, 2.0], CONFIG)
    assert pinned is not None
    assert rule_evidence(pinned) == (
        "utilization median 100% (p10 100%, p90 100%) over 3 samples while token rate ranged 0.5 to "
        "2.0 tok/s (4.0x)"
    )
    assert gauge_rule([2.0, 2.0, 2.0], [0.5, 2.0], CONFIG) is None
    assert gauge_rule([50.0, 50.0, 50.0], [0.5, 2.0], CONFIG) is None
    assert gauge_rule([1.0, 1.0, 1.0], [], CONFIG) is None


def test_an_engine_with_one_level_and_no_usable_cells_is_told_what_its_curve_lacks() -> None:
    """Its one measure-first rule names the curve it has, not "no rate curve"."""
    failed = [
        Cell(
            uid=f"f{k}",
            eval_name="g",
            cell_id=f"f{k}",
            engine="q",
            start_unix_ns=10 * k * S,
            end_unix_ns=(10 * k + 5) * S,
            status=CellStatus.ERROR,
        )
        for k in range(3)
    ]
    advice = advise(failed, [_curve((1, 10.0, 10.0))])
    (measure,) = [r for r in advice.rules if r.kind is RuleKind.MEASURE and r.shape is None]  # not the lane's
    assert rule_evidence(measure) == (
        "3 cells recorded, one level only (1 stream): nothing to compare (probe, idle, at 1 stream); "
        "run: spark-otel probe --engine q=URL --streams 1,2,4,8, or run the eval at 1 and N workers"
    )
    assert (measure.figures.levels, measure.figures.n_cells) == ([1], 3)
