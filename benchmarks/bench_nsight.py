"""Nsight ingest: a realistic capture (10 s at 10 kHz, 19 metrics, ~1.9 M GPU_METRICS rows) from
file to summary in under 2 s on one core, and at least 3x faster than a straightforward pandas
read-and-groupby of the same file, in the same run.

Both sides produce the same outputs: per-metric mean, p50 and p95, and 100 ms series means.
The pandas side reads the joined rows with ``read_sql_query`` and uses ``groupby``; the results
are checked to agree. Building the capture is not timed. The process is pinned to one CPU.

    .venv/bin/python benchmarks/bench_nsight.py [--seconds 10] [--hz 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
from tests.support.nsight import build_capture

from spark_otel.receivers.nsight import read_capture

TARGET_S = 2.0
TARGET_RATIO = 3.0
INTERVAL_NS = 100_000_000


def pandas_summary(path: Path) -> tuple[pd.DataFrame, pd.Series]:
    """The straightforward way: read both tables into DataFrames, merge on (typeId, metricId), group."""
    with sqlite3.connect(path) as conn:
        rows = pd.read_sql_query("SELECT * FROM GPU_METRICS", conn)
        names = pd.read_sql_query("SELECT * FROM TARGET_INFO_GPU_METRICS", conn)
    return _group(rows.merge(names, on=["typeId", "metricId"]))


def pandas_tuned(path: Path) -> tuple[pd.DataFrame, pd.Series]:
    """pandas with the join pushed into SQL and only the needed columns read (for reference)."""
    with sqlite3.connect(path) as conn:
        df = pd.read_sql_query(
            "SELECT g.timestamp, g.typeId, g.value, m.metricName FROM GPU_METRICS g "
            "JOIN TARGET_INFO_GPU_METRICS m ON g.typeId = m.typeId AND g.metricId = m.metricId",
            conn,
        )
    return _group(df)


def _group(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    grouped = df.groupby(["typeId", "metricName"])["value"]
    summary = grouped.agg(["count", "mean", "min", "max"])
    summary["p50"] = grouped.quantile(0.5)
    summary["p95"] = grouped.quantile(0.95)
    series = df.groupby(["typeId", "metricName", df["timestamp"] // INTERVAL_NS])["value"].mean()
    return summary, series


def timed(fn: Any, repeats: int) -> tuple[float, float, Any]:
    """Median CPU seconds and median wall seconds of ``repeats`` runs.

    CPU time is the figure compared with the targets: the machines these run on are shared,
    and wall time there measures the neighbours as much as the code.
    """
    cpu, wall, result = [], [], None
    for _ in range(repeats):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        result = fn()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return statistics.median(cpu), statistics.median(wall), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hz", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.sqlite"
        build_start = time.perf_counter()
        build_capture(path, layout="raw", seconds=args.seconds, hz=args.hz)
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT COUNT(*) FROM GPU_METRICS").fetchone()[0]
        print(
            f"capture: {rows:,} GPU_METRICS rows, {path.stat().st_size / 2**20:.0f} MiB "
            f"(built in {time.perf_counter() - build_start:.1f} s, not timed)"
        )

        ours_s, ours_wall, capture = timed(
            lambda: read_capture(path, interval_ms=INTERVAL_NS / 1e6), args.repeats
        )
        pandas_s, pandas_wall, (summary, series) = timed(lambda: pandas_summary(path), args.repeats)
        tuned_s, tuned_wall, (tuned_summary, _) = timed(lambda: pandas_tuned(path), args.repeats)

        # same answers
        for m in capture.summary.metrics:
            if m.unit != "%":
                continue
            for frame in (summary, tuned_summary):
                row = frame.xs(m.metric, level="metricName").iloc[0]
                assert row["count"] == m.samples, m.metric
                assert abs(row["mean"] - m.mean) < 1e-9 * max(1.0, abs(m.mean)), m.metric
                assert abs(row["p50"] - m.p50) < 1e-9, m.metric
                assert abs(row["p95"] - m.p95) < 1e-9, m.metric
        n_points = sum(len(points) for points in capture.series.values())
        assert n_points == len(series), (n_points, len(series))

    ratio = pandas_s / ours_s
    print(f"median of {args.repeats} runs, CPU seconds (wall seconds), pinned to one core:")
    print(f"  spark-otel read_capture, file -> summary + 100 ms series: {ours_s:5.2f} ({ours_wall:.2f})")
    print(f"  pandas: read tables, merge, groupby (same outputs):       {pandas_s:5.2f} ({pandas_wall:.2f})")
    print(f"  pandas, join in SQL, needed columns only (reference):     {tuned_s:5.2f} ({tuned_wall:.2f})")
    print(
        f"ratio: {ratio:.1f}x against straightforward pandas, {tuned_s / ours_s:.1f}x against tuned "
        f"(targets: < {TARGET_S:.0f} s, >= {TARGET_RATIO:.0f}x)"
    )
    issue = capture.summary.metric("SM Issue")
    print(
        f"SM Issue mean/p50/p95 of the synthetic capture: {issue.mean:.1f} / {issue.p50:.0f} / "
        f"{issue.p95:.0f} (built to Appendix B's 07:16 row: 3.1 / 2 / 5)"
    )
    ok = ours_s < TARGET_S and ratio >= TARGET_RATIO
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
