"""One predicate decides which cells are rated, and every analysis uses it."""

from __future__ import annotations

from tests.support.article import S

from spark_otel.analysis import (
    AdvisorConfig,
    CurvePoint,
    RateCurve,
    advise,
    ceiling_hit,
    concurrency,
    failed,
    neighbour_cost,
    rated_decode_rate,
)
from spark_otel.model import Cell, CellStatus, LoadWindow


def _cell(uid: str, start_s: int, *, tokens: int | None = 1000, **kw: object) -> Cell:
    return Cell(
        uid=uid,
        eval_name="e",
        cell_id=uid,
        engine="q",
        start_unix_ns=start_s * S,
        end_unix_ns=(start_s + 100) * S,
        prompt_tokens=100,
        completion_tokens=tokens,
        workers=1,
        **kw,
    )


def test_rated_decode_rate_refuses_cut_off_failed_and_tokenless_cells() -> None:
    ok = _cell("ok", 0)
    deadline = _cell("d", 0, status=CellStatus.DEADLINE, tokens=500)  # salvaged tokens: partial
    hit = _cell("h", 0, status=CellStatus.DEADLINE, salvaged_findings=2, tokens=500)  # degraded
    error = _cell("x", 0, status=CellStatus.ERROR, tokens=300)
    tokenless = _cell("n", 0, tokens=None)
    capped = _cell("c", 0, status=CellStatus.LENGTH_CAP)
    assert rated_decode_rate(ok) == 10.0
    assert rated_decode_rate(capped) == 10.0  # it produced every token it was allowed
    for cell in (deadline, hit, error, tokenless):
        assert rated_decode_rate(cell) is None, cell.uid
    assert [ceiling_hit(c) for c in (ok, deadline, hit, error)] == [False, True, True, False]
    assert [failed(c) for c in (ok, deadline, hit, error)] == [False, False, False, True]


def test_every_analysis_keeps_partial_rates_of_cut_off_and_failed_cells_out() -> None:
    # Three rated cells at 10 tok/s alone, then, inside a window, one rated cell at 5 tok/s, a
    # cut-off cell and a failed cell whose partial rates (20 and 30 tok/s) would pull the
    # window's median up if they counted.
    cells = [_cell(f"b{k}", 150 * k) for k in range(3)]
    cells += [
        _cell("w", 450, tokens=500),
        _cell("d", 600, status=CellStatus.DEADLINE, tokens=2000),
        _cell("x", 750, status=CellStatus.ERROR, tokens=3000),
    ]
    window = LoadWindow(
        uid="L", name="load", kind="load", engine="other", start_unix_ns=450 * S, end_unix_ns=850 * S
    )
    (engine,) = concurrency(cells).engines
    assert engine.levels[0].rate.n == 4
    assert engine.levels[0].rate.median == 10.0
    assert (engine.ceiling_hits, engine.failures) == (1, 1)
    (run,) = engine.runs
    assert (run.rate.n, run.ceiling_hits, run.failures) == (4, 1, 1)

    w = neighbour_cost("e", cells, [window]).window("load")
    assert (w.n_cells, w.timeouts, w.failures, w.rate.n) == (3, 1, 1, 1)
    assert w.rate.median == 5.0

    curve = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=10, aggregate_rate=10),
            CurvePoint(streams=2, per_stream_rate=9, aggregate_rate=18),
        ],
    )
    (a,) = advise(cells, [curve], config=AdvisorConfig(ceiling_s=100)).classes
    # The failed cell says nothing about length: left out. The cut-off one is a timeout.
    assert a.n_cells == 5
    assert a.historical_timeouts == 1
