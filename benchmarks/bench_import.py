"""What importing spark-otel costs a process: ``import spark_otel`` and its first public names.

    .venv/bin/python benchmarks/bench_import.py [--runs 15]

Each variant runs in fresh interpreters with bytecode caches written (as an installed package
has them), timing the statement itself, alternating variants so a busy machine weighs on all
alike; the median over the runs is printed. ``PYTHONPATH`` picks the tree measured, so the same script
measures an older checkout for a before/after pair.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

VARIANTS = {
    "import spark_otel": "import spark_otel",
    "+ spark_otel.cell": "import spark_otel; spark_otel.cell",
    "+ spark_otel.instrument": "import spark_otel; spark_otel.instrument",
}
_TIMED = "import time; t = time.perf_counter(); {stmt}; print((time.perf_counter() - t) * 1e3)"


def _once(stmt: str) -> float:
    # Bytecode caches on (a machine may set PYTHONDONTWRITEBYTECODE): an installed package has them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [sys.executable, "-c", _TIMED.format(stmt=stmt)], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for stmt in VARIANTS.values():  # writes the bytecode caches; not timed
        _once(stmt)
    for _ in range(args.runs):
        for name, stmt in VARIANTS.items():
            times[name].append(_once(stmt))
    base = statistics.median(times["import spark_otel"])
    print(f"{'statement':28} {'median ms':>10} {'min ms':>8} {'vs import':>10}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:28} {median:10.1f} {min(values):8.1f} {median / base:9.2f}x")


if __name__ == "__main__":
    main()
