"""Turn existing eval records (JSON, JSON Lines, CSV) into cells with their historical times.

A field mapping says where each cell field lives in a record: --mapping spark-bench (the
article's per-cell records), generic-csv (plain columns), openai-usage (logs keeping the
OpenAI response body), or a JSON file of your own (see docs/receivers.md). Tokens come from
e.g. usage.completion_tokens, elapsed from elapsed_s; the start from a field, or from the
record file's mtime minus elapsed (the article's Appendix D; only for a file holding one
record). Timeouts are kept as timeouts: listed, never averaged into a rate, even when they
kept partial tokens; failed cells are not rated either. The summary's median is over the
other cells' tok/s.

Cells go to the embedded store (or --store PATH), and with --otlp also over OTLP as cell
spans carrying their historical start and end times. Re-running on the same files replaces
their cells instead of duplicating them. A record that does not fit is reported with its
file and line, the rest still load, and the exit code is non-zero.

  spark-otel backfill runs/2026-09-17/*.json --mapping spark-bench --eval golden-review --engine qwen
"""

from __future__ import annotations

import argparse
import sys

from ._common import add_store_argument, print_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "records", nargs="+", metavar="RECORDS", help="JSON, JSON Lines (.jsonl) or CSV files"
    )
    parser.add_argument(
        "--mapping", required=True, metavar="NAME|FILE.json", help="built-in mapping or a JSON file"
    )
    parser.add_argument(
        "--eval", dest="eval_name", metavar="NAME", help="eval name (when records do not carry one)"
    )
    parser.add_argument("--engine", metavar="E", help="engine name (when records do not carry one)")
    parser.add_argument("--otlp", action="store_true", help="also export the cells as spans over OTLP")
    parser.add_argument(
        "--no-store", action="store_true", help="do not write the embedded store (with --otlp)"
    )
    parser.add_argument("--dry-run", action="store_true", help="check and summarise; write nothing")
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    from .._exceptions import ConfigError
    from ..analysis.rates import ceiling_hit, rated_decode_rate
    from ..analysis.stats import summarize
    from ..receivers.backfill import backfill_files, load_mapping

    if args.no_store and not args.otlp and not args.dry_run:
        raise ConfigError("--no-store without --otlp would keep nothing; add --otlp or --dry-run")
    mapping = load_mapping(args.mapping)
    result = backfill_files(args.records, mapping, eval_name=args.eval_name, engine=args.engine)
    for error in result.errors:
        print(f"spark-otel: error: {error}", file=sys.stderr)
    cells = result.cells
    if cells and not args.dry_run:
        if not args.no_store:
            from ._common import open_store

            with open_store(args, write=True) as store:
                store.write_cells(cells)
        if args.otlp:
            _export_otlp(cells)
    # Cut-off and failed cells are listed but never rated (the analyses' shared predicate).
    timeouts = sum(1 for c in cells if ceiling_hit(c))
    rates = summarize(rated_decode_rate(c) for c in cells)
    print_table(
        f"backfill with mapping {mapping.name}" + (" (dry run)" if args.dry_run else ""),
        ["records", "cells", "rejected", "timeouts", "with a rate", "median tok/s"],
        [
            [
                result.records,
                len(cells),
                len(result.errors),
                timeouts,
                rates.n,
                f"{rates.median:.2f}" if rates.median is not None else "-",
            ]
        ],
    )
    return 1 if result.errors else 0


def _export_otlp(cells: list) -> None:
    import os

    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ..receivers.backfill import FixedIdGenerator, export_cells_as_spans
    from ..telemetry import otlp_span_exporter

    span_exporter = otlp_span_exporter()
    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "spark-otel-backfill"})
    provider = TracerProvider(resource=resource, id_generator=FixedIdGenerator(), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(span_exporter, max_queue_size=max(2048, len(cells))))
    try:
        export_cells_as_spans(cells, provider)
    finally:
        provider.shutdown()
