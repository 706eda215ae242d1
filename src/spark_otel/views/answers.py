"""The article's two questions answered in one line each, from what an `Overview` measured.

*What does concurrency buy?* On a curve: what the most streams measured bought in aggregate
and cost per stream, and where the aggregate stopped gaining. On real cells, an eval run at 1
and at N workers: "golden-review at 8 workers:
4.1x wall for 19% slower cells". *What does a neighbour cost?* An eval's cells beside another
load against its cells alone: "nemotron load cost serial-review 53% per cell". Then the rules:
how many the advisor wrote and how many must be measured first. Every line names what it rests
on (cells per side, the worker counts, the window); where the records cannot answer a question,
the line says so and what would answer it. The demo prints these between its tables and the
report opens with them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..analysis.advisor import RuleKind, lane_shape
from ..analysis.neighbour import NeighbourReport, no_baseline_reason, windows_touched
from ..analysis.overview import Overview
from ..records.rate_curve import RateCurve
from .curves import describe_curve, lane_evidence

__all__ = ["Answer", "answers", "curve_answer", "neighbour_answer", "rules_answer", "speedup_answers"]

Topic = Literal["curve", "concurrency", "neighbour", "rules"]


class Answer(BaseModel):
    """One question's answer as a person reads it; ``measured`` is False when the line says
    what is missing instead of answering."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: Topic
    text: str
    measured: bool


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def curve_answer(curve: RateCurve, *, flat_gain: float = 0.05) -> Answer:
    """What the most streams measured bought over one stream, and the lane's shape."""
    rests = describe_curve(curve)
    if len(curve.points) < 2:
        missing = "one level measured, a curve needs two"
    elif not curve.measured_single_stream:
        missing = "no single stream measured to compare the levels with"
    else:
        missing = None
    if missing is not None:
        return Answer(topic="curve", text=f"{curve.engine}: {missing} ({rests})", measured=False)
    one = curve.points[0]
    shape = lane_shape(curve, flat_gain)
    if shape.kind in ("falls", "flattens"):
        peak = next(p for p in curve.points if p.streams == shape.streams)
        what = (
            f"{peak.streams} streams bought {peak.aggregate_rate / one.aggregate_rate:.1f}x the aggregate "
            f"of one stream for {1 - peak.per_stream_rate / one.per_stream_rate:.0%} per stream, "
            f"then no more: {lane_evidence(shape)}"
        )
    else:
        top = curve.points[-1]
        what = (
            f"{top.streams} streams bought {top.aggregate_rate / one.aggregate_rate:.1f}x the aggregate "
            f"of one stream for {1 - top.per_stream_rate / one.per_stream_rate:.0%} per stream, "
            "still rising at the most measured"
        )
    return Answer(topic="curve", text=f"{curve.engine}: {what} ({rests})", measured=True)


def speedup_answers(found: Overview) -> list[Answer]:
    """What more workers bought each eval run at two worker counts: wall speedup for per-cell cost."""
    out: list[Answer] = []
    if found.concurrency is None:
        return out
    for engine in found.concurrency.engines:
        for s in engine.speedups:
            cost = (
                "per-cell cost not measured (no rated cells on one side)"
                if s.per_cell_cost is None
                else f"{s.per_cell_cost:.0%} slower cells"
                if s.per_cell_cost >= 0
                else f"{-s.per_cell_cost:.0%} faster cells"
            )
            cells = "the same cells" if s.same_cells else "different cells"
            what = f"{s.eval_name} at {_plural(s.workers, 'worker')} on {s.engine}"
            text = (
                f"{what}: {s.speedup:.1f}x wall for {cost} (n={s.n_cells:,} cells, against "
                f"{s.base_cells:,} at {_plural(s.base_workers, 'worker')}; {cells})"
            )
            out.append(Answer(topic="concurrency", text=text, measured=True))
    if not out and found.concurrency.engines:
        evals = sorted({run.eval_name for engine in found.concurrency.engines for run in engine.runs})
        out.append(
            Answer(
                topic="concurrency",
                text=(
                    "what more workers buy is not measured: no eval ran at two worker counts "
                    f"({', '.join(evals)}); run one at 1 and at N workers"
                ),
                measured=False,
            )
        )
    return out


def neighbour_answer(report: NeighbourReport, threshold: float) -> Answer | None:
    """What the costliest other load cost ``report``'s eval; None when nothing ran beside it."""
    reason = no_baseline_reason(report)
    if reason is not None:
        return Answer(topic="neighbour", text=f"{report.label}: {reason}", measured=False)
    priced = [(w.cost, w) for w in windows_touched(report) if w.cost is not None]
    if not priced:
        return None
    cost, worst = max(priced, key=lambda cw: cw[0])
    where = {True: " on the same engine", False: " on another engine", None: ""}[worst.same_engine]
    flag = f", past the {threshold:.0%} threshold" if cost > threshold else ""
    text = (
        f"{worst.name}{where} cost {report.label} {cost:.0%} per cell{flag}: "
        f"{worst.rate.median:.2f} against {report.baseline.median:.2f} tok/s alone "
        f"(n={worst.rate.n:,} cells beside it, {report.baseline.n:,} alone)"
    )
    return Answer(topic="neighbour", text=text, measured=True)


def rules_answer(found: Overview) -> Answer | None:
    """How many rules the advisor wrote, and how many are "measure first"."""
    if found.advice is None:
        return None
    rules = found.advice.rules
    measure = sum(1 for r in rules if r.kind is RuleKind.MEASURE)
    if not rules:
        return Answer(topic="rules", text="no queue rules: nothing measured to reason from", measured=False)
    firm = len(rules) - measure
    tail = f"; {measure:,} {'says' if measure == 1 else 'say'} what to measure first" if measure else ""
    return Answer(
        topic="rules",
        text=f"{_plural(firm, 'queue rule')} from measured evidence{tail} (spark-otel advise lists them)",
        measured=firm > 0,
    )


def answers(found: Overview) -> list[Answer]:
    """Every answer the overview supports: the curves, what workers bought, the neighbours, the rules."""
    out = [curve_answer(curve, flat_gain=found.config.flat_gain) for curve in found.curves]
    out += speedup_answers(found)
    for report in found.neighbours:
        answer = neighbour_answer(report, found.config.threshold)
        if answer is not None:
            out.append(answer)
    rules = rules_answer(found)
    if rules is not None:
        out.append(rules)
    return out
