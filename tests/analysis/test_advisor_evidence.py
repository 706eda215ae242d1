"""The advisor answers only from evidence: one test per guard, on hand-built data."""

from __future__ import annotations

import pytest
from tests.support.article import NEMOTRON_CURVE, QWEN_CURVE, S, appendix_c_cells

from spark_otel import _semconv as sc
from spark_otel.analysis import CurvePoint, RateCurve, advise, overview
from spark_otel.analysis.advisor import AdvisorConfig, LaneShape, RuleKind, choose_curves, lane_shape
from spark_otel.model import Cell, LoadWindow
from spark_otel.views.curves import describe_curve, lane_evidence
from spark_otel.views.rules import rule_evidence, rule_text

URLS = {"q": "http://127.0.0.1:8011"}


def _point(streams: int, rate: float, *, n: int = 8, spread: float = 0.0) -> CurvePoint:
    return CurvePoint(
        streams=streams,
        per_stream_rate=rate,
        aggregate_rate=streams * rate,
        n=n,
        ci_low=rate - spread if spread else None,
        ci_high=rate + spread if spread else None,
    )


def _curve(points: list[CurvePoint], **fields: object) -> RateCurve:
    return RateCurve(engine="q", points=points, **fields)  # type: ignore[arg-type]


def _cells(n: int = 6, *, tokens: int = 1000, rate: float = 10.0, eval_name: str = "g") -> list[Cell]:
    out, t = [], 0
    for k in range(n):
        elapsed = round(tokens / rate * S)
        out.append(
            Cell(
                uid=f"{eval_name}{k}",
                eval_name=eval_name,
                cell_id=f"c{k}",
                engine="q",
                start_unix_ns=t,
                end_unix_ns=t + elapsed,
                prompt_tokens=100,
                completion_tokens=tokens + 10 * k,  # lengths vary, so a bootstrap has something to resample
                workers=1,
            )
        )
        t += elapsed + S
    return out


def _kinds(rules: list) -> list[str]:
    return [r.kind.value for r in rules]


# -- a worker count needs a measured single stream and a second level ------------------------------


def test_no_single_stream_point_means_measure_first_with_the_exact_command() -> None:
    curve = _curve([_point(2, 9), _point(4, 8), _point(8, 6)])
    advice = advise(_cells(), [curve], engine_urls=URLS)
    assert advice.classes == []
    (rule,) = [r for r in advice.rules if r.eval_name == "g"]
    assert (rule.kind, rule.missing) == (RuleKind.MEASURE, "no single stream")
    assert "no single-stream rate: the curve starts at 2 streams" in rule_evidence(rule)
    assert rule.command == "spark-otel probe --engine q=http://127.0.0.1:8011 --streams 1,2,4,8"
    assert "or run the eval at 1 and N workers" in rule_evidence(rule)


def test_a_single_level_is_nothing_to_compare() -> None:
    advice = advise(_cells(), [_curve([_point(1, 10)])], engine_urls=URLS)
    assert advice.classes == []
    rule = next(r for r in advice.rules if r.eval_name == "g")
    assert (rule.kind, rule.missing) == (RuleKind.MEASURE, "one level")
    assert "one level only" in rule_evidence(rule)


def test_with_both_a_worker_count_is_given_and_shows_n_levels_and_intervals() -> None:
    curve = _curve([_point(1, 10, spread=0.5), _point(2, 9.5, spread=0.5), _point(4, 9, spread=0.5)])
    advice = advise(_cells(), [curve], engine_urls=URLS)
    (a,) = advice.classes
    (rule,) = [r for r in advice.rules if r.kind is RuleKind.BATCH]
    assert rule.workers == a.recommended_workers == 4
    assert a.per_stream_cost == pytest.approx(0.1)
    # The cost's interval takes the curve's intervals against each other: 1 - 9.5/9.5 .. 1 - 8.5/10.5.
    assert a.per_stream_cost_interval == pytest.approx((0.0, 1 - 8.5 / 10.5))
    low, high = a.speedup_interval  # type: ignore[misc]
    assert low <= a.speedup <= high
    assert rule.figures.levels == [1, 2, 4]
    assert rule.figures.n_cells == 6
    assert "n=6 cells" in rule_evidence(rule)
    assert "at 1, 2, 4 streams" in rule_evidence(rule)
    assert "(95% CI 0% to 19%)" in rule_evidence(rule)
    assert f"(95% CI {low:.1f}x to {high:.1f}x)" in rule_evidence(rule)


# -- a curve measured under load is used only when nothing better exists ----------------------------


def test_an_idle_curve_wins_over_one_measured_under_load_and_cells() -> None:
    loaded = _curve(
        [_point(1, 5), _point(2, 4.5)], under_load="engine/probe 2.00 at 1 streams", measured_unix_ns=9
    )
    cells = _curve([_point(1, 9), _point(2, 8)], source="cells", measured_unix_ns=8)
    idle = _curve([_point(1, 10), _point(2, 9)], measured_unix_ns=1)
    assert choose_curves([loaded, cells, idle])["q"] is idle
    assert choose_curves([loaded, cells])["q"] is cells
    assert choose_curves([loaded])["q"] is loaded


def test_a_rule_resting_on_a_curve_under_load_says_so_and_how_to_remeasure() -> None:
    loaded = _curve([_point(1, 5), _point(2, 4.5)], under_load="engine/probe 2.00 at 1 streams")
    (rule,) = [r for r in advise(_cells(), [loaded], engine_urls=URLS).rules if r.kind is RuleKind.BATCH]
    assert rule.figures.under_load
    assert "under load (engine/probe 2.00 at 1 streams)" in rule_evidence(rule)
    assert "used because nothing better was measured" in rule_evidence(rule)
    assert "spark-otel probe --engine q=http://127.0.0.1:8011 --streams 1,2" in rule_evidence(rule)


def test_a_probe_beside_cells_on_its_engine_is_marked_under_load_in_the_overview() -> None:
    cells = _cells()
    run = "probe-1"
    probe = _curve([_point(1, 10), _point(2, 9)], run=run, measured_unix_ns=cells[-1].end_unix_ns)
    level = LoadWindow(
        uid="p1",
        name="probe 1 streams",
        kind="probe",
        engine="q",
        start_unix_ns=cells[0].start_unix_ns,
        end_unix_ns=cells[0].end_unix_ns,
        streams=1,
        attributes={sc.PROBE_RUN: run},
    )
    found = overview(cells, [level], [probe])
    (curve,) = found.curves
    assert curve.under_load == "1 cells of g ran on q during the probe"
    elsewhere = level.model_copy(update={"engine": "other"})
    assert overview(cells, [elsewhere], [probe]).curves[0].under_load is None


def test_the_cells_curve_leaves_out_cells_that_ran_beside_a_probe() -> None:
    # Four serial cells at 10 tok/s, and one slowed to 5 by a probe the in-flight count cannot see.
    cells = _cells(4)
    slowed = cells[3].model_copy(update={"completion_tokens": 500})
    cells[3] = slowed
    probe = LoadWindow(
        uid="p", name="probe 8 streams", kind="probe", engine="q",
        start_unix_ns=slowed.start_unix_ns, end_unix_ns=slowed.end_unix_ns, streams=8,
    )  # fmt: skip
    (curve,) = overview(cells, [probe]).curves
    assert curve.source == "cells"
    assert curve.points[0].n == 3  # the cell beside the probe is not a single-stream sample
    assert curve.points[0].per_stream_rate == pytest.approx(10.1, abs=0.2)


# -- a lane cap only where the aggregate fell or flattened ------------------------------------------


def test_lane_shapes() -> None:
    config = AdvisorConfig()
    falls = lane_shape(NEMOTRON_CURVE, config.flat_gain)
    assert (falls.kind, falls.streams) == ("falls", 8)
    flat = _curve([_point(1, 10), _point(2, 9), _point(4, 4.6), _point(8, 2.4)])  # 10, 18, 18.4, 19.2
    flattens = lane_shape(flat, config.flat_gain)
    assert (flattens.kind, flattens.streams) == ("flattens", 2)
    rising = lane_shape(QWEN_CURVE, config.flat_gain)
    assert (rising.kind, rising.streams) == ("rising", 32)


def test_a_lane_still_rising_is_measure_higher_not_a_cap() -> None:
    rising = _curve([_point(1, 10), _point(2, 9.5), _point(4, 9)])
    rules = advise(_cells(), [rising], engine_urls=URLS).rules
    assert not [r for r in rules if r.kind is RuleKind.CAP]
    (higher,) = [r for r in rules if r.kind is RuleKind.MEASURE]
    assert (higher.missing, rule_text(higher)) == (
        "lane still rising",
        "q: no lane cap yet, measure past 4 streams",
    )
    assert higher.command == "spark-otel probe --engine q=http://127.0.0.1:8011 --streams 4,8,16"
    flat = _curve([_point(1, 10), _point(2, 9), _point(4, 4.6)])
    (cap,) = [r for r in advise(_cells(), [flat]).rules if r.kind is RuleKind.CAP]
    assert cap.workers == 2
    assert cap.shape is not None
    assert cap.shape.kind == "flattens"
    assert "flattens" in rule_evidence(cap)


# -- the article's own rows still give its queue rules ---------------------------------------------


def test_the_article_rows_give_its_rules_for_the_thinking_reviewer_and_the_nemotron_lane() -> None:
    advice = advise(appendix_c_cells(), [QWEN_CURVE, NEMOTRON_CURVE])
    batch = [r for r in advice.rules if r.kind is RuleKind.BATCH]
    assert [(r.engine, r.workers) for r in batch] == [("qwen", 8)]  # "generation-heavy cells batch to 8"
    assert [(r.engine, r.workers) for r in advice.rules if r.kind is RuleKind.CAP] == [("nemotron", 8)]
    assert _kinds(advice.rules).count("measure") == 1  # qwen's lane: measure past 32


def test_a_curve_is_described_by_its_source_time_state_and_levels() -> None:
    when = 1_780_000_000 * S  # 2026-05-28 20:26 UTC
    assert describe_curve(_curve([_point(1, 10)])) == "probe, idle, at 1 stream"
    assert describe_curve(_curve([_point(1, 10), _point(4, 8)], run="p1", measured_unix_ns=when)) == (
        "probe 'p1' of 2026-05-28 20:26 UTC, idle, at 1, 4 streams"
    )
    assert describe_curve(_curve([_point(2, 9)], source="cells", under_load="beside n")) == (
        "the q cells, under load (beside n), at 2 streams"
    )


def test_of_equal_curves_the_newest_wins_then_the_later_given() -> None:
    old = _curve([_point(1, 9), _point(2, 8)], measured_unix_ns=1)
    new = _curve([_point(1, 10), _point(2, 9)], measured_unix_ns=2)
    undated, undated_later = _curve([_point(1, 7), _point(2, 6)]), _curve([_point(1, 6), _point(2, 5)])
    assert choose_curves([new, old])["q"] is new
    assert choose_curves([old, new])["q"] is new
    assert choose_curves([undated, undated_later])["q"] is undated_later
    assert choose_curves([new, undated])["q"] is new  # a dated curve over an undated one
    one_level = _curve([_point(1, 20)], measured_unix_ns=5)
    loaded = _curve([_point(1, 5), _point(2, 4)], under_load="x")
    assert choose_curves([loaded, one_level])["q"] is loaded  # a usable curve over a newer unusable one
    from_cells = _curve([_point(1, 9), _point(2, 8)], source="cells", measured_unix_ns=9)
    assert choose_curves([old, from_cells])["q"] is old  # an idle probe over the cells, however new


def test_a_lane_shape_at_its_edges() -> None:
    gain = AdvisorConfig().flat_gain
    assert lane_shape(_curve([_point(1, 10)]), gain) == LaneShape(kind="single", streams=1)
    assert lane_evidence(lane_shape(_curve([_point(1, 10)]), gain)) == "one level measured (1 stream)"
    assert lane_evidence(lane_shape(_curve([_point(4, 10)]), gain)) == "one level measured (4 streams)"
    # Equal aggregates at 1 and 2: the peak is the fewer streams, and 2 does not fall below it.
    equal = lane_shape(_curve([_point(1, 10), _point(2, 5), _point(4, 2)]), gain)
    assert (equal.kind, equal.streams) == ("flattens", 1)
    exact = lane_shape(_curve([_point(1, 8.0), _point(2, 5.0)]), 0.25)  # +25% exactly: still gaining
    assert exact.kind == "rising"
    idle_first = _curve([CurvePoint(streams=1, per_stream_rate=1, aggregate_rate=0.0), _point(2, 5)])
    assert lane_shape(idle_first, gain).gain == float("inf")
    assert lane_evidence(lane_shape(idle_first, gain)).endswith("(+inf%)")
