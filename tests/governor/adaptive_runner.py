"""A runner governed adaptively with no rules file, for the deadline-slack test: ``workers``
threads run ``cells`` cells of one eval on ``engine`` of the simulated box, each streaming a chat
completion of exactly ``tokens`` tokens on the box's model clock, with ``deadline`` (model s; 0:
none) declared. Prints a JSON line when each cell is admitted, then, at the end, each cell span's
attributes. With ``--store STORE`` the spans also reach that real embedded store through
spark-otel's own exporter (`spark_otel.configure`), for the decisions' read-back test.

    adaptive_runner.py [--store STORE] STATE URL EVAL ENGINE WORKERS CELLS TOKENS DEADLINE
"""

from __future__ import annotations

import argparse
import json
import queue
import threading

import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spark_otel
from spark_otel import _clock
from spark_otel import _semconv as sc
from spark_otel.governor import govern
from spark_otel.sim import follow


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store")
    for name in ("state", "url", "eval", "engine"):
        parser.add_argument(name)
    for name in ("workers", "cells", "tokens"):
        parser.add_argument(name, type=int)
    parser.add_argument("deadline", type=float)
    args = parser.parse_args()
    govern(state=args.state, adaptive=True)
    exporter = InMemorySpanExporter()  # what the process recorded (beside the store's, if any)
    telemetry = None
    if args.store:
        telemetry = spark_otel.configure(store=args.store, otlp=False)
        tp, mp = telemetry.tracer_provider, telemetry.meter_provider
    else:
        tp, mp = TracerProvider(), MeterProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    spark_otel.instrument(tracer_provider=tp, meter_provider=mp)
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
            deadline = args.deadline or None
            with spark_otel.cell(
                args.eval,
                cell_id,
                engine=args.engine,
                deadline_s=deadline,
                tracer_provider=tp,
                meter_provider=mp,
            ):
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

    with _clock.hold(follow(args.url)):
        threads = [threading.Thread(target=worker) for _ in range(args.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if telemetry is not None:
        telemetry.shutdown()  # every span in the store before the test reads it
    for span in exporter.get_finished_spans():
        attrs = dict(span.attributes or {})
        if sc.CELL_ELAPSED_S in attrs:  # a cell span (its requests' spans name the cell too)
            say(event="span", attributes=attrs)


if __name__ == "__main__":
    main()
