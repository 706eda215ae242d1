"""List recent requests from the embedded store, newest first, as `spark-otel cells` lists cells.

Each row: the eval it counts in, the request (its span id), its cell (or "none": no cell()
recorded it, so it stands in for a cell of its own in concurrency, neighbour-cost, advise,
timeouts and report; or "load": it ran inside a recorded load or probe window, which counts it),
engine, model, status (as a cell's: a timeout is "deadline", another error "error", a finish
reason "length" "length_cap"), prompt and output tokens, elapsed seconds, rate (output tokens
over elapsed), time to the first streamed chunk, start, and whether it streamed.
--outside-cells lists only the requests no cell holds. --json prints the requests as the store
keeps them, with the eval, engine and status they count under and whether each stands in for a
cell.
"""

from __future__ import annotations

import argparse

from ._common import add_store_argument, open_store, print_hint, print_json, print_table
from ._console import status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--eval", dest="eval_name", help="only requests counted in this eval")
    parser.add_argument("--engine", help="only requests to this engine")
    parser.add_argument("--outside-cells", action="store_true", help="only requests no cell holds")
    parser.add_argument("-n", "--limit", type=int, default=50, help="how many requests, newest first")
    parser.add_argument(
        "--wide", action="store_true", help="every column, however narrow the terminal (rows may wrap)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ..analysis.request_cells import request_engine, request_eval, requests_as_cells
    from ..views.requests import outside_cells_hint, requests_json, requests_list, requests_title
    from ._common import COUNT

    COUNT.check("--limit", args.limit)
    filtered = args.eval_name is not None or args.engine is not None
    with open_store(args) as store, status(f"reading requests from {store.path}") as phase:
        urls = store.engine_urls()
        if args.outside_cells:
            found = store.requests_outside_cells()[::-1]
        else:
            found = store.requests(newest_first=True, limit=None if filtered else args.limit)
        if filtered:
            engines = {r.uid: request_engine(r, urls) for r in found}
            found = [
                r
                for r in found
                if (args.engine is None or engines[r.uid] == args.engine)
                and (args.eval_name is None or request_eval(r, engines[r.uid]) == args.eval_name)
            ]
        requests = found[: args.limit]
        phase.update(f"reading the cells of {len(requests):,} requests")
        cells = store.cells_by_uid(r.cell_uid for r in requests if r.cell_uid)
        outside = [r for r in requests if r.cell_uid not in cells]
        loads = store.windows(kind="load") + store.windows(kind="probe") if outside else []
        # Of those no cell holds, the ones the answers count as cells (not a recorded load's).
        phase.update(f"matching {len(outside):,} requests outside cells to loads")
        standing = {c.uid for c in requests_as_cells(outside, engine_urls=urls, windows=loads)}
    if args.json:
        print_json(requests_json(requests, cells, urls, standing))
        return 0
    columns, rows, priorities = requests_list(requests, cells, urls, standing)
    print_table(
        requests_title(len(requests), len(outside)), columns, rows, priorities=priorities, wide=args.wide
    )
    hint = outside_cells_hint(len(standing), len(outside) - len(standing))
    if hint:
        print_hint(hint)
    return 0
