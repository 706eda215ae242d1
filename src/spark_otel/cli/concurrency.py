"""What concurrency bought and what it cost each cell, from recorded cells of any eval.

For each engine: every cell's decode rate (completion tokens over elapsed) against the
time-weighted number of cells in flight on that engine while it ran (itself included), grouped
by in-flight level and by the cells' worker count with median, p10 and p90 rates, ceiling hits
and failed cells; the engine's aggregate throughput (completion tokens over the time any cell
was running); and each eval's runs at different worker counts with the wall-clock speedup over
the serial run (the article's 8,507 s at one worker against 1,801 s at eight: 4.7x). A run is
one eval's cells at one worker count without an idle gap longer than --merge-gap: the same eval
run serially on two days is two runs. Cells cut off at the ceiling and failed cells are counted
but never rated.

Energy, where the store holds GPU readings covering the cells (`spark-otel receive --gpu auto`
or `spark-otel gpu-sample` beside the eval): each eval's joules per output token and per cell,
from the box's energy counter (or its power samples integrated, marked estimated) split among
the cells in flight by their tokens, stretch by stretch (spark_otel.analysis.energy).

--since and --until (ISO 8601 dates or times, UTC unless they name an offset) report only the
cells that start in that range, read from the store by time; every cell running in the range
still counts in flight, so a cell at its edge is weighed against the neighbours that began before.

Works on live instrumented evals and on backfilled records alike. --cells lists every cell with
its in-flight load and energy; --json prints the analysis the tables show (energy under "energy"),
and with --cells each cell's row too (each engine's "cells", the energy's "cells"). Cells
recorded under a model clock (the simulated box) are labelled "model time" in the tables' titles.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._common import add_store_argument, open_store, print_json, print_table, tables_held
from ._console import status

if TYPE_CHECKING:
    from ..analysis.concurrency import EngineConcurrency, Speedup
    from ..analysis.energy import CellEnergy, EnergyReport
    from ..model import Cell
    from ..records.cell_columns import CellColumns
    from ..store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..analysis.windows import DEFAULT_MERGE_GAP_S

    add_store_argument(parser)
    parser.add_argument("--eval", dest="eval_name", metavar="NAME", help="only this eval's cells")
    parser.add_argument("--engine", metavar="E", help="only cells on this engine")
    parser.add_argument(
        "--merge-gap",
        type=float,
        default=DEFAULT_MERGE_GAP_S,
        metavar="SECONDS",
        help="an idle gap longer than this between an eval's cells starts a new run",
    )
    parser.add_argument(
        "--since",
        type=_instant,
        metavar="WHEN",
        help="only cells that start at or after WHEN (e.g. 2026-11-01)",
    )
    parser.add_argument(
        "--until",
        type=_instant,
        metavar="WHEN",
        help="only cells that start at or before WHEN (e.g. 2026-11-30T18:00)",
    )
    parser.add_argument(
        "--cells", action="store_true", help="also list every cell with its in-flight load (in --json too)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _instant(text: str) -> int:
    """An ISO 8601 date or date and time (UTC unless it names an offset) as Unix nanoseconds, in
    2000-2100."""
    from datetime import UTC, datetime

    from .._clock import NS_PER_S
    from .._validate import EARLIEST_NS, LATEST_NS

    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 date or time (e.g. 2026-11-01 or 2026-11-01T08:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = moment.timestamp()
    ns = int(seconds) * NS_PER_S + moment.microsecond * 1_000
    if not EARLIEST_NS <= ns < LATEST_NS:
        raise argparse.ArgumentTypeError(f"{text!r} is outside 2000-2100")
    return ns


def _when(unix_ns: int) -> str:
    from datetime import UTC, datetime

    from .._clock import NS_PER_S

    return datetime.fromtimestamp(unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M")


def _print_engine(
    e: EngineConcurrency, *, with_cells: bool, scales: list[float], energy: dict[str, CellEnergy]
) -> None:
    """The engine's tables; ``scales``: the time scales its cells were recorded under."""
    from ..views.requests import cell_label
    from ..views.tables import fmt_number, level_table, model_time, seconds

    when = model_time(scales)
    unit = seconds(scales)
    print_table(
        f"{e.engine}: {e.n_cells} cells, {e.completion_tokens:,} output tokens over {e.wall_s:,.0f} {unit} "
        f"busy = {fmt_number(e.aggregate_rate, 1)} tok/s aggregate, "
        f"{e.ceiling_hits} ceiling hits, {e.failures} failed{when}",
        *level_table("cells in flight", e.levels),
    )
    if e.by_workers:
        print_table(f"{e.engine}: by worker count{when}", *level_table("workers", e.by_workers))
    speedup: dict[tuple[str, int, int], Speedup] = {
        (s.eval_name, s.workers, s.start_unix_ns): s for s in e.speedups
    }
    rows = []
    for run in e.runs:
        s = speedup.get((run.eval_name, run.workers or 0, run.start_unix_ns))
        rows.append(
            [
                run.eval_name,
                run.workers if run.workers is not None else "-",
                _when(run.start_unix_ns),
                run.n_cells,
                f"{run.wall_s:,.0f}",
                fmt_number(run.aggregate_rate, 1),
                fmt_number(run.rate.median),
                fmt_number(run.rate.mean),
                run.ceiling_hits,
                f"{s.speedup:.1f}x" + ("" if s.same_cells else " (other cells)") if s else "-",
                f"{s.per_cell_cost * 100:.0f}" if s and s.per_cell_cost is not None else "-",
            ]
        )
    print_table(
        f"{e.engine}: runs (one eval at one worker count, without idle gaps){when}",
        [
            "eval",
            "workers",
            "started (UTC)",
            "cells",
            f"wall {unit}",
            "aggregate tok/s",
            "median tok/s",
            "mean tok/s",
            "ceiling hits",
            "wall speedup",
            "per-cell cost %",
        ],
        rows,
    )
    if with_cells:
        print_table(
            f"{e.engine}: cells{when}",
            [
                "cell",
                "eval",
                "workers",
                "cells in flight",
                f"elapsed {unit}",
                "output tok",
                "tok/s",
                "energy J",
                "J/tok",
                "status",
            ],
            [
                [
                    cell_label(c.cell_id, request_as_cell=c.request_as_cell),
                    c.eval_name,
                    c.workers,
                    fmt_number(c.in_flight),
                    f"{c.elapsed_s:,.0f}",
                    f"{c.completion_tokens:,}" if c.completion_tokens else "-",
                    fmt_number(c.decode_rate),
                    fmt_number(energy[c.uid].share_j if c.uid in energy else None, 0),
                    fmt_number(energy[c.uid].j_per_token if c.uid in energy else None, 3),
                    "timeout" if c.ceiling_hit else c.status.value,
                ]
                for c in sorted(e.cells, key=lambda c: c.start_unix_ns)
            ],
        )


def _energy(
    store: Store, everyone: CellColumns, cells: list[Cell] | None, args: argparse.Namespace
) -> EnergyReport | None:
    """The box's energy over the cells: every cell on the box shares it, whatever --eval or
    --engine selects, so the attribution reads all of them (``everyone``), as cells only where
    the store holds GPU readings over them (``cells``, where already read)."""
    from ..analysis.energy import attribute, restrict
    from ..report.inputs import cells_from_store, energy_samples

    if not len(everyone):
        return None
    span = (int(everyone.start_unix_ns.min()), int(everyone.end_unix_ns.max()))
    if not energy_samples(store, [span]):
        return None
    box = cells_from_store(store) if cells is None else cells
    report = attribute(box, energy_samples(store, [(c.start_unix_ns, c.end_unix_ns) for c in box]))
    if report is None:
        return None
    return restrict(
        report,
        eval_name=args.eval_name,
        engine=args.engine,
        since_unix_ns=args.since,
        until_unix_ns=args.until,
    )


def _print_energy(report: EnergyReport | None, n_cells: int, scales: list[float]) -> None:
    from ..analysis.energy import MEASURE_GPU
    from ..views.tables import energy_lines, energy_table

    if report is not None and report.evals:
        print_table(*energy_table(report, scales))
    for line in energy_lines(report, n_cells, MEASURE_GPU):
        print(line)


def _columns(store: Store, args: argparse.Namespace) -> CellColumns:
    """`report.inputs.cells_from_store`'s cells, as columns: the store's cells (those running in
    the range of --since/--until) and the requests no cell holds, each a cell of its own."""
    from ..analysis.request_cells import columns_with_requests_as_cells

    return columns_with_requests_as_cells(
        store.cell_columns(since_unix_ns=args.since, until_unix_ns=args.until, overlapping=True),
        store.requests_outside_cells(),
        engine_urls=store.engine_urls(),
        windows=store.windows(kind="load") + store.windows(kind="probe"),
    )


def run(args: argparse.Namespace) -> int:
    from .._exceptions import InputError
    from ..analysis.concurrency import UNKNOWN_ENGINE
    from ..analysis.concurrency_columns import concurrency_of_columns
    from ..analysis.request_cells import REQUEST_SOURCE
    from ..records.cell_columns import CellColumns
    from ..report.inputs import cells_from_store
    from ..views.requests import no_cells, requests_as_cells_line
    from ..views.tables import time_scales
    from ._common import DURATION_S, print_hint

    DURATION_S.check("--merge-gap", args.merge_gap)  # 0 to a year
    try:
        import numpy  # noqa: F401
    except ImportError:
        from .._exceptions import ConfigError

        raise ConfigError(
            "concurrency reads cells as numpy columns, which the core install leaves out: "
            "pip install 'spark-otel[cli]'"
        ) from None

    # Tables are laid out under the spinner (thousands of runs take a while) and written after it.
    with tables_held(), status("reading cells") as phase:
        with open_store(args) as store:
            phase.update(f"reading cells from {store.path}")
            # In-flight counts every cell on the engine, so read all evals and filter afterwards;
            # requests no cell holds count as cells of their own. --json needs no cell as a
            # record, so it reads columns; the tables read each cell's time scale too.
            cells = None if args.json else cells_from_store(store)
            everyone = _columns(store, args) if cells is None else CellColumns.from_cells(cells)
            chosen = (
                everyone
                if args.engine is None
                else everyone.take([k for k, e in enumerate(everyone.engine) if e == args.engine])
            )
            path = store.path
            phase.update(f"reading GPU energy over {len(chosen):,} cells")
            energy = _energy(store, everyone, cells, args)
            in_scope = any(
                (args.eval_name is None or chosen.eval_name[k] == args.eval_name)
                and (args.since is None or chosen.start_unix_ns[k] >= args.since)
                and (args.until is None or chosen.start_unix_ns[k] <= args.until)
                for k in range(len(chosen))
            )
            counts = {} if in_scope else store.row_counts()  # what a refusal names
        phase.update(f"computing in-flight levels over {len(chosen):,} cells")
        report = concurrency_of_columns(
            chosen,
            eval_name=args.eval_name,
            engine=args.engine,
            merge_gap_s=args.merge_gap,
            since_unix_ns=args.since,
            until_unix_ns=args.until,
            with_cells=args.cells,
        )
        if report.engines and cells is not None:
            phase.update(f"laying out the tables of {len(chosen):,} cells")
            for engine in report.engines:
                _print_engine(
                    engine,
                    with_cells=args.cells,
                    scales=time_scales(c for c in cells if (c.engine or UNKNOWN_ENGINE) == engine.engine),
                    energy={} if energy is None else {c.uid: c for c in energy.cells},
                )
    if not report.engines:
        scope = "".join(
            [
                f" of eval {args.eval_name!r}" if args.eval_name else "",
                f" on engine {args.engine!r}" if args.engine else "",
                " starting in the range of --since/--until" if args.since or args.until else "",
            ]
        )
        stand_ins = sum(source == REQUEST_SOURCE for source in everyone.source)
        evals = sorted(set(everyone.eval_name))
        raise InputError(no_cells(str(path), counts, scope=scope, evals=evals, stand_ins=stand_ins))
    if cells is not None:
        n_cells = sum(e.n_cells for e in report.engines)
        _print_energy(
            energy, n_cells, time_scales(c for c in cells if args.engine is None or c.engine == args.engine)
        )
        line = requests_as_cells_line(report.requests_as_cells, n_cells)
        if line:
            print_hint(line)
        return 0
    # Each cell's row only with --cells, as in the tables: at 100,000 cells they were 39 MB of the
    # 71 MB answer and half the analysis's time.
    rows = None if args.cells else {"cells"}
    print_json(
        report.model_dump(mode="json", exclude=None if rows is None else {"engines": {"__all__": rows}})
        | {"energy": None if energy is None else energy.model_dump(mode="json", exclude=rows)},
        plain=True,
    )
    return 0
