"""The one-line answers, word for word, on plain curves, reports and rules: what each says it
rests on, and what each says is missing when the records cannot answer."""

from __future__ import annotations

from tests.support.cells import S, cell
from tests.support.neighbour_reports import neighbour_report, window_cost

from spark_otel.analysis.advisor.advice_model import Advice, AdvisorConfig, QueueRule, RuleKind
from spark_otel.analysis.concurrency import concurrency
from spark_otel.analysis.neighbour import CellRate
from spark_otel.analysis.overview import Overview
from spark_otel.analysis.stats import RateSummary
from spark_otel.model import Cell, CellStatus
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.views.answers import Answer, curve_answer, neighbour_answer, rules_answer, speedup_answers


def _curve(*points: tuple[int, float]) -> RateCurve:
    return RateCurve(
        engine="q",
        points=[CurvePoint(streams=s, per_stream_rate=r, aggregate_rate=s * r) for s, r in points],
    )


def test_a_rising_curve_says_what_the_most_streams_bought_and_that_it_still_rises() -> None:
    assert curve_answer(_curve((1, 10.0), (2, 9.0), (8, 6.0))) == Answer(
        topic="curve",
        text=(
            "q: 8 streams bought 4.8x the aggregate of one stream for 40% per stream, still rising at the "
            "most measured (probe, idle, at 1, 2, 8 streams)"
        ),
        measured=True,
    )


def test_a_curve_that_falls_or_flattens_names_its_peak() -> None:
    falls = curve_answer(_curve((1, 10.0), (4, 8.0), (8, 3.0)))
    assert falls.text == (
        "q: 4 streams bought 3.2x the aggregate of one stream for 20% per stream, then no more: aggregate "
        "peaks at 32 tok/s at 4 streams and falls to 24 at 8 (probe, idle, at 1, 4, 8 streams)"
    )
    flat = curve_answer(_curve((1, 10.0), (2, 7.0), (4, 3.6)), flat_gain=0.05)  # 14 -> 14.4: +3%
    assert flat.text.startswith(
        "q: 2 streams bought 1.4x the aggregate of one stream for 30% per stream, then"
    )
    assert curve_answer(_curve((1, 10.0), (2, 7.0), (4, 3.6)), flat_gain=0.02).text.startswith(
        "q: 4 streams bought 1.4x"
    )


def test_a_curve_that_cannot_answer_says_what_is_missing() -> None:
    assert curve_answer(_curve((1, 10.0))) == Answer(
        topic="curve",
        text="q: one level measured, a curve needs two (probe, idle, at 1 stream)",
        measured=False,
    )
    assert curve_answer(_curve((2, 9.0), (4, 8.0))) == Answer(
        topic="curve",
        text="q: no single stream measured to compare the levels with (probe, idle, at 2, 4 streams)",
        measured=False,
    )


def test_the_costliest_touched_window_answers_what_a_neighbour_costs() -> None:
    report = neighbour_report(
        [
            window_cost("w1", 0.3),
            window_cost("w2", 0.55, rate=RateSummary(n=1_200, median=4.5)),
            window_cost("w3", 0.9, n_cells=0),  # none of the eval's cells in it
            window_cost("w4", None),
        ],
        baseline=RateSummary(n=2_000, median=10.0),
        workers=1,
    )
    assert neighbour_answer(report, 0.2) == Answer(
        topic="neighbour",
        text=(
            "run w2 on another engine cost g at 1 worker 55% per cell, past the 20% threshold: 4.50 against "
            "10.00 tok/s alone (n=1,200 cells beside it, 2,000 alone)"
        ),
        measured=True,
    )
    same = neighbour_report([window_cost("w", 0.1, same_engine=True)])
    assert neighbour_answer(same, 0.2) == Answer(
        topic="neighbour",
        text=(
            "run w on the same engine cost g 10% per cell: 4.00 against 10.00 tok/s alone "
            "(n=5 cells beside it, 20 alone)"
        ),
        measured=True,
    )
    unknown = neighbour_report([window_cost("w", 0.2, same_engine=None)])
    assert neighbour_answer(unknown, 0.2).text.startswith("run w cost g 20% per cell: ")  # type: ignore[union-attr]
    assert neighbour_answer(neighbour_report([window_cost("w", None)]), 0.2) is None


def test_without_a_baseline_the_neighbour_answer_says_why_and_what_would_give_one() -> None:
    none_alone = neighbour_report([window_cost("w", None)], baseline=RateSummary(n=0), n_cells=7)
    answer = neighbour_answer(none_alone, 0.2)
    assert answer == Answer(
        topic="neighbour",
        text=(
            "g: no baseline: every one of the 7 cells of g ran beside other load, so nothing says what it "
            "decodes alone; run a few of its cells with the box otherwise idle"
        ),
        measured=False,
    )


def _overview(rules: list[QueueRule] | None) -> Overview:
    config = AdvisorConfig()
    advice = None if rules is None else Advice(config=config, classes=[], rules=rules)
    return Overview(
        eval_name=None,
        engine=None,
        config=config,
        curves=[],
        concurrency=None,
        neighbours=[],
        advice=advice,
        notes=[],
    )


def _rule(kind: RuleKind) -> QueueRule:
    return QueueRule(kind=kind)


def test_the_rules_answer_counts_the_rules_from_evidence_and_the_ones_to_measure_first() -> None:
    def text(*kinds: RuleKind) -> tuple[str, bool]:
        answer = rules_answer(_overview([_rule(k) for k in kinds]))
        assert answer is not None
        return answer.text, answer.measured

    assert text(RuleKind.BATCH, RuleKind.CAP, RuleKind.MEASURE) == (
        "2 queue rules from measured evidence; 1 says what to measure first (spark-otel advise lists them)",
        True,
    )
    assert text(RuleKind.GAUGE) == (
        "1 queue rule from measured evidence (spark-otel advise lists them)",
        True,
    )
    assert text(RuleKind.MEASURE, RuleKind.MEASURE) == (
        "0 queue rules from measured evidence; 2 say what to measure first (spark-otel advise lists them)",
        False,
    )
    assert text() == ("no queue rules: nothing measured to reason from", False)
    assert rules_answer(_overview(None)) is None
    assert speedup_answers(_overview(None)) == []


def test_a_report_whose_cells_all_failed_alone_says_so() -> None:
    def alone(uid: str, status: CellStatus) -> CellRate:
        return CellRate(
            uid=uid,
            cell_id=uid,
            engine="q",
            workers=1,
            start_unix_ns=0,
            end_unix_ns=10,
            elapsed_s=10.0,
            completion_tokens=None,
            decode_rate=None,
            status=status,
            timed_out=status is CellStatus.DEADLINE,
            failed=status is CellStatus.ERROR,
            baseline=True,
            windows=(),
            overlapped=(),
        )

    cells = [alone("t", CellStatus.DEADLINE), alone("f", CellStatus.ERROR)]
    report = neighbour_report([], baseline=RateSummary(n=0), cells=cells)
    answer = neighbour_answer(report, 0.2)
    assert answer is not None
    assert answer.text == (
        "g: no baseline: the 2 cells of g that ran alone all timed out or failed (2 not rated), so "
        "nothing says what it decodes alone; run a few cells with the box otherwise idle, under a ceiling "
        "they finish within"
    )


def _speedup_overview(cells: list[Cell]) -> Overview:
    return _overview(None).model_copy(update={"concurrency": concurrency(cells)})


def test_what_more_workers_bought_each_eval_word_for_word() -> None:
    slower = [
        cell("s1", 0, 100, 1_000, cell_id="a", workers=1),
        cell("s2", 100, 200, 800, cell_id="b", workers=1),
        cell("p1", 1_000, 1_050, 500, cell_id="a", workers=2),
        cell("p2", 1_000, 1_100, 600, cell_id="b", workers=2),
    ]
    assert speedup_answers(_speedup_overview(slower)) == [
        Answer(
            topic="concurrency",
            text=(
                "g at 2 workers on q: 2.0x wall for 11% slower cells (n=2 cells, against 2 at 1 worker; "
                "the same cells)"
            ),
            measured=True,
        )
    ]
    faster = [
        cell("s1", 0, 100, 500, cell_id="a", workers=1),
        cell("p1", 1_000, 1_050, 1_000, cell_id="c", workers=4),
    ]
    (answer,) = speedup_answers(_speedup_overview(faster))
    assert answer.text == (
        "g at 4 workers on q: 2.0x wall for 300% faster cells (n=1 cells, against 1 at 1 worker; "
        "different cells)"
    )
    unrated = [
        cell("s1", 0, 100, None, cell_id="a", workers=1, status=CellStatus.DEADLINE),
        cell("p1", 1_000, 1_050, 1_000, cell_id="a", workers=2),
    ]
    (answer,) = speedup_answers(_speedup_overview(unrated))
    assert "2.0x wall for per-cell cost not measured (no rated cells on one side)" in answer.text


def test_without_two_worker_counts_the_concurrency_answer_says_what_would_measure_it() -> None:
    cells = [
        cell("s1", 0, 100, 1_000, cell_id="a", workers=1),
        cell("s2", 100, 200, 800, cell_id="b", workers=1),
    ]
    other = cells[0].model_copy(update={"uid": "h1", "eval_name": "h", "start_unix_ns": 10_000 * S})
    other = other.model_copy(update={"end_unix_ns": other.start_unix_ns + S})
    assert speedup_answers(_speedup_overview([*cells, other])) == [
        Answer(
            topic="concurrency",
            text=(
                "what more workers buy is not measured: no eval ran at two worker counts (g, h); "
                "run one at 1 and at N workers"
            ),
            measured=False,
        )
    ]
    assert speedup_answers(_speedup_overview([])) == []
