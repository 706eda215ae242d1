"""What importing spark-otel costs a process: ``import spark_otel`` and its first public names, and
with ``--cli`` what the command line costs before it runs anything: `spark-otel --help` and a
command's ``--help`` (the parser built, the help printed, as ``python -m spark_otel`` does).

    .venv/bin/python benchmarks/bench_import.py [--runs 15] [--cli]

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
CLI_COMMANDS = ("concurrency", "neighbour-cost", "timeouts", "advise", "cells", "report", "demo")
_TIMED = "import time\nt = time.perf_counter()\n{stmt}\nprint((time.perf_counter() - t) * 1e3)"


def _cli(*argv: str) -> str:
    """The statement `spark-otel ARGV` runs, its help printed to nowhere."""
    return (
        "import contextlib, io\nfrom spark_otel.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        main({list(argv)!r})\n    except SystemExit:\n        pass"
    )


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
    parser.add_argument("--cli", action="store_true", help="also each command's --help")
    args = parser.parse_args()
    variants = dict(VARIANTS)
    if args.cli:
        variants["spark-otel --help"] = _cli("--help")
        variants.update({f"spark-otel {c} --help": _cli(c, "--help") for c in CLI_COMMANDS})
    times: dict[str, list[float]] = {name: [] for name in variants}
    for stmt in variants.values():  # writes the bytecode caches; not timed
        _once(stmt)
    for _ in range(args.runs):
        for name, stmt in variants.items():
            times[name].append(_once(stmt))
    base = statistics.median(times["import spark_otel"])
    print(f"{'statement':36} {'median ms':>10} {'min ms':>8} {'vs import':>10}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:36} {median:10.1f} {min(values):8.1f} {median / base:9.2f}x")


if __name__ == "__main__":
    main()
