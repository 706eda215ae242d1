"""`overview`: the one analysis advise and the report share."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.article import (
    C_EVAL,
    D_EVAL,
    NEMOTRON_CURVE,
    QWEN_CURVE,
    appendix_c_cells,
    appendix_d_cells,
    appendix_d_loads,
)

from spark_otel import InputError
from spark_otel import _semconv as sc
from spark_otel.analysis import (
    AdvisorConfig,
    CurvePoint,
    RateCurve,
    concurrency,
    overview,
    windows_touched,
)
from spark_otel.analysis.curve_candidates import _beside_unseen_load, _probe_under_load
from spark_otel.model import Cell, LoadWindow
from spark_otel.records.cell_columns import CellColumns
from spark_otel.views.rules import rule_evidence


def test_overview_takes_the_newest_probe_curve_and_falls_back_to_cells() -> None:
    older = RateCurve(engine="qwen", points=[CurvePoint(streams=1, per_stream_rate=1.0, aggregate_rate=1.0)])
    found = overview(appendix_c_cells(), probe_curves=[older, QWEN_CURVE])
    assert [(c.engine, c.source) for c in found.curves] == [("qwen", "probe")]
    assert found.curves[0] == QWEN_CURVE
    from_cells = overview(appendix_c_cells())
    (curve,) = from_cells.curves
    assert curve.source == "cells"
    assert curve.points[0].per_stream_rate == pytest.approx(11.565, abs=1e-6)


def test_overview_prices_every_eval_per_worker_count_and_advises_once() -> None:
    probes, others = appendix_d_loads()
    cells = appendix_c_cells() + appendix_d_cells() + others
    found = overview(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], config=AdvisorConfig(ceiling_s=1800))
    labels = [n.label for n in found.neighbours]
    assert f"{C_EVAL} at 1 worker" in labels
    assert f"{C_EVAL} at 8 workers" in labels
    serial = next(n for n in found.neighbours if n.eval_name == D_EVAL)
    assert serial.baseline.median == pytest.approx(11.51, abs=1e-6)
    assert found.advice is not None
    flags = [r for r in found.advice.rules if r.kind == "cross-engine"]
    assert [(r.engine, r.eval_name) for r in flags] == [("nemotron", D_EVAL)]
    assert "cost 54%" in rule_evidence(flags[0])
    narrowed = overview(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], eval_name=D_EVAL)
    assert {n.eval_name for n in narrowed.neighbours} == {D_EVAL}
    assert narrowed.concurrency is not None
    assert {c.eval_name for e in narrowed.concurrency.engines for c in e.cells} == {D_EVAL}
    with pytest.raises(InputError, match="no cells recorded for eval 'nope'"):
        overview(cells, eval_name="nope")


def test_overview_of_no_cells_has_curves_but_no_advice() -> None:
    found = overview([], probe_curves=[QWEN_CURVE])
    assert found.curves == [QWEN_CURVE]
    assert (found.concurrency, found.advice, found.neighbours) == (None, None, [])


def test_overview_for_one_engine_shows_that_engine_as_concurrency_reports_it() -> None:
    probes, others = appendix_d_loads()
    cells = appendix_c_cells() + appendix_d_cells() + others
    for engine in ("qwen", "nemotron"):
        found = overview(cells, probes, [QWEN_CURVE, NEMOTRON_CURVE], engine=engine)
        assert found.concurrency == concurrency(cells, engine=engine)
        assert [c.engine for c in found.curves] == [engine]
        assert found.neighbours
        assert all(
            n.engine == engine or any(w.engine == engine for w in windows_touched(n))
            for n in found.neighbours
        )
    both = overview(cells, probes, eval_name=D_EVAL, engine="qwen")
    assert both.concurrency == concurrency(cells, eval_name=D_EVAL, engine="qwen")


# -- which cells a curve may rest on --------------------------------------------------------------
S = 1_000_000_000


def _cell(uid: str, engine: str, start_s: int, end_s: int, eval_name: str = "g") -> Cell:
    return Cell(
        uid=uid,
        eval_name=eval_name,
        cell_id=uid,
        engine=engine,
        start_unix_ns=start_s * S,
        end_unix_ns=end_s * S,
        completion_tokens=100,
    )


def _window(uid: str, kind: str, engine: str, start_s: int, end_s: int, run: str | None = None) -> LoadWindow:
    return LoadWindow(
        uid=uid,
        name=uid,
        kind=kind,
        engine=engine,
        start_unix_ns=start_s * S,
        end_unix_ns=end_s * S,
        attributes={sc.PROBE_RUN: run} if run else {},
    )


PROBE_P1 = RateCurve(
    engine="q",
    points=[CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0)],
    run="p1",
)
PROBE_WINDOWS = [
    _window("p1-1", "probe", "q", 100, 200, "p1"),
    _window("p2-1", "probe", "q", 300, 400, "p2"),
    _window("n-p1", "probe", "n", 500, 600, "p1"),  # the same run name on another engine
]


def test_a_probe_curve_is_marked_under_load_by_the_cells_on_its_engine_during_its_levels() -> None:
    cells = [
        _cell("g1", "q", 150, 160),
        _cell("h1", "q", 180, 250, eval_name="h"),
        _cell("g2", "q", 190, 199),
        _cell("other-engine", "n", 150, 160),
        _cell("other-run", "q", 300, 310),
        _cell("n-run", "q", 550, 560),
        _cell("before", "q", 0, 100),  # ends as the level starts: not beside it
    ]
    marked = _probe_under_load(PROBE_P1, CellColumns.from_cells(cells), PROBE_WINDOWS)
    assert marked.under_load == "3 cells of g, h ran on q during the probe"
    assert marked.model_copy(update={"under_load": None}) == PROBE_P1
    idle = [cells[3], cells[4], cells[6]]
    assert _probe_under_load(PROBE_P1, CellColumns.from_cells(idle), PROBE_WINDOWS) is PROBE_P1
    already = PROBE_P1.model_copy(update={"under_load": "known"})
    assert _probe_under_load(already, CellColumns.from_cells(cells), PROBE_WINDOWS) is already
    unnamed = PROBE_P1.model_copy(update={"run": None})
    assert _probe_under_load(unnamed, CellColumns.from_cells(cells), PROBE_WINDOWS) is unnamed


def test_the_cells_curve_leaves_out_cells_beside_load_their_in_flight_count_cannot_see() -> None:
    cells = [
        _cell("beside-probe", "q", 100, 110),
        _cell("beside-own-eval", "q", 300, 310),
        _cell("beside-other-engine", "q", 500, 510),
        _cell("alone", "q", 700, 710),
        _cell("n1", "n", 505, 520, eval_name="cards"),
    ]
    windows = [
        _window("probe", "probe", "n", 95, 120),
        _window("own eval", "eval", "q", 290, 320),  # the in-flight count sees q's own evals
        _window("other eval", "eval", "n", 690, 695),  # ends before "alone" starts
    ]
    cols = CellColumns.from_cells(cells)

    def beside(engine: str) -> set[str]:
        own = np.array([c.engine == engine for c in cells])
        return {cells[k].uid for k in np.flatnonzero(_beside_unseen_load(cols, own, windows, engine))}

    assert beside("q") == {"beside-probe", "beside-other-engine"}
    assert beside("n") == {"n1"}


def test_the_overview_hands_every_setting_to_the_analyses_it_runs() -> None:
    from spark_otel.analysis import advise

    def rated(uid: str, engine: str, eval_name: str, start_s: int, workers: int) -> Cell:
        return Cell(
            uid=uid,
            eval_name=eval_name,
            cell_id=uid[-1],
            engine=engine,
            start_unix_ns=start_s * S,
            end_unix_ns=(start_s + 100) * S,
            prompt_tokens=100,
            completion_tokens=1_000,
            workers=workers,
        )

    cells = [rated(f"g{k}", "q", "g", 150 * k, 1) for k in range(4)]  # 50 s apart: one run at 60 s
    cells += [rated(f"h{k}", "q", "h", 2_000, 2) for k in range(2)]
    cells += [rated(f"n{k}", "n", "cards", 250 + 10 * k, 4) for k in range(2)]
    probe = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
            CurvePoint(streams=2, per_stream_rate=9.0, aggregate_rate=18.0),
        ],
    )
    settings: dict[str, object] = {
        "config": AdvisorConfig(ceiling_s=150.0, threshold=0.1),
        "gpu_utilization": [96.0, 96.0, 96.0],
        "token_rates": [10.0, 40.0],
        "eval_name": "g",
        "engine": "q",
        "merge_gap_s": 30.0,
        "engine_urls": {"q": "http://127.0.0.1:8011"},
    }
    found = overview(cells, [], [probe], **settings)  # type: ignore[arg-type]
    assert (found.eval_name, found.engine, found.config) == ("g", "q", settings["config"])
    assert found.concurrency == concurrency(cells, eval_name="g", engine="q", merge_gap_s=30.0)
    assert len(found.concurrency.engines[0].runs) == 4  # 50 s apart is past the 30 s gap
    assert found.advice == advise(
        cells,
        found.curves,
        neighbour=found.neighbours,
        **{k: v for k, v in settings.items() if k != "merge_gap_s"},  # type: ignore[arg-type]
    )
    assert found.advice is not None
    assert {r.kind.value for r in found.advice.rules} >= {"batch", "measure", "gauge"}
    assert "http://127.0.0.1:8011" in " ".join(r.command or "" for r in found.advice.rules)
