"""What keeping each cell's energy current costs the store's writers: one GPU reading tick and one
finished cell written into a store that already holds hours of both.

    .venv/bin/python benchmarks/bench_store_energy.py [--hours 6] [--workers 8] [--cell-s 60]
        [--writes 200] [--rounds 5]

Side by side in one process, interleaved round by round, on two real store files built alike: a
box read once a second (energy counter and power, one GPU) with ``--workers`` cells of ``--cell-s``
side by side for ``--hours``. One store keeps the cells' energy (`store.energy`, every write), the
other is the same `Store` with the refresh left out. Each round appends ``--writes`` ticks (two
readings each) and ``--writes`` cells after what is there, and times each write. Prints the
median µs per write of each, the ratio, and what the refresh costs a box whose sampler writes a
tick a second and whose eval ends a cell every cell-s / workers s, as a share of one core. A
refresh reads the cells and readings of about three cell lengths, so its cost grows with --cell-s.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from spark_otel import _semconv as sc
from spark_otel.model import Cell, MetricSample
from spark_otel.store import Store
from spark_otel.store import energy as store_energy

S = 1_000_000_000
T0 = 1_750_000_000 * S
WATTS = 120.0


class BareStore(Store):
    """The store without the energy refresh: what a write cost before schema 3."""

    def _refresh_energy(self, conn: sqlite3.Connection, span: tuple[int, int] | None) -> None:
        return None


def _tick(t_s: int) -> list[MetricSample]:
    gpu = {sc.GPU_ID: "0"}
    return [
        MetricSample(name=sc.GPU_ENERGY, unix_ns=T0 + t_s * S, value=WATTS * t_s, unit="J", attributes=gpu),
        MetricSample(name=sc.GPU_POWER, unix_ns=T0 + t_s * S, value=WATTS, unit="W", attributes=gpu),
    ]


def _cell(k: int, start_s: float, cell_s: int) -> Cell:
    return Cell(
        uid=f"c{k}",
        eval_name="bench",
        cell_id=f"c{k}",
        engine="q",
        start_unix_ns=T0 + int(start_s * S),
        end_unix_ns=T0 + int((start_s + cell_s) * S),
        completion_tokens=900,
        workers=8,
    )


def _build(path: Path, seconds: int, workers: int, cell_s: int) -> int:
    """The store's history, priced once at the end; returns the cells written."""
    cells = [
        _cell(k, k * cell_s / workers, cell_s) for k in range(int((seconds - cell_s) * workers / cell_s))
    ]
    with BareStore(path) as store:
        for start in range(0, seconds + 1, 3600):
            store.write_samples([s for t in range(start, min(start + 3600, seconds + 1)) for s in _tick(t)])
        store.write_cells(cells)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    store_energy.refresh_all(conn)
    conn.execute("COMMIT")
    conn.close()
    return len(cells)


def _round(store: Store, t_s: int, k: int, writes: int, cell_s: int) -> tuple[list[float], list[float]]:
    """µs per tick write and per cell write, ``writes`` of each, continuing the box at ``t_s``."""
    ticks, cells = [], []
    for i in range(writes):
        tick = _tick(t_s + i + 1)
        t0 = time.perf_counter_ns()
        store.write_samples(tick)
        ticks.append((time.perf_counter_ns() - t0) / 1000)
        c = _cell(k + i, t_s + i + 1 - cell_s, cell_s)  # a cell that ended with this tick
        t0 = time.perf_counter_ns()
        store.write_cells([c])
        cells.append((time.perf_counter_ns() - t0) / 1000)
    return ticks, cells


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--hours", type=float, default=6.0, help="history in each store")
    parser.add_argument("--workers", type=int, default=8, help="cells side by side")
    parser.add_argument("--cell-s", type=int, default=60, help="each cell's length, s")
    parser.add_argument("--writes", type=int, default=200, help="ticks and cells per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    seconds = int(args.hours * 3600)
    results: dict[str, tuple[list[float], list[float]]] = {"bare": ([], []), "kept": ([], [])}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"bare": Path(tmp) / "bare.sqlite", "kept": Path(tmp) / "kept.sqlite"}
        print(
            f"building two stores: {args.hours:g} h of 1 s GPU readings, {args.workers} cells of "
            f"{args.cell_s} s side by side ...",
            file=sys.stderr,
        )
        n_cells = max(
            _build(p, seconds, args.workers, args.cell_s) for p in paths.values()
        )  # the same for both
        stores = {"bare": BareStore(paths["bare"]), "kept": Store(paths["kept"])}
        t_s, k = seconds, n_cells
        for r in range(args.rounds):
            for variant, store in stores.items():
                ticks, cells = _round(store, t_s, k, args.writes, args.cell_s)
                results[variant][0].extend(ticks)
                results[variant][1].extend(cells)
            t_s, k = t_s + args.writes, k + args.writes
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
        kept_rows = len(stores["kept"].cell_energy())
        for store in stores.values():
            store.close()
    tick = {v: statistics.median(results[v][0]) for v in results}
    cell = {v: statistics.median(results[v][1]) for v in results}
    print(
        f"store: {args.hours:g} h of history, {n_cells:,} cells, {2 * (seconds + 1):,} GPU readings; "
        f"{args.rounds} rounds x {args.writes} writes of each, interleaved; {kept_rows:,} cells priced"
    )
    print(f"{'write':<28}{'bare µs':>10}{'kept µs':>10}{'ratio':>8}{'added µs':>10}")
    for name, figures in (("one tick (2 GPU readings)", tick), ("one finished cell", cell)):
        print(
            f"{name:<28}{figures['bare']:>10.0f}{figures['kept']:>10.0f}"
            f"{figures['kept'] / figures['bare']:>8.2f}{figures['kept'] - figures['bare']:>10.0f}"
        )
    added_us_per_s = (tick["kept"] - tick["bare"]) + (
        cell["kept"] - cell["bare"]
    ) * args.workers / args.cell_s
    print(
        f"a box writing a tick a second and a cell every {args.cell_s / args.workers:g} s: the refresh adds "
        f"{added_us_per_s:.0f} µs a second, {added_us_per_s / 1e4:.3f}% of one core (on the exporters' "
        "threads, not the eval's)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
