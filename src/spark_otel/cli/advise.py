"""Recommend a worker count per cell class, and flag neighbours not to batch beside an eval.

Computes the article's queue-rules table from measurements instead of writing it by hand. The
rate curve per engine is the newest `spark-otel probe` run in the store, or, for an engine
never probed, the curve its recorded cells trace out. Cells are classed by their token counts
(long-context: prompt of 24K tokens or more; prompt-heavy: prompt 90% or more of the tokens;
generation-heavy: the rest), per engine and eval. For each measured stream count the advisor
predicts every historical cell's time under the per-cell --ceiling (prompt time slowed by
prefill contention, output tokens at the curve's per-stream rate), the fraction that would time
out and the wall-clock speedup over serial, and recommends the best speedup that adds no
timeouts. It caps each engine where its aggregate throughput peaks, flags loads on another
engine whose measured neighbour cost exceeds --threshold, and, when GPU utilization samples sit
pinned while token rates vary, adds the rule to read load from token counts.

Each rule is printed with the numbers behind it; --json prints the whole analysis.
--write-rules FILE also writes the enforceable rules (worker counts, lane caps, cross-engine
limits), each with its evidence, for the queue governor (spark_otel.govern, SPARK_OTEL_RULES;
see docs/governor.md); check a file with `spark-otel rules check FILE`. The rules take the
general forms, so they govern the next run of an eval whatever it is called: worker counts per
cell class, cross-engine limits while any ceiling-bound cell runs, and each eval family's
history, from which the governor knows a cell's class at admission. --by-eval writes rules that
name the measured evals instead (version 1's forms: they hold those runs only). The rules
are the ones `spark-otel report` shows for the same store, ceiling and threshold: both run the
same analysis (`spark_otel.analysis.overview`).
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from ..views.requests import requests_as_cells_line
from ..views.rules import advice_json, rules_table
from ..views.tables import model_time, seconds, time_scales
from ._common import (
    add_advisor_arguments,
    add_store_argument,
    open_store,
    print_hint,
    print_json,
    print_table,
)
from ._console import status

if TYPE_CHECKING:
    from ..analysis import AdvisorConfig
    from ..analysis.overview import Overview
    from ..report import ReportInputs

_logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    add_advisor_arguments(parser)
    parser.add_argument("--engine", metavar="E", help="only advise on this engine")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--write-rules",
        metavar="FILE",
        help="also write the enforceable rules as a governor rules file (TOML)",
    )
    parser.add_argument(
        "--by-eval",
        action="store_true",
        help="with --write-rules: rules that name the measured evals, instead of holding by cell class "
        "and for any ceiling-bound cell (the default, which carries to the next run)",
    )


def run(args: argparse.Namespace) -> int:
    from ..analysis import AdvisorConfig
    from ..analysis.advisor.predict import require_numpy
    from ..report import inputs_from_store

    require_numpy()  # before the store is read: the cells are read as its columns

    config = AdvisorConfig(ceiling_s=args.ceiling, threshold=args.threshold)
    if args.write_rules:
        from .._files import check_output

        check_output(args.write_rules, what="--write-rules")
    with open_store(args) as store, status(f"reading {store.path}") as phase:
        # --json shows no cell, so reads them as columns; the tables read each cell's time scale too.
        inputs = inputs_from_store(store, probe_tables=False, cells_as_columns=args.json)
        phase.update(f"computing the queue rules over {_n_cells(inputs):,} cells")
        found = _overview(args, inputs, config)
    advice = found.advice
    assert advice is not None  # there are cells
    if args.by_eval and not args.write_rules:
        from .._exceptions import ConfigError

        raise ConfigError(
            "--by-eval shapes the rules --write-rules writes: name the file with --write-rules FILE"
        )
    if args.write_rules:
        _write_rules(args.write_rules, found, inputs, by_eval=args.by_eval)
    if args.json:
        print_json(advice_json(advice))
        return 0
    scales = time_scales(inputs.cells)
    when, unit = model_time(scales), seconds(scales)
    print_table(
        f"queue rules under a {args.ceiling:,.0f} {unit} per-cell ceiling{when}",
        *rules_table(advice),
    )
    print_table(
        f"worker count per cell class (predicted){when}",
        [
            "engine",
            "eval",
            "class",
            "cells",
            "ceiling-bound",
            "workers",
            "timeouts % (serial)",
            "wall speedup",
            "prefill contention",
        ],
        [
            [
                a.engine,
                a.eval_name,
                a.cell_class.value,
                a.n_cells,
                "yes" if a.ceiling_bound else "no",
                a.recommended_workers,
                f"{a.timeout_fraction * 100:.0f} ({a.serial_timeout_fraction * 100:.0f})",
                f"{a.speedup:.1f}x",
                f"{a.prefill_contention:.2f}" + (" fitted" if a.prefill_contention_fitted else ""),
            ]
            for a in advice.classes
        ],
        notes={
            "ceiling-bound": "the class's p90 serial cell time reaches "
            f"{config.ceiling_bound_fraction:.0%} of the ceiling",
            "timeouts % (serial)": "share of the class's cells predicted to time out at that worker "
            "count (at one worker)",
            "wall speedup": "predicted wall time of one run over the class's cells: serial over at "
            "that worker count",
            "prefill contention": "prefill time grows by this share per further stream (fitted: from "
            f"the class's own cells; else {config.prefill_contention:g}, the article's)",
        },
    )
    line = requests_as_cells_line(advice.requests_as_cells, advice.n_cells)
    if line:
        print_hint(line)
    return 0


def _n_cells(inputs: ReportInputs) -> int:
    return len(inputs.cell_columns) if inputs.cell_columns is not None else len(inputs.cells)


def _overview(args: argparse.Namespace, inputs: ReportInputs, config: AdvisorConfig) -> Overview:
    from .._exceptions import InputError
    from ..analysis.concurrency import UNKNOWN_ENGINE
    from ..analysis.request_cells import REQUEST_SOURCE
    from ..report import overview_from_inputs
    from ..views.requests import no_cells

    if inputs.cell_columns is not None:
        engines_of, sources = inputs.cell_columns.engine, inputs.cell_columns.source
    else:
        engines_of, sources = [c.engine for c in inputs.cells], [c.source for c in inputs.cells]
    if not engines_of:
        raise InputError(no_cells(inputs.source, inputs.holdings))
    if args.engine is not None and args.engine not in engines_of:
        engines = sorted({e or UNKNOWN_ENGINE for e in engines_of})
        raise InputError(
            no_cells(
                inputs.source,
                inputs.holdings,
                scope=f" on engine {args.engine!r} (engines: {', '.join(engines)})",
                stand_ins=sources.count(REQUEST_SOURCE),
            )
        )
    found = overview_from_inputs(
        inputs, config=config, engine=args.engine, with_concurrency=False, with_cells=False
    )
    for note in found.notes:
        _logger.info("advise: %s", note)
    return found


def _write_rules(path: str, found: Overview, inputs: ReportInputs, *, by_eval: bool) -> None:
    import sys
    from pathlib import Path

    from .._exceptions import InputError
    from .._files import disk_full, write_output
    from ..views.rules_file import dump_rules, rules_from_advice

    assert found.advice is not None
    rules = rules_from_advice(
        found.advice, found.curves, engine_urls=inputs.engine_urls, source=inputs.source, by_eval=by_eval
    )
    target = Path(path)
    try:
        write_output(target, dump_rules(rules))
    except OSError as exc:
        if disk_full(exc):
            raise
        raise InputError(f"--write-rules {target}: cannot write: {exc.strerror or exc}") from exc
    print(
        f"wrote {target}: {len(rules.rules)} rules ({len(rules.lane)} lane, {len(rules.limit)} limit, "
        f"{len(rules.cross_engine)} cross-engine; {rules.form}), {len(rules.unmeasured)} not covered yet",
        file=sys.stderr,
    )
