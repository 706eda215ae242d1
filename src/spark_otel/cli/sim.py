"""Serve simulated vLLM-compatible engines on 127.0.0.1, calibrated to the article's DGX Spark.

Each --engine NAME=PORT:PROFILE starts one OpenAI-compatible server (port 0 picks a free port);
all of them share one simulated GPU, so load on one engine slows the others. Profiles: dense
(Qwen3.8-27B: 11.1 tok/s alone, 10.1 per stream at 8) and moe (Nemotron-3.5-30B-A3B: 82 tok/s
alone, collapsing past 8 streams). --speed 100 runs the box 100 times faster than real time;
every figure it reports (/metrics histograms, /sim/gpu energy, timestamps) stays in model time.

    spark-otel sim --engine qwen=8011:dense --engine nemotron=8012:moe --speed 100

Runs until Ctrl-C, or for --duration SECONDS of real time. Each engine serves /v1/completions,
/v1/chat/completions, /v1/models, /health, /metrics (vLLM V1 names), /sim/info and /sim/gpu
(the box's GPU readout). A runner in another process follows the box's model clock with
``SPARK_OTEL_CLOCK="$(spark-otel sim --clock-of URL)"``.

--otlp-traces-endpoint URL sends one ``llm_request`` server span per finished request over
OTLP/HTTP, as ``vllm serve --otlp-traces-endpoint`` does: parented to the request's
``traceparent``, with the engine's queue, prefill and decode times, so an instrumented runner's
cells get the engine's split of their wait for first tokens (``spark-otel cells --budget``).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

DEFAULT_ENGINES = ("qwen=8011:dense", "nemotron=8012:moe")


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (or inf), got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        action="append",
        metavar="NAME=PORT:PROFILE",
        help=f"an engine to serve; repeat for several (default: {' '.join(DEFAULT_ENGINES)})",
    )
    parser.add_argument(
        "--speed", type=_speed, default=1.0, help="times faster than real time (inf: as fast as it can)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for unpinned output lengths")
    parser.add_argument(
        "--otlp-traces-endpoint",
        metavar="URL",
        help="send vLLM's llm_request server span per request over OTLP/HTTP (as vllm serve does)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--contention",
        type=float,
        default=1.0,
        help="scale of the cross-engine memory contention; 0 turns it off",
    )
    parser.add_argument(
        "--duration", type=float, default=None, metavar="SECONDS", help="stop after this many real seconds"
    )
    parser.add_argument(
        "--clock-of",
        metavar="URL",
        help="print the clock of the running box at URL as SPARK_OTEL_CLOCK takes it, and exit "
        "(a runner started with it follows the box)",
    )


def run(args: argparse.Namespace) -> int:
    from ..sim import follow, parse_engine_spec, run_box
    from ._common import DURATION_S, Bounds

    if args.clock_of is not None:
        from .._exceptions import ConfigError, EngineError

        try:
            print(follow(args.clock_of).spec())
        except EngineError as exc:
            raise ConfigError(f"--clock-of {args.clock_of!r}: {exc}") from exc
        return 0

    from ..sim.box import check_speed

    check_speed(args.speed, what="--speed")
    duration = args.duration
    DURATION_S.check("--duration", duration)
    Bounds(at_least=0).check("--contention", args.contention)
    specs = [parse_engine_spec(text) for text in (args.engine or DEFAULT_ENGINES)]
    tracing = _server_tracing(args.otlp_traces_endpoint)
    with contextlib.ExitStack() as held:
        if tracing is not None:
            held.callback(tracing.shutdown)
        box = held.enter_context(
            run_box(
                specs,
                speed=args.speed,
                seed=args.seed,
                host=args.host,
                contention=args.contention,
                tracer_provider=tracing,
            )
        )
        speed = "as fast as possible" if math.isinf(box.speed) else f"{box.speed:g}x real time"
        print(f"spark-otel sim: {len(box.engines)} engine(s) on one simulated box, {speed}", flush=True)
        for name in box.engines:
            profile = box.profile(name)
            print(f"  {name:<12} {profile.name:<6} {profile.model_id:<24} {box.url(name)}/v1", flush=True)
        if duration is None:
            print("Ctrl-C to stop.", file=sys.stderr, flush=True)
        else:
            print(f"Stopping after {duration:g} s.", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait(duration)
    return 0


def _server_tracing(endpoint: str | None) -> TracerProvider | None:
    """The simulated engines' tracer provider for ``--otlp-traces-endpoint`` (None without one):
    OTLP/HTTP to that URL (``/v1/traces`` added to a bare host), service ``$OTEL_SERVICE_NAME`` or
    ``spark-otel-sim``. A URL that is not http(s) is refused, naming it."""
    if endpoint is None:
        return None
    import os
    from urllib.parse import urlsplit

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from .._exceptions import ConfigError

    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--otlp-traces-endpoint {endpoint!r}: expected an http(s) URL such as http://127.0.0.1:4318"
        )
    url = endpoint if parts.path.strip("/") else endpoint.rstrip("/") + "/v1/traces"
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "spark-otel-sim"})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return provider
