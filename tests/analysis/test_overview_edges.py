"""`overview` and the answers read off it, at their edges: the error that lists the evals, curves
from cells that all ran beside another engine, an engine with no curve at all, the settings the
overview hands on when nothing narrows it, and answers that rest on the overview's own config."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.cells import S, cell
from tests.support.neighbour_reports import neighbour_report, window_cost

from spark_otel import InputError
from spark_otel.analysis.advisor.advice_model import AdvisorConfig, RuleKind
from spark_otel.analysis.concurrency import concurrency
from spark_otel.analysis.overview import Overview, overview
from spark_otel.model import Cell
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.views.answers import Answer, answers, neighbour_answer, speedup_answers


def test_an_unknown_eval_is_refused_with_the_evals_there_are() -> None:
    """The message names every eval recorded, so a typo is obvious; with no cells it says none."""
    cells = [cell("h1", 0, 10, 100, eval_name="h"), cell("g1", 0, 10, 100)]
    with pytest.raises(InputError) as raised:
        overview(cells, eval_name="nope")
    assert str(raised.value) == "no cells recorded for eval 'nope' (evals: g, h)"
    with pytest.raises(InputError) as raised:
        overview([], eval_name="nope")
    assert str(raised.value) == "no cells recorded for eval 'nope' (evals: none)"


def _curve_point(streams: int, rate: float) -> CurvePoint:
    """A level of three cells all at ``rate``: every statistic is the rate itself."""
    return CurvePoint(
        streams=streams,
        per_stream_rate=rate,
        aggregate_rate=streams * rate,
        p10=rate,
        p90=rate,
        n=3,
        ci_low=rate,
        ci_high=rate,
    )


def test_engines_whose_every_cell_ran_beside_the_other_each_get_a_curve_marked_under_load() -> None:
    """Three cells on q (10 tok/s) and three on n (5 tok/s), all in 0..100 s: each engine's cells
    ran beside the other's, so no clean cell is left, and each curve uses its engine's cells
    all, saying why; with two engines in the report, each must be named to build its curve."""
    cells = [cell(f"q{k}", 0, 100, 1000) for k in range(3)]
    cells += [cell(f"n{k}", 0, 100, 500, eval_name="h", engine="n") for k in range(3)]
    found = overview(cells)
    assert found.curves == [
        RateCurve(
            engine="n",
            points=[_curve_point(3, 5.0)],
            source="cells",
            measured_unix_ns=100 * S,
            under_load="every cell on n ran beside a probe or another engine's load",
        ),
        RateCurve(
            engine="q",
            points=[_curve_point(3, 10.0)],
            source="cells",
            measured_unix_ns=100 * S,
            under_load="every cell on q ran beside a probe or another engine's load",
        ),
    ]
    assert found.notes == []


def test_an_engine_without_token_counts_has_no_curve_and_a_note_says_why() -> None:
    found = overview([cell(f"q{k}", 0, 100) for k in range(3)])
    assert found.curves == []
    assert found.notes == [
        "no curve from cells on q: engine 'q': no completed cells with token counts to build a curve from"
    ]


def _three_g_runs_then_two_h_cells() -> list[Cell]:
    """g's three cells 50 s apart (100 s each), then h's two, 50 s apart too, well after."""
    cells = [cell(f"g{k}", 150 * k, 150 * k + 100, 1000) for k in range(3)]
    cells += [cell(f"h{k}", 1000 + 150 * k, 1100 + 150 * k, 1000, eval_name="h") for k in range(2)]
    return cells


def test_the_merge_gap_splits_runs_and_neighbour_windows_in_an_unnarrowed_overview() -> None:
    """At a 30 s gap the 50 s pauses split every run and every window; at the default 60 s they
    do not. With no eval or engine named, the overview shows its first concurrency pass."""
    cells = _three_g_runs_then_two_h_cells()
    split = overview(cells, merge_gap_s=30.0)
    assert split.concurrency is not None
    runs = [(r.eval_name, r.start_unix_ns, r.end_unix_ns) for e in split.concurrency.engines for r in e.runs]
    assert runs == [
        ("g", 0, 100 * S),
        ("g", 150 * S, 250 * S),
        ("g", 300 * S, 400 * S),
        ("h", 1000 * S, 1100 * S),
        ("h", 1150 * S, 1250 * S),
    ]
    # g (three cells alone: a baseline) is priced against h's two windows; h has too few cells.
    [g] = split.neighbours
    assert [(w.name, w.start_unix_ns, w.end_unix_ns) for w in g.windows] == [
        ("h eval on q", 1000 * S, 1100 * S),
        ("h eval on q", 1150 * S, 1250 * S),
    ]
    joined = overview(cells)
    assert joined.concurrency is not None
    assert [
        (r.eval_name, r.start_unix_ns, r.end_unix_ns) for e in joined.concurrency.engines for r in e.runs
    ] == [
        ("g", 0, 400 * S),
        ("h", 1000 * S, 1250 * S),
    ]
    [g] = joined.neighbours
    assert [(w.name, w.start_unix_ns, w.end_unix_ns) for w in g.windows] == [
        ("h eval on q", 1000 * S, 1250 * S)
    ]


def _g_on_two_engines() -> list[Cell]:
    cells = [cell(f"g{k}", 100 * k, 100 * k + 100, 1000) for k in range(3)]
    cells += [cell(f"gn{k}", 1000 + 100 * k, 1100 + 100 * k, 500, engine="n") for k in range(3)]
    return cells


def test_an_eval_and_an_engine_together_narrow_the_concurrency_to_both() -> None:
    """g ran on q and on n: named with engine q, the overview shows g's cells on q only."""
    found = overview(_g_on_two_engines(), eval_name="g", engine="q")
    assert found.concurrency is not None
    assert [e.engine for e in found.concurrency.engines] == ["q"]
    assert [c.uid for e in found.concurrency.engines for c in e.cells] == ["g0", "g1", "g2"]


def test_an_engine_narrows_the_advice_to_its_own_rules() -> None:
    """No curve on either engine: each would get a measure-first rule, but only q's is asked for."""
    found = overview(_g_on_two_engines(), engine="q")
    assert found.advice is not None
    assert [(r.kind, r.engine, r.eval_name) for r in found.advice.rules] == [
        (RuleKind.MEASURE, "q", "g"),
        (RuleKind.MEASURE, "q", None),
    ]


def _bare_overview(**fields: Any) -> Overview:
    """An overview with nothing in it but ``fields``."""
    values: dict[str, Any] = {
        "eval_name": None,
        "engine": None,
        "config": AdvisorConfig(),
        "curves": [],
        "concurrency": None,
        "neighbours": [],
        "advice": None,
        "notes": [],
    }
    return Overview(**(values | fields))


def test_the_answers_read_the_curve_flatness_and_the_threshold_from_the_overviews_config() -> None:
    """Aggregates 10, 14, 14.4: +3% from 2 to 4 streams is flat at a 5% gain, still rising at 2%.
    The neighbour's 30% cost is past a 20% threshold."""
    curve = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=s, per_stream_rate=r, aggregate_rate=s * r)
            for s, r in ((1, 10.0), (2, 7.0), (4, 3.6))
        ],
    )
    found = _bare_overview(
        config=AdvisorConfig(flat_gain=0.02, threshold=0.2),
        curves=[curve],
        neighbours=[neighbour_report([window_cost("w1", 0.3)])],
    )
    assert answers(found) == [
        Answer(
            topic="curve",
            text=(
                "q: 4 streams bought 1.4x the aggregate of one stream for 64% per stream, still rising at "
                "the most measured (probe, idle, at 1, 2, 4 streams)"
            ),
            measured=True,
        ),
        Answer(
            topic="neighbour",
            text=(
                "run w1 on another engine cost g 30% per cell, past the 20% threshold: 4.00 against 10.00 "
                "tok/s alone (n=5 cells beside it, 20 alone)"
            ),
            measured=True,
        ),
    ]


def test_of_two_equally_costly_neighbours_the_first_is_the_answer() -> None:
    """A tie on cost is no reason to compare the windows themselves: the earlier one is named."""
    report = neighbour_report([window_cost("w1", 0.3), window_cost("w2", 0.3)])
    answer = neighbour_answer(report, 0.5)
    assert answer == Answer(
        topic="neighbour",
        text=(
            "run w1 on another engine cost g 30% per cell: 4.00 against 10.00 tok/s alone "
            "(n=5 cells beside it, 20 alone)"
        ),
        measured=True,
    )


def test_more_workers_at_the_same_per_cell_rate_cost_zero_percent_not_minus_zero() -> None:
    """Four cells one at a time (400 s), then the same four two at a time (200 s), all at
    10 tok/s: 2.0x the wall for cells exactly as fast, which reads "0% slower"."""
    serial = [cell(f"s{k}", 100 * k, 100 * k + 100, 1000, cell_id=f"c{k}", workers=1) for k in range(4)]
    paired = [
        cell(f"p{k}", 1000 + 100 * (k // 2), 1100 + 100 * (k // 2), 1000, cell_id=f"c{k}", workers=2)
        for k in range(4)
    ]
    found = _bare_overview(concurrency=concurrency(serial + paired))
    assert speedup_answers(found) == [
        Answer(
            topic="concurrency",
            text=(
                "g at 2 workers on q: 2.0x wall for 0% slower cells "
                "(n=4 cells, against 4 at 1 worker; the same cells)"
            ),
            measured=True,
        )
    ]
