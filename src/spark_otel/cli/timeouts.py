"""Why each cell that hit its ceiling did: slowed by a load, long by itself, or queued.

For every cell cut off at its ceiling (of --eval NAME, else of every eval): the tokens it
produced before the cut, the rate it ran at against its eval's baseline (the eval's cells that
overlapped no other load), the loads it overlapped (other evals' cells, probe levels, recorded
loads), and what it would have needed: its tokens at baseline speed (a lower bound) and, where
the same cell id ran again and completed, that run's length and rate. One line of verdict per
cell. A cut-off cell without tokens is judged by the eval's cells inside the same loads, and the
line says so. --json prints the same for scripts.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..views.tables import model_time, time_scales
from ._common import add_store_argument, open_store, print_hint, print_json, print_table
from ._console import status

if TYPE_CHECKING:
    from ..analysis.timeouts import TimeoutVerdict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--eval", dest="eval_name", metavar="NAME", help="only this eval's timeouts")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from .._exceptions import InputError
    from ..analysis.request_cells import count_requests_as_cells
    from ..analysis.timeouts import timeout_verdicts
    from ..report.inputs import cells_from_store
    from ..views.requests import no_cells, requests_as_cells_line
    from ..views.timeouts import timeouts_table, verdict_json

    with status("reading cells") as phase:
        with open_store(args) as store:
            phase.update(f"reading cells and load windows from {store.path}")
            cells, windows = cells_from_store(store), store.windows()  # requests no cell holds as cells
            scoped = [c for c in cells if args.eval_name is None or c.eval_name == args.eval_name]
            counts = {} if scoped else store.row_counts()  # what a refusal names
            source = str(store.path)
        if scoped:
            phase.update(f"judging the timeouts of {len(scoped):,} cells")
            verdicts = timeout_verdicts(cells, windows, eval_name=args.eval_name)
    if not scoped:
        evals = sorted({c.eval_name for c in cells})
        scope = "" if args.eval_name is None else f" of eval {args.eval_name!r}"
        stand_ins = count_requests_as_cells(cells)
        raise InputError(no_cells(source, counts, scope=scope, evals=evals, stand_ins=stand_ins))
    if args.json:
        print_json([verdict_json(v) for v in verdicts], plain=True)
        return 0
    line = requests_as_cells_line(count_requests_as_cells(scoped), len(scoped))
    scope = f"eval {args.eval_name}" if args.eval_name else f"{len({c.eval_name for c in cells})} evals"
    if not verdicts:
        print(f"no cell of {scope} hit its ceiling ({len(cells)} cells read)")
        if line:
            print_hint(line)
        return 0
    by_eval: dict[str, list[TimeoutVerdict]] = {}
    for v in verdicts:
        by_eval.setdefault(v.eval_name, []).append(v)
    for name, group in by_eval.items():
        first = group[0]
        baseline = (
            f"baseline {first.baseline_rate:.2f} tok/s (median of {first.baseline_n} cells that overlapped "
            "no other load)"
            if first.baseline_rate is not None
            else "no baseline"
        )
        when = model_time(time_scales([c for c in cells if c.eval_name == name]))
        columns, rows = timeouts_table(group)
        print_table(f"{name}: {len(group)} cells hit their ceiling; {baseline}{when}", columns, rows)
    if line:
        print_hint(line)
    return 0
