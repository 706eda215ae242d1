"""List recent eval cells from the embedded store, newest first.

Each row: eval, cell, engine, workers, status, prompt and completion tokens, elapsed seconds,
decode rate (completion tokens over elapsed), the cell's GPU energy (its share of the box's by
tokens among the cells in flight, priced on read) and salvaged findings. --json prints the
cells as the store keeps them, each with its ``energy`` (null where no GPU readings cover it),
for scripts.

--budget shows where each cell's wall time went instead: admission (the queue governor's wait),
the wait for first tokens (split into the engine's queue and prefill where its server spans were
joined through traceparent), decode, requests not streamed (unsplit), and the runner's own work
between requests (other), in seconds and as a share of wall time, then the same summed per eval.
Cells recorded without a budget (before schema 2, or backfilled without the fields) are counted,
never estimated.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..views.tables import model_time, time_scales
from ._common import add_store_argument, open_store, print_hint, print_json, print_table
from ._console import status

if TYPE_CHECKING:
    from ..analysis.budget import CellBudget
    from ..model import Cell
    from ..store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--eval", dest="eval_name", help="only cells of this eval")
    parser.add_argument("--engine", help="only cells on this engine")
    parser.add_argument("-n", "--limit", type=int, default=50, help="how many cells, newest first")
    parser.add_argument(
        "--budget", action="store_true", help="where each cell's wall time went (queue, prefill, decode, ...)"
    )
    parser.add_argument(
        "--wide", action="store_true", help="every column, however narrow the terminal (rows may wrap)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ..analysis.energy import energy_shares
    from ..views.cells import ENERGY_NOTES, cells_json, cells_list
    from ..views.requests import requests_outside_cells_hint
    from ._common import COUNT

    COUNT.check("--limit", args.limit)
    with (
        open_store(args) as store,
        status(f"reading the {args.limit:,} most recent cells from {store.path}") as phase,
    ):
        cells = store.cells(eval_name=args.eval_name, engine=args.engine, limit=args.limit, newest_first=True)
        if args.budget:
            phase.update(f"splitting the time of {len(cells):,} cells")
            budgets = _budgets(store, cells)
        else:
            phase.update(f"pricing the energy of {len(cells):,} cells")
            energy = energy_shares(*store.energy_inputs(c.uid for c in cells), [c.uid for c in cells])
            outside = 0 if cells else len(store.requests_outside_cells())
    if args.budget:
        return _budget(cells, budgets, as_json=args.json)
    if args.json:
        print_json(cells_json(cells, energy))
        return 0
    columns, rows, priorities = cells_list(cells, energy)
    print_table(
        f"{len(cells)} most recent cells" + model_time(time_scales(cells)),
        columns,
        rows,
        notes=ENERGY_NOTES,
        priorities=priorities,
        wide=args.wide,
    )
    if cells and not energy:
        from ..analysis.energy import MEASURE_GPU

        print_hint(f"energy: no GPU readings in the store cover these cells; measure with `{MEASURE_GPU}`")
    hint = requests_outside_cells_hint(outside)
    if hint:
        print_hint(hint)
    return 0


def _budgets(store: Store, cells: list[Cell]) -> list[CellBudget]:
    from ..analysis.budget import cell_budgets

    requests = [r for c in cells for r in store.requests(cell_uid=c.uid)]
    return cell_budgets(cells, requests, store.server_timings(r.uid for r in requests))


def _budget(cells: list[Cell], budgets: list[CellBudget], *, as_json: bool) -> int:
    from ..analysis.budget import eval_budgets
    from ..views.budget import PHASE_NOTES, budget_table, eval_budget_table

    per_eval = eval_budgets(budgets, cells)
    if as_json:
        print_json(
            {
                "cells": [b.model_dump(mode="json") for b in budgets],
                "evals": [e.model_dump(mode="json") for e in per_eval],
            }
        )
        return 0
    if not budgets:
        print(
            f"none of the {len(cells)} cells read has a time budget: a live cell() records one (store "
            "schema 2 on); a backfilled cell has one where its mapping names the fields"
        )
        return 0
    when = model_time(time_scales(cells))
    joined = sum(b.joined for b in budgets)
    requests_n = sum(b.requests for b in budgets)
    source = (
        f"queue and prefill from the engine's server spans ({joined} of {requests_n} requests joined)"
        if joined
        else "the wait for first tokens is not split: no engine server span was joined (vLLM: "
        "--otlp-traces-endpoint, and instrument(inject_traceparent=True))"
    )
    columns, rows = budget_table(budgets)
    print(f"where the wall time went: {source}")
    print_table(f"{len(budgets)} most recent cells{when}", columns, rows, notes=PHASE_NOTES)
    columns, rows = eval_budget_table(per_eval)
    print_table("per eval, summed over its cells" + when, columns, rows, notes=PHASE_NOTES)
    return 0
