"""What one Nsight export reads as: the result models, and the metric-name helpers they need.

Pure: nothing here touches a file, so the models and helpers can be used (and tested) on their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

__all__ = [
    "MetricSummary",
    "NsightCapture",
    "NsightLayout",
    "NsightSummary",
    "SeriesPoint",
    "canonical_metric",
    "percentile_from_counts",
    "split_metric_name",
]

# Names that changed between Nsight releases, mapped to the current spelling.
_ALIASES = {
    "SM Active": "SMs Active",
    "Compute Warps In Flight": "Compute Warps in Flight",
    "Async Compute In Flight": "Async Compute in Flight",
    "Sync Compute In Flight": "Sync Compute in Flight",
}
_UNITS = {
    "Throughput %": "%",
    "MHz": "MHz",
    "Avg Warps per Cycle": "{warp}",
    "Avg": "{warp}",
    "Requests": "{request}",
    "Workloads": "{workload}",
    "Cycles Active": "{cycle}",
}
_NAME_RE = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\]]*)\]\s*$")


class NsightLayout(StrEnum):
    """How an export stores its GPU metrics, told by its columns (see the package docstring)."""

    GENERIC = "generic"
    PLAIN = "plain"
    RAW = "raw"


class MetricSummary(BaseModel):
    """One metric on one GPU over a whole capture (Appendix B's columns, plus spread)."""

    model_config = ConfigDict(frozen=True)

    metric: str
    name: str
    unit: str
    gpu_id: str
    gpu_name: str | None
    samples: int
    mean: float
    p50: float
    p95: float
    min: float
    max: float
    scaled_from_hz: bool = False


class NsightSummary(BaseModel):
    """A capture's identity and its per-metric summary; stored as an ``nsight_summary`` document."""

    model_config = ConfigDict(frozen=True)

    capture: str
    path: str
    uid: str
    layout: NsightLayout
    product_version: str | None
    schema_version: str | None
    session_start_unix_ns: int
    start_unix_ns: int
    end_unix_ns: int
    duration_s: float
    interval_ms: float
    metrics: list[MetricSummary]

    def metric(self, name: str, gpu_id: str | None = None) -> MetricSummary:
        """The summary of ``name`` (short "SM Issue" or full "SM Issue [Throughput %]")."""
        for m in self.metrics:
            if name in (m.name, m.metric) and (gpu_id is None or m.gpu_id == gpu_id):
                return m
        raise KeyError(name)


@dataclass(frozen=True)
class SeriesPoint:
    """One downsampling interval of a series: its start time, mean value and sample count."""

    unix_ns: int
    value: float
    count: int


@dataclass
class NsightCapture:
    """Everything read from one export: the summary and each metric's downsampled series."""

    summary: NsightSummary
    series: dict[tuple[str, str], list[SeriesPoint]] = field(default_factory=dict)
    gpu_names: dict[str, str | None] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    """Rows left out, one line per table: ``FILE: TABLE row N: what is wrong (k rows of n left out)``."""


# -- pure helpers ------------------------------------------------------------------------------------
def split_metric_name(metric: str) -> tuple[str, str]:
    """``"SMs Active [Throughput %]"`` -> ``("SMs Active", "%")``; aliases normalised."""
    match = _NAME_RE.match(metric)
    name, bracket = (match["name"], match["unit"]) if match else (metric.strip(), "")
    return _ALIASES.get(name, name), _UNITS.get(bracket, bracket)


def canonical_metric(metric: str) -> str:
    """The full name with old spellings replaced (``SM Active [Throughput %]`` -> ``SMs Active [...]``)."""
    match = _NAME_RE.match(metric)
    if not match:
        return _ALIASES.get(metric.strip(), metric.strip())
    return f"{_ALIASES.get(match['name'], match['name'])} [{match['unit']}]"


def percentile_from_counts(values: Sequence[float], counts: Sequence[int], q: float) -> float:
    """The q-th percentile (0..100) of a multiset given as sorted distinct values and their counts.

    Uses linear interpolation between closest ranks, exactly as ``numpy.percentile``'s default.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q!r} is outside 0..100")
    total = sum(counts)
    if total == 0:
        return math.nan
    position = (q / 100.0) * (total - 1)
    lower_rank = math.floor(position)
    upper_rank = min(lower_rank + 1, total - 1)
    frac = position - lower_rank
    lower = upper = None
    seen = 0
    for value, count in zip(values, counts, strict=True):
        seen += count
        if lower is None and seen > lower_rank:
            lower = value
        if seen > upper_rank:
            upper = value
            break
    # Both are set: with q in 0..100 both ranks are below the total, which the last count reaches.
    assert lower is not None
    assert upper is not None
    return lower + (upper - lower) * frac
