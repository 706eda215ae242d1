"""numpy against DuckDB on the concurrency analysis's shapes (issue 38, item 2: "measure both and
record why you chose").

The kernel every per-cell answer starts from, on the same columns for both: each cell's
time-weighted count of cells in flight on its engine (the sweep `concurrency.in_flight` does:
endpoints sorted, the in-flight count's running integral, two lookups a cell), then per engine and
in-flight level the number of cells and the median rate. numpy runs
`concurrency_columns.in_flight_of_columns` and a sort per group; DuckDB runs the same sweep as
SQL window functions over the columns handed to it as an Arrow table (no copy). Cells spread over
a year on two engines, 30 to 600 s each, in the columns the store's columnar read gives.

Both must agree before anything is timed: the same levels and counts, and the weights and
medians within 1e-12 relative (DuckDB divides 128-bit integer sums as doubles). Best of
``--repeats`` runs; CPU seconds.

DuckDB is not a dependency of spark-otel: install it anywhere on ``PYTHONPATH`` for this
benchmark (``pip install --target /tmp/duck duckdb``; pyarrow too, which it takes numpy arrays
through). Without it the benchmark times numpy alone and says so.

    PYTHONPATH=src:/tmp/duck .venv/bin/python benchmarks/bench_columnar_engines.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spark_otel.analysis.concurrency_columns import in_flight_of_columns

S = 1_000_000_000
YEAR_NS = 365 * 86_400 * S
T0 = 1_767_225_600 * S

SWEEP_SQL = """
WITH ends AS (
    SELECT engine, start_ns AS t, 1 AS d FROM cells WHERE end_ns > start_ns
    UNION ALL
    SELECT engine, end_ns AS t, -1 AS d FROM cells WHERE end_ns > start_ns
), steps AS (
    SELECT engine, t, sum(d) AS d FROM ends GROUP BY engine, t
), counts AS (
    SELECT engine, t,
           sum(d) OVER (PARTITION BY engine ORDER BY t ROWS UNBOUNDED PRECEDING) AS n,
           lead(t) OVER (PARTITION BY engine ORDER BY t) - t AS span
    FROM steps
), integral AS (
    SELECT engine, t,
           coalesce(sum(n * span) OVER (PARTITION BY engine ORDER BY t
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS i
    FROM counts
)
SELECT c.row, (e.i - s.i) / (c.end_ns - c.start_ns) AS weight
FROM cells c
JOIN integral s ON s.engine = c.engine AND s.t = c.start_ns
JOIN integral e ON e.engine = c.engine AND e.t = c.end_ns
WHERE c.end_ns > c.start_ns
ORDER BY c.row
"""

LEVELS_SQL = """
SELECT engine, greatest(1, floor(w.weight + 0.5))::BIGINT AS level, count(*) AS cells,
       median(tokens / ((end_ns - start_ns) / 1e9)) AS median_rate
FROM cells JOIN weights w USING (row)
GROUP BY engine, level ORDER BY engine, level
"""


def columns(n: int, seed: int = 38) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    start = T0 + np.sort(rng.integers(0, YEAR_NS, n))
    return {
        "row": np.arange(n, dtype=np.int64),
        "engine": rng.integers(0, 2, n).astype(np.int64),
        "start_ns": start,
        "end_ns": start + rng.integers(30 * S, 600 * S, n),
        "tokens": rng.integers(100, 9_000, n).astype(np.int64),
    }


def with_numpy(cols: dict[str, Any]) -> tuple[Any, list[tuple[int, int, int, float]]]:
    weights = np.full(len(cols["row"]), np.nan)
    levels = []
    rate = cols["tokens"] / ((cols["end_ns"] - cols["start_ns"]) / S)
    for engine in np.unique(cols["engine"]).tolist():
        mine = np.flatnonzero(cols["engine"] == engine)
        weight, _ = in_flight_of_columns(cols["start_ns"][mine], cols["end_ns"][mine])
        weights[mine] = weight
        level = np.maximum(1, np.floor(weight + 0.5)).astype(np.int64)
        order = np.lexsort((rate[mine], level))
        by_level, first = np.unique(level[order], return_index=True)
        bounds = [*first.tolist(), len(order)]
        for k, lv in enumerate(by_level.tolist()):
            group = rate[mine][order][bounds[k] : bounds[k + 1]]
            levels.append((engine, lv, len(group), float(np.median(group))))
    return weights, levels


def with_duckdb(cols: dict[str, Any]) -> tuple[Any, list[tuple[int, int, int, float]]]:
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    con.register("cells", pa.table(cols))
    weights_table = con.sql(SWEEP_SQL).to_arrow_table()
    con.register("weights", weights_table)
    levels = [(int(e), int(lv), int(n), float(m)) for e, lv, n, m in con.execute(LEVELS_SQL).fetchall()]
    weights = np.full(len(cols["row"]), np.nan)
    weights[weights_table.column("row").to_numpy()] = weights_table.column("weight").to_numpy()
    con.close()
    return weights, levels


def best(fn: Callable[[], Any], repeats: int) -> tuple[Any, float, float]:
    """The result, and the best wall and CPU seconds (DuckDB's CPU counts all its threads)."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return result, min(walls), min(cpus)


def agree(a: tuple[Any, Any], b: tuple[Any, Any]) -> None:
    (wa, la), (wb, lb) = a, b
    if not np.allclose(wa, wb, rtol=1e-12, atol=0):
        raise SystemExit("the weights differ")
    if [x[:3] for x in la] != [x[:3] for x in lb] or not np.allclose(
        [x[3] for x in la], [x[3] for x in lb], rtol=1e-12, atol=0
    ):
        raise SystemExit("the levels differ")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        import duckdb
        import pyarrow  # noqa: F401

        engine = f"duckdb {duckdb.__version__}"
    except ImportError:
        engine = None
        print("duckdb (and pyarrow) not importable: numpy alone")
    print(
        f"{'cells':>10} {'numpy wall / cpu s':>20} {(engine or '-') + ' wall / cpu s':>26} {'wall ratio':>10}"
    )
    for n in [int(x) for x in args.sizes.split(",")]:
        cols = columns(n)
        mine, numpy_wall, numpy_cpu = best(lambda cols=cols: with_numpy(cols), args.repeats)
        if engine is None:
            print(f"{n:>10,} {numpy_wall:>9.3f} / {numpy_cpu:<8.3f}")
            continue
        theirs, duck_wall, duck_cpu = best(lambda cols=cols: with_duckdb(cols), args.repeats)
        agree(mine, theirs)
        print(
            f"{n:>10,} {numpy_wall:>9.3f} / {numpy_cpu:<8.3f} {duck_wall:>15.3f} / {duck_cpu:<8.3f}"
            f" {duck_wall / numpy_wall:>9.2f}x"
        )


if __name__ == "__main__":
    main()
