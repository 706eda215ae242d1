"""What the queue governor adds to an uncontended cell: entry (admission) and exit (release); and
what publishing the live signal adds to each lease renewal.

    .venv/bin/python benchmarks/bench_governor.py [--cells 400] [--rounds 7] [--renewals 300]

Side by side in one process, interleaved round by round: `spark_otel.cell` entered and exited
with no governor, and with a governor whose rules name the cell's engine (a lane it never fills,
so every entry is admitted at once: one SQLite transaction to take the slot, one to free it, on
a real state file in a temporary directory). Spans and metrics go to the SDK with no exporter
attached, the same in both. Prints the median µs per entry and per exit of each variant and
what the governor adds; the issue's target is at most 1 ms added per entry.

Then the live signal (issue 37): with 1, 8 and 32 cells in flight, each holding a slot and a
stream that grows between renewals, a lease renewal without publishing and one that publishes
every cell's progress (each cell's `live_progress`, then one UPDATE per cell in the renewal's
transaction), alternated renewal by renewal on the same state file. Prints the median µs of
each, what publishing adds per renewal and per cell, and that as a share of one core at one
renewal a second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from spark_otel import cell
from spark_otel.governor import current_governor, govern, ungovern

TARGET_US = 1000.0


def _round(n: int, tp: TracerProvider, mp: MeterProvider) -> tuple[float, float]:
    """Median µs per entry and per exit over ``n`` cells."""
    enter, leave = [], []
    for i in range(n):
        c = cell("bench", f"c{i}", engine="q", deadline_s=1800, tracer_provider=tp, meter_provider=mp)
        t0 = time.perf_counter_ns()
        c.__enter__()
        t1 = time.perf_counter_ns()
        c.__exit__(None, None, None)
        t2 = time.perf_counter_ns()
        enter.append((t1 - t0) / 1000)
        leave.append((t2 - t1) / 1000)
    return statistics.median(enter), statistics.median(leave)


class _Stream:
    """A stream being read (`spark_otel.live_progress.ChunkStamps`): its first chunk and count."""

    def __init__(self) -> None:
        self.first_ns = time.monotonic_ns()
        self.chunks = 1


def _publish_cost(n: int, renewals: int, rules: Path, state: Path) -> tuple[float, float]:
    """Median µs of a renewal without and with publishing, ``n`` cells in flight."""
    tp, mp = TracerProvider(), MeterProvider()
    govern(rules, state=state)
    governor = current_governor()
    assert governor is not None
    cells = [
        cell("bench-live", f"l{i}", engine="q", deadline_s=1800, tracer_provider=tp, meter_provider=mp)
        for i in range(n)
    ]
    streams = []
    for c in cells:
        entered = c.__enter__()
        streams.append(_Stream())
        entered.watch_stream(streams[-1])
    bare, published = [], []
    try:
        for r in range(renewals):
            for s in streams:
                s.chunks += 11  # about a second of a stream
            order = ("bare", "published") if r % 2 else ("published", "bare")
            for variant in order:
                t0 = time.perf_counter_ns()
                if variant == "bare":
                    governor.state.renew()
                else:
                    governor.state.renew(governor.live_progress())
                took = (time.perf_counter_ns() - t0) / 1000
                (bare if variant == "bare" else published).append(took)
    finally:
        for c in cells:
            c.__exit__(None, None, None)
        ungovern()
    return statistics.median(bare), statistics.median(published)


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--cells", type=int, default=400, help="cells per variant per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--renewals", type=int, default=300, help="renewals per variant per size")
    args = parser.parse_args()
    tp, mp = TracerProvider(), MeterProvider()
    results: dict[str, list[tuple[float, float]]] = {"bare": [], "governed": []}
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules.toml"
        rules.write_text("[[lane]]\nengine = 'q'\ncells = 1000\n")
        state = Path(tmp) / "governor.sqlite"
        for _ in range(args.rounds):
            for variant in ("bare", "governed"):
                if variant == "governed":
                    govern(rules, state=state)
                _round(20, tp, mp)  # warm: the state file, the instruments, the caches
                results[variant].append(_round(args.cells, tp, mp))
                ungovern()
    print(f"{'variant':10} {'entry µs':>10} {'exit µs':>10}")
    med = {}
    for variant, rounds in results.items():
        med[variant] = (statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds))
        print(f"{variant:10} {med[variant][0]:>10.1f} {med[variant][1]:>10.1f}")
    added_entry = med["governed"][0] - med["bare"][0]
    added_exit = med["governed"][1] - med["bare"][1]
    print(
        f"governor adds {added_entry:+.1f} µs per entry ({med['governed'][0] / med['bare'][0]:.1f}x) and "
        f"{added_exit:+.1f} µs per exit; target <= {TARGET_US:.0f} µs per entry: "
        + ("met" if added_entry <= TARGET_US else "NOT met")
    )
    print()
    heads = ("in flight", "renew µs", "+publish µs", "adds µs", "per cell µs", "core %")
    print(" ".join(f"{h:>{w}}" for h, w in zip(heads, (9, 10, 12, 9, 12, 7), strict=True)))
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules.toml"
        rules.write_text("[[lane]]\nengine = 'q'\ncells = 1000\n")
        for n in (1, 8, 32):
            bare, published = _publish_cost(n, args.renewals, rules, Path(tmp) / f"live-{n}.sqlite")
            added = published - bare
            print(
                f"{n:>9} {bare:>10.1f} {published:>12.1f} {added:>+9.1f} {added / n:>+12.1f} "
                f"{added / 1e6 * 100:>7.3f}"
            )
    return 0 if added_entry <= TARGET_US else 1


if __name__ == "__main__":
    sys.exit(main())
