"""Act 5's figures from hand-built cells: which serial cells ran beside the neighbour, what they
paid, and the answer's guard when none did."""

from __future__ import annotations

import dataclasses

import pytest

from spark_otel import _semconv as sc
from spark_otel.demo.governed import RunFigures, governed_answer, run_figures
from spark_otel.model import Cell, CellStatus

S = 1_000_000_000
T0 = 1_790_000_000 * S


def _cell(uid: str, start_s: float, end_s: float, tokens: int, **kw: object) -> Cell:
    return Cell(
        uid=uid,
        eval_name=uid.split("-", maxsplit=1)[0],
        cell_id=uid,
        start_unix_ns=T0 + int(start_s * S),
        end_unix_ns=T0 + int(end_s * S),
        completion_tokens=tokens,
        **kw,
    )


def test_only_cells_wholly_beside_the_neighbour_price_it() -> None:
    serial = [
        _cell("serial-0", 0, 100, 1100),  # alone: 11 tok/s
        _cell("serial-1", 100, 300, 1000),  # half beside (200..600): not priced
        _cell("serial-2", 300, 500, 1000),  # wholly beside: 5 tok/s
        _cell("serial-3", 500, 590, 450, status=CellStatus.DEADLINE),  # a hit
    ]
    load = [
        _cell("load-0", 200, 400, 800, attributes={sc.CELL_QUEUE_WAIT_S: 12.0}),
        _cell("load-1", 210, 600, 800),
        _cell("load-2", 220, 380, 800),
    ]
    figures = run_figures("open", serial, load, baseline=10.0)
    assert (figures.beside_cells, figures.beside_median) == (2, 5.0)  # the hit is beside, not rated
    assert figures.cost == pytest.approx(0.5)
    assert figures.ceiling_hits == 1
    assert (figures.load_cells, figures.load_peak, figures.load_waited_max_s) == (3, 3, 12.0)
    assert not figures.load_started_after_serial
    assert figures.both_wall_s == 600.0


def test_the_answer_says_there_is_nothing_to_compare_when_no_cell_ran_beside() -> None:
    serial = [_cell("serial-0", 0, 100, 1100), _cell("serial-1", 100, 200, 1100)]
    open_run = run_figures("open", serial, [_cell("load-0", 150, 180, 500)], baseline=11.0)
    assert open_run.beside_cells == 0
    assert open_run.cost == pytest.approx(0.0)  # all cells, against the baseline
    governed = run_figures("governed", serial, [_cell("load-0", 250, 300, 500)], baseline=11.0)
    assert governed.load_started_after_serial
    text = governed_answer("serial", open_run, governed)
    assert text.startswith("without rules, no cell of serial ran wholly beside the nemotron eval")
    assert "no cost to compare" in text


def test_the_answer_names_both_costs_and_what_each_rests_on() -> None:
    base = RunFigures(
        label="without rules",
        serial_cells=5,
        serial_median=7.0,
        beside_cells=2,
        beside_median=5.1,
        cost=0.536,
        ceiling_hits=1,
        serial_longest_s=400.0,
        load_cells=12,
        load_wall_s=300.0,
        load_peak=4,
        load_waited_max_s=0.0,
        load_started_after_serial=False,
        both_wall_s=508.0,
    )
    governed = dataclasses.replace(
        base,
        label="with the rules",
        beside_cells=0,
        cost=-0.004,
        ceiling_hits=0,
        load_waited_max_s=307.2,
        both_wall_s=485.0,
    )
    assert governed_answer("serial", base, governed) == (
        "with the rules, serial paid 0% (n=5 cells, 0 beside the neighbour) against 54% without "
        "(n=2 beside), 0 ceiling hits against 1; the nemotron eval waited up to 307 model s, then "
        "ran 4 wide; both evals took 485 model s against 508"
    )
