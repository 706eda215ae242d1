"""What every other load on the box cost an eval, read from the eval's own cells.

The eval is its own instrument: each cell's decode rate is completion tokens over elapsed. Its
baseline is the cells that overlapped no other load (median, p10, p90). Every other load is a
window: other evals' cells (merged per engine and worker count), probe levels and loads
recorded in the store, work on the other engine. For each window: the rates of the eval's cells
that spent at least --min-overlap of their time inside it, and the cost against the baseline,
1 - median / baseline median, printed like the article's Act 4 table (load | median tok/s |
cost %). Costs past --threshold are marked "!". Timeouts (cut off at the ceiling) and failed
cells are listed and counted per window, each apart, but kept out of every rate. The per-cell
listing follows (cell | window | elapsed | output tok | tok/s | overlapped); --all-cells
includes the baseline cells. Cells recorded under a model clock are labelled "model time".
An eval with no baseline (every cell ran beside other load) gets one line saying so instead of
a table of costs that cannot be computed. --plot FILE.png draws the eval over time: each cell
at its decode rate from start to end, every load it ran beside shaded and named.

An eval that ran at several worker counts is priced one worker count at a time (its cells at
the other counts are then load like any other), since its own batching would otherwise read as
a neighbour's cost; --workers N prices one count only. A recorded eval window whose eval's cells
are in the store is left out: those cells already stand for it, run by run.
"""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..views.requests import cell_label
from ..views.tables import model_time, seconds
from ._common import (
    add_advisor_arguments,
    add_store_argument,
    open_store,
    print_json,
    print_table,
    tables_held,
)
from ._console import status

if TYPE_CHECKING:
    from ..analysis.neighbour import CellRate, NeighbourReport, WindowCost
    from ..analysis.neighbour_columns import NeighbourColumns
    from ..model import LoadWindow
    from ..records.cell_columns import CellColumns

_logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..analysis.neighbour import DEFAULT_MIN_OVERLAP_FRACTION
    from ..analysis.windows import DEFAULT_MERGE_GAP_S

    add_store_argument(parser)
    parser.add_argument("--eval", dest="eval_name", metavar="NAME", required=True, help="the eval to price")
    add_advisor_arguments(parser, ceiling=False)
    parser.add_argument(
        "--min-overlap",
        type=float,
        default=DEFAULT_MIN_OVERLAP_FRACTION,
        metavar="FRACTION",
        help="share of a cell's time inside a window for the cell to count for it",
    )
    parser.add_argument(
        "--merge-gap",
        type=float,
        default=DEFAULT_MERGE_GAP_S,
        metavar="SECONDS",
        help="other evals' cells this close together form one window",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="price only the eval's cells at this worker count (default: each count in turn)",
    )
    parser.add_argument("--all-cells", action="store_true", help="list baseline cells too")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw the eval's timeline to this PNG (one file per worker count: FILE-N-workers.png)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _hhmm(unix_ns: int) -> str:
    from .._clock import NS_PER_S

    return datetime.fromtimestamp(unix_ns / NS_PER_S, UTC).strftime("%H:%M")


def _range(w: WindowCost) -> str:
    if w.rate.n < 2 or w.min_rate is None or w.max_rate is None:
        return "-"
    return f"{w.min_rate:.2f} to {w.max_rate:.2f}"


def _output(c: CellRate) -> str:
    if c.timed_out:
        return "timeout"
    if c.failed:
        return "failed"
    return "-" if c.completion_tokens is None else f"{c.completion_tokens:,}"


def _print(report: NeighbourReport, *, threshold: float, all_cells: bool, scales: list[float]) -> None:
    """The report's two tables; ``scales``: the time scales the eval's cells were recorded under."""
    from ..analysis.neighbour import no_baseline_reason

    when = model_time(scales)
    reason = no_baseline_reason(report)
    if reason is not None:
        print(f"{report.label} on {report.engine or 'unknown engine'}: {reason}{when}")
    else:
        _print_costs(report, threshold=threshold, when=when)
    print_table(
        f"{report.label}: cells ({report.timeouts} timeouts and {report.failures} failed, kept out of rates)"
        + when,
        ["cell", "window (UTC)", f"elapsed {seconds(scales)}", "output tok", "tok/s", "overlapped"],
        [
            [
                cell_label(c.cell_id, request_as_cell=c.request_as_cell),
                f"{_hhmm(c.start_unix_ns)} to {_hhmm(c.end_unix_ns)}",
                f"{c.elapsed_s:,.0f}",
                _output(c),
                "-" if c.decode_rate is None else f"{c.decode_rate:.2f}",
                ", ".join(c.windows)
                or ("baseline" if c.baseline else "(brushed: " + ", ".join(c.overlapped) + ")"),
            ]
            for c in report.cells
            if all_cells or not c.baseline
        ],
    )


def _print_costs(report: NeighbourReport, *, threshold: float, when: str) -> None:
    from ..analysis.neighbour import windows_touched

    b = report.baseline
    baseline = f"median {b.median:.2f} tok/s, p10 {b.p10:.2f}, p90 {b.p90:.2f}"
    print_table(
        f"{report.label} on {report.engine or 'unknown engine'}: baseline over {b.n} cells "
        f"overlapping no other load: {baseline}{when}",
        [
            "load elsewhere on the box",
            "kind",
            "engine",
            "streams",
            "window (UTC)",
            "cells",
            "timeouts",
            "failed",
            "median tok/s",
            "range tok/s",
            "cost %",
        ],
        [
            [
                w.name,
                w.kind,
                (w.engine or "-") + (" (same)" if w.same_engine else ""),
                w.streams,
                f"{_hhmm(w.start_unix_ns)} to {_hhmm(w.end_unix_ns)}",
                w.n_cells,
                w.timeouts,
                w.failures,
                "-" if w.rate.median is None else f"{w.rate.median:.2f}",
                _range(w),
                "-" if w.cost is None else f"{w.cost * 100:.0f}" + (" !" if w.cost > threshold else ""),
            ]
            for w in windows_touched(report)
        ],
        notes={
            "median tok/s": f"median decode rate of {report.eval_name}'s cells inside the window",
            "cost %": f"1 - that median over the baseline median; ! past --threshold ({threshold:.0%})",
        },
    )


def run(args: argparse.Namespace) -> int:
    from .._exceptions import InputError
    from .._files import check_output
    from ..analysis.request_cells import REQUEST_SOURCE
    from ..report.inputs import columns_from_store, eval_scales_from_store
    from ..views.requests import no_cells, requests_as_cells_line
    from ._common import COUNT, DURATION_S, FRACTION, check_advisor_arguments, print_hint

    check_advisor_arguments(args)
    FRACTION.check("--min-overlap", args.min_overlap)
    DURATION_S.check("--merge-gap", args.merge_gap)  # 0 to a year
    COUNT.check("--workers", args.workers)
    if args.plot:
        check_output(args.plot, what="--plot")  # before the store is read
    tables = not args.json
    # Tables are laid out under the spinner (a long eval's cells take a while) and written after it.
    with tables_held(), status("reading cells and load windows") as phase:
        with open_store(args) as store:
            phase.update(f"reading cells and load windows from {store.path}")
            cells = columns_from_store(store)  # requests no cell holds count as cells of their own
            evals = sorted(set(cells.eval_name))
            if args.eval_name not in evals:
                raise InputError(
                    no_cells(
                        str(store.path),
                        store.row_counts(),
                        scope=f" of eval {args.eval_name!r}",
                        evals=evals,
                        stand_ins=cells.source.count(REQUEST_SOURCE),
                    )
                )
            windows = store.windows()
            scales = eval_scales_from_store(store, cells, args.eval_name) if tables or args.plot else []
        phase.update(
            f"pricing neighbours of {args.eval_name} over {len(cells):,} cells and {len(windows):,} windows"
        )
        found = _reports(args, cells, windows)
        for each in found:
            for warning in each.head.warnings:
                _logger.warning(warning)  # once, however many worker counts carry it
        reports = [each.report() for each in found] if tables or args.plot else []
        if tables:
            phase.update("laying out the tables")
            for report in reports:
                _print(report, threshold=args.threshold, all_cells=args.all_cells, scales=scales)
    heads = [each.head for each in found]
    line = requests_as_cells_line(sum(h.requests_as_cells for h in heads), sum(h.n_cells for h in heads))
    if line and tables:
        print_hint(line)
    if args.plot:
        with status(f"drawing the timeline of {args.eval_name} to {args.plot}"):
            _plot(args.plot, reports, scales)
    if args.json:
        # Written from the columns: each report's `model_dump(mode="json")`, without its models.
        dumped = [each.dump() | {"threshold": args.threshold} for each in found]
        print_json(dumped[0] if len(dumped) == 1 else dumped, plain=True)
    return 0


def _plot(path: str, reports: list[NeighbourReport], scales: list[float]) -> None:
    """Each report's timeline as a PNG: ``path``, or one ``path-N-workers.png`` per worker count."""
    import sys
    from pathlib import Path

    from .._exceptions import InputError
    from .._files import disk_full, write_output
    from ..report.plots import plot_timeline

    target = Path(path)
    scale = max(scales, default=1.0)
    for report in reports:
        out = target
        if len(reports) > 1 and report.workers is not None:
            out = target.with_name(f"{target.stem}-{report.workers}-workers{target.suffix}")
        png = plot_timeline(report, time_scale=scale)
        try:
            write_output(out, png)
        except OSError as exc:
            if disk_full(exc):
                raise
            raise InputError(f"--plot {out}: cannot write: {exc.strerror or exc}") from exc
        print(f"wrote {out}", file=sys.stderr)


def _reports(
    args: argparse.Namespace, cells: CellColumns, windows: list[LoadWindow]
) -> list[NeighbourColumns]:
    from ..analysis.neighbour_columns import neighbour_cost_of_columns, neighbour_costs_of_columns

    if args.workers is not None:
        return [
            neighbour_cost_of_columns(
                args.eval_name,
                cells,
                windows,
                workers=args.workers,
                min_overlap_fraction=args.min_overlap,
                merge_gap_s=args.merge_gap,
            )
        ]
    # Each worker count in turn where the eval ran at several, however few its cells.
    return neighbour_costs_of_columns(
        cells,
        windows,
        eval_names=[args.eval_name],
        min_cells=1,
        min_overlap_fraction=args.min_overlap,
        merge_gap_s=args.merge_gap,
    )
