"""A governed runner process for the multi-process tests: N cells on engine "q", each held for
a while, printing when each was admitted and ended (JSON lines)."""

from __future__ import annotations

import json
import sys
import time

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

import spark_otel
from spark_otel.governor import govern


def main() -> None:
    rules, state, name = sys.argv[1], sys.argv[2], sys.argv[3]
    cells, hold_s = int(sys.argv[4]), float(sys.argv[5])
    govern(rules, state=state)
    tp, mp = TracerProvider(), MeterProvider()
    for i in range(cells):
        cell_id = f"{name}-{i}"
        with spark_otel.cell(
            name, cell_id, engine="q", deadline_s=1800, tracer_provider=tp, meter_provider=mp
        ):
            start = time.time()
            print(json.dumps({"event": "admitted", "cell": cell_id, "t": start}), flush=True)
            time.sleep(hold_s)
            print(
                json.dumps({"event": "done", "cell": cell_id, "start": start, "end": time.time()}), flush=True
            )


if __name__ == "__main__":
    main()
