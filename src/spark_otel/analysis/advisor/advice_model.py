"""The advisor's settings and results: classes, predictions, and rules with their evidence."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...records.rate_curve import CurvePoint, RateCurve
from .._result import Result

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
]

ARTICLE_PREFILL_CONTENTION = 0.37

Interval = tuple[float, float]


class CellClass(StrEnum):
    GENERATION_HEAVY = "generation-heavy"
    PROMPT_HEAVY = "prompt-heavy"
    LONG_CONTEXT = "long-context"


class RuleKind(StrEnum):
    BATCH = "batch"
    """Workers for a class of cells on an engine."""
    CAP = "cap"
    """The most streams an engine's lane takes: where its aggregate fell or flattened."""
    CROSS_ENGINE = "cross-engine"
    """What another engine may run while an eval runs on this one."""
    GAUGE = "gauge"
    """Which gauge reads load."""
    MEASURE = "measure"
    """What the data cannot answer yet, and the command that would measure it."""


class AdvisorConfig(BaseModel):
    """The advisor's thresholds; defaults are the article's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ceiling_s: float = Field(default=1800.0, gt=0, description="per-cell wall-clock ceiling")
    threshold: float = Field(default=0.2, ge=0, le=1, description="neighbour cost that flags a load")
    prompt_heavy_fraction: float = Field(default=0.9, gt=0, le=1)
    long_context_prompt_tokens: int = Field(default=24_000, ge=1)
    ceiling_bound_fraction: float = Field(default=0.75, gt=0)
    timeout_tolerance: float = Field(default=0.02, ge=0, le=1)
    ceiling_headroom: float = Field(
        default=0.1, ge=0, lt=1, description="share of the ceiling a predicted cell must leave free"
    )
    prefill_contention: float = Field(default=ARTICLE_PREFILL_CONTENTION, ge=0)
    pinned_utilization: float = Field(default=0.9, ge=0, le=1, description="utilization read as pinned")
    pinned_spread: float = Field(default=0.05, ge=0, description="max p90 - p10 of a pinned gauge")
    rate_variation: float = Field(default=2.0, gt=1, description="max/min token rate that counts as varying")
    flat_gain: float = Field(
        default=0.05,
        ge=0,
        description="aggregate gain from one measured level to the next below which the lane has flattened",
    )
    bootstrap_resamples: int = Field(default=200, ge=20, description="resamples for the speedup interval")


class CandidatePrediction(Result):
    workers: int
    per_stream_rate: float
    timeout_fraction: float
    wall_s: float
    speedup: float


class ClassAdvice(Result):
    engine: str
    eval_name: str
    cell_class: CellClass
    ceiling_bound: bool
    serial_p90_s: float | None = Field(
        default=None, description="p90 predicted time of the class's cells at one worker, alone (model s)"
    )
    n_cells: int
    historical_timeouts: int
    prompt_tokens_median: float | None
    output_tokens_p90: float | None
    prefill_contention: float
    prefill_contention_fitted: bool
    recommended_workers: int
    timeout_fraction: float
    serial_timeout_fraction: float
    speedup: float
    speedup_interval: Interval | None = Field(
        description="95% bootstrap interval over the class's cells on the predicted speedup"
    )
    per_stream_cost: float = Field(description="1 - per-stream rate at the recommendation / alone")
    per_stream_cost_interval: Interval | None = Field(
        description="from the curve's intervals on both rates (conservative)"
    )
    candidates: list[CandidatePrediction]


class Evidence(Result):
    """The figures a rule rests on, for scripts and for the governor's rules file."""

    n_cells: int | None = None
    levels: list[int] = Field(default_factory=list, description="stream counts the curve measured")
    under_load: bool = False
    model: str | None = Field(default=None, description="the model the engine served when measured")
    measured_unix_ns: int | None = None
    per_stream_cost: float | None = None
    per_stream_cost_interval: Interval | None = None
    speedup: float | None = None
    speedup_interval: Interval | None = None
    neighbour_cost: float | None = None
    neighbour_cost_interval: Interval | None = None


class LaneShape(Result):
    """Where an engine's aggregate stopped gaining, as the curve measured it, and the two levels
    that show it (none for a single level)."""

    kind: Literal["falls", "flattens", "rising", "single"]
    streams: int = Field(description="falls/flattens: the level to cap at; rising/single: the most measured")
    low: CurvePoint | None = Field(default=None, description="falls: the peak; else the lower of the two")
    high: CurvePoint | None = Field(default=None, description="the level after it")

    @property
    def gain(self) -> float | None:
        """The aggregate's change from ``low`` to ``high`` (+0.05: 5% more)."""
        if self.low is None or self.high is None:
            return None
        if self.low.aggregate_rate <= 0:
            return float("inf")
        return self.high.aggregate_rate / self.low.aggregate_rate - 1


class CrossEngineEvidence(Result):
    """What a cross-engine rule rests on: the costliest window of the other engine's load beside
    the eval, against the eval's baseline, and the eval beside one cell of that engine."""

    window: str
    eval_label: str = Field(description="the eval (and workers) the costs are of")
    rate: float = Field(description="the eval's median tok/s inside the window")
    rate_n: int
    baseline: float
    baseline_n: int
    threshold: float
    timeouts: int
    failures: int
    n_cells: int = Field(description="the eval's cells in the window")
    more_windows: int = Field(description="other windows of that engine past the threshold")
    cost_at_one: float | None = Field(
        description="the cost beside one cell of that engine (at most the threshold); None: not measured so"
    )


class GaugeEvidence(Result):
    """What the gauge rule rests on: a pinned utilization while the token rate varied."""

    utilization_median: float
    utilization_p10: float
    utilization_p90: float
    samples: int
    rate_min: float
    rate_max: float


MeasureReason = Literal["no curve", "no single stream", "one level", "lane still rising"]


class QueueRule(Result):
    """One rule, and the facts its words rest on (`views.rules` writes the rule and its evidence)."""

    kind: RuleKind
    engine: str | None = Field(default=None, description="the engine the rule limits")
    eval_name: str | None = None
    cell_class: CellClass | None = None
    workers: int | None = Field(default=None, description="batch: workers; cap: streams; cross-engine: limit")
    while_engine: str | None = Field(
        default=None, description="cross-engine: the limit holds while the eval runs on this engine"
    )
    ceiling_bound: bool = False
    command: str | None = Field(default=None, description="the command that would measure what is missing")
    figures: Evidence = Field(default_factory=Evidence)
    curve: RateCurve | None = Field(default=None, description="the curve the rule rests on")
    advice: ClassAdvice | None = Field(default=None, description="batch: the class's prediction")
    shape: LaneShape | None = Field(default=None, description="cap, or a lane still rising: its shape")
    missing: MeasureReason | None = Field(default=None, description="measure: what stands in the way")
    cross: CrossEngineEvidence | None = None
    gauge: GaugeEvidence | None = None


class Advice(Result):
    config: AdvisorConfig
    classes: list[ClassAdvice]
    rules: list[QueueRule]
    n_cells: int = Field(default=0, description="the cells advised on (of the eval and engine asked)")
    requests_as_cells: int = Field(
        default=0, description="of n_cells, requests standing in for cells (no cell() held them)"
    )
