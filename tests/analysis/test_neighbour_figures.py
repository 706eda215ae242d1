"""One eval priced against recorded loads on plain cells: every figure of the report, per window
and per cell, from rates worked out by hand."""

from __future__ import annotations

from functools import partial

import pytest
from tests.support.cells import S, cell

from spark_otel.analysis.neighbour import neighbour_cost
from spark_otel.model import CellStatus, LoadWindow

_cell = partial(cell, workers=1)


CELLS = [
    _cell("a", 0, 100, 1_000),  # alone: 10 tok/s
    _cell("b", 200, 300, 800),  # alone: 8 tok/s
    _cell("c", 400, 500, 400),  # inside the nemotron run: 4 tok/s
    _cell("d", 450, 560, 300, status=CellStatus.DEADLINE),  # 70 of its 110 s beside it: attributed
    _cell("e", 510, 610, 600),  # 10 of its 100 s beside it: touched, not attributed, not baseline
    _cell("f", 620, 640, 100, status=CellStatus.ERROR),  # alone, failed: no rate
]
WINDOWS = [
    LoadWindow(
        uid="w1",
        name="nemotron run",
        kind="load",
        engine="nemotron",
        start_unix_ns=380 * S,
        end_unix_ns=520 * S,
    ),
    LoadWindow(
        uid="w2",
        name="q probe",
        kind="probe",
        engine="q",
        streams=4,
        start_unix_ns=700 * S,
        end_unix_ns=800 * S,
    ),
]


def test_every_figure_of_a_priced_eval() -> None:
    report = neighbour_cost("g", CELLS, WINDOWS, derive_from_cells=False)
    assert (
        report.engine,
        report.workers,
        report.label,
        report.n_cells,
        report.timeouts,
        report.failures,
    ) == (
        "q",
        None,
        "g",
        6,
        1,
        1,
    )
    assert (report.baseline.n, report.baseline.median, report.baseline_timeouts) == (2, pytest.approx(9.0), 0)
    run, probe = report.windows
    assert (run.name, run.kind, run.engine, run.same_engine, run.streams) == (
        "nemotron run",
        "load",
        "nemotron",
        False,
        None,
    )
    assert (run.n_cells, run.timeouts, run.failures, run.rate.n, run.min_rate, run.max_rate) == (
        2,
        1,
        0,
        1,
        4.0,
        4.0,
    )
    assert run.cost == pytest.approx(1 - 4 / 9)
    assert (probe.same_engine, probe.streams, probe.n_cells, probe.rate.n, probe.cost, probe.min_rate) == (
        True,
        4,
        0,
        0,
        None,
        None,
    )
    assert (probe.timeouts, probe.failures, probe.max_rate, probe.start_unix_ns, probe.end_unix_ns) == (
        0,
        0,
        None,
        700 * S,
        800 * S,
    )
    assert (run.uid, run.start_unix_ns, run.end_unix_ns) == ("w1", 380 * S, 520 * S)
    cells = {c.uid: c for c in report.cells}
    assert {uid: (c.baseline, c.windows, c.overlapped) for uid, c in cells.items()} == {
        "a": (True, (), ()),
        "b": (True, (), ()),
        "c": (False, ("nemotron run",), ("nemotron run",)),
        "d": (False, ("nemotron run",), ("nemotron run",)),
        "e": (False, (), ("nemotron run",)),
        "f": (True, (), ()),
    }
    assert {uid: (c.decode_rate, c.timed_out, c.failed) for uid, c in cells.items()} == {
        "a": (10.0, False, False),
        "b": (8.0, False, False),
        "c": (4.0, False, False),
        "d": (None, True, False),
        "e": (6.0, False, False),
        "f": (None, False, True),
    }
    assert report.window("nemotron run") is run
    d = cells["d"]
    assert (d.cell_id, d.engine, d.workers, d.start_unix_ns, d.end_unix_ns, d.elapsed_s, d.status) == (
        "d",
        "q",
        1,
        450 * S,
        560 * S,
        110.0,
        CellStatus.DEADLINE,
    )
    assert (d.completion_tokens, cells["f"].status) == (300, CellStatus.ERROR)
    with pytest.raises(KeyError, match=r"^'nothing'$"):
        report.window("nothing")


def test_the_overlap_that_attributes_a_cell_to_a_window_is_a_fraction_of_the_cell() -> None:
    strict = neighbour_cost("g", CELLS, WINDOWS, derive_from_cells=False, min_overlap_fraction=0.9)
    run = strict.window("nemotron run")
    assert (run.n_cells, run.timeouts) == (1, 0)  # d's 64% is under 90%; c lies wholly inside
    loose = neighbour_cost("g", CELLS, WINDOWS, derive_from_cells=False, min_overlap_fraction=0.1)
    run = loose.window("nemotron run")
    assert (run.n_cells, run.rate.n, run.rate.median) == (3, 2, pytest.approx(5.0))  # e's 10% now counts
