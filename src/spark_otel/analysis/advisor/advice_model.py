"""The advisor's settings and results: classes, predictions, and rules with their evidence."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from .._result import Result

__all__ = [
    "ARTICLE_PREFILL_CONTENTION",
    "Advice",
    "AdvisorConfig",
    "CandidatePrediction",
    "CellClass",
    "ClassAdvice",
    "Evidence",
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
    curve: str | None = Field(default=None, description="which curve, and how it was measured")
    under_load: bool = False
    model: str | None = Field(default=None, description="the model the engine served when measured")
    measured_unix_ns: int | None = None
    per_stream_cost: float | None = None
    per_stream_cost_interval: Interval | None = None
    speedup: float | None = None
    speedup_interval: Interval | None = None
    neighbour_cost: float | None = None
    neighbour_cost_interval: Interval | None = None


class QueueRule(Result):
    rule: str
    evidence: str
    kind: RuleKind
    engine: str | None = Field(default=None, description="the engine the rule limits")
    eval_name: str | None = None
    cell_class: CellClass | None = None
    workers: int | None = Field(default=None, description="batch: workers; cap: streams; cross-engine: limit")
    while_engine: str | None = Field(
        default=None, description="cross-engine: the limit holds while the eval runs on this engine"
    )
    ceiling_bound: bool = False
    command: str | None = Field(default=None, description="measure: the command that would measure it")
    figures: Evidence = Field(default_factory=Evidence)


class Advice(Result):
    config: AdvisorConfig
    classes: list[ClassAdvice]
    rules: list[QueueRule]
