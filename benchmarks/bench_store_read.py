"""The store's read of all cells (issue 38), side by side with the read it replaced, at several
sizes; and, with ``--before-src``, the answers end to end through the command line, this tree's
against another's (a checkout of the code before).

For each size it builds the box `bench_analysis.make_box` builds (not timed), then reads every
cell three ways, best of ``--repeat``, each after a full collection:

* ``before``: the read as it was: every column, each row decoded to a dict (`json.loads` on the
  attributes), ``Cell(**fields)``, the cyclic collector at Python's thresholds;
* ``store.cells()``: the read now (`Table.records`);
* ``cells_from_store``: what every analysis reads (the cells and the requests no cell holds).

It checks that ``before`` and ``store.cells()`` give equal cells before it prints a figure.

With ``--before-src DIR`` it then runs ``concurrency --json`` and ``advise --json`` on the largest
store with ``PYTHONPATH=DIR`` and with this tree's ``src``, start-up included, checks that the two
print the same bytes, and prints wall seconds and peak resident memory of each.

    .venv/bin/python benchmarks/bench_store_read.py [--sizes 10000,50000,100000] [--repeat 3]
        [--before-src /path/to/old/src] [--answers concurrency,advise]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

from bench_scale import build_store, run_child  # noqa: E402

from spark_otel.model import Cell  # noqa: E402
from spark_otel.report.inputs import cells_from_store  # noqa: E402
from spark_otel.store import Store  # noqa: E402
from spark_otel.store.schema import CELLS  # noqa: E402


def read_before(path: Path) -> list[Cell]:
    """The read as it was before issue 38's: all columns, derived ones dropped in Python, each
    JSON column through `json.loads`, each cell built with keyword arguments."""
    names = CELLS.column_names
    derived = {c.name for c in CELLS.columns if c.derived}
    decoders = {c.name: c.decode for c in CELLS.columns if c.decode is not None}
    decoders["attributes"] = json.loads
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(f"SELECT {', '.join(names)} FROM cells ORDER BY start_unix_ns ASC").fetchall()
        return [
            Cell(
                **{
                    name: value if value is None or name not in decoders else decoders[name](value)
                    for name, value in zip(names, row, strict=True)
                    if name not in derived
                }
            )
            for row in rows
        ]
    finally:
        conn.close()


def best(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    result, fastest = None, float("inf")
    for _ in range(repeat):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = fn()
        fastest = min(fastest, time.perf_counter() - start)
    return result, fastest


def cli_pair(store: Path, answer: str, before_src: Path) -> None:
    rows = []
    printed = []
    for label, src in (("before", before_src), ("now", HERE.parent / "src")):
        env = dict(os.environ, PYTHONPATH=str(src), COLUMNS="200")
        argv = [sys.executable, "-m", "spark_otel", answer, "--store", str(store), "--json"]
        out, err, code, wall, cpu, rss = run_child(argv, env)
        if code:
            raise SystemExit(f"{label}: {' '.join(argv)} exited {code}: {err.decode()[-2000:]}")
        printed.append(out)
        rows.append((label, wall, cpu, rss))
    if printed[0] != printed[1]:
        raise SystemExit(f"{answer}: the answer printed now differs from the one before")
    for label, wall, cpu, rss in rows:
        print(f"{answer:12} {label:7} {wall:>8.2f} {cpu:>8.2f} {rss:>8.0f}")
    ratio = rows[0][1] / rows[1][1]
    print(f"{answer:12} {'ratio':7} {ratio:>7.2f}x  (before / now, wall; the same bytes printed)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,50000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before-src", type=Path, help="the src folder of the code to compare with")
    parser.add_argument("--answers", default="concurrency,advise")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"{'cells':>9} {'before/s':>10} {'cells()/s':>10} {'ratio':>6} {'cells_from_store/s':>19}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "box.sqlite"
        for n in sizes:
            for old in Path(tmp).glob("box*"):
                old.unlink()
            build_store(path, n)
            with Store(path, read_only=True) as store:
                before, t_before = best(lambda: read_before(path), args.repeat)
                now, t_now = best(store.cells, args.repeat)
                if before != now:
                    raise SystemExit(f"{n:,} cells: the read now gives other cells than the read before")
                del before, now
                _, t_all = best(lambda: cells_from_store(store), args.repeat)
            ratio = t_before / t_now
            print(f"{n:>9,} {n / t_before:>10,.0f} {n / t_now:>10,.0f} {ratio:>5.2f}x {n / t_all:>19,.0f}")
        if args.before_src:
            print(f"\n{sizes[-1]:,} cells, end to end (python -m spark_otel ... --json, start-up included)")
            print(f"{'answer':12} {'code':7} {'wall s':>8} {'cpu s':>8} {'peak MB':>8}")
            for answer in [a for a in args.answers.split(",") if a]:
                cli_pair(path, answer, args.before_src)


if __name__ == "__main__":
    main()
