"""`overview` and `advise` over columns give what they gave one `Cell` per row before issue 38
(`tests/support/overview_reference.py`), figure for figure, the bootstrap's intervals included:
on the article's cells, windows and probes, on cells made to hit each rule's edge, on generated
boxes, past float64's exact integers, and whether the cells come in as records or as columns."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.article import (
    C_EVAL,
    D_EVAL,
    NEMOTRON_CURVE,
    QWEN_CURVE,
    appendix_c_cells,
    appendix_d_cells,
    appendix_d_loads,
)
from tests.support.cells import S, cell
from tests.support.neighbour_boxes import rows_no_baseline_reads
from tests.support.overview_reference import reference_advise, reference_overview

from spark_otel import _semconv as sc
from spark_otel.analysis import AdvisorConfig, CurvePoint, RateCurve, advise, overview
from spark_otel.analysis.neighbour import no_baseline_reason, windows_touched
from spark_otel.analysis.request_cells import REQUEST_SOURCE
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.records.cell_columns import CellColumns


def same(
    cells: list[Cell],
    windows: list[LoadWindow] | None = None,
    probes: list[RateCurve] | None = None,
    **options: Any,
) -> None:
    """The overview of the cells as records and as columns equals the reference's, every figure;
    without the concurrency report's rows, or without the report, every other figure the same."""
    windows, probes = windows or [], probes or []
    reference = reference_overview(cells, windows, probes, **options)
    assert overview(cells, windows, probes, **options) == reference
    columns = CellColumns.from_cells(cells)
    assert overview(columns, windows, probes, **options) == reference
    bare = overview(columns, windows, probes, with_cells=False, **options)
    assert bare.concurrency == (
        None
        if reference.concurrency is None
        else reference.concurrency.model_copy(
            update={"engines": [e.model_copy(update={"cells": []}) for e in reference.concurrency.engines]}
        )
    )
    assert bare.neighbours == [
        r.model_copy(update={"cells": rows_no_baseline_reads(r), "windows": windows_touched(r)})
        for r in reference.neighbours
    ]
    assert [no_baseline_reason(r) for r in bare.neighbours] == [
        no_baseline_reason(r) for r in reference.neighbours
    ]
    assert bare.model_copy(
        update={"concurrency": reference.concurrency, "neighbours": reference.neighbours}
    ) == (reference)
    alone = overview(columns, windows, probes, with_concurrency=False, **options)
    assert alone.concurrency is None
    assert alone.model_copy(update={"concurrency": reference.concurrency}) == reference


RISING = RateCurve(
    engine="q",
    points=[
        CurvePoint(streams=1, per_stream_rate=40.0, aggregate_rate=40.0),
        CurvePoint(streams=2, per_stream_rate=36.0, aggregate_rate=72.0),
        CurvePoint(streams=4, per_stream_rate=30.0, aggregate_rate=120.0),
        CurvePoint(streams=8, per_stream_rate=16.0, aggregate_rate=128.0),
    ],
    run="p1",
)
"""A probe of q that measured one stream and peaks at 8: every class on q gets worker counts."""


def _window(
    uid: str, kind: str, engine: str | None, start_s: float, end_s: float, run: str | None = None
) -> LoadWindow:
    return LoadWindow(
        uid=uid,
        name=uid,
        kind=kind,
        engine=engine,
        start_unix_ns=int(start_s * S),
        end_unix_ns=int(end_s * S),
        attributes={sc.PROBE_RUN: run} if run else {},
    )


def test_the_articles_box_gives_the_same_overview() -> None:
    probes, others = appendix_d_loads()
    cells = appendix_c_cells() + appendix_d_cells() + others
    config = AdvisorConfig(ceiling_s=1800)
    found = overview(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], config=config)
    assert found.advice is not None
    assert found.advice.classes
    assert any(a.speedup_interval for a in found.advice.classes)
    same(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], config=config)
    same(cells, probes, [], config=config)  # curves from the cells, some beside the probes
    same(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], eval_name=D_EVAL)
    same(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], engine="nemotron")
    same(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], eval_name=C_EVAL, engine="qwen", merge_gap_s=0.0)


def test_the_articles_advice_is_the_same_from_records_and_columns() -> None:
    cells = appendix_c_cells() + appendix_d_cells()
    reference = reference_advise(cells, [QWEN_CURVE, NEMOTRON_CURVE])
    assert advise(cells, [QWEN_CURVE, NEMOTRON_CURVE]) == reference
    assert advise(CellColumns.from_cells(cells), [QWEN_CURVE, NEMOTRON_CURVE]) == reference


EDGES = [
    cell("a", 0, 100, 1_000, prompt_tokens=100, workers=2),
    cell("b", 0, 100, 1_000, prompt_tokens=30_000, workers=2),  # long context
    cell("c", 50, 50, 500, workers=2),  # zero length: level 1, no rate, load only
    cell("d", 10, 300, 0, workers=None),  # no tokens: load only
    cell("e", 12, 1_000, 800, workers=2, status=CellStatus.DEADLINE, cell_id="x"),  # a timeout
    cell("e2", 2_000, 2_900, None, workers=1, status=CellStatus.DEADLINE, cell_id="x"),  # same id, alone
    cell("f", 12, 14, 80, status=CellStatus.ERROR),  # a failure: load only
    cell("g", 40, 41, 10, engine=None),  # unknown engine
    cell("h", 40, 42, 10, engine=""),  # an empty engine reads as unknown too
    cell("i", 500, 520, 99, workers=1, source=REQUEST_SOURCE),  # a request standing in
    cell("j", 520, 530, 900, prompt_tokens=8_100, workers=1),  # prompt-heavy: exactly 90% prompt
    cell("k", 520, 540, 900, prompt_tokens=8_099, workers=1),  # just under: generation-heavy
    cell("l", 1_000, 1_001, 7, workers=1, eval_name="other", engine="n"),
    cell("m", 1_000, 1_300, 3_000, workers=4, eval_name="other", engine="n", prompt_tokens=500),
    cell("o", 1_100, 1_200, 900, workers=4, eval_name="other", engine="n", status=CellStatus.LENGTH_CAP),
    cell("p", 3_000, 3_100, 1_000, prompt_tokens=200, workers=1, eval_name="solo"),  # only a class of one
    cell("r", 4_000, 4_010, 100, workers=1, eval_name="other", engine="n"),
    cell("s", 4_050, 4_060, 100, workers=1, eval_name="other", engine="n"),  # 40 s on: r's window
    cell("t", 4_020, 4_030, 400, workers=1),  # in that window's gap: beside n's load
    cell("u", 5_000, 5_900, 36_000, workers=1),  # finished: 900 s, no timeout however close
    cell("v", 6_000, 6_899.9999999, None, workers=1, status=CellStatus.DEADLINE),  # a timeout, just under
]
EDGE_WINDOWS = [
    _window("p1-1", "probe", "q", 90, 95, "p1"),  # the probe's level, beside a and b
    _window("load", "load", "n", 500, 510),  # a recorded load on another engine
    _window("own", "eval", "q", 0, 5_000),  # q's own eval: its in-flight count sees it
    _window("touching", "load", "q", 530, 540),  # touches j's end only
    _window("empty", "load", None, 3_050, 3_050),  # empty: overlaps nothing
]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"eval_name": "g"},
        {"eval_name": "other"},
        {"engine": "unknown"},
        {"engine": "n"},
        {"merge_gap_s": 0.0},
        {"config": AdvisorConfig(ceiling_s=900.0, timeout_tolerance=0.0, prompt_heavy_fraction=0.5)},
        {"config": AdvisorConfig(long_context_prompt_tokens=500, bootstrap_resamples=20)},
        # e2's and u's 900 s at 40 tok/s are exactly what the headroom leaves, v's just under it
        {"config": AdvisorConfig(ceiling_s=1_000.0, ceiling_headroom=0.1)},
    ],
)
def test_every_edge_the_rules_name(options: dict[str, Any]) -> None:
    same(EDGES, EDGE_WINDOWS, [RISING], **options)
    same(EDGES, [], [], **options)
    # the advice on the probe's curve alone (the overview prefers q's cells', as no load was beside them)
    given = {k: v for k, v in options.items() if k != "merge_gap_s"}
    reference = reference_advise(EDGES, [RISING], **given)
    assert advise(CellColumns.from_cells(EDGES), [RISING], **given) == reference


def test_no_cells_and_cells_the_model_cannot_use() -> None:
    same([], EDGE_WINDOWS, [RISING])
    unusable = [
        cell("f", 0, 10, 80, status=CellStatus.ERROR),
        cell("z", 5, 5, 80),
        cell("n", 0, 10, None),
    ]
    same(unusable, [], [RISING])
    same(unusable, [], [])


def test_figures_past_float64s_exact_integers_are_the_rows_figures() -> None:
    """Durations past 2**53 ns (104 days) and in-flight sweeps past 2**62 cell-ns: the levels and
    curves the row path's integers give."""
    day = 86_400
    long = [cell(f"y{k}", k, 200 * day + 3 * k, 5_000_000 + k, workers=2, prompt_tokens=10) for k in range(3)]
    long.append(cell("short", 10, 20, 300, workers=1))
    same(long, [], [RISING])
    same(long, [], [])
    crowd = [cell(f"c{k}", 0, 365 * day + k, 10 + k, workers=400) for k in range(400)]
    same(crowd, [], [RISING])


_statuses = st.sampled_from(list(CellStatus))


@st.composite
def boxes(draw: st.DrawFn) -> list[Cell]:
    """Cells of a few evals on a few engines, starts and ends drawn from a few instants (ties,
    shared endpoints and zero-length cells are common), tokens either side of the class bounds,
    cell ids shared so a timeout's id has other cells."""
    n = draw(st.integers(0, 30))
    instants = draw(st.lists(st.integers(0, 5_000 * S), min_size=1, max_size=10))
    cells = []
    for k in range(n):
        a, b = sorted((draw(st.sampled_from(instants)), draw(st.sampled_from(instants))))
        cells.append(
            Cell(
                uid=f"u{k}",
                eval_name=draw(st.sampled_from(["e1", "e2"])),
                cell_id=draw(st.sampled_from(["c1", "c2", f"c{k}"])),
                engine=draw(st.sampled_from(["q", "q", "n", None])),
                start_unix_ns=a,
                end_unix_ns=b,
                prompt_tokens=draw(
                    st.none() | st.sampled_from([0, 100, 9_000, 24_000]) | st.integers(0, 50_000)
                ),
                completion_tokens=draw(st.none() | st.sampled_from([0, 1_000]) | st.integers(0, 50_000)),
                status=draw(st.sampled_from([CellStatus.OK, CellStatus.OK]) | _statuses),
                workers=draw(st.none() | st.integers(0, 8)),
                source=draw(st.sampled_from(["live", REQUEST_SOURCE])),
            )
        )
    return sorted(cells, key=lambda c: c.start_unix_ns) if draw(st.booleans()) else cells


@st.composite
def window_sets(draw: st.DrawFn) -> list[LoadWindow]:
    out = []
    for k in range(draw(st.integers(0, 4))):
        a, b = sorted((draw(st.integers(0, 5_000)), draw(st.integers(0, 5_000))))
        kind = draw(st.sampled_from(["probe", "load", "eval"]))
        out.append(
            _window(
                f"w{k}",
                kind,
                draw(st.sampled_from(["q", "n", None])),
                a,
                b,
                "p1" if kind == "probe" else None,
            )
        )
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cells=boxes(),
    windows=window_sets(),
    probes=st.sampled_from([[], [RISING], [RISING.model_copy(update={"run": None})]]),
    eval_name=st.none() | st.sampled_from(["e1"]),
    engine=st.none() | st.sampled_from(["q", "unknown"]),
    merge_gap_s=st.sampled_from([0.0, 60.0]),
    ceiling_s=st.sampled_from([60.0, 1_800.0]),
)
def test_generated_boxes_give_the_same_overview(
    cells: list[Cell],
    windows: list[LoadWindow],
    probes: list[RateCurve],
    eval_name: str | None,
    engine: str | None,
    merge_gap_s: float,
    ceiling_s: float,
) -> None:
    if eval_name is not None and eval_name not in {c.eval_name for c in cells}:
        eval_name = None
    config = AdvisorConfig(ceiling_s=ceiling_s, bootstrap_resamples=20)
    same(cells, windows, probes, eval_name=eval_name, engine=engine, merge_gap_s=merge_gap_s, config=config)
