"""Write a self-contained HTML report: concurrency curves, neighbour cost, deadline outcomes and
the advisor's queue rules, with every plot embedded (and also written as PNG files).

The page says what the adaptive governor decided for the cells (what it admitted at once, what
it held, for how long and why), and, where it decided any, so does a line printed after the page.

Reads the embedded store (default), an OTLP JSON trace export written by the collector's file
exporter (--otlp-json), or eval records backfilled on the fly (--records with --mapping, into a
temporary store that is thrown away). --eval narrows the report to one eval. The queue rules
are those `spark-otel advise` gives for the same records, --ceiling and --threshold.

    spark-otel report --out report/
    spark-otel report --otlp-json /var/lib/otelcol/traces.jsonl --eval golden-review
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .._exceptions import ConfigError, InputError
from ._common import add_advisor_arguments, add_store_argument
from ._console import status

if TYPE_CHECKING:
    from ..report import ReportInputs

_SHOWN_ERRORS = 5
_logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--otlp-json", nargs="+", metavar="FILE", help="OTLP JSON trace export(s) to read")
    parser.add_argument("--records", nargs="+", metavar="FILE", help="eval records to backfill and report")
    parser.add_argument(
        "--mapping", metavar="M", help="backfill mapping for --records (see spark-otel backfill)"
    )
    parser.add_argument("--engine", help="engine of --records that do not name one")
    parser.add_argument(
        "--eval", dest="eval_name", help="report on this eval only (and name --records' eval)"
    )
    add_advisor_arguments(parser)
    parser.add_argument(
        "--out", default="spark-otel-report", metavar="DIR", help="output directory (report.html and PNGs)"
    )


def _backfilled(args: argparse.Namespace, tmp: Path) -> ReportInputs:
    """Backfill ``--records`` into a temporary store and read it back, as any store is read."""
    from ..receivers.backfill import backfill_files, error_lines, load_mapping
    from ..report import inputs_from_store
    from ..store import Store

    if not args.mapping:
        raise ConfigError("--records needs --mapping (the record layout; see spark-otel backfill --help)")
    result = backfill_files(
        args.records, load_mapping(args.mapping), eval_name=args.eval_name, engine=args.engine
    )
    for line in error_lines(
        result.errors, most=_SHOWN_ERRORS, listed_by="spark-otel backfill --dry-run --json on these files"
    ):
        _logger.warning("skipped %s", line)
    for warning in result.warnings:
        _logger.warning("%s", warning)
    if not result.cells:
        first = f": {result.errors[0]}" if result.errors else ""
        raise InputError(f"{', '.join(args.records)}: no record could be read as a cell{first}")
    with Store(tmp / "backfill.sqlite") as store:
        store.write_cells(result.cells)
        return inputs_from_store(store, source=", ".join(args.records))


def run(args: argparse.Namespace) -> int:
    from .._files import check_output_dir
    from ..analysis.advisor import AdvisorConfig
    from ..report import build_report, inputs_from_otlp_json, inputs_from_store, write_report
    from ..views.requests import requests_as_cells_line
    from ._common import check_advisor_arguments, open_store, print_hint

    check_advisor_arguments(args)
    check_output_dir(args.out, what="--out")  # before minutes of reading and analyses
    config = AdvisorConfig(ceiling_s=args.ceiling, threshold=args.threshold)
    chosen = sum(bool(x) for x in (args.store, args.otlp_json, args.records))
    if chosen > 1:
        raise ConfigError("choose one input: --store, --otlp-json or --records")
    with status("reading the records") as phase:
        with tempfile.TemporaryDirectory(prefix="spark-otel-report-") as tmp:
            if args.otlp_json:
                phase.update(f"reading {', '.join(args.otlp_json)}")
                inputs = inputs_from_otlp_json(args.otlp_json)
            elif args.records:
                phase.update(f"backfilling {', '.join(args.records)}")
                inputs = _backfilled(args, Path(tmp))
            else:
                if args.store and not Path(args.store).expanduser().exists():
                    raise InputError(f"{args.store}: no such store file")
                with open_store(args) as store:
                    phase.update(f"reading {store.path}")
                    inputs = inputs_from_store(store)
        phase.update(f"computing the analyses over {len(inputs.cells):,} cells")
        content = build_report(inputs, eval_name=args.eval_name, config=config)
        del inputs  # the records, let go before the plots: their memory serves the drawing
        phase.update(f"drawing the plots and writing {args.out}")
        page = write_report(content, args.out)
    print(f"wrote {page}")
    line = requests_as_cells_line(content.requests_as_cells, content.n_cells)
    if line:
        print_hint(line)
    if content.decisions is not None and content.decisions.any:
        from ..views.adaptive_decisions import summary_line
        from ..views.tables import seconds

        print_hint(summary_line(content.decisions, seconds(content.scales)))
    return 0
