"""Each gauge's verdict in words: the evidence sentence the command line and the report both show,
made from the figures `analysis.gauges` graded it on, and the JSON shape ``instruments --json``
prints (the verdict's facts with that sentence beside them)."""

from __future__ import annotations

from typing import Any

from ..analysis.gauges import InstrumentsReport, InstrumentVerdict
from ..analysis.gauges.grades import Thresholds, VerdictReason

__all__ = [
    "evidence",
    "fmt_value",
    "readings_table",
    "report_json",
    "verdict_json",
    "verdict_notes",
    "verdict_table",
    "verdict_title",
]


def fmt_value(value: float) -> str:
    """A gauge value to about three significant digits: 2,405, 96.0, 3.10, 0.0421."""
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1 or magnitude == 0:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _with_unit(value: float, unit: str) -> str:
    text = fmt_value(value)
    return f"{text}%" if unit == "%" else f"{text} {unit}".rstrip()


def _span(low: float, high: float, unit: str) -> str:
    if fmt_value(low) == fmt_value(high):
        return _with_unit(low, unit)
    return f"{fmt_value(low)} to {_with_unit(high, unit)}"


def _tok(low: float, high: float) -> str:
    if f"{low:,.1f}" == f"{high:,.1f}":
        return f"{low:,.1f} tok/s"
    return f"{low:,.1f} to {high:,.1f} tok/s"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def evidence(v: InstrumentVerdict, report: InstrumentsReport) -> str:
    """The sentence that says why ``v`` got its verdict, naming the figures it rests on (n, the
    throughput range, the gauge's range) and, where the data cannot decide, the command that would."""
    th = report.thresholds
    box = [i.throughput for i in report.intervals]
    loaded = f"{len(box)} loaded intervals ({_tok(min(box), max(box))})" if box else "no loaded interval"
    if v.reason in _UNSUPPORTED:
        return _unsupported(v, loaded)
    if v.reason in _SHORT_OF_LOAD:
        return _short_of_load(v, th, loaded)
    return _graded(v, th)


_UNSUPPORTED = frozenset({VerdictReason.NO_READINGS, VerdictReason.READS_ZERO, VerdictReason.DOES_NOT_MOVE})
_SHORT_OF_LOAD = frozenset(
    {
        VerdictReason.FEW_INTERVALS,
        VerdictReason.ENGINE_NOT_MEASURED,
        VerdictReason.OUTSIDE_INTERVALS,
        VerdictReason.NARROW_LOAD,
    }
)


def _unsupported(v: InstrumentVerdict, loaded: str) -> str:
    """A gauge its source never reported, or one that reads nothing but 0."""
    if v.reason is VerdictReason.NO_READINGS:
        return f"no readings in {loaded}: its source recorded other quantities but not this one"
    what = "does not move" if v.reason is VerdictReason.DOES_NOT_MOVE else "reads 0"
    over_n = f"{v.n_intervals} intervals ({_tok(*_throughput(v))})" if v.n_intervals else loaded
    return f"{what} in all {v.n_samples} samples over {over_n}"


def _short_of_load(v: InstrumentVerdict, th: Thresholds, loaded: str) -> str:
    """Too few intervals, or too narrow a range, and the command that would measure more."""
    n = v.n_intervals
    needed = f"{th.min_intervals} at different loads are needed: measure with `{v.measure}`"
    if v.reason is VerdictReason.FEW_INTERVALS:
        low, high = _gauge(v)
        where = f"readings in {n} interval{'s' if n != 1 else ''} ({_tok(*_throughput(v))}: "
        return f"{where}{_span(low, high, v.unit)}); {needed}"
    if v.reason is VerdictReason.ENGINE_NOT_MEASURED:
        others = ", ".join(v.other_engines)
        return f"no interval measured {v.engine}'s throughput (the {loaded} are on {others}); {needed}"
    if v.reason is VerdictReason.OUTSIDE_INTERVALS:
        return f"none of its {v.n_readings} readings lie in {loaded}; {needed}"
    return (
        f"{_over(v)}: throughput moved less than {th.min_load_ratio:g}x, too little to tell a flat "
        f"gauge from a moving one (it read {_reads(v)}): measure with `{v.measure}`"
    )


def _graded(v: InstrumentVerdict, th: Thresholds) -> str:
    """The sentences of the verdicts graded over enough load."""
    low_t, high_t = _throughput(v)
    e, rho = _number(v.elasticity), _number(v.rank_correlation)
    numbers = f"elasticity {e}, rank correlation {rho}"
    reason = v.reason
    if reason is VerdictReason.PINNED:
        rel = v.relative_range or 0.0
        moved = f"while throughput moved {high_t / low_t:.1f}x ({numbers})"
        return f"{_over(v)}: pinned at {_reads(v)} (moves {rel:.1%}) {moved}"
    if reason is VerdictReason.KNEE:
        assert v.knee_throughput is not None
        assert v.knee_value is not None
        assert v.flat_min is not None
        assert v.flat_max is not None
        direction = "rises" if _gauge_at_lowest_load(v) < v.knee_value else "falls"
        return (
            f"{_over(v)}: {direction} with throughput to {_with_unit(v.knee_value, v.unit)} at "
            f"{v.knee_throughput:,.1f} tok/s, then flat to {high_t:,.1f} tok/s "
            f"({_span(v.flat_min, v.flat_max, v.unit)} above the knee; {numbers} overall)"
        )
    if reason is VerdictReason.TRACKS:
        direction = "rises with throughput" if (v.elasticity or 0) > 0 else "falls as throughput rises"
        return f"{_over(v)}: reads {_reads(v)}, {direction} ({numbers})"
    if reason is VerdictReason.OUT_OF_STEP:
        below = f"rank correlation {rho} < {th.tracks_rank_correlation:g}"
        why = f"out of step with throughput ({below}; elasticity {e})"
    else:
        why = (
            f"moves {abs(v.elasticity or 0):.2f}x as fast as throughput "
            f"(elasticity {e} < {th.tracks_elasticity:g}; rank correlation {rho})"
        )
    return f"{_over(v)}: reads {_reads(v)}, {why}"


def _throughput(v: InstrumentVerdict) -> tuple[float, float]:
    assert v.throughput_min is not None
    assert v.throughput_max is not None
    return v.throughput_min, v.throughput_max


def _gauge(v: InstrumentVerdict) -> tuple[float, float]:
    assert v.gauge_min is not None
    assert v.gauge_max is not None
    return v.gauge_min, v.gauge_max


def _gauge_at_lowest_load(v: InstrumentVerdict) -> float:
    """The gauge's reading at the lowest throughput (the start of its rise or fall)."""
    return min(v.readings, key=lambda r: (r.throughput, r.value)).value


def _over(v: InstrumentVerdict) -> str:
    low, high = _throughput(v)
    return f"{v.n_intervals} intervals, {_tok(low, high)} ({high / low:.1f}x)"


def _reads(v: InstrumentVerdict) -> str:
    return _span(*_gauge(v), v.unit)


def verdict_json(v: InstrumentVerdict, report: InstrumentsReport) -> dict[str, Any]:
    """A verdict as ``instruments --json`` prints it: its facts, and its sentence as ``evidence``."""
    return v.model_dump(mode="json") | {"evidence": evidence(v, report)}


def report_json(report: InstrumentsReport) -> dict[str, Any]:
    """The whole grading as ``instruments --json`` prints it, each verdict with its sentence."""
    return report.model_dump(mode="json") | {
        "instruments": [verdict_json(v, report) for v in report.instruments]
    }


def _range(low: float | None, high: float | None, unit: str) -> str:
    if low is None or high is None:
        return "-"
    return _span(low, high, unit)


def _tok_cell(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    return f"{low:,.1f}" if f"{low:,.1f}" == f"{high:,.1f}" else f"{low:,.1f} to {high:,.1f}"


def verdict_title(report: InstrumentsReport, when: str) -> str:
    """The verdict table's title: the intervals it rests on (n, kind, throughput range) and the
    question; ``when`` is the model-time label of their clock, if any."""
    lo, hi = report.throughput_min or 0.0, report.throughput_max or 0.0
    ratio = f" ({hi / lo:.1f}x)" if lo > 0 else ""
    kind = {"probe": "probe", "receiver": "receiver", "evals": "eval"}.get(report.interval_source or "", "")
    return (
        f"{len(report.intervals)} {kind} intervals, {lo:,.1f} to {hi:,.1f} tok/s{ratio}"
        f"{when}: does each gauge move with load?"
    )


def verdict_table(report: InstrumentsReport) -> tuple[list[str], list[list[str]]]:
    """One row per gauge: its verdict and the figures it rests on."""
    columns = ["instrument", "verdict", "intervals", "tok/s", "reads", "elasticity", "rank corr"]
    rows = [
        [
            v.instrument,
            v.verdict.value,
            str(v.n_intervals),
            _tok_cell(v.throughput_min, v.throughput_max),
            _range(v.gauge_min, v.gauge_max, v.unit),
            _number(v.elasticity),
            _number(v.rank_correlation),
            f"{v.zero_samples} / {v.constant_samples} of {v.n_samples}",
        ]
        for v in report.instruments
    ]
    return [*columns, "zero / constant samples"], rows


def verdict_notes(th: Thresholds) -> dict[str, str]:
    """What the verdict table's figures mean, with the thresholds in force."""
    return {
        "elasticity": "least-squares slope of the gauge on throughput, times mean throughput over mean "
        f"gauge: 1 moves in proportion, 0 not at all; tracks load from {th.tracks_elasticity:g}",
        "rank corr": "Spearman rank correlation with throughput; tracks load from "
        f"{th.tracks_rank_correlation:g}",
        "zero / constant samples": "samples inside the intervals reading 0, and reading the gauge's "
        "most common value",
    }


def readings_table(report: InstrumentsReport) -> tuple[list[str], list[list[str]]]:
    """One row per gauge per interval: what it read there (``instruments --readings``)."""
    rows = [
        [v.instrument, r.interval, f"{r.throughput:,.1f}", _with_unit(r.value, v.unit), str(r.samples)]
        for v in report.instruments
        for r in v.readings
    ]
    return ["instrument", "interval", "tok/s", "reads", "samples"], rows
