"""A governed eval runner for the multi-process tests of the general rules: ``workers`` threads
run ``cells`` cells of one eval on one engine, each held ``hold_s``, printing when each entered,
was admitted and ended (JSON lines).

    class_runner.py RULES STATE EVAL ENGINE CELLS WORKERS HOLD_S [--until FLAG] [--flag FLAG]

``--until FLAG``: after its cells, keep running cells (at most 20 more) until FLAG exists, then
two more: the eval is still running when the other runner arrives. ``--flag FLAG``: create FLAG
once the first cell is about to enter.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

import spark_otel
from spark_otel.governor import govern


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("rules", "state", "eval", "engine"):
        parser.add_argument(name)
    parser.add_argument("cells", type=int)
    parser.add_argument("workers", type=int)
    parser.add_argument("hold_s", type=float)
    parser.add_argument("--until")
    parser.add_argument("--flag")
    args = parser.parse_args()
    govern(args.rules, state=args.state)
    tp, mp = TracerProvider(), MeterProvider()
    lock = threading.Lock()
    todo = list(range(args.cells))

    def one(i: int) -> None:
        cell_id = f"{args.eval}-{i}"
        entered = time.time()
        with spark_otel.cell(
            args.eval, cell_id, engine=args.engine, deadline_s=1800, tracer_provider=tp, meter_provider=mp
        ):
            start = time.time()
            time.sleep(args.hold_s)
            end = time.time()
        line = {"cell": cell_id, "entered": entered, "start": start, "end": end}
        with lock:
            print(json.dumps(line), flush=True)

    def work() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            one(i)

    if args.flag:
        Path(args.flag).touch()
    threads = [threading.Thread(target=work) for _ in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if args.until:
        more = args.cells
        for _ in range(20):
            if Path(args.until).exists():
                break
            one(more)
            more += 1
        for _ in range(2):
            one(more)
            more += 1


if __name__ == "__main__":
    main()
