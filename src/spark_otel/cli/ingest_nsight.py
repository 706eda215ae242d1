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
from typing import TYPE_CHECKING, Any

from .._clock import NS_PER_S
from ._common import add_store_argument, print_json, print_table
from ._console import status

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter

    from ..receivers.nsight import NsightCapture
    from ..store import Store


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
    from ..receivers.nsight import MAX_INTERVAL_MS
    from ..telemetry import otlp_configured, otlp_metric_exporter
    from ._common import Bounds

    Bounds(above=0, at_most=MAX_INTERVAL_MS).check("--interval-ms", args.interval_ms)
    use_otlp = args.otlp or otlp_configured("metrics")
    # A path that is not a regular file is named now, and when none is, the store is not even opened.
    unreadable = _not_files(args.captures)
    if len(unreadable) == len(args.captures):
        return 1
    store = None
    if not args.no_store:
        from ._common import open_store

        store = open_store(args, write=True)
    exporter = otlp_metric_exporter() if use_otlp else None
    summaries: list[dict[str, Any]] = []
    failed = len(unreadable)
    try:
        for i, path in enumerate(args.captures, start=1):
            if path in unreadable:
                continue
            of = f"({i:,} of {len(args.captures):,} captures)"
            # One spinner per capture, gone before its table prints.
            with status(f"reading {path} {of}") as phase:
                capture = _read_capture(path, args.interval_ms)
                if capture is None:
                    failed += 1
                    continue
                failed += bool(capture.skipped)
                if store is not None:
                    phase.update(f"storing the series of {path} {of}")
                    _store_capture(store, capture, args.interval_ms)
                if exporter is not None:
                    phase.update(f"exporting the series of {path} over OTLP {of}")
                    failed += not _export_capture(exporter, capture, path)
            summaries.append(capture.summary.model_dump(mode="json"))
            if not args.json:
                _print_summary(capture.summary)
    finally:
        if exporter is not None:
            exporter.shutdown()
        if store is not None:
            store.close()
    if args.json:
        print_json(summaries)
    return 1 if failed else 0


def _not_files(paths: list[str]) -> set[str]:
    """The paths that are not regular files, each reported in one line."""
    from .._exceptions import InputError
    from .._files import check_regular

    found = set()
    for path in paths:
        try:
            check_regular(path, what="Nsight export")
        except InputError as exc:
            print(f"spark-otel: error: {exc}", file=sys.stderr)
            found.add(path)
    return found


def _read_capture(path: str, interval_ms: float) -> NsightCapture | None:
    """The capture, its rows left out reported (the rest of it still loads); None, reported, for a
    file that cannot be read, so the other captures still load."""
    from .._exceptions import SparkOtelError
    from ..receivers.nsight import read_capture

    try:
        capture = read_capture(path, interval_ms=interval_ms)
    except SparkOtelError as exc:
        print(f"spark-otel: error: {exc}", file=sys.stderr)
        return None
    for line in capture.skipped:
        print(f"spark-otel: error: {line}", file=sys.stderr)
    return capture


def _store_capture(store: Store, capture: NsightCapture, interval_ms: float) -> None:
    """The series (unless an earlier ingest of this capture stored them) and the summary document:
    ingesting a capture again adds nothing twice."""
    from .. import _semconv as sc
    from ..receivers.nsight import samples_for_store, store_source

    summary = capture.summary
    # A sample's bucket starts less than an interval before it (the session start may even come
    # after every sample): the window holds each stored point.
    already = store.has_samples(
        sc.NSIGHT_METRIC,
        since_unix_ns=summary.start_unix_ns - int(interval_ms * 1e6),
        until_unix_ns=summary.end_unix_ns + int(interval_ms * 1e6),
        source=store_source(summary),
    )
    if not already:
        store.write_samples(samples_for_store(capture))
    store.put_document("nsight_summary", summary.capture, summary.model_dump(mode="json"), uid=summary.uid)


def _export_capture(exporter: MetricExporter, capture: NsightCapture, path: str) -> bool:
    """The series over OTLP at their historical times; False, reported, when the export fails."""
    from opentelemetry.sdk.metrics.export import MetricExportResult

    from ..receivers.nsight import metrics_data

    if exporter.export(metrics_data(capture)) is MetricExportResult.SUCCESS:
        return True
    print(f"spark-otel: error: {path}: OTLP export of the series failed", file=sys.stderr)
    return False


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
