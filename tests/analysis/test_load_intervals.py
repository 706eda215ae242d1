"""Load intervals from the engines' counter scrapes and from eval runs, and the cells' own rate
gauge, on plain samples and cells: every interval's edges, label and throughput by hand."""

from __future__ import annotations

from functools import partial

import pytest
from tests.support.cells import cell

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import cell_rate_samples, eval_intervals, receiver_intervals
from spark_otel.analysis.gauges.catalog import CELL_RATE_METRIC
from spark_otel.model import Cell, CellStatus, MetricSample

S = 1_000_000_000
T0 = 1_700_000_000 * S  # 2023-11-14 22:13:20 UTC
_cell = partial(cell, workers=1, t0_ns=T0)


def _scrape(
    engine: str | None, t_s: int, total: float, name: str = sc.ENGINE_GENERATION_TOKENS
) -> MetricSample:
    attributes = {sc.ENGINE: engine} if engine else {}
    return MetricSample(name=name, unix_ns=T0 + t_s * S, value=total, attributes=attributes)


def test_receiver_bins_read_each_engines_counter_where_its_scrapes_cover_the_bin() -> None:
    scrapes = [
        *(_scrape("q", t, v) for t, v in [(0, 100.0), (10, 200.0), (20, 400.0), (30, 700.0)]),
        _scrape("n", 10, 0.0),
        _scrape("n", 20, 50.0),
        _scrape("q", 15, 9e9, name=sc.ENGINE_REQUESTS_RUNNING),  # not the counter
    ]
    bins = receiver_intervals(scrapes, 10)
    assert [(b.label, b.start_unix_ns - T0, b.end_unix_ns - T0, b.engines, b.throughput) for b in bins] == [
        ("22:13:20 +10 s", 0, 10 * S, {"q": 10.0}, 10.0),
        ("22:13:30 +10 s", 10 * S, 20 * S, {"n": 5.0, "q": 20.0}, 25.0),
        ("22:13:40 +10 s", 20 * S, 30 * S, {"q": 30.0}, 30.0),
    ]
    assert {b.source for b in bins} == {"receiver"}
    halves = receiver_intervals([_scrape(None, 0, 0.0), _scrape(None, 1, 10.0)], 0.5)
    assert [(b.label, b.engines) for b in halves] == [
        ("22:13:20.000 +0.5 s", {"unknown": 10.0}),  # bins under a second: to the millisecond
        ("22:13:20.500 +0.5 s", {"unknown": 10.0}),
    ]
    assert receiver_intervals([], 10) == []
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match=f"bin must be positive seconds, got {bad}"):
            receiver_intervals(scrapes, bad)


def test_an_eval_runs_interval_counts_every_cells_tokens_inside_it() -> None:
    cells = [
        _cell("g1", 0, 100, 1_000, attributes={sc.TIME_SCALE: "4"}),
        _cell("g2", 100, 200, 1_000),
        _cell(
            "h1", 150, 250, 500, eval_name="h", engine="n", attributes={sc.TIME_SCALE: "fast"}
        ),  # real time
        _cell("z", 300, 300, 99, eval_name="z", engine="n"),  # no duration: neither a run nor tokens
    ]
    g, h = eval_intervals(cells)
    assert (g.label, g.source, g.start_unix_ns - T0, g.end_unix_ns - T0, g.time_scale) == (
        "g eval, 1 worker on q 22:13",
        "evals",
        0,
        200 * S,
        4.0,
    )
    # g's 2,000 tokens over 200 s, and half of h1's 500 (it overlapped g's last 50 s of its 100).
    assert g.engines == {"n": pytest.approx(1.25), "q": pytest.approx(10.0)}
    assert g.throughput == pytest.approx(11.25)
    assert (h.label, h.time_scale, h.engines) == (
        "h eval, 1 worker on n 22:15",
        1.0,
        {"n": pytest.approx(5.0), "q": pytest.approx(5.0)},
    )


def test_the_cells_rate_gauge_is_one_sample_per_rated_cell_at_its_midpoint() -> None:
    cells = [
        _cell("a", 0, 100, 1_000),
        _cell("cut", 0, 100, 500, status=CellStatus.DEADLINE),
        _cell("none", 0, 100, None),
        Cell(
            uid="b",
            eval_name="g",
            cell_id="b",
            start_unix_ns=T0,
            end_unix_ns=T0 + 11 * S,
            completion_tokens=55,
        ),
    ]
    assert cell_rate_samples(cells) == [
        MetricSample(
            name=CELL_RATE_METRIC,
            unix_ns=T0 + 50 * S,
            value=10.0,
            unit="{token}/s",
            attributes={sc.ENGINE: "q"},
            source="cells",
        ),
        MetricSample(
            name=CELL_RATE_METRIC,
            unix_ns=T0 + 5_500_000_000,
            value=5.0,
            unit="{token}/s",
            attributes={sc.ENGINE: "unknown"},
            source="cells",
        ),
    ]
