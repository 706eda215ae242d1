"""Pure analyses of recorded cells and load windows: concurrency, neighbour cost, the advisor.

Every function here takes `spark_otel.model` records and plain numbers and returns frozen
pydantic results (``model_dump(mode="json")`` gives JSON); none reads the store or prints. The
CLI commands ``concurrency``, ``neighbour-cost``, ``advise``, ``instruments`` and ``report`` do the I/O;
`overview` runs them all the one way ``advise`` and ``report`` share.
"""

from __future__ import annotations

from ..records.rate_curve import CurvePoint, RateCurve
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
from .curve import curve_from_concurrency, curves_from_documents
from .gauges import InstrumentsReport, InstrumentVerdict, LoadInterval, instrument_verdicts
from .neighbour import (
    CellRate,
    NeighbourReport,
    WindowCost,
    neighbour_cost,
    neighbour_costs,
    no_baseline_reason,
    windows_touched,
)
from .overview import Overview, overview
from .rates import ceiling_hit, failed, rated_decode_rate
from .stats import RateSummary, percentile, summarize
from .windows import overlapping_pairs, peak_concurrency, split_at_gaps, windows_from_cells

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
    "InstrumentVerdict",
    "InstrumentsReport",
    "LevelSummary",
    "LoadInterval",
    "NeighbourReport",
    "Overview",
    "QueueRule",
    "RateCurve",
    "RateSummary",
    "RunSummary",
    "Speedup",
    "WindowCost",
    "advise",
    "ceiling_hit",
    "classify",
    "concurrency",
    "curve_from_concurrency",
    "curves_from_documents",
    "failed",
    "fit_prefill_contention",
    "in_flight",
    "instrument_verdicts",
    "neighbour_cost",
    "neighbour_costs",
    "no_baseline_reason",
    "overlapping_pairs",
    "overview",
    "peak_concurrency",
    "percentile",
    "rated_decode_rate",
    "split_at_gaps",
    "summarize",
    "union_seconds",
    "windows_from_cells",
    "windows_touched",
]
