"""The advisor: worker counts per cell class under a per-cell ceiling, lane caps, neighbours not to
batch beside, and for whatever the records cannot answer, the command that would measure it.

    advice_model  settings and results: classes, predictions, rules and their evidence
    evidence      which curve to trust, single-stream and lane-shape checks, the commands to measure
    predict       the timeout and speedup model of a class's cells at N workers, with intervals
    classes       the cells by engine, eval and class as numpy columns, and each class's advice
    queue_rules   each rule with the facts it rests on: n, levels, intervals, the curve, the window
    advice        `advise`: all of it from one box's records
"""

from __future__ import annotations

from .advice import advise, supports_worker_counts
from .advice_model import (
    ARTICLE_PREFILL_CONTENTION,
    Advice,
    AdvisorConfig,
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
from .evidence import choose_curves, engine_url, lane_shape, probe_command
from .predict import classify, fit_prefill_contention

__all__ = [
    "ARTICLE_PREFILL_CONTENTION",
    "Advice",
    "AdvisorConfig",
    "CandidatePrediction",
    "CellClass",
    "ClassAdvice",
    "CrossEngineEvidence",
    "Evidence",
    "GaugeEvidence",
    "LaneShape",
    "QueueRule",
    "RuleKind",
    "advise",
    "choose_curves",
    "classify",
    "engine_url",
    "fit_prefill_contention",
    "lane_shape",
    "probe_command",
    "supports_worker_counts",
]
