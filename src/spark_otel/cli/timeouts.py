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

from ..views.tables import model_time
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
    from ..analysis.request_cells import REQUEST_SOURCE
    from ..analysis.timeouts import cut_off_uids, timeout_verdicts_of_columns
    from ..report.inputs import columns_from_store, eval_scales_from_store
    from ..views.requests import no_cells, requests_as_cells_line
    from ..views.timeouts import timeouts_table, verdict_json

    with status("reading cells") as phase, open_store(args) as store:
        phase.update(f"reading cells and load windows from {store.path}")
        cells, windows = columns_from_store(store), store.windows()  # requests no cell holds as cells
        scoped = [k for k, name in enumerate(cells.eval_name) if args.eval_name in (None, name)]
        counts = {} if scoped else store.row_counts()  # what a refusal names
        source = str(store.path)
        # The governor's wait of each cut-off cell: in its attributes, which the columns do not carry.
        held = store.cells_by_uid(cut_off_uids(cells, eval_name=args.eval_name)) if scoped else {}
        admissions = {uid: c.admission_s for uid, c in held.items() if c.admission_s is not None}
        if scoped:
            phase.update(f"judging the timeouts of {len(scoped):,} cells")
            verdicts = timeout_verdicts_of_columns(
                cells, windows, eval_name=args.eval_name, admissions=admissions
            )
        if scoped and verdicts and not args.json:
            scales = {
                name: eval_scales_from_store(store, cells, name) for name in {v.eval_name for v in verdicts}
            }
    if not scoped:
        evals = sorted(set(cells.eval_name))
        scope = "" if args.eval_name is None else f" of eval {args.eval_name!r}"
        stand_ins = cells.source.count(REQUEST_SOURCE)
        raise InputError(no_cells(source, counts, scope=scope, evals=evals, stand_ins=stand_ins))
    if args.json:
        print_json([verdict_json(v) for v in verdicts], plain=True)
        return 0
    line = requests_as_cells_line(sum(cells.source[k] == REQUEST_SOURCE for k in scoped), len(scoped))
    scope = f"eval {args.eval_name}" if args.eval_name else f"{len(set(cells.eval_name))} evals"
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
        columns, rows = timeouts_table(group)
        print_table(
            f"{name}: {len(group)} cells hit their ceiling; {baseline}{model_time(scales[name])}",
            columns,
            rows,
        )
    if line:
        print_hint(line)
    return 0
