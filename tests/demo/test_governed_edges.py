"""Act 5's figures at their edges, from hand-built cells: a cell exactly 90% beside the
neighbour, cells of no length, a run with no neighbour cells or no serial cells, no rates or no
baseline, a neighbour cell starting the instant the serial eval ends, cells at the clock's zero;
the answer's wording of each cost; and when the nemotron runner starts (the figures of a whole run
are in test_governed_figures.py)."""

from __future__ import annotations

import dataclasses

import pytest

from spark_otel import _semconv as sc
from spark_otel.demo import DemoPlan
from spark_otel.demo.governed import RunFigures, _inside, _load_start_ns, governed_answer, run_figures
from spark_otel.model import Cell

S = 1_000_000_000
T0 = 1_790_000_000 * S


def _cell(uid: str, start_ns: int, end_ns: int, tokens: int | None = None, **kw: object) -> Cell:
    return Cell(
        uid=uid,
        eval_name=uid.split("-", maxsplit=1)[0],
        cell_id=uid,
        start_unix_ns=start_ns,
        end_unix_ns=end_ns,
        completion_tokens=tokens,
        **kw,
    )


def _at(uid: str, start_s: float, end_s: float, tokens: int | None = None, **kw: object) -> Cell:
    return _cell(uid, T0 + int(start_s * S), T0 + int(end_s * S), tokens, **kw)


def test_the_share_of_a_cell_inside_a_window() -> None:
    window = (T0 + 200 * S, T0 + 600 * S)
    assert _inside(_at("serial-0", 100, 300), window) == 0.5
    assert _inside(_at("serial-1", 300, 500), window) == 1.0
    assert _inside(_at("serial-2", 700, 800), window) == 0.0  # after it: no overlap, not a negative one
    assert _inside(_cell("serial-3", T0, T0 + 1), window) == 0.0  # a 1 ns cell outside
    assert _inside(_cell("serial-4", T0 + 300 * S, T0 + 300 * S + 1), window) == 1.0  # a 1 ns cell inside
    assert _inside(_cell("serial-5", T0 + 300 * S, T0 + 300 * S), window) == 0.0  # no length: never beside


def test_a_cell_exactly_90_percent_beside_the_neighbour_prices_it() -> None:
    serial = [_at("serial-0", 0, 100, 1000), _at("serial-1", 100, 200, 500)]
    load = [_at("load-0", 10, 1000, 800)]
    figures = run_figures("open", serial, load, baseline=10.0)
    # serial-0 is 90 s of its 100 inside the neighbour's span: beside. serial-1 is wholly inside.
    assert (figures.beside_cells, figures.beside_median) == (2, 7.5)
    assert figures.serial_median == 7.5


def test_the_cost_rests_on_the_cells_beside_the_neighbour_not_on_all() -> None:
    serial = [
        _at("serial-0", 0, 100, 1200),  # alone: 12 tok/s
        _at("serial-1", 100, 200, 1100),  # alone: 11 tok/s
        _at("serial-2", 200, 300, 600),  # beside: 6 tok/s
    ]
    figures = run_figures("open", serial, [_at("load-0", 200, 300, 800)], baseline=12.0)
    assert (figures.serial_median, figures.beside_median) == (11.0, 6.0)
    assert figures.cost == pytest.approx(0.5)  # 6 against 12; all cells' 11 would say 8%


def test_the_peak_counts_neighbour_cells_in_flight_at_once_not_ever_started() -> None:
    load = [_at("load-0", 0, 10, 100), _at("load-1", 20, 30, 100), _at("load-2", 25, 40, 100)]
    figures = run_figures("open", [_at("serial-0", 0, 40, 400)], load, baseline=10.0)
    assert figures.load_peak == 2


def test_a_run_without_neighbour_cells() -> None:
    serial = [_at("serial-0", 0, 100, 1100), _at("serial-1", 100, 200, 900)]
    assert run_figures("open", serial, [], baseline=10.0) == RunFigures(
        label="open",
        serial_cells=2,
        serial_median=10.0,
        beside_cells=0,
        beside_median=None,
        cost=pytest.approx(0.0),
        ceiling_hits=0,
        serial_longest_s=100.0,
        load_cells=0,
        load_wall_s=0.0,
        load_peak=0,
        load_waited_max_s=0.0,
        load_started_after_serial=False,
        both_wall_s=200.0,
    )


def test_a_run_without_serial_cells() -> None:
    load = [_at("load-0", 0, 100, 1000), _at("load-1", 50, 150, 1000)]
    assert run_figures("governed", [], load, baseline=10.0) == RunFigures(
        label="governed",
        serial_cells=0,
        serial_median=None,
        beside_cells=0,
        beside_median=None,
        cost=None,
        ceiling_hits=0,
        serial_longest_s=0.0,
        load_cells=2,
        load_wall_s=150.0,  # ungoverned: from the first start to the last end
        load_peak=2,
        load_waited_max_s=0.0,  # ungoverned cells waited nothing
        load_started_after_serial=True,
        both_wall_s=150.0,
    )


def test_an_empty_run() -> None:
    assert run_figures("open", [], [], baseline=10.0) == RunFigures(
        label="open",
        serial_cells=0,
        serial_median=None,
        beside_cells=0,
        beside_median=None,
        cost=None,
        ceiling_hits=0,
        serial_longest_s=0.0,
        load_cells=0,
        load_wall_s=0.0,
        load_peak=0,
        load_waited_max_s=0.0,
        load_started_after_serial=False,
        both_wall_s=0.0,
    )


def test_no_cost_without_rates_or_without_a_baseline() -> None:
    untimed = [_at("serial-0", 0, 100), _at("serial-1", 100, 200)]  # no completion tokens: no rate
    assert run_figures("open", untimed, [], baseline=10.0).cost is None
    assert run_figures("open", [_at("serial-0", 0, 100, 1000)], [], baseline=0.0).cost is None


def test_the_longest_serial_cell_and_the_neighbours_wall_from_its_first_ask() -> None:
    """The nemotron eval's wall starts where its first cell asked (its start less its queue
    wait: 250 - 130.5), not where it was admitted, and ends at its last end."""
    serial = [_at("serial-0", 0, 120.5, 1000), _at("serial-1", 120.5, 400, 1000)]
    load = [
        _at("load-0", 250, 300, 100, attributes={sc.CELL_QUEUE_WAIT_S: 130.5}),
        _at("load-1", 260, 480, 100, attributes={sc.CELL_QUEUE_WAIT_S: 20.0}),
    ]
    figures = run_figures("adaptive", serial, load, baseline=10.0)
    assert (figures.serial_longest_s, figures.load_wall_s) == (279.5, 360.5)


def test_a_neighbour_cell_starting_as_the_serial_eval_ends_started_after_it() -> None:
    serial = [_at("serial-0", 0, 100, 1000)]
    load = [_at("load-0", 100, 200, 1000, attributes={sc.CELL_QUEUE_WAIT_S: 95.5})]
    figures = run_figures("governed", serial, load, baseline=10.0)
    assert figures.load_started_after_serial
    assert figures.load_waited_max_s == 95.5


def test_the_figures_as_a_dict_for_json() -> None:
    figures = run_figures("open", [_at("serial-0", 0, 100, 1000)], [], baseline=10.0)
    assert figures.as_dict() == {
        "label": "open",
        "serial_cells": 1,
        "serial_median": 10.0,
        "beside_cells": 0,
        "beside_median": None,
        "cost": 0.0,
        "ceiling_hits": 0,
        "serial_longest_s": 100.0,
        "load_cells": 0,
        "load_wall_s": 0.0,
        "load_peak": 0,
        "load_waited_max_s": 0.0,
        "load_started_after_serial": False,
        "both_wall_s": 100.0,
    }


_BASE = RunFigures(
    label="without rules",
    serial_cells=5,
    serial_median=7.0,
    beside_cells=2,
    beside_median=3.3,
    cost=0.7,
    ceiling_hits=0,
    serial_longest_s=400.0,
    load_cells=12,
    load_wall_s=300.0,
    load_peak=4,
    load_waited_max_s=0.0,
    load_started_after_serial=False,
    both_wall_s=500.0,
)


def test_the_answer_rounds_each_cost_to_whole_percent() -> None:
    governed = dataclasses.replace(_BASE, label="with the rules", beside_cells=0, cost=0.6, both_wall_s=480.4)
    assert governed_answer("serial", _BASE, governed) == (
        "with the rules, serial paid 60% (n=5 cells, 0 beside the neighbour) against 70% without "
        "(n=2 beside), 0 ceiling hits against 0; the nemotron eval waited up to 0 model s, then ran "
        "4 wide; both evals took 480 model s against 500"
    )


@pytest.mark.parametrize(("open_cost", "governed_cost"), [(None, 0.1), (0.7, None)])
def test_no_comparison_when_either_run_has_no_cost(
    open_cost: float | None, governed_cost: float | None
) -> None:
    open_run = dataclasses.replace(_BASE, cost=open_cost)
    governed = dataclasses.replace(_BASE, label="with the rules", cost=governed_cost)
    assert governed_answer("serial", open_run, governed) == (
        "serial: no decode rates in Act 5's cells, so no cost to compare"
    )


def test_the_nemotron_runner_starts_its_cells_midway_through_the_first_serial_cell() -> None:
    assert _load_start_ns(DemoPlan.quick(500.0), T0) == T0 + 40 * S
    plan = dataclasses.replace(DemoPlan.quick(500.0), governed_load_after_s=2.5)
    assert _load_start_ns(plan, T0) == T0 + 2_500_000_000


def test_cells_at_the_clocks_zero_without_the_other_eval() -> None:
    # No neighbour cells: no window, so even a serial cell in the clock's first nanosecond is not
    # beside one; no serial cells: a neighbour cell starting at zero still started after them.
    at_zero = [_cell("serial-0", 0, 1)]
    assert run_figures("open", at_zero, [], baseline=10.0).beside_cells == 0
    assert run_figures("governed", [], [_cell("load-0", 0, 1)], baseline=10.0).load_started_after_serial
