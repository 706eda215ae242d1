"""What `spark-otel instruments --intervals receiver` costs per receiver bin: the reading and the
grading of an engine's counter and two GPU gauges, scraped every second, cut into 1,000, 5,000
and 10,000 bins (10,000 is `MAX_RECEIVER_INTERVALS`, the cap past which a bin is refused). Time and
the peak of Python's allocations (tracemalloc) per size, side by side; the store is built first,
untimed.

    .venv/bin/python benchmarks/bench_receiver_bins.py [--hours 6]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import MAX_RECEIVER_INTERVALS
from spark_otel.model import MetricSample
from spark_otel.report.inputs import read_inputs, verdicts_of
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_700_000_000 * S


def build(path: Path, seconds: int) -> None:
    """A load that rises and falls each ten minutes; the GPU's power follows it, its busy flag not."""
    samples = []
    total = 0.0
    for t in range(seconds):
        rate = 100.0 + 900.0 * ((t // 60) % 10) / 9
        total += rate
        at = T0 + t * S
        engine = {sc.ENGINE: "q"}
        samples.append(
            MetricSample(name=sc.ENGINE_GENERATION_TOKENS, unix_ns=at, value=total, attributes=engine)
        )
        samples.append(MetricSample(name=sc.GPU_POWER, unix_ns=at, value=30.0 + rate / 100, attributes={}))
        samples.append(MetricSample(name=sc.GPU_UTILIZATION, unix_ns=at, value=0.96, attributes={}))
    with Store(path) as store:
        store.write_samples(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=6.0)
    args = parser.parse_args()
    seconds = int(args.hours * 3600)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bins.sqlite"
        build(path, seconds)
        print(f"{seconds:,} s of scrapes, 3 series; cap {MAX_RECEIVER_INTERVALS:,} bins")
        print(f"{'bins':>7} {'bin s':>7} {'seconds':>8} {'ms/bin':>7} {'peak MiB':>9}")
        for bins in (1_000, 5_000, MAX_RECEIVER_INTERVALS):
            bin_s = seconds / bins
            with Store(path, read_only=True) as store:
                tracemalloc.start()
                began = time.perf_counter()
                report = verdicts_of(read_inputs(store, source="receiver", bin_s=bin_s))
                took = time.perf_counter() - began
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            made = len(report.intervals)
            print(f"{made:>7,} {bin_s:>7.2f} {took:>8.2f} {took / made * 1000:>7.2f} {peak / 2**20:>9.1f}")


if __name__ == "__main__":
    main()
