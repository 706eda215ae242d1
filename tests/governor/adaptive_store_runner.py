"""A runner governed adaptively with no rules file that records into a real embedded store, for
the decisions' read-back test: ``workers`` threads run ``cells`` cells of one eval on ``engine``
of the simulated box, each streaming exactly ``tokens`` tokens on the box's model clock with
``deadline`` (model s; 0: none) declared; the spans reach ``STORE`` through spark-otel's own
store exporter. Prints a JSON line when each cell is admitted, then each cell span's attributes
as the process saw them (what the store should give back).

    adaptive_store_runner.py STORE STATE URL EVAL ENGINE WORKERS CELLS TOKENS DEADLINE
"""

from __future__ import annotations

import argparse
import json
import queue
import threading

import openai
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.governor import govern
from spark_otel.sim import follow


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("store", "state", "url", "eval", "engine"):
        parser.add_argument(name)
    for name in ("workers", "cells", "tokens"):
        parser.add_argument(name, type=int)
    parser.add_argument("deadline", type=float)
    args = parser.parse_args()
    telemetry = spark_otel.configure(store=args.store, otlp=False, clock=follow(args.url))
    seen = InMemorySpanExporter()  # beside the store's exporter: what the process recorded
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(seen))
    govern(state=args.state, adaptive=True)
    spark_otel.instrument()
    client = openai.OpenAI(base_url=args.url + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    lock = threading.Lock()
    todo: queue.Queue[int] = queue.Queue()
    for i in range(args.cells):
        todo.put(i)

    def say(**line: object) -> None:
        with lock:
            print(json.dumps(line), flush=True)

    def worker() -> None:
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            cell_id = f"{args.eval}-{i}"
            with spark_otel.cell(args.eval, cell_id, engine=args.engine, deadline_s=args.deadline or None):
                say(event="admitted", cell=cell_id)
                stream = client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": "review this"}],
                    max_tokens=args.tokens,
                    extra_body={"min_tokens": args.tokens},
                    stream=True,
                )
                for _chunk in stream:
                    pass

    threads = [threading.Thread(target=worker) for _ in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    telemetry.shutdown()  # every span in the store before the test reads it
    for span in seen.get_finished_spans():
        attrs = dict(span.attributes or {})
        if sc.CELL_ELAPSED_S in attrs:
            say(event="span", attributes=attrs)


if __name__ == "__main__":
    main()
