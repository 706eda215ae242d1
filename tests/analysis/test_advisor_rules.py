"""The advisor's cross-engine and gauge rules on plain reports: which windows flag a load, the
limit each rule sets, and the whole text and figures a person reads, word for word."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.neighbour_reports import BASELINE, neighbour_report, window_cost
from tests.support.queue_rules import candidate, class_advice

from spark_otel.analysis.advisor.advice_model import (
    AdvisorConfig,
    CellClass,
    Evidence,
    QueueRule,
    RuleKind,
)
from spark_otel.analysis.advisor.queue_rules import (
    batch_rule,
    cross_engine_rules,
    gauge_rule,
    lane_rule,
    measure_first_rule,
)
from spark_otel.analysis.stats import RateSummary
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.views.rules import rule_evidence, rule_text


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


def test_a_costly_cross_engine_window_limits_the_other_engine_to_one_cell_when_one_was_harmless() -> None:
    report = neighbour_report(
        [
            window_cost("w1", 0.6, failures=1, end_unix_ns=123),
            window_cost("w2", 0.5),
            window_cost("one", 0.1, streams=1),  # nemotron at one worker beside g: under the threshold
            window_cost("same", 0.9, same_engine=True),  # batching on q itself: not a neighbour
            window_cost("unknown", 0.9, same_engine=None),  # which engine ran it is not known
            window_cost("unpriced", None),
            window_cost("nobody", 0.9, engine=None),
            window_cost("at", 0.2),  # exactly the threshold: not past it
        ]
    )
    (rule,) = cross_engine_rules([report], set(), 0.2)
    assert said(rule) == expected(
        rule="Do not batch nemotron while g runs on q",
        evidence=(
            "run w1: g decoded 4.00 tok/s (n=5) against its 10.00 baseline (n=20), cost 60% "
            "(95% CI 44% to 73%) > 20%; 2 of 5 cells in the window timed out, 1 failed; "
            "1 more window on nemotron past the threshold; "
            "beside one nemotron cell it cost 10%: at most 1 there"
        ),
        kind=RuleKind.CROSS_ENGINE,
        engine="nemotron",
        eval_name="g",
        workers=1,
        while_engine="q",
        ceiling_bound=False,
        figures=Evidence(
            n_cells=5,
            neighbour_cost=0.6,
            neighbour_cost_interval=(1 - 5.0 / 9.0, 1 - 3.0 / 11.0),
            measured_unix_ns=123,
        ),
    )


def test_without_a_harmless_single_cell_the_other_engine_yields() -> None:
    unmeasured = neighbour_report([window_cost("w1", 0.6), window_cost("w2", 0.5), window_cost("w3", 0.3)])
    (rule,) = cross_engine_rules([unmeasured], {("q", "g")}, 0.2)
    assert (rule_text(rule), rule.workers, rule.ceiling_bound) == (
        "nemotron yields while a ceiling-bound eval runs on q",
        0,
        True,
    )
    assert rule_evidence(rule).endswith(
        "2 of 5 cells in the window timed out; 2 more windows on nemotron past the threshold; "
        "nemotron at one worker beside it was not measured under the threshold: it yields"
    )
    costly_alone = neighbour_report(
        [window_cost("w1", 0.6), window_cost("one", 0.1, streams=1), window_cost("two", 0.3, streams=1)]
    )
    (rule,) = cross_engine_rules([costly_alone], set(), 0.2)
    assert rule.workers == 0  # one of the single-cell windows was past the threshold


def test_the_costliest_sighting_of_a_window_is_the_evidence_across_reports() -> None:
    at_one = neighbour_report([window_cost("w1", 0.4)], workers=1)
    at_four = neighbour_report([window_cost("w1", 0.7, rate=RateSummary(n=3, median=3.0))], workers=4)
    (rule,) = cross_engine_rules([at_one, at_four, at_one], set(), 0.2)
    assert rule_evidence(rule).startswith(
        "run w1: g at 4 workers decoded 3.00 tok/s (n=3) against its 10.00 baseline (n=20), cost 70% > 20%; "
    )
    assert rule.figures.neighbour_cost_interval is None  # the window's rate has no interval
    (rule,) = cross_engine_rules([at_four, at_one], set(), 0.2)
    assert rule.figures.neighbour_cost == 0.7
    assert "more window" not in rule_evidence(rule)  # one window, seen twice


def test_a_report_without_a_baseline_and_an_engine_not_named_give_no_rule() -> None:
    costly = [window_cost("w1", 0.6)]
    assert cross_engine_rules([neighbour_report(costly, baseline=RateSummary(n=0))], set(), 0.2) == []
    assert cross_engine_rules([neighbour_report(costly)], set(), 0.2, engine="other") == []
    by_load = cross_engine_rules([neighbour_report(costly)], set(), 0.2, engine="nemotron")
    by_eval = cross_engine_rules([neighbour_report(costly)], set(), 0.2, engine="q")
    assert [r.engine for r in by_load] == [r.engine for r in by_eval] == ["nemotron"]
    assert cross_engine_rules([neighbour_report(costly)], set(), 0.6) == []


def test_one_rule_per_other_engine_and_eval() -> None:
    windows = [window_cost("w1", 0.6), window_cost("s1", 0.5, engine="sglang")]
    rules = cross_engine_rules(
        [neighbour_report(windows), neighbour_report(windows, eval_name="h")], set(), 0.2
    )
    assert sorted((r.engine, r.eval_name) for r in rules) == [
        ("nemotron", "g"),
        ("nemotron", "h"),
        ("sglang", "g"),
        ("sglang", "h"),
    ]


def test_the_cost_interval_needs_both_ends_of_both_intervals_and_a_nonzero_baseline() -> None:
    def interval(baseline: RateSummary, rate: RateSummary) -> Any:
        (rule,) = cross_engine_rules(
            [neighbour_report([window_cost("w", 0.6, rate=rate)], baseline=baseline)], set(), 0.2
        )
        return rule.figures.neighbour_cost_interval

    rate = RateSummary(n=5, median=4.0, ci_low=3.0, ci_high=5.0)
    assert interval(BASELINE, rate) == pytest.approx((1 - 5 / 9, 1 - 3 / 11))
    for missing in ("ci_low", "ci_high"):
        assert interval(BASELINE, rate.model_copy(update={missing: None})) is None
        assert interval(BASELINE.model_copy(update={missing: None}), rate) is None
        assert interval(BASELINE.model_copy(update={missing: 0.0}), rate) is None


CONFIG = AdvisorConfig()
PINNED = [96.0, 96.2, 95.9, 96.1, 96.0]


def test_the_gauge_rule_states_the_pinned_gauge_and_the_token_rates_it_contradicts() -> None:
    rule = gauge_rule(PINNED, [11.1, 0.0, 80.5, 184.4], CONFIG)
    assert said(rule) == expected(
        rule="Read load from token counts, never from the GPU utilization gauge",
        evidence=(
            "utilization median 96% (p10 96%, p90 96%) over 5 samples while token rate ranged 11.1 to "
            "184.4 tok/s (16.6x)"
        ),
        kind=RuleKind.GAUGE,
        figures=Evidence(n_cells=None),
    )
    fraction = gauge_rule([u / 100 for u in PINNED], [11.1, 184.4], CONFIG)
    assert fraction is not None
    assert rule_evidence(fraction) == rule_evidence(rule)


@pytest.mark.parametrize(
    ("utilization", "rates", "fires"),
    [
        ([0.9, 0.9, 0.9], [10.0, 20.0], True),  # at the pinned level, rates exactly 2x apart
        ([0.89, 0.89, 0.89], [10.0, 30.0], False),  # below the pinned level
        ([90.0, 96.25], [10.0, 30.0], True),  # p90 - p10 exactly 5 points (percent)
        ([90.0, 96.5], [10.0, 30.0], False),  # past 5 points
        ([0.95] * 3, [10.0, 19.9], False),  # rates under 2x apart
        ([0.95] * 3, [0.0, 10.0, 30.0], True),  # a zero rate is no rate
        ([0.95] * 3, [30.0, 0.0], False),  # one rate: nothing varies
        ([], [10.0, 30.0], False),  # no gauge samples
    ],
)
def test_the_gauge_rule_fires_only_for_a_pinned_gauge_beside_varying_rates(
    utilization: list[float], rates: list[float], fires: bool
) -> None:
    assert (gauge_rule(utilization, rates, CONFIG) is not None) is fires


def test_the_gauge_rule_reads_percent_and_fraction_alike() -> None:
    percent = gauge_rule([90.0, 92.0, 94.0], [10.0, 40.0], CONFIG)
    fraction = gauge_rule([0.90, 0.92, 0.94], [10.0, 40.0], CONFIG)
    assert percent is not None
    assert fraction is not None
    assert (
        rule_evidence(percent)
        == rule_evidence(fraction)
        == (
            "utilization median 92% (p10 90%, p90 94%) over 3 samples while token rate ranged 10.0 to "
            "40.0 tok/s (4.0x)"
        )
    )


# --- batch, measure-first and lane rules ----------------------------------------------------------

URLS = {"q": "http://127.0.0.1:8011"}
WHEN = 1_780_000_000 * 1_000_000_000  # 2026-05-28 20:26 UTC


def _curve(*points: tuple[int, float, float], **kw: Any) -> RateCurve:
    return RateCurve(
        engine="q",
        points=[CurvePoint(streams=s, per_stream_rate=r, aggregate_rate=a) for s, r, a in points],
        run="p1",
        model="m",
        measured_unix_ns=WHEN,
        **kw,
    )


RISING = _curve((1, 10.0, 10.0), (2, 9.0, 18.0), (4, 8.0, 32.0))


CURVE_PHRASE = "probe 'p1' of 2026-05-28 20:26 UTC, idle, at 1, 2, 4 streams"


def test_a_batch_rule_names_its_class_n_curve_intervals_and_the_next_count_it_turned_down() -> None:
    rule = batch_rule(class_advice(), RISING, URLS)
    assert said(rule) == expected(
        rule="g generation-heavy cells on q batch to 2",
        evidence=(
            f"n=40 cells (p90 output 5,678 tok, median prompt 1,234 tok); curve: {CURVE_PHRASE}; at 2: "
            "9.00 tok/s per stream, 10% slower (95% CI 5% to 15%), predicted 1.8x wall "
            "(95% CI 1.6x to 1.9x), 2% timeouts vs 0% serial; 4 would predict 30% timeouts and 3.2x"
        ),
        kind=RuleKind.BATCH,
        engine="q",
        eval_name="g",
        cell_class=CellClass.GENERATION_HEAVY,
        workers=2,
        ceiling_bound=False,
        figures=Evidence(
            n_cells=40,
            levels=[1, 2, 4],
            under_load=False,
            model="m",
            measured_unix_ns=WHEN,
            per_stream_cost=0.1,
            per_stream_cost_interval=(0.05, 0.15),
            speedup=1.8,
            speedup_interval=(1.6, 1.95),
        ),
    )


def test_a_serial_prompt_heavy_ceiling_bound_class_on_a_loaded_curve_says_each() -> None:
    loaded = _curve((1, 10.0, 10.0), (2, 9.0, 18.0), under_load="beside nemotron")
    serial = class_advice(
        recommended_workers=1,
        cell_class=CellClass.PROMPT_HEAVY,
        ceiling_bound=True,
        speedup=1.0,
        speedup_interval=None,
        per_stream_cost=0.0,
        per_stream_cost_interval=None,
        output_tokens_p90=None,
        prompt_tokens_median=None,
        candidates=[candidate(1, 10.0, 0.0, 1.0)],
    )
    rule = batch_rule(serial, loaded, {})
    assert (rule_text(rule), rule.workers, rule.ceiling_bound, rule.figures.under_load) == (
        "g prompt-heavy ceiling-bound cells on q: stay serial",
        1,
        True,
        True,
    )
    assert rule_evidence(rule) == (
        "n=40 cells (p90 output 0 tok, median prompt 0 tok); curve: probe 'p1' of 2026-05-28 20:26 UTC, "
        "under load (beside nemotron), at 1, 2 streams; at 1: 10.00 tok/s per stream, 0% slower, "
        "predicted 1.0x wall, 2% timeouts vs 0% serial; the curve was measured under load and is used "
        "because nothing better was measured: re-measure on an idle engine with "
        "spark-otel probe --engine q=URL --streams 1,2"
    )
    batched = batch_rule(class_advice(cell_class=CellClass.LONG_CONTEXT), RISING, URLS)
    assert (
        rule_text(batched) == "g long-context cells on q batch to 2; prefill-bound, the gain caps near 1.8x"
    )


def test_a_measure_first_rule_says_what_is_missing_and_the_probe_that_measures_it() -> None:
    command = "spark-otel probe --engine q=http://127.0.0.1:8011 --streams 1,2,4,8"
    none = measure_first_rule("q", "g", 12, None, URLS)
    assert said(none) == expected(
        rule="Measure q first: no worker count for g cells on q yet",
        evidence=f"12 cells recorded, no rate curve; run: {command}, or run the eval at 1 and N workers",
        kind=RuleKind.MEASURE,
        engine="q",
        eval_name="g",
        command=command,
        figures=Evidence(n_cells=12),
    )
    from_two = _curve((2, 9.0, 18.0), (4, 8.0, 32.0))
    rule = measure_first_rule("q", None, 3, from_two, {})
    assert rule_text(rule) == "Measure q first: no worker count for q yet"
    assert rule_evidence(rule) == (
        "3 cells recorded, no single-stream rate: the curve starts at 2 streams "
        "(probe 'p1' of 2026-05-28 20:26 UTC, idle, at 2, 4 streams); "
        "run: spark-otel probe --engine q=URL --streams 1,2,4,8, or run the eval at 1 and N workers"
    )
    assert rule.figures == Evidence(
        n_cells=3,
        levels=[2, 4],
        model="m",
        measured_unix_ns=WHEN,
    )
    one = measure_first_rule("q", "g", 3, _curve((1, 10.0, 10.0)), URLS)
    assert rule_evidence(one).startswith(
        "3 cells recorded, one level only (1 stream): nothing to compare "
        "(probe 'p1' of 2026-05-28 20:26 UTC, idle, at 1 stream); run: "
    )


def test_a_lane_is_capped_where_its_aggregate_falls_and_measured_further_while_it_rises() -> None:
    falls = _curve((1, 10.0, 10.0), (2, 9.0, 18.0), (4, 4.0, 16.0))
    cap = lane_rule(falls, CONFIG, URLS)
    assert said(cap) == expected(
        rule="q lane at most 2 streams",
        evidence=(
            "aggregate peaks at 18 tok/s at 2 streams and falls to 16 at 4 "
            "(probe 'p1' of 2026-05-28 20:26 UTC, idle, at 1, 2, 4 streams)"
        ),
        kind=RuleKind.CAP,
        engine="q",
        workers=2,
        figures=Evidence(
            levels=[1, 2, 4],
            model="m",
            measured_unix_ns=WHEN,
        ),
    )
    flat = lane_rule(_curve((1, 10.0, 10.0), (2, 5.1, 10.2), (4, 4.0, 16.0)), CONFIG, URLS)
    assert (flat.kind, flat.workers, rule_text(flat)) == (RuleKind.CAP, 1, "q lane at most 1 stream")
    measure = lane_rule(RISING, CONFIG, URLS)
    command = "spark-otel probe --engine q=http://127.0.0.1:8011 --streams 4,8,16"
    assert said(measure) == expected(
        rule="q: no lane cap yet, measure past 4 streams",
        evidence=(
            "aggregate still rising at 4 streams, the most measured: 18 tok/s at 2, 32 at 4 (+78%) "
            f"({CURVE_PHRASE}); run: {command}"
        ),
        kind=RuleKind.MEASURE,
        engine="q",
        workers=None,
        command=command,
        figures=cap.figures,
    )
    single = lane_rule(_curve((1, 10.0, 10.0)), CONFIG, {})
    assert (rule_text(single), single.command) == (
        "q: no lane cap yet, measure past 1 stream",
        "spark-otel probe --engine q=URL --streams 1,2,4",
    )
