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

Where NVML exposes GPU performance monitoring (Hopper-class parts), the samples also carry SM
occupancy, DRAM bandwidth utilization and tensor activity, each over the time since the previous
sample (so --once, one reading, has none). A part without them is said once ("unsupported: GPU
0 GPM: ..."), and they are left out, never recorded as 0.

  spark-otel gpu-sample --interval 1
  spark-otel gpu-sample --source sim --sim-url http://127.0.0.1:8011 --once
"""

from __future__ import annotations

import argparse
import sys

from ._common import add_store_argument, print_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between samples")
    parser.add_argument(
        "--source",
        choices=["auto", "nvml", "smi", "sim"],
        default="auto",
        help="where to read the GPU",
    )
    parser.add_argument("--sim-url", metavar="URL", help="with --source sim: a simulated engine's base URL")
    parser.add_argument("--once", action="store_true", help="read once, store it, print a table, and exit")
    parser.add_argument("--json", action="store_true", help="with --once: print JSON instead of a table")
    parser.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    from ..receivers.gpu import open_gpu_source
    from ._common import DURATION_S, INTERVAL_S
    from ._receiving import print_gpu_table, receiving, run_until_stopped

    INTERVAL_S.check("--interval", args.interval)
    DURATION_S.check("--duration", args.duration)
    source = open_gpu_source(args.source, sim_url=args.sim_url)
    unsupported = getattr(source, "unsupported", {})
    with receiving(args, service_name="spark-otel-gpu-sample", gpu=source) as receiver:
        if args.once:
            # One reading, stored and exported exactly as a sampling loop's would be.
            failure = receiver.scrape_once().get("gpu")
            if isinstance(failure, Exception):
                raise failure
            if receiver.fatal is not None:  # logged as an error line where it happened
                return 1
            if args.json:
                print_json([r.model_dump() for r in receiver.gpu_readings()])
            else:
                print_gpu_table(receiver.gpu_readings())
                for what, why in unsupported.items():
                    print(f"unsupported: {what}: {why}")
            return 0
        print(
            f"spark-otel: sampling the GPU via {source.kind} every {args.interval:g} s; Ctrl-C stops",
            file=sys.stderr,
        )
        for what, why in unsupported.items():
            print(f"spark-otel: unsupported: {what}: {why}; left out, never recorded as 0", file=sys.stderr)
        return run_until_stopped(receiver, args.duration)
