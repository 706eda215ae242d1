"""Queue rules built by hand with the facts their words rest on (`QueueRule`): what the tests of
what renders rules (the demo's tables, the report, the answers) give, each rule's words then
written by `views.rules` as everywhere else."""

from __future__ import annotations

from typing import Any

from spark_otel.analysis.advisor import (
    CandidatePrediction,
    CellClass,
    ClassAdvice,
    CrossEngineEvidence,
    Evidence,
    GaugeEvidence,
    LaneShape,
    QueueRule,
    RuleKind,
)
from spark_otel.analysis.advisor.queue_rules import batch_rule
from spark_otel.records.rate_curve import CurvePoint, RateCurve


def _point(streams: int, aggregate: float) -> CurvePoint:
    return CurvePoint(streams=streams, per_stream_rate=aggregate / streams, aggregate_rate=aggregate)


def cap_rule(engine: str, streams: int, *, peak: float, after: float) -> QueueRule:
    """A lane cap at ``streams``, where the aggregate peaked at ``peak`` tok/s and fell to ``after``
    at twice the streams (an idle probe at one stream, the peak and after it)."""
    curve = RateCurve(
        engine=engine,
        points=[_point(1, peak / streams * 1.5), _point(streams, peak), _point(2 * streams, after)],
    )
    shape = LaneShape(kind="falls", streams=streams, low=curve.points[1], high=curve.points[2])
    return QueueRule(
        kind=RuleKind.CAP,
        engine=engine,
        workers=streams,
        figures=Evidence(levels=curve.streams),
        curve=curve,
        shape=shape,
    )


def yields_rule(
    engine: str,
    eval_name: str,
    while_engine: str,
    *,
    cost: float,
    n: int = 5,
    cost_at_one: float | None = None,
) -> QueueRule:
    """``engine`` yields while ``eval_name`` runs on ``while_engine``: beside it the eval's cells
    decoded ``1 - cost`` of their 10 tok/s baseline (n=20); with ``cost_at_one`` (what one cell of
    ``engine`` cost them), it runs at most one cell there instead."""
    return QueueRule(
        kind=RuleKind.CROSS_ENGINE,
        engine=engine,
        eval_name=eval_name,
        workers=0 if cost_at_one is None else 1,
        while_engine=while_engine,
        figures=Evidence(n_cells=n, neighbour_cost=cost),
        cross=CrossEngineEvidence(
            window="load",
            eval_label=eval_name,
            rate=10.0 * (1 - cost),
            rate_n=n,
            baseline=10.0,
            baseline_n=20,
            threshold=0.2,
            timeouts=0,
            failures=0,
            n_cells=n,
            more_windows=0,
            cost_at_one=cost_at_one,
        ),
    )


def measure_rule(engine: str, eval_name: str | None = None, *, n_cells: int = 12) -> QueueRule:
    """Measure ``engine`` first: no rate curve for ``eval_name``'s ``n_cells`` cells yet."""
    return QueueRule(
        kind=RuleKind.MEASURE,
        engine=engine,
        eval_name=eval_name,
        command=f"spark-otel probe --engine {engine}=URL --streams 1,2,4,8",
        figures=Evidence(n_cells=n_cells),
        missing="no curve",
    )


def candidate(workers: int, rate: float, timeouts: float, speedup: float) -> CandidatePrediction:
    return CandidatePrediction(
        workers=workers, per_stream_rate=rate, timeout_fraction=timeouts, wall_s=100.0, speedup=speedup
    )


def class_advice(**kw: Any) -> ClassAdvice:
    """The advice for eval g's 40 generation-heavy cells on engine q: 2 workers, 1.8x (95% CI 1.6x to
    1.95x), 10% slower per stream; 4 would time out 30%. ``kw`` replaces any of it."""
    fields: dict[str, Any] = {
        "engine": "q",
        "eval_name": "g",
        "cell_class": CellClass.GENERATION_HEAVY,
        "ceiling_bound": False,
        "n_cells": 40,
        "historical_timeouts": 0,
        "prompt_tokens_median": 1234.0,
        "output_tokens_p90": 5678.0,
        "prefill_contention": 0.37,
        "prefill_contention_fitted": False,
        "recommended_workers": 2,
        "timeout_fraction": 0.025,
        "serial_timeout_fraction": 0.0,
        "speedup": 1.8,
        "speedup_interval": (1.6, 1.95),
        "per_stream_cost": 0.1,
        "per_stream_cost_interval": (0.05, 0.15),
        "candidates": [
            candidate(1, 10.0, 0.0, 1.0),
            candidate(2, 9.0, 0.025, 1.8),
            candidate(4, 8.0, 0.3, 3.2),
            candidate(8, 6.0, 0.6, 4.8),
        ],
    }
    return ClassAdvice(**(fields | kw))


def batched_rule(
    engine: str,
    eval_name: str,
    workers: int,
    cell_class: CellClass = CellClass.GENERATION_HEAVY,
    **advice_fields: Any,
) -> QueueRule:
    """The advisor's batch rule for `class_advice` of ``eval_name`` on ``engine`` at ``workers``, on
    a curve rising over 1, 2 and 4 streams; ``advice_fields`` replace any of the class's advice."""
    curve = RateCurve(
        engine=engine,
        points=[_point(1, 10.0), _point(2, 18.0), _point(4, 32.0)],
    )
    advice = class_advice(
        engine=engine,
        eval_name=eval_name,
        recommended_workers=workers,
        cell_class=cell_class,
        **advice_fields,
    )
    return batch_rule(advice, curve, {})


def gauge_rule(engine: str) -> QueueRule:
    """The gauge rule: utilization pinned near 96% over 120 samples while ``engine``'s tokens ranged
    2.0 to 40.0 tok/s."""
    return QueueRule(
        kind=RuleKind.GAUGE,
        engine=engine,
        gauge=GaugeEvidence(
            utilization_median=0.96, utilization_p10=0.95, utilization_p90=0.97, samples=120, rate_min=2.0,
            rate_max=40.0,
        ),
    )  # fmt: skip
