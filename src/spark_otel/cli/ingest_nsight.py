"""Read Nsight Systems SQLite exports: every GPU metric's series, and a per-capture summary.

Give it the files `nsys export --type sqlite REPORT.nsys-rep` writes. For each capture it
prints the summary the article's Appendix B reports (mean, p50 and p95 per metric: GR Active,
SMs Active, SM Issue, Tensor Active, compute warps in flight, ...), stores that summary as an
"nsight_summary" document, and stores each metric's series at its original timestamps,
downsampled to --interval-ms means (100 ms by default) as spark_otel.nsight.metric samples.
With OTEL_EXPORTER_OTLP_ENDPOINT set (or --otlp), the series also go over OTLP with their
historical timestamps.

All three export layouts are read (GENERIC_EVENTS JSON up to 2023.3, GPU_METRICS without and
with rawTimestamp). It never runs nsys and needs no root. An export captured without GPU
metrics is reported as such; a file that is not an Nsight export gets a clear error; the
other files still load, and the exit code is non-zero if any failed. A row that does not fit
(a NULL or text where a number belongs, a time outside 2000-2100) is reported with its table
and row and left out; the capture's other rows still load.

  spark-otel ingest-nsight capture-0716.sqlite capture-0720.sqlite
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from .._clock import NS_PER_S
from ._common import add_store_argument, print_json, print_table
from ._console import status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "captures", nargs="+", metavar="CAPTURE.sqlite", help="nsys export --type sqlite files"
    )
    parser.add_argument(
        "--interval-ms",
        type=float,
        default=100.0,
        metavar="MS",
        help="downsampling interval for the stored series, milliseconds",
    )
    parser.add_argument(
        "--otlp", action="store_true", help="export the series over OTLP (default: when configured)"
    )
    parser.add_argument(
        "--no-store", action="store_true", help="only print (and export); keep nothing locally"
    )
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON")
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    from .. import _semconv as sc
    from .._exceptions import SparkOtelError
    from ..receivers.nsight import (
        MAX_INTERVAL_MS,
        metrics_data,
        read_capture,
        samples_for_store,
        store_source,
    )
    from ..telemetry import otlp_configured, otlp_metric_exporter
    from ._common import Bounds

    Bounds(above=0, at_most=MAX_INTERVAL_MS).check("--interval-ms", args.interval_ms)
    use_otlp = args.otlp or otlp_configured("metrics")
    store = None
    if not args.no_store:
        from ._common import open_store

        store = open_store(args, write=True)
    exporter = otlp_metric_exporter() if use_otlp else None
    summaries: list[dict[str, Any]] = []
    failed = 0
    try:
        for i, path in enumerate(args.captures, start=1):
            of = f"({i:,} of {len(args.captures):,} captures)"
            # One spinner per capture, gone before its table prints.
            with status(f"reading {path} {of}") as phase:
                try:
                    capture = read_capture(path, interval_ms=args.interval_ms)
                except SparkOtelError as exc:
                    failed += 1
                    print(f"spark-otel: error: {exc}", file=sys.stderr)
                    continue
                for line in capture.skipped:  # rows left out; the rest of the capture still loads
                    print(f"spark-otel: error: {line}", file=sys.stderr)
                failed += bool(capture.skipped)
                summary = capture.summary
                if store is not None:
                    phase.update(f"storing the series of {path} {of}")
                    # A sample's bucket starts less than an interval before it (the session start
                    # may even come after every sample): the window holds each stored point.
                    already = store.has_samples(
                        sc.NSIGHT_METRIC,
                        since_unix_ns=summary.start_unix_ns - int(args.interval_ms * 1e6),
                        until_unix_ns=summary.end_unix_ns + int(args.interval_ms * 1e6),
                        source=store_source(summary),
                    )
                    if not already:
                        store.write_samples(samples_for_store(capture))
                    store.put_document(
                        "nsight_summary", summary.capture, summary.model_dump(mode="json"), uid=summary.uid
                    )
                if exporter is not None:
                    from opentelemetry.sdk.metrics.export import MetricExportResult

                    phase.update(f"exporting the series of {path} over OTLP {of}")
                    if exporter.export(metrics_data(capture)) is not MetricExportResult.SUCCESS:
                        failed += 1
                        print(f"spark-otel: error: {path}: OTLP export of the series failed", file=sys.stderr)
            summaries.append(summary.model_dump(mode="json"))
            if not args.json:
                _print_summary(summary)
    finally:
        if exporter is not None:
            exporter.shutdown()
        if store is not None:
            store.close()
    if args.json:
        print_json(summaries)
    return 1 if failed else 0


def _print_summary(summary: Any) -> None:
    started = datetime.fromtimestamp(summary.start_unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    samples = max((m.samples for m in summary.metrics), default=0)
    rate = samples / summary.duration_s if summary.duration_s > 0 else 0.0
    gpus = sorted({f"{m.gpu_name or 'GPU'} ({m.gpu_id})" for m in summary.metrics})
    title = (
        f"{summary.capture}: {', '.join(gpus)}, {started}, {summary.duration_s:.1f} s, "
        f"{samples:,} samples per metric (~{rate:,.0f} Hz), Nsight {summary.product_version or '?'}"
    )

    def fmt(value: float) -> str:
        return f"{value:,.1f}"

    print_table(
        title,
        ["metric", "unit", "mean", "p50", "p95", "min", "max"],  # each row's unit is its own
        [
            [m.name if len({x.gpu_id for x in summary.metrics}) == 1 else f"{m.name} [{m.gpu_id}]", m.unit]
            + [fmt(v) for v in (m.mean, m.p50, m.p95, m.min, m.max)]
            for m in summary.metrics
        ],
    )
