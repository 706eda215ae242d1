"""A governed runner that streams from a simulated engine, for the live-signal tests: ``workers``
threads each run one cell of one chat completion of exactly ``tokens`` tokens on the box's model
clock, streamed (or, with ``--no-stream``, one whole answer), printing a JSON line when each cell
is admitted and when its stream's first chunk arrives.

    streaming_runner.py RULES STATE URL EVAL ENGINE WORKERS TOKENS [--no-stream]
"""

from __future__ import annotations

import argparse
import json
import threading

import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

import spark_otel
from spark_otel import _clock
from spark_otel.governor import govern
from spark_otel.sim import follow


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("rules", "state", "url", "eval", "engine"):
        parser.add_argument(name)
    parser.add_argument("workers", type=int)
    parser.add_argument("tokens", type=int)
    parser.add_argument("--no-stream", action="store_true")
    args = parser.parse_args()
    govern(args.rules, state=args.state)
    tp, mp = TracerProvider(), MeterProvider()
    spark_otel.instrument(tracer_provider=tp, meter_provider=mp)
    client = openai.OpenAI(base_url=args.url + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    lock = threading.Lock()

    def say(**line: object) -> None:
        with lock:
            print(json.dumps(line), flush=True)

    def one(i: int) -> None:
        cell_id = f"{args.eval}-{i}"
        request = {
            "model": model,
            "messages": [{"role": "user", "content": "review this"}],
            "max_tokens": args.tokens,
            "extra_body": {"min_tokens": args.tokens},
        }
        with spark_otel.cell(
            args.eval, cell_id, engine=args.engine, deadline_s=1800, tracer_provider=tp, meter_provider=mp
        ):
            say(event="admitted", cell=cell_id)
            if args.no_stream:
                client.chat.completions.create(**request)
            else:
                first = True
                for _chunk in client.chat.completions.create(**request, stream=True):
                    if first:
                        say(event="streaming", cell=cell_id)
                        first = False
        say(event="done", cell=cell_id)

    with _clock.hold(follow(args.url)):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(args.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
