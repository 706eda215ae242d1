"""Overhead of `spark_otel.instrument()` against the bare client and the contrib instrumentation.

    .venv/bin/python benchmarks/bench_instrumentation.py [--rounds 15] [--calls 150] [--streams 2]

Every variant talks to the same in-process `httpx2.MockTransport`, so the server costs nothing
and what differs is the client side. Variants run in short interleaved phases in one process
(instrument, measure, uninstrument; each phase checks the previous one left no patch behind),
so the load other processes put on a shared machine falls on all of them alike. Spans go
through a `BatchSpanProcessor` to a null exporter everywhere. Measured:

* a non-streamed ``chat.completions.create``: median µs per call;
* a 512-chunk ``chat.completions.create(stream=True)`` consumed to the end: median µs per chunk;
* the same 512-chunk SSE body read with raw ``httpx2`` ``iter_lines`` (spark-otel's raw layer;
  contrib has none).

``spark-otel`` is spark-otel as it runs by default: on the providers spark-otel builds (what
`configure()` sets up for the store or OTLP; here with exporters that drop everything, the
metric reader on the store's 10 s interval), whose reader takes a stream's
``gen_ai.client.operation.time_per_output_chunk`` values in one bulk record at the stream's end.
``spark-user-sdk`` is spark-otel given the user's own SDK providers (an in-memory metric
reader, as contrib gets): one OpenTelemetry SDK histogram record per chunk, as contrib pays.
``spark-chunk-off`` is that with ``instrument(chunk_metrics=False)``: no per-chunk records.
``spark-noop-sdk`` (a diagnostic) is spark-otel given OpenTelemetry's no-op tracer and meter
providers: only spark-otel's own code runs, in place, so spark-otel minus spark-noop-sdk is
what the SDK costs inside a real call.
The "SDK floor" line times the OpenTelemetry SDK alone in a tight loop: one span with our
attributes, one histogram record.
The spread printed after the table is over rounds: each round's added cost is that round's
variant median minus that round's bare median, so slow and fast rounds pair up.

Targets (issue 2): at most 40 µs added per non-streamed call, at most 2 µs per streamed chunk,
and no worse than the contrib instrumentation (``opentelemetry-instrumentation-genai-openai``).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

CHUNKS = 512
MODEL = "bench-model"
VARIANTS = ("bare", "spark-otel", "spark-user-sdk", "spark-chunk-off", "spark-noop-sdk", "contrib")
KEYS = ("call_us", "chunk_us", "raw_chunk_us")


# -- the in-process engine -----------------------------------------------------------------------
def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _bodies() -> tuple[bytes, list[bytes]]:
    whole = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok " * 64}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 32, "completion_tokens": 64, "total_tokens": 96},
    }
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    blocks = []
    for i in range(CHUNKS):
        reason = "length" if i == CHUNKS - 1 else None
        choice = {"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": reason}
        blocks.append(_sse({**head, "choices": [choice], "usage": None}))
    usage = {"prompt_tokens": 32, "completion_tokens": CHUNKS, "total_tokens": CHUNKS + 32}
    blocks.append(_sse({**head, "choices": [], "usage": usage}))
    blocks.append(b"data: [DONE]\n\n")
    return json.dumps(whole).encode(), blocks


def _transport() -> Any:
    import httpx2

    whole, blocks = _bodies()

    class Body(httpx2.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield from blocks

    def handler(request: httpx2.Request) -> httpx2.Response:
        if b'"stream":true' in request.content or b'"stream": true' in request.content:
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=whole)

    return httpx2.MockTransport(handler)


# -- providers, the SDK floor, one variant ------------------------------------------------------------
def _noop_providers() -> tuple[Any, Any, None]:
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.trace import NoOpTracerProvider

    return NoOpTracerProvider(), NoOpMeterProvider(), None


class _NullSpanExporter:
    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _providers() -> tuple[Any, Any, Any]:
    """The user's own SDK providers: a batch span processor and an in-memory metric reader."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(_NullSpanExporter()))  # type: ignore[arg-type]
    reader = InMemoryMetricReader()
    return tracer_provider, MeterProvider(metric_readers=[reader]), reader


def _own_providers() -> tuple[Any, Any, Any]:
    """The providers spark-otel builds (`configure()` does the same for the store and OTLP), with
    a batch span processor and a periodic metric reader to exporters that drop everything."""
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from spark_otel.telemetry import build_providers

    class NullMetricExporter(MetricExporter):
        exported = 0

        def export(
            self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            NullMetricExporter.exported += 1
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    processor = BatchSpanProcessor(_NullSpanExporter())  # type: ignore[arg-type]
    tracer_provider, meter_provider = build_providers([processor], [(NullMetricExporter(), 10_000)])
    return tracer_provider, meter_provider, NullMetricExporter


def _sdk_floor(tracer_provider: Any, meter_provider: Any) -> dict[str, float]:
    """What the OpenTelemetry SDK itself costs here: one span like ours, one histogram record."""
    tracer = tracer_provider.get_tracer("floor")
    histogram = meter_provider.get_meter("floor").create_histogram("floor", unit="s")
    metric_attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": MODEL,
        "gen_ai.response.model": MODEL,
        "server.address": "engine.local",
        "server.port": 8000,
    }
    end_attrs = {
        "gen_ai.response.id": "x",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 32,
        "gen_ai.usage.output_tokens": 64,
    }

    def spans() -> None:
        for _ in range(100):
            span = tracer.start_span("chat m", attributes=metric_attrs)
            span.set_attributes(end_attrs)
            span.end()

    def records() -> None:
        for _ in range(100):
            histogram.record(0.5, metric_attrs)

    spans()
    records()
    return {"span_us": _median_ns(spans, 20) / 1e5, "record_us": _median_ns(records, 20) / 1e5}


CLOCKS: dict[str, Callable[[], int]] = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
_clock = CLOCKS["wall"]
"""What a sample is timed with: wall time, or the calling thread's CPU time (on a shared machine,
the part of a call that is its own: other processes and the exporters' background threads
drop out)."""


def _median_ns(run: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = _clock()
        run()
        samples.append(_clock() - start)
    return statistics.median(samples)


class _Variant:
    """One way of running the client; `on` / `off` switch its instrumentation for one phase."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.providers: tuple[Any, Any, Any] | None = None
        if name == "spark-noop-sdk":
            self.providers = _noop_providers()
        elif name == "spark-otel":
            self.providers = _own_providers()
        elif name != "bare":
            self.providers = _providers()
        self.samples: dict[str, list[float]] = {k: [] for k in KEYS}
        self.rounds: dict[str, list[float]] = {k: [] for k in KEYS}  # one median per round
        self._contrib: Any = None

    def on(self) -> None:
        if self.providers is None:
            return
        tracer_provider, meter_provider, _ = self.providers
        if self.name == "contrib":
            from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

            self._contrib = OpenAIInstrumentor()
            self._contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        else:
            import spark_otel

            spark_otel.instrument(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                chunk_metrics=self.name != "spark-chunk-off",
            )

    def off(self) -> None:
        if self._contrib is not None:
            self._contrib.uninstrument()
            self._contrib = None
        elif self.providers is not None:
            import spark_otel

            spark_otel.uninstrument()
        _assert_unpatched()

    def add(self, key: str, samples: list[float]) -> None:
        self.samples[key] += samples
        self.rounds[key].append(statistics.median(samples))


def _assert_unpatched() -> None:
    """Phases must not leak: after `off`, the SDK's create is the original function again."""
    import wrapt
    from openai.resources.chat.completions.completions import Completions

    assert not isinstance(Completions.__dict__["create"], wrapt.ObjectProxy), "a phase leaked its patch"


def run(rounds: int, calls: int, streams: int) -> dict[str, dict[str, Any]]:
    """Alternate short phases of every variant, so load on a shared machine hits them all alike."""
    import httpx2
    import openai

    transport = _transport()
    client = openai.OpenAI(
        base_url="http://engine.local:8000/v1",
        api_key="sk-bench",
        http_client=httpx2.Client(transport=transport),
    )
    raw = httpx2.Client(transport=transport)
    messages = [{"role": "user", "content": "benchmark"}]
    raw_body = {"model": MODEL, "messages": messages, "max_tokens": CHUNKS, "stream": True}

    def call() -> object:
        return client.chat.completions.create(model=MODEL, messages=messages, max_tokens=64)  # type: ignore[arg-type]

    def stream() -> int:
        s = client.chat.completions.create(  # type: ignore[call-overload]
            model=MODEL,
            messages=messages,
            max_tokens=CHUNKS,
            stream=True,
            stream_options={"include_usage": True},
        )
        return sum(1 for _ in s)

    def raw_stream() -> int:
        with raw.stream("POST", "http://engine.local:8000/v1/chat/completions", json=raw_body) as r:
            return sum(1 for _ in r.iter_lines())

    variants = [_Variant(name) for name in VARIANTS]
    for variant in variants:  # warm every code path once
        variant.on()
        for _ in range(20):
            call()
        stream()
        raw_stream()
        variant.off()
    gc.collect()
    gc.freeze()  # what warm-up left is no phase's garbage to collect
    for round_ in range(rounds):
        order = variants[round_ % len(variants) :] + variants[: round_ % len(variants)]
        for variant in order:
            gc.collect()  # each phase starts with no other phase's garbage
            variant.on()
            variant.add("call_us", _samples_ns(call, calls, 1e3))
            variant.add("chunk_us", _samples_ns(stream, streams, 1e3 * CHUNKS))
            variant.add("raw_chunk_us", _samples_ns(raw_stream, streams, 1e3 * CHUNKS))
            variant.off()
    results: dict[str, dict[str, Any]] = {
        v.name: {k: statistics.median(xs) for k, xs in v.samples.items()} for v in variants
    }
    bare_rounds = variants[0].rounds
    for variant in variants[1:]:
        results[variant.name]["added_rounds"] = {
            k: [x - b for x, b in zip(variant.rounds[k], bare_rounds[k], strict=True)] for k in KEYS
        }
    for variant in variants:
        if variant.providers is not None and variant.providers[2] is not None:
            tracer_provider, meter_provider, reader = variant.providers
            tracer_provider.force_flush()
            if variant.name == "spark-otel":
                meter_provider.force_flush()
                assert reader.exported, "spark-otel's own providers exported no metrics"
            else:
                assert reader.get_metrics_data() is not None, f"{variant.name} recorded no metrics"
    tracer_provider, meter_provider, _ = _providers()
    results["bare"].update(_sdk_floor(tracer_provider, meter_provider))
    return results


def _samples_ns(run: Callable[[], object], repeats: int, per: float) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = _clock()
        run()
        samples.append((_clock() - start) / per)
    return samples


# -- the side-by-side table --------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15, help="interleaved phases of every variant")
    parser.add_argument("--calls", type=int, default=150, help="non-streamed calls per variant per round")
    parser.add_argument("--streams", type=int, default=2, help="512-chunk streams per variant per round")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time samples by wall clock (default) or by the calling thread's CPU time",
    )
    args = parser.parse_args()
    global _clock  # noqa: PLW0603 - set once, before anything is timed
    _clock = CLOCKS[args.clock]
    print(f"timed by {'the calling thread CPU time' if args.clock == 'cpu' else 'wall clock'}")
    results = run(args.rounds, args.calls, args.streams)
    bare = results["bare"]
    print(
        f"openai {_version('openai')}, httpx2 {_version('httpx2')}, {CHUNKS}-chunk streams, MockTransport; "
        f"{args.rounds} interleaved rounds x ({args.calls} calls, {args.streams} streams) "
        "per variant; medians"
    )
    columns = ("µs/call", "added", "µs/chunk", "added", "raw µs/chunk", "added")
    print(f"{'variant':<16}" + "".join(f"{c:>13}" for c in columns))
    for variant in VARIANTS:
        r = results[variant]
        cells = (
            f"{r['call_us']:.1f}",
            f"{r['call_us'] - bare['call_us']:+.1f}",
            f"{r['chunk_us']:.2f}",
            f"{r['chunk_us'] - bare['chunk_us']:+.2f}",
            f"{r['raw_chunk_us']:.2f}",
            f"{r['raw_chunk_us'] - bare['raw_chunk_us']:+.2f}",
        )
        print(f"{variant:<16}" + "".join(f"{c:>13}" for c in cells))
    print()
    print("added over bare, per round (median [25th-75th percentile] of the rounds):")
    for variant in VARIANTS[1:]:
        spread = results[variant]["added_rounds"]
        print(
            f"  {variant:<16} call {_spread(spread['call_us'], 1)} µs, "
            f"chunk {_spread(spread['chunk_us'], 2)} µs, raw chunk {_spread(spread['raw_chunk_us'], 2)} µs"
        )
    ours, user, off, contrib = (
        results[v] for v in ("spark-otel", "spark-user-sdk", "spark-chunk-off", "contrib")
    )
    added, user_added, off_added, contrib_added = (
        {k: r[k] - bare[k] for k in KEYS} for r in (ours, user, off, contrib)
    )
    print()
    print(
        f"added per call:  spark-otel {added['call_us']:+.1f} µs "
        f"(user's providers {user_added['call_us']:+.1f}), "
        f"contrib {contrib_added['call_us']:+.1f} µs (target <= 40 µs)"
    )
    print(
        f"added per chunk: spark-otel {added['chunk_us']:+.2f} µs "
        f"(user's providers {user_added['chunk_us']:+.2f}, "
        f"chunk metrics off {off_added['chunk_us']:+.2f}), contrib {contrib_added['chunk_us']:+.2f} µs "
        "(target <= 2 µs)"
    )
    print(
        f"raw added per chunk: spark-otel {added['raw_chunk_us']:+.2f} µs "
        f"(user's providers {user_added['raw_chunk_us']:+.2f}, "
        f"chunk metrics off {off_added['raw_chunk_us']:+.2f})"
    )
    own = {k: results["spark-noop-sdk"][k] - bare[k] for k in KEYS}
    print(
        f"spark-otel's own code in place (no-op SDK): call {own['call_us']:+.1f} µs, "
        f"chunk {own['chunk_us']:+.2f} µs, raw chunk {own['raw_chunk_us']:+.2f} µs; "
        f"so the SDK's share of a call here is {added['call_us'] - own['call_us']:.1f} µs"
    )
    floor_call = bare["span_us"] + 3 * bare["record_us"]
    print(
        f"OpenTelemetry SDK floor on this machine: one span {bare['span_us']:.1f} µs, one histogram "
        f"record {bare['record_us']:.1f} µs; a call's span + 3 records = {floor_call:.1f} µs, "
        f"a chunk's record = {bare['record_us']:.1f} µs"
    )
    print(
        "added-cost ratio spark-otel / contrib (same user providers): "
        f"call {user_added['call_us'] / contrib_added['call_us']:.2f}, "
        f"stream {user_added['chunk_us'] / contrib_added['chunk_us']:.2f}; "
        "spark-otel by default / contrib: "
        f"call {added['call_us'] / contrib_added['call_us']:.2f}, "
        f"stream {added['chunk_us'] / contrib_added['chunk_us']:.2f}"
    )
    # The targets, from the per-round added costs (each round's variant median minus the same
    # round's bare median), whose median a burst of load on a shared machine moves least.
    ours_rounds, contrib_rounds = results["spark-otel"]["added_rounds"], results["contrib"]["added_rounds"]
    call_ratio = statistics.median(ours_rounds["call_us"]) / statistics.median(contrib_rounds["call_us"])
    print(
        "targets, from the per-round medians: spark-otel / contrib added per call "
        f"{call_ratio:.2f} (target <= 0.45); added per chunk "
        f"{statistics.median(ours_rounds['chunk_us']):+.2f} µs (target <= +2 µs), contrib "
        f"{statistics.median(contrib_rounds['chunk_us']):+.2f} µs"
    )
    return 0


def _spread(xs: list[float], digits: int) -> str:
    if len(xs) < 2:
        return f"{xs[0]:+.{digits}f}" if xs else "n/a"
    q1, median, q3 = statistics.quantiles(xs, n=4)
    return f"{median:+.{digits}f} [{q1:+.{digits}f}..{q3:+.{digits}f}]"


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    raise SystemExit(main())
