"""Turn existing eval records (JSON, JSON Lines, CSV, Inspect AI logs) into cells with their historical times.

A field mapping says where each cell field lives in a record: --mapping spark-bench (the
article's per-cell records), generic-csv (plain columns), openai-usage (logs keeping the
OpenAI response body), or a JSON file of your own (see docs/receivers.md). --mapping inspect
reads Inspect AI's logs (.eval and .json; needs spark-otel[inspect]): one cell per sample and
epoch, named after the task, with the sample's tokens, times and limit. Tokens come from
e.g. usage.completion_tokens, elapsed from elapsed_s; the start from a field, or from the
record file's mtime minus elapsed (the article's Appendix D; only for a file holding one
record). Timeouts are kept as timeouts: listed, never averaged into a rate, even when they
kept partial tokens; failed cells are not rated either. The summary's median is over the
other cells' tok/s.

Cells go to the embedded store (or --store PATH), and with --otlp also over OTLP as cell
spans carrying their historical start and end times; a collector that does not take them is an
error (exit 1) saying where the cells are kept. Re-running on the same files replaces their cells
instead of duplicating them, and the log of an Inspect run the live hook recorded replaces the
hook's cells (same uids, requests still linked) with the log's figures. A record that does not
fit is reported with its file and line, the rest still load, and the exit code is non-zero.
--json prints the cells
(written, or with --dry-run that would be), the rejected records and the counts. Only regular
files of at most 512 MiB are read; a FIFO, a device or a directory is refused by name.

  spark-otel backfill runs/2026-09-17/*.json --mapping spark-bench --eval golden-review --engine qwen
  spark-otel backfill logs/*.eval --mapping inspect --engine qwen
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..views.tables import model_time, time_scales
from ._common import add_store_argument, print_hint, print_json, print_table
from ._console import status

if TYPE_CHECKING:
    from ..analysis.stats import RateSummary
    from ..model import Cell
    from ..records.cell_batch import CellBatch
    from ..store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "records",
        nargs="+",
        metavar="RECORDS",
        help="JSON, JSON Lines (.jsonl) or CSV files; Inspect AI logs (.eval, .json) with --mapping inspect",
    )
    parser.add_argument(
        "--mapping",
        required=True,
        metavar="NAME|FILE.json",
        help="built-in mapping (spark-bench, generic-csv, openai-usage, inspect) or a JSON file",
    )
    parser.add_argument(
        "--eval",
        dest="eval_name",
        metavar="NAME",
        help="eval name (when records do not carry one; for Inspect logs, instead of the task's name)",
    )
    parser.add_argument(
        "--engine",
        metavar="E",
        help="engine name (when records do not carry one; for Inspect logs, instead of the model's name)",
    )
    parser.add_argument("--otlp", action="store_true", help="also export the cells as spans over OTLP")
    parser.add_argument(
        "--no-store", action="store_true", help="do not write the embedded store (with --otlp)"
    )
    parser.add_argument("--dry-run", action="store_true", help="check and summarise; write nothing")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the cells written (or, with --dry-run, that would be), the errors and the counts as JSON",
    )
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    from .._exceptions import ConfigError
    from ..receivers.backfill import BackfillResult, backfill_files, error_lines, load_mapping
    from ..records.cell_batch import CellBatch

    if args.no_store and not args.otlp and not args.dry_run:
        raise ConfigError("--no-store without --otlp would keep nothing; add --otlp or --dry-run")
    mapping = load_mapping(args.mapping)
    result = BackfillResult()
    batches = []
    store_path = None
    unsent = 0
    with status("reading records") as phase:
        for i, path in enumerate(args.records, start=1):
            phase.update(f"reading {path} ({i:,} of {len(args.records):,} files)")
            one = backfill_files([path], mapping, eval_name=args.eval_name, engine=args.engine)
            batches.append(one.batch)
            result.errors += one.errors
            result.records += one.records
            result.warnings += one.warnings
        cells = CellBatch.joined(batches)
        adoption = _Adopted(cells)
        if cells and not args.no_store:
            if args.dry_run:
                adoption = _adopted_in_existing_store(args, cells)
            else:
                from ._common import open_store

                with open_store(args, write=True) as store:
                    adoption = _adopted(cells, store, args)
                    phase.update(f"writing {len(adoption.cells):,} cells to {store.path}")
                    store.write_cell_batch(adoption.cells, replacing=adoption.superseded)
                    store_path = str(store.path)
            cells = adoption.cells
        if cells and args.otlp and not args.dry_run:
            phase.update(f"exporting {len(cells):,} cells over OTLP")
            unsent = _export_otlp(cells.cells())
    for line in error_lines(result.errors):  # a repeated error once, with a count of the rest
        print(f"spark-otel: error: {line}", file=sys.stderr)
    for warning in result.warnings:
        print(f"spark-otel: warning: {warning}", file=sys.stderr)
    if unsent:
        kept = f"they are in the store {store_path}" if store_path else "nothing was stored (--no-store)"
        print(
            f"spark-otel: error: {_collector()} did not take {unsent:,} of {len(cells):,} cells over OTLP; "
            f"{kept}: send them again once it is up",
            file=sys.stderr,
        )
    timeouts, rates = _summary(cells)
    if args.json:
        print_json(
            {
                "mapping": mapping.name,
                "dry_run": args.dry_run,
                "store": store_path,
                "otlp": bool(args.otlp and cells and not args.dry_run and not unsent),
                "counts": {
                    "records": result.records,
                    "cells": len(cells),
                    "rejected": len(result.errors),
                    "timeouts": timeouts,
                    "rated": rates.n,
                    "median_tok_s": rates.median,
                    "replaced_live": adoption.replaced_live,
                    "kept_live": adoption.kept_live,
                },
                "cells": _cells_json(cells),
                "errors": [{"file": e.file, "line": e.line, "message": e.message} for e in result.errors],
                "warnings": result.warnings,
            },
            plain=True,
        )
        return 1 if result.errors or unsent else 0
    scales = time_scales(SimpleNamespace(attributes=a) for a in cells.distinct("attributes"))
    print_table(
        f"backfill with mapping {mapping.name}" + (" (dry run)" if args.dry_run else "") + model_time(scales),
        ["records", "cells", "rejected", "timeouts", "cells with a rate", "median tok/s"],
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
    if adoption.replaced_live or adoption.kept_live:
        print_hint(_live_note(adoption, dry_run=args.dry_run))
    return 1 if result.errors or unsent else 0


def _summary(cells: CellBatch) -> tuple[int, RateSummary]:
    """The timeouts among ``cells``, and their rated decode rates summarised: cut-off and failed
    cells are listed but never rated (`analysis.rates`' predicates, over the batch's columns)."""
    from ..analysis.stats import summarize
    from ..model import CellStatus

    statuses = cells.column("status")
    unrated = (CellStatus.DEADLINE, CellStatus.ERROR)
    rates = summarize(
        None if status in unrated else rate
        for status, rate in zip(statuses, cells.decode_rates(), strict=True)
    )
    return statuses.count(CellStatus.DEADLINE), rates


_COMPUTED = ("deadline_hit", "degraded", "elapsed_s", "decode_rate")
"""What each cell's JSON adds to its fields, in this order: `Cell`'s computed fields, then its
elapsed time and decode rate."""


def _cells_json(cells: CellBatch) -> list[dict[str, Any]]:
    """Each cell as `Cell.model_dump(mode="json")` writes it, with its elapsed time and decode rate."""
    from pydantic import TypeAdapter

    from ..model import AttributeValue, CellStatus
    from ..records.cell_batch import FIELDS

    if not cells:
        return []
    dump = TypeAdapter(dict[str, AttributeValue]).dump_python
    as_json = {id(a): dump(a, mode="json") for a in cells.distinct("attributes")}
    statuses = cells.column("status")
    columns = {name: cells.column(name) for name in FIELDS}
    columns["status"] = [s.value for s in statuses]
    columns["attributes"] = [as_json[id(a)] for a in cells.column("attributes")]
    deadline_hit = [s is CellStatus.DEADLINE for s in statuses]
    degraded = [
        hit and found > 0 for hit, found in zip(deadline_hit, cells.column("salvaged_findings"), strict=True)
    ]
    keys = (*FIELDS, *_COMPUTED)
    values = zip(
        *columns.values(), deadline_hit, degraded, cells.elapsed_s(), cells.decode_rates(), strict=True
    )
    return [dict(zip(keys, row, strict=True)) for row in values]


@dataclass
class _Adopted:
    """`LiveAdoption` of a batch: the cells to write, and what the live cells changed."""

    cells: CellBatch
    replaced_live: int = 0
    kept_live: int = 0
    superseded: list[str] = field(default_factory=list)


def _adopted(cells: CellBatch, store: Store, args: argparse.Namespace) -> _Adopted:
    """``cells`` with the Inspect samples ``store`` holds live given the stored cells' uids
    (`adopt_live_cells`); a batch holding no Inspect sample as it is."""
    from .. import _semconv as sc
    from ..receivers.backfill import adopt_live_cells
    from ..records.cell_batch import CellBatch

    if not any(sc.INSPECT_SAMPLE_UUID in a for a in cells.distinct("attributes")):
        return _Adopted(cells)
    adoption = adopt_live_cells(cells.cells(), store, **_named(args))
    return _Adopted(
        CellBatch.from_cells(adoption.cells),
        adoption.replaced_live,
        adoption.kept_live,
        adoption.superseded,
    )


def _live_note(adoption: _Adopted, *, dry_run: bool) -> str:
    notes = []
    if adoption.replaced_live:
        verb = "would replace" if dry_run else "replaced"
        notes.append(
            f"{adoption.replaced_live:,} cells {verb} the live Inspect hook's for the same samples "
            "(same uid, its requests still linked)"
        )
    if adoption.kept_live:
        notes.append(
            f"{adoption.kept_live:,} samples recorded live on a model clock were kept as recorded, "
            "not replaced by the log's real times"
        )
    return "; ".join(notes) + "."


def _adopted_in_existing_store(args: argparse.Namespace, cells: CellBatch) -> _Adopted:
    """What a write would replace, read from the store if it exists (a dry run creates none)."""
    from ..store import Store, default_store_path

    path = Path(args.store).expanduser() if args.store else default_store_path()
    if not path.is_file():
        return _Adopted(cells)
    with Store(path, read_only=True) as store:
        return _adopted(cells, store, args)


def _named(args: argparse.Namespace) -> dict[str, bool]:
    """Whether the user named the eval and the engine: their names win over a live cell's."""
    return {"eval_named": bool(args.eval_name), "engine_named": bool(args.engine)}


def _collector() -> str:
    """The collector the spans went to, as the environment names it."""
    import os

    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if os.environ.get(name):
            return f"the collector at {os.environ[name]}"
    return "the collector (the default endpoint, localhost)"


def _export_otlp(cells: list[Cell]) -> int:
    """Send ``cells`` as spans; how many the collector did not take (down, or refusing them)."""
    import os

    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ..receivers.backfill import FixedIdGenerator, UnsentCounter, export_cells_as_spans
    from ..telemetry import otlp_span_exporter

    span_exporter = UnsentCounter(otlp_span_exporter())
    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "spark-otel-backfill"})
    provider = TracerProvider(resource=resource, id_generator=FixedIdGenerator(), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(span_exporter, max_queue_size=max(2048, len(cells))))
    try:
        export_cells_as_spans(cells, provider)
    finally:
        provider.shutdown()
    return span_exporter.unsent
