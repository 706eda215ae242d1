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
from typing import TYPE_CHECKING, Any

from ..report.inputs import DEFAULT_BIN_S, read_inputs, verdicts_of
from ._common import add_store_argument, open_store, print_json, print_table

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
        default=DEFAULT_BIN_S,
        metavar="SECONDS",
        help="receiver intervals: seconds of engine scrapes in each",
    )
    parser.add_argument("--readings", action="store_true", help="also list every gauge's value per interval")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _num(value: float | None) -> str:
    from ..analysis.gauges import fmt_value

    return "-" if value is None else fmt_value(value)


def _range(low: float | None, high: float | None, unit: str) -> str:
    if low is None or high is None:
        return "-"
    text = _num(low) if _num(low) == _num(high) else f"{_num(low)} to {_num(high)}"
    return f"{text}%" if unit == "%" else f"{text} {unit}".rstrip()


def _tok(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    return f"{low:,.1f}" if f"{low:,.1f}" == f"{high:,.1f}" else f"{low:,.1f} to {high:,.1f}"


def print_verdicts(report: InstrumentsReport, *, title: str | None = None) -> None:
    """The verdict table, each verdict's evidence and the notes (the demo prints it too)."""
    from ..report.tables import model_time

    lo, hi = report.throughput_min or 0.0, report.throughput_max or 0.0
    ratio = f" ({hi / lo:.1f}x)" if lo > 0 else ""
    when = model_time(i.time_scale for i in report.intervals)
    th = report.thresholds
    kind = {"probe": "probe", "receiver": "receiver", "evals": "eval"}.get(report.interval_source or "", "")
    print_table(
        (title + ": " if title else "")
        + f"{len(report.intervals)} {kind} intervals, {lo:,.1f} to {hi:,.1f} tok/s{ratio}"
        f"{when}: does each gauge move with load?",
        [
            "instrument",
            "verdict",
            "intervals",
            "tok/s",
            "reads",
            "elasticity",
            "rank corr",
            "zero / constant samples",
        ],
        [
            [
                v.instrument,
                v.verdict,
                v.n_intervals,
                _tok(v.throughput_min, v.throughput_max),
                _range(v.gauge_min, v.gauge_max, v.unit),
                "-" if v.elasticity is None else f"{v.elasticity:.2f}",
                "-" if v.rank_correlation is None else f"{v.rank_correlation:.2f}",
                f"{v.zero_samples} / {v.constant_samples} of {v.n_samples}",
            ]
            for v in report.instruments
        ],
        notes={
            "elasticity": "least-squares slope of the gauge on throughput, times mean throughput over mean "
            f"gauge: 1 moves in proportion, 0 not at all; tracks load from {th.tracks_elasticity:g}",
            "rank corr": f"Spearman rank correlation with throughput; tracks load from "
            f"{th.tracks_rank_correlation:g}",
            "zero / constant samples": "samples inside the intervals reading 0, and reading the gauge's "
            "most common value",
        },
    )
    print("why:")
    for v in report.instruments:
        print(f"  {v.instrument}: {v.verdict}: {v.evidence}")
    for note in report.notes:
        print(f"note: {note}")


def _print_readings(report: InstrumentsReport) -> None:
    rows: list[list[Any]] = [
        [v.instrument, r.interval, f"{r.throughput:,.1f}", _range(r.value, r.value, v.unit), r.samples]
        for v in report.instruments
        for r in v.readings
    ]
    print_table("each gauge per interval", ["instrument", "interval", "tok/s", "reads", "samples"], rows)


def run(args: argparse.Namespace) -> int:
    from .._exceptions import InputError
    from ._common import Bounds

    Bounds(above=0, at_most=86_400).check("--bin", args.bin_s)
    with open_store(args) as store:
        inputs = read_inputs(store, source=args.intervals, bin_s=args.bin_s)
        path = store.path
    if not inputs.intervals:
        what = (
            "probe levels, engine counter scrapes or eval cells"
            if args.intervals == "auto"
            else {"probe": "probe levels", "receiver": "engine counter scrapes", "evals": "eval cells"}[
                args.intervals
            ]
        )
        raise InputError(f"{path}: no load to pair the gauges with (no {what}); measure: {_MEASURE}")
    report = verdicts_of(inputs)
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
        print_json(report.model_dump(mode="json"))
        return 0
    print_verdicts(report)
    if args.readings:
        _print_readings(report)
    return 0
