"""Overhead of spark-otel's ``requests`` and ``aiohttp`` layers, side by side with the bare clients
and with contrib's requests and aiohttp-client instrumentations on the same calls.

    .venv/bin/python benchmarks/bench_http_clients.py [--rounds 9] [--calls 60] [--streams 3]
                                                       [--chunks 16,128,1024] [--clock cpu]

The engine is a small asyncio server in a process of its own, answering from pre-built bytes: a
JSON completion, or an SSE stream of N events (one HTTP chunk each, as vLLM sends them, then the
usage event and ``[DONE]``). Each client posts to ``/v1/chat/completions`` as lm-evaluation-harness
does: ``requests`` (``Session.post``, ``.json()``; a stream read with ``iter_lines``) and an aiohttp
session (``post``, ``await .json()``; a stream read with ``async for line in response.content``).
Variants run in short interleaved phases in one process (instrument, measure, uninstrument; each
phase checks the previous left nothing patched), rotating the order each round, so load from other
processes falls on all of them alike. Spans go through a `BatchSpanProcessor` to a null exporter
everywhere.

* ``spark-otel``: as it runs by default, on the providers spark-otel builds (what `configure()`
  sets up for the store or OTLP), whose reader takes a stream's per-chunk values in one record;
* ``spark-user-sdk``: spark-otel on the user's own SDK providers (the same as contrib gets);
* ``contrib``: ``opentelemetry-instrumentation-requests`` and ``-aiohttp-client`` on those
  providers: one HTTP client span and one duration record per call; they never read the body.

Timed with the calling thread's CPU time by default (``--clock wall`` for wall time): the server
is another process, so what is counted is the client's own work, and a busy shared machine moves
it less. Added cost is per round (the variant's median minus the same round's bare median), then
the median over rounds. Before timing, every variant's answers are checked equal to the bare
client's, and after it, spark-otel's spans counted and their tokens checked.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

MODEL = "bench-model"
PROMPT_TOKENS = 32
VARIANTS = ("bare", "spark-otel", "spark-user-sdk", "contrib")
CLIENTS = ("requests", "aiohttp")


# -- the engine, in a process of its own ---------------------------------------------------------------
def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _answer(body: dict[str, Any]) -> bytes:
    n = int(body["max_tokens"])
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": n, "total_tokens": PROMPT_TOKENS + n}
    head = {"id": "chatcmpl-bench", "created": 1, "model": MODEL}
    if not body.get("stream"):
        message = {"role": "assistant", "content": "ok " * n}
        choice = {"index": 0, "message": message, "finish_reason": "length"}
        whole = json.dumps(
            {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        ).encode()
        return (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(whole)}\r\n\r\n".encode()
            + whole
        )
    events = []
    for i in range(n):
        choice = {
            "index": 0,
            "delta": {"content": f"tok{i} "},
            "finish_reason": "length" if i == n - 1 else None,
        }
        events.append(_sse({**head, "object": "chat.completion.chunk", "choices": [choice]}))
    events.append(_sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    events.append(b"data: [DONE]\n\n")
    chunked = b"".join(f"{len(e):x}\r\n".encode() + e + b"\r\n" for e in events) + b"0\r\n\r\n"
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + chunked
    )


def _serve(sock: socket.socket) -> None:
    answers: dict[bytes, bytes] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                found = answers.get(body)
                if found is None:
                    found = answers[body] = _answer(json.loads(body))
                writer.write(found)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, sock=sock)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# -- providers -----------------------------------------------------------------------------------------
class _CountingExporter:
    """Drops every span; counts spark-otel's GenAI spans and their output tokens, and HTTP spans."""

    def __init__(self) -> None:
        self.genai = 0
        self.output_tokens = 0
        self.http = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        for span in spans:
            attrs = span.attributes or {}
            if "gen_ai.operation.name" in attrs:
                self.genai += 1
                self.output_tokens += int(attrs.get("gen_ai.usage.output_tokens", 0))
            else:
                self.http += 1
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _user_providers() -> tuple[Any, Any, _CountingExporter]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = _CountingExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))  # type: ignore[arg-type]
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()]), exporter


def _own_providers() -> tuple[Any, Any, _CountingExporter]:
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from spark_otel.telemetry import build_providers

    class NullMetricExporter(MetricExporter):
        def export(
            self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    exporter = _CountingExporter()
    processor = BatchSpanProcessor(exporter)  # type: ignore[arg-type]
    tracer_provider, meter_provider = build_providers([processor], [(NullMetricExporter(), 10_000)])
    return tracer_provider, meter_provider, exporter


# -- variants ------------------------------------------------------------------------------------------
class _Variant:
    def __init__(self, name: str) -> None:
        self.name = name
        self.providers: tuple[Any, Any, _CountingExporter] | None = None
        if name == "spark-otel":
            self.providers = _own_providers()
        elif name != "bare":
            self.providers = _user_providers()
        self.rounds: dict[str, list[float]] = {}
        self._contrib: list[Any] = []

    def on(self) -> None:
        if self.providers is None:
            return
        tracer_provider, meter_provider, _ = self.providers
        if self.name == "contrib":
            from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
            from opentelemetry.instrumentation.requests import RequestsInstrumentor

            self._contrib = [RequestsInstrumentor(), AioHttpClientInstrumentor()]
            for instrumentor in self._contrib:
                instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        else:
            import spark_otel

            spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    def off(self) -> None:
        if self._contrib:
            for instrumentor in self._contrib:
                instrumentor.uninstrument()
            self._contrib = []
        elif self.providers is not None:
            import spark_otel

            spark_otel.uninstrument()
        _assert_unpatched()

    def add(self, key: str, per_unit: list[float]) -> None:
        self.rounds.setdefault(key, []).append(statistics.median(per_unit))


def _assert_unpatched() -> None:
    import aiohttp
    import requests
    import requests.adapters

    assert requests.Session.send is _ORIGINALS[0], "a phase left Session.send patched"
    assert requests.adapters.HTTPAdapter.send is _ORIGINALS[1], "a phase left HTTPAdapter.send patched"
    assert aiohttp.ClientSession._request is _ORIGINALS[2], "a phase left ClientSession._request patched"
    assert aiohttp.ClientSession.__init__ is _ORIGINALS[3], "a phase left ClientSession.__init__ patched"


_ORIGINALS: tuple[Any, ...] = ()

CLOCKS: dict[str, Callable[[], int]] = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
_clock = CLOCKS["cpu"]


def _body(chunks: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "benchmark"}]}
    if chunks is None:
        return {**body, "max_tokens": 64}
    return {**body, "max_tokens": chunks, "stream": True, "stream_options": {"include_usage": True}}


# -- one phase of each client --------------------------------------------------------------------------
def _requests_phase(
    url: str, calls: int, streams: int, sizes: list[int]
) -> tuple[dict[str, list[float]], list[Any]]:
    import requests

    samples: dict[str, list[float]] = {}
    answers: list[Any] = []
    with requests.Session() as session:
        call_body = _body(None)
        timed = []
        for _ in range(calls):
            start = _clock()
            answer = session.post(url, json=call_body).json()
            timed.append((_clock() - start) / 1e3)
        samples["call"] = timed
        answers.append(answer)
        for n in sizes:
            body = _body(n)
            timed = []
            for _ in range(streams):
                start = _clock()
                with session.post(url, json=body, stream=True) as response:
                    lines = [line for line in response.iter_lines() if line]
                timed.append((_clock() - start) / 1e3)
            samples[f"stream{n}"] = timed
            answers.append(lines)
    return samples, answers


async def _aiohttp_phase(
    url: str, calls: int, streams: int, sizes: list[int]
) -> tuple[dict[str, list[float]], list[Any]]:
    import aiohttp

    samples: dict[str, list[float]] = {}
    answers: list[Any] = []
    async with aiohttp.ClientSession() as session:  # made in the phase: contrib hooks its __init__
        call_body = _body(None)
        timed = []
        for _ in range(calls):
            start = _clock()
            async with session.post(url, json=call_body) as response:
                answer = await response.json()
            timed.append((_clock() - start) / 1e3)
        samples["call"] = timed
        answers.append(answer)
        for n in sizes:
            body = _body(n)
            timed = []
            for _ in range(streams):
                start = _clock()
                async with session.post(url, json=body) as response:
                    lines = [line async for line in response.content if line.strip()]
                timed.append((_clock() - start) / 1e3)
            samples[f"stream{n}"] = timed
            answers.append(lines)
    return samples, answers


def run(rounds: int, calls: int, streams: int, sizes: list[int]) -> tuple[list[_Variant], int]:
    global _ORIGINALS  # noqa: PLW0603 - read by `_assert_unpatched` in every phase
    import aiohttp
    import requests
    import requests.adapters

    _ORIGINALS = (
        requests.Session.send,
        requests.adapters.HTTPAdapter.send,
        aiohttp.ClientSession._request,
        aiohttp.ClientSession.__init__,
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/chat/completions"
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(sock,), daemon=True)
    server.start()
    loop = asyncio.new_event_loop()
    phases: dict[str, Callable[[], tuple[dict[str, list[float]], list[Any]]]] = {
        "requests": lambda: _requests_phase(url, calls, streams, sizes),
        "aiohttp": lambda: loop.run_until_complete(_aiohttp_phase(url, calls, streams, sizes)),
    }
    variants = [_Variant(name) for name in VARIANTS]
    try:
        expected: dict[str, list[Any]] = {}
        for variant in variants:  # warm every path once, and check every variant's answers agree
            variant.on()
            for client, phase in phases.items():
                _, answers = phase()
                assert expected.setdefault(client, answers) == answers, (
                    f"{variant.name} changed {client}'s answers"
                )
            variant.off()
        gc.collect()
        gc.freeze()
        for round_ in range(rounds):
            order = variants[round_ % len(variants) :] + variants[: round_ % len(variants)]
            for variant in order:
                gc.collect()
                variant.on()
                for client, phase in phases.items():
                    samples, _ = phase()
                    for key, values in samples.items():
                        variant.add(f"{client}:{key}", values)
                variant.off()
    finally:
        loop.close()
        server.kill()
        sock.close()
    per_phase_calls = 2 * (calls + streams * len(sizes))  # both clients
    return variants, per_phase_calls


def _check_spans(
    variants: list[_Variant], per_phase_calls: int, rounds: int, calls: int, streams: int, sizes: list[int]
) -> None:
    phases = rounds + 1  # the warm-up phase too
    for variant in variants:
        if variant.providers is None:
            continue
        tracer_provider, _, exporter = variant.providers
        tracer_provider.force_flush()
        if variant.name == "contrib":
            assert (exporter.genai, exporter.http) == (0, phases * per_phase_calls), (
                exporter.genai,
                exporter.http,
            )
        else:
            assert (exporter.genai, exporter.http) == (phases * per_phase_calls, 0), (
                exporter.genai,
                exporter.http,
            )
            tokens = 2 * phases * (calls * 64 + streams * sum(sizes))
            assert exporter.output_tokens == tokens, (exporter.output_tokens, tokens)


def _report(variants: list[_Variant], sizes: list[int]) -> None:
    bare = variants[0]

    def added(variant: _Variant, key: str) -> float:
        return statistics.median(x - b for x, b in zip(variant.rounds[key], bare.rounds[key], strict=True))

    for client in CLIENTS:
        print(f"\n{client}: µs per call (median over rounds), and added over the bare client")
        header = f"{'variant':16}{'call':>10}{'added':>9}"
        for n in sizes:
            header += f"{f'stream {n}':>14}{'added':>9}{'/chunk':>8}"
        print(header)
        for variant in variants:
            key = f"{client}:call"
            median = statistics.median(variant.rounds[key])
            row = f"{variant.name:16}{median:>10.1f}{added(variant, key):>+9.1f}"
            for n in sizes:
                key = f"{client}:stream{n}"
                plus = added(variant, key)
                row += f"{statistics.median(variant.rounds[key]):>14.1f}{plus:>+9.1f}{plus / n:>+8.2f}"
            print(row)
    print()
    by_name = {v.name: v for v in variants}
    for client in CLIENTS:
        spark = added(by_name["spark-otel"], f"{client}:call")
        contrib = added(by_name["contrib"], f"{client}:call")
        line = f"{client}: added per call spark-otel {spark:+.1f} µs, contrib {contrib:+.1f} µs"
        line += f" (ratio {spark / contrib:.2f})"
        for n in sizes:
            key = f"{client}:stream{n}"
            s, c = added(by_name["spark-otel"], key), added(by_name["contrib"], key)
            line += f"; stream of {n}: {s:+.1f} vs {c:+.1f} µs ({s / c:.2f}x), {s / n:+.2f} µs a chunk"
        print(line)


def main() -> None:
    global _clock  # noqa: PLW0603 - the clock every sample is timed with, chosen once
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--streams", type=int, default=3)
    parser.add_argument("--chunks", default="16,128,1024", help="stream sizes, in SSE events")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args()
    _clock = CLOCKS[args.clock]
    sizes = [int(n) for n in args.chunks.split(",")]
    variants, per_phase = run(args.rounds, args.calls, args.streams, sizes)
    _check_spans(variants, per_phase, args.rounds, args.calls, args.streams, sizes)
    print(
        f"{args.rounds} rounds x ({args.calls} calls, {args.streams} streams of each size) per client and "
        f"variant, {args.clock} clock; spans and tokens checked"
    )
    _report(variants, sizes)


if __name__ == "__main__":
    main()
