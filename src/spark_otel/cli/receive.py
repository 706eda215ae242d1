"""Scrape inference engines' /metrics on an interval and re-export them as OpenTelemetry metrics.

Each --engine NAME=URL is a vLLM (V1 names, and the V0 names that were renamed), SGLang or
llama.cpp server; the kind is detected from its metrics. Generation and prompt token
counters, running and waiting requests and KV-cache fill become spark_otel.engine.* metrics
with a spark_otel.engine attribute, plus generation and prompt token rates derived from
consecutive scrapes (the mapping table is in docs/receivers.md). With --gpu, the GPU's
utilization, power, energy, clocks and memory are sampled beside them.

Where it goes: every scrape is written to the embedded store (the default, or --store
PATH); with OTEL_EXPORTER_OTLP_ENDPOINT set, the metrics are exported over OTLP as well (and
the store is kept only with --store or SPARK_OTEL_STORE). An engine that is down is logged,
counted (spark_otel.receiver.errors), reported as spark_otel.engine.up = 0 with its other
metrics left out until it answers again (no stale rates), and retried with backoff while the
others are served. Ctrl-C stops cleanly.

  spark-otel receive --engine qwen=http://127.0.0.1:8011 --engine nemotron=http://127.0.0.1:8012
  spark-otel receive --engine qwen=http://127.0.0.1:8011 --once     # one scrape, as a table

--once scrapes each engine a single time and does not retry: an engine that is down is
reported and the exit code is 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..views.tables import fmt_number
from ._common import add_store_argument, print_json, print_table

if TYPE_CHECKING:
    from .._exceptions import SparkOtelError
    from ..receivers.prometheus import EngineSnapshot
    from ..receivers.receiver import EngineTarget, Receiver


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        action="append",
        default=None,
        metavar="NAME=URL",
        help="an engine to scrape, e.g. qwen=http://127.0.0.1:8011 (repeatable)",
    )
    parser.add_argument("--interval", type=float, default=5.0, metavar="S", help="seconds between scrapes")
    parser.add_argument(
        "--gpu",
        choices=["auto", "nvml", "smi", "sim"],
        default=None,
        help="also sample the GPU from this source",
    )
    parser.add_argument(
        "--sim-url", metavar="URL", help="with --gpu sim: the simulated engine to read /sim/gpu from"
    )
    parser.add_argument("--timeout", type=float, default=5.0, metavar="S", help="per-scrape timeout, seconds")
    parser.add_argument(
        "--once",
        action="store_true",
        help="scrape once (no retries), print a table, and exit; 1 if an engine is down",
    )
    parser.add_argument("--json", action="store_true", help="with --once: print JSON instead of a table")
    parser.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    from .._exceptions import ConfigError
    from ..receivers.gpu import open_gpu_source
    from ..receivers.receiver import parse_engine_spec
    from ._common import DURATION_S, INTERVAL_S, TIMEOUT_S
    from ._receiving import receiving, run_until_stopped

    INTERVAL_S.check("--interval", args.interval)
    TIMEOUT_S.check("--timeout", args.timeout)
    DURATION_S.check("--duration", args.duration)
    targets = [parse_engine_spec(spec) for spec in args.engine or ()]
    if not targets and args.gpu is None:
        raise ConfigError("nothing to receive: give --engine NAME=URL (repeatable) and/or --gpu SOURCE")
    gpu_url = args.sim_url or (targets[0].url if args.gpu == "sim" and targets else None)
    gpu = open_gpu_source(args.gpu, sim_url=gpu_url) if args.gpu else None
    with receiving(
        args, service_name="spark-otel-receiver", targets=targets, gpu=gpu, timeout_s=args.timeout
    ) as receiver:
        if args.once:
            results = receiver.scrape_once()
            if receiver.fatal is not None:  # logged as an error line where it happened
                return 1
            return _print_once(targets, results, receiver, args.json)
        return run_until_stopped(receiver, args.duration)


def _print_once(
    targets: list[EngineTarget],
    results: dict[str, EngineSnapshot | SparkOtelError],
    receiver: Receiver,
    as_json: bool,
) -> int:
    from .._exceptions import SparkOtelError
    from ..receivers.prometheus import EngineSnapshot
    from ._receiving import print_gpu_table

    failed = {name: str(value) for name, value in results.items() if isinstance(value, SparkOtelError)}
    snapshots = {name: value for name, value in results.items() if isinstance(value, EngineSnapshot)}
    if as_json:
        print_json(
            {
                "engines": {
                    t.name: snapshots[t.name].model_dump()
                    if t.name in snapshots
                    else {"error": failed[t.name]}
                    for t in targets
                },
                "gpu": [r.model_dump() for r in receiver.gpu_readings()],
                "errors": failed,
            }
        )
    else:
        rows = []
        for t in targets:
            snap = snapshots.get(t.name)
            if snap is None:
                rows.append([t.name, "-", t.url, "down", "", "", "", "", ""])
                continue
            rows.append(
                [
                    t.name,
                    snap.kind,
                    t.url,
                    "up",
                    fmt_number(snap.generation_tokens, 0),
                    fmt_number(snap.prompt_tokens, 0),
                    fmt_number(snap.requests_running, 0),
                    fmt_number(snap.requests_waiting, 0),
                    f"{snap.kv_cache_usage * 100:.1f}" if snap.kv_cache_usage is not None else "-",
                ]
            )
        if rows:
            print_table(
                "engines",
                [
                    "engine",
                    "kind",
                    "url",
                    "state",
                    "generation tok",
                    "prompt tok",
                    "requests running",
                    "requests waiting",
                    "KV cache %",
                ],
                rows,
            )
        readings = receiver.gpu_readings()
        if readings:
            print_gpu_table(readings)
    if failed:
        for name, message in failed.items():
            print(f"spark-otel: error: {name}: {message}", file=sys.stderr)
        return 1
    return 0
