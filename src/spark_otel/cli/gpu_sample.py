"""Sample the GPU's utilization, power, energy counter, clocks and memory as OpenTelemetry metrics.

Sources: NVML through nvidia-ml-py (power in W from mW, energy in J from NVML's mJ counter,
memory in bytes), or, where NVML is missing, nvidia-smi --query-gpu CSV; --source sim reads
a simulated engine's /sim/gpu readout so the demo's dashboards show the gauge beside the
token rate. --source auto (the default) tries NVML, then nvidia-smi.

Keep in mind what these gauges are: utilization.gpu is the fraction of sample periods in
which any kernel was resident, so it pins near 96% under any decode load whether the chip is
straining or waiting on memory. Read load from token counts (spark-otel receive), and SM
activity from Nsight captures (spark-otel ingest-nsight).

Samples go to the embedded store (or --store PATH) and, with OTEL_EXPORTER_OTLP_ENDPOINT
set, over OTLP as spark_otel.gpu.* metrics (the store is then kept only with --store or
SPARK_OTEL_STORE). --once takes one reading, stores and exports it the same way, prints it
as a table, and exits.

  spark-otel gpu-sample --interval 1
  spark-otel gpu-sample --source sim --sim-url http://127.0.0.1:8011 --once
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from ._common import add_store_argument, print_json, print_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between samples (1)"
    )
    parser.add_argument(
        "--source",
        choices=["auto", "nvml", "smi", "sim"],
        default="auto",
        help="where to read the GPU (auto)",
    )
    parser.add_argument("--sim-url", metavar="URL", help="with --source sim: a simulated engine's base URL")
    parser.add_argument("--once", action="store_true", help="read once, store it, print a table, and exit")
    parser.add_argument("--json", action="store_true", help="with --once: print JSON instead of a table")
    parser.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    from .._exceptions import ConfigError
    from ..receivers.gpu import open_gpu_source
    from ..receivers.receiver import Receiver
    from ..telemetry import configure

    if args.interval <= 0:
        raise ConfigError(f"--interval must be positive, got {args.interval}")
    source = open_gpu_source(args.source, sim_url=args.sim_url)
    store_choice: Any = args.store if args.store else None
    try:
        telemetry = configure(
            service_name=os.environ.get("OTEL_SERVICE_NAME") or "spark-otel-gpu-sample",
            store=store_choice,
            metric_export_interval_ms=max(1000, int(args.interval * 1000)),
            set_global=False,
        )
    except BaseException:
        source.close()
        raise
    receiver = Receiver(
        [],
        interval_s=args.interval,
        meter_provider=telemetry.meter_provider,
        store=telemetry.store,
        gpu=source,
        close_gpu=True,
    )
    try:
        if args.once:
            # One reading, stored and exported exactly as a sampling loop's would be.
            failure = receiver.scrape_once().get("gpu")
            if isinstance(failure, Exception):
                raise failure
            _print_readings(receiver.gpu_readings(), args.json)
            return 0
        print(
            f"spark-otel: sampling the GPU via {source.kind} every {args.interval:g} s; Ctrl-C stops",
            file=sys.stderr,
        )
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            receiver.start()
            stop.wait(args.duration)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
        return 0
    finally:
        receiver.stop()
        telemetry.shutdown()


def _print_readings(readings: list, as_json: bool) -> None:
    if as_json:
        print_json([r.model_dump() for r in readings])
        return

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    print_table(
        "GPU (utilization is the resident-kernel flag, not load)",
        [
            "gpu",
            "name",
            "util",
            "power W",
            "energy J",
            "SM MHz",
            "mem MHz",
            "memory used MiB",
            "memory total MiB",
        ],
        [
            [
                r.gpu_id,
                r.name,
                num(r.utilization, ".0%"),
                num(r.power_w, ".1f"),
                num(r.energy_j, ",.1f"),
                num(r.sm_clock_mhz, ".0f"),
                num(r.memory_clock_mhz, ".0f"),
                num(r.memory_used_bytes / 2**20 if r.memory_used_bytes is not None else None, ",.0f"),
                num(r.memory_total_bytes / 2**20 if r.memory_total_bytes is not None else None, ",.0f"),
            ]
            for r in readings
        ],
    )
