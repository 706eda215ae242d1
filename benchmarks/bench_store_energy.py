"""What pricing each cell's energy on read costs (schema 4: the store's writes only store), against
the plain read it sits beside, at several sizes of history.

    .venv/bin/python benchmarks/bench_store_energy.py [--hours 1,6,24] [--workers 8] [--cell-s 60]
        [--reads 50]

For each size, one real store file: a box read once a second (energy counter and power, one GPU)
with ``--workers`` cells of ``--cell-s`` side by side for that many hours. Side by side in one
process, interleaved read by read: what ``spark-otel cells`` does for its newest 20 cells, as a
plain read (`Store.cells`) and priced (`Store.energy_inputs` then `analysis.energy.energy_shares`),
and the same for one cell. Prints the median ms of each, the ratio, and how the priced read grows
with the history: it reads a neighbourhood of the cells asked for, so it should not grow at all.
Also prints the median µs of one finished cell's write, which schema 3 made about 8 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from spark_otel import _semconv as sc
from spark_otel.analysis.energy import energy_shares
from spark_otel.model import Cell, MetricSample
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_750_000_000 * S
WATTS = 120.0


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


def _build(store: Store, seconds: int, workers: int, cell_s: int) -> int:
    """The store's history; returns the cells written."""
    cells = [
        _cell(k, k * cell_s / workers, cell_s) for k in range(int((seconds - cell_s) * workers / cell_s))
    ]
    for start in range(0, seconds + 1, 3600):
        store.write_samples([s for t in range(start, min(start + 3600, seconds + 1)) for s in _tick(t)])
    store.write_cells(cells)
    return len(cells)


def _ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


def _read(store: Store, n: int, *, priced: bool) -> None:
    """What ``spark-otel cells -n N`` reads: the newest cells, and with ``priced`` their energy."""
    cells = store.cells(limit=n, newest_first=True)
    if priced:
        uids = [c.uid for c in cells]
        energy_shares(*store.energy_inputs(uids), uids)


def _measure(store: Store, reads: int, n_cells: int, seconds: int, cell_s: int) -> dict[str, float]:
    times: dict[str, list[float]] = {
        "plain 20": [],
        "priced 20": [],
        "plain 1": [],
        "priced 1": [],
        "write": [],
    }
    for i in range(reads):
        for n in (20, 1):
            times[f"plain {n}"].append(_ms(lambda n=n: _read(store, n, priced=False)))
            times[f"priced {n}"].append(_ms(lambda n=n: _read(store, n, priced=True)))
        late = _cell(n_cells + i, seconds - cell_s, cell_s)
        times["write"].append(_ms(lambda late=late: store.write_cells([late])))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--hours", default="1,6,24", help="history in each store, comma-separated")
    parser.add_argument("--workers", type=int, default=8, help="cells side by side")
    parser.add_argument("--cell-s", type=int, default=60, help="each cell's length, s")
    parser.add_argument("--reads", type=int, default=50, help="reads of each kind per size")
    args = parser.parse_args()
    print(
        f"{'history':>8}{'cells':>9}{'readings':>10}  {'read':<10}"
        f"{'plain ms':>9}{'priced ms':>10}{'ratio':>7}"
    )
    writes: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for hours in (float(h) for h in args.hours.split(",")):
            seconds = int(hours * 3600)
            print(f"building {hours:g} h ...", file=sys.stderr)
            with Store(Path(tmp) / f"h{hours:g}.sqlite") as store:
                n_cells = _build(store, seconds, args.workers, args.cell_s)
                got = _measure(store, args.reads, n_cells, seconds, args.cell_s)
            for k in ("20", "1"):
                plain, priced = got[f"plain {k}"], got[f"priced {k}"]
                print(
                    f"{hours:>7g}h{n_cells:>9,}{2 * (seconds + 1):>10,}  {k + ' cells':<10}"
                    f"{plain:>9.2f}{priced:>10.2f}{priced / plain:>7.1f}"
                )
            writes.append((hours, got["write"] * 1000))
    for hours, us in writes:
        print(f"one finished cell's write, {hours:g} h of history: {us:.0f} µs (schema 3: about 8,000 µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
