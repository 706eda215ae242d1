"""The report's two plots of every cell (an eval's timeline and the concurrency scatter) drawn to
PNG at 1,000 and 100,000 cells spread over a year, side by side: as before issue 38 (a bar or a
marker per cell) and as now (past `DENSITY_ABOVE` cells, one hexbin of their density; a dates
axis past two days). The analyses the plots read are computed once and not timed; the variants
are checked to count the same cells before anything is timed.

    .venv/bin/python benchmarks/bench_plots.py [--sizes 1000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy
from matplotlib.collections import PathCollection, PolyCollection

from spark_otel.analysis import concurrency, neighbour_cost
from spark_otel.model import Cell
from spark_otel.report.plots import DENSITY_ABOVE, concurrency_figure, plot_concurrency, plot_timeline

S = 1_000_000_000
T0 = 1_790_000_000 * S
YEAR_S = 365 * 86_400
POINTS = sys.maxsize
"""``density_above`` that never draws density: a bar or marker per cell, as before issue 38."""


def year_of_cells(n: int, seed: int = 0) -> list[Cell]:
    """``n`` cells of one eval over a year on two engines, 30 to 300 s each at 3 to 40 tok/s."""
    rng = random.Random(seed)
    cells = []
    for i in range(n):
        start = T0 + int(rng.uniform(0, YEAR_S) * S)
        elapsed = rng.uniform(30, 300)
        cell = Cell(
            uid=f"c{i}", eval_name="serial", cell_id=f"c{i}", engine=("qwen", "nemotron")[i % 2],
            workers=1, start_unix_ns=start, end_unix_ns=start + int(elapsed * S),
            completion_tokens=int(elapsed * rng.uniform(3, 40)),
        )  # fmt: skip
        cells.append(cell)
    return cells


def _counted(fig: Any) -> int:
    """Cells a concurrency figure draws: markers of its scatters, counts of its hexbins (not the
    colour bars' meshes)."""
    n = 0
    for ax in fig.axes:
        for c in ax.collections:
            if isinstance(c, PolyCollection):
                counts = c.get_array()
                assert counts is not None, "a hexbin without counts"
                n += int(counts.sum())
            elif isinstance(c, PathCollection):
                n += len(numpy.asarray(c.get_offsets()))
    return n


def timed(fn: Callable[[], bytes], repeat: int) -> tuple[float, int]:
    """Best wall seconds of ``repeat`` runs, and the PNG's size."""
    best, size = float("inf"), 0
    for _ in range(repeat):
        t = time.perf_counter()
        size = len(fn())
        best = min(best, time.perf_counter() - t)
    return best, size


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,100000", help="cell counts, comma-separated")
    parser.add_argument(
        "--repeat", type=int, default=3, help="best of this many runs (one for points past 10,000 cells)"
    )
    args = parser.parse_args()
    print(f"density past {DENSITY_ABOVE:,} cells; PNG bytes in brackets")
    print(f"{'cells':>9}  {'plot':<12} {'before (points)':>18} {'now':>18} {'ratio':>7}")
    for n in (int(s) for s in args.sizes.split(",")):
        cells = year_of_cells(n)
        timeline, conc = neighbour_cost("serial", cells, []), concurrency(cells)
        gc.freeze()
        # Same cells counted either way: the scatter's markers against the density's counts.
        dots = _counted(concurrency_figure(conc, density_above=POINTS))
        counted = _counted(concurrency_figure(conc))
        assert dots == counted == n, (dots, counted, n)
        draws = {
            "timeline": partial(plot_timeline, timeline),
            "concurrency": partial(plot_concurrency, conc),
        }
        for name, draw in draws.items():
            repeat = 1 if n > 10_000 else args.repeat
            before, before_size = timed(partial(draw, density_above=POINTS), repeat)
            after, after_size = timed(partial(draw, density_above=DENSITY_ABOVE), args.repeat)
            print(
                f"{n:>9,}  {name:<12} {before:8.2f} s [{before_size // 1024:>4} kB] "
                f"{after:8.2f} s [{after_size // 1024:>4} kB] {before / after:6.1f}x"
            )
        gc.unfreeze()


if __name__ == "__main__":
    main()
