"""Which gauges measure load: every recorded gauge against the measured token throughput.

The article's Appendix F from the store: GPU utilization, power, clocks and memory (NVML,
nvidia-smi or the simulated box), NVML's GPM counters where the part has them (SM occupancy,
DRAM bandwidth, tensor activity), Nsight captures' SM Issue, SMs Active, GR Active and Tensor
Active, the engines' running requests, KV-cache usage and generation counters, and the cells'
own decode rates, each paired with the token throughput over the same intervals. Intervals
(--intervals): probe levels (the probe's own aggregate tok/s), receiver bins (--bin seconds of
the engines' generation-counter scrapes, summed over engines) or eval runs (the cells' tokens
per second); auto takes the first the store holds, in that order. Engine gauges are paired with
their own engine's throughput.

Each gauge gets its range over the load range, its elasticity (least-squares slope of gauge on
throughput, times mean throughput over mean gauge: 1 moves in proportion, 0 not at all), its
rank correlation with throughput, its samples reading zero or one constant value, and a verdict
in the article's words: tracks load (rank correlation >= 0.8 and elasticity >= 0.5), not load
(pinned within 5%, flat or out of step), unsupported (no readings, or only zeros), saturates
(tracks up to a knee, then flat), or not enough load range (fewer than 3 intervals, or
throughput moving less than 2x: the probe that would measure it is named). A "why" line under
the table gives each verdict's evidence; --readings lists every gauge's value per interval;
--json prints the whole analysis. Read-only: the store is never changed.

  spark-otel receive --engine qwen=http://127.0.0.1:8011 --gpu auto --interval 1 &   # beside the load
  spark-otel probe --engine qwen=http://127.0.0.1:8011 --streams 1,2,4,8,16
  spark-otel instruments
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..report.inputs import DEFAULT_BIN_S, read_inputs, verdicts_of
from ._common import add_store_argument, open_store, print_hint, print_json, print_table
from ._console import status

if TYPE_CHECKING:
    from ..analysis.gauges import InstrumentsReport

SOURCES = ("auto", "probe", "receiver", "evals")
_MEASURE = "spark-otel probe --engine NAME=URL --streams 1,2,4,8,16"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument(
        "--intervals",
        choices=SOURCES,
        default="auto",
        help="what to pair the gauges with: probe levels, receiver bins of engine scrapes, eval runs",
    )
    parser.add_argument(
        "--bin",
        dest="bin_s",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"receiver intervals: seconds of engine scrapes in each (default: {DEFAULT_BIN_S:g}, widened "
        "where the scrapes span more bins than the cap; a given bin that makes more is refused)",
    )
    parser.add_argument("--readings", action="store_true", help="also list every gauge's value per interval")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def print_verdicts(report: InstrumentsReport, *, title: str | None = None) -> None:
    """The verdict table, each verdict's evidence and the notes (the demo prints it too)."""
    from ..views.gauges import evidence, verdict_notes, verdict_table, verdict_title
    from ..views.tables import model_time

    when = model_time(i.time_scale for i in report.intervals)
    columns, rows = verdict_table(report)
    print_table(
        (title + ": " if title else "") + verdict_title(report, when),
        columns,
        rows,
        notes=verdict_notes(report.thresholds),
    )
    print("why:")
    for v in report.instruments:
        print_hint(f"{v.instrument}: {v.verdict}: {evidence(v, report)}", indent="  ")
    for note in report.notes:
        print_hint(f"note: {note}")


def _print_readings(report: InstrumentsReport) -> None:
    from ..views.gauges import readings_table

    print_table("each gauge per interval", *readings_table(report))


def run(args: argparse.Namespace) -> int:
    from .._exceptions import ConfigError, InputError
    from ._common import Bounds

    Bounds(above=0, at_most=86_400).check("--bin", args.bin_s)
    with status("reading the load intervals and gauges") as phase:
        with open_store(args) as store:
            phase.update(f"reading the load intervals and gauges from {store.path}")
            try:
                inputs = read_inputs(store, source=args.intervals, bin_s=args.bin_s)
            except ConfigError as exc:
                raise ConfigError(f"--bin {args.bin_s:g}: {exc}") from None
            path = store.path
        if inputs.intervals:
            phase.update(f"grading the gauges over {len(inputs.intervals):,} {inputs.source} intervals")
            report = verdicts_of(inputs)
    if not inputs.intervals:
        what = (
            "probe levels, engine counter scrapes or eval cells"
            if args.intervals == "auto"
            else {"probe": "probe levels", "receiver": "engine counter scrapes", "evals": "eval cells"}[
                args.intervals
            ]
        )
        raise InputError(f"{path}: no load to pair the gauges with (no {what}); measure: {_MEASURE}")
    if not report.intervals:
        raise InputError(
            f"{path}: none of the {len(inputs.intervals)} {inputs.source} intervals had any token "
            f"throughput; measure: {_MEASURE}"
        )
    if not report.instruments:
        raise InputError(
            f"{path}: {len(report.intervals)} {inputs.source} intervals but no gauge readings to grade: "
            "run `spark-otel receive --engine NAME=URL --gpu auto` beside the load"
        )
    if args.json:
        from ..views.gauges import report_json

        print_json(report_json(report))
        return 0
    print_verdicts(report)
    if args.readings:
        _print_readings(report)
    return 0
