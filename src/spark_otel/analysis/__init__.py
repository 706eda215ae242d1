"""Pure analyses of recorded cells and load windows: concurrency, neighbour cost, the advisor.

Every function here takes `spark_otel.model` records and plain numbers and returns frozen
pydantic results (``model_dump(mode="json")`` gives JSON); none reads the store or prints. The
CLI commands ``concurrency``, ``neighbour-cost`` and ``advise`` do the I/O.
"""

from __future__ import annotations

from .advisor import (
    Advice,
    AdvisorConfig,
    CandidatePrediction,
    CellClass,
    ClassAdvice,
    QueueRule,
    advise,
    classify,
    fit_prefill_contention,
)
from .concurrency import (
    CellLoad,
    ConcurrencyReport,
    EngineConcurrency,
    LevelSummary,
    RunSummary,
    Speedup,
    concurrency,
    in_flight,
    union_seconds,
)
from .curve import CurvePoint, RateCurve, curve_from_concurrency
from .neighbour import CellRate, NeighbourReport, WindowCost, is_timeout, neighbour_cost, windows_touched
from .stats import RateSummary, percentile, summarize
from .windows import overlapping_pairs, peak_concurrency, windows_from_cells

__all__ = [
    "Advice",
    "AdvisorConfig",
    "CandidatePrediction",
    "CellClass",
    "CellLoad",
    "CellRate",
    "ClassAdvice",
    "ConcurrencyReport",
    "CurvePoint",
    "EngineConcurrency",
    "LevelSummary",
    "NeighbourReport",
    "QueueRule",
    "RateCurve",
    "RateSummary",
    "RunSummary",
    "Speedup",
    "WindowCost",
    "advise",
    "classify",
    "concurrency",
    "curve_from_concurrency",
    "fit_prefill_contention",
    "in_flight",
    "is_timeout",
    "neighbour_cost",
    "overlapping_pairs",
    "peak_concurrency",
    "percentile",
    "summarize",
    "union_seconds",
    "windows_from_cells",
    "windows_touched",
]
