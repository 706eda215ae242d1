"""`overview`: the one analysis advise and the report share."""

from __future__ import annotations

import pytest
from tests.analysis.article import (
    C_EVAL,
    D_EVAL,
    NEMOTRON_CURVE,
    QWEN_CURVE,
    appendix_c_cells,
    appendix_d_cells,
    appendix_d_loads,
)

from spark_otel._exceptions import InputError
from spark_otel.analysis import (
    AdvisorConfig,
    CurvePoint,
    RateCurve,
    concurrency,
    overview,
    windows_touched,
)


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
    assert "cost 54%" in flags[0].evidence
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
