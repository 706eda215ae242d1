"""Load levels and gauge samples built by hand for grading gauges, and graded verdicts read back
by name with the sentence the views write for each."""

from __future__ import annotations

from collections.abc import Sequence

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import (
    InstrumentsReport,
    InstrumentVerdict,
    LoadInterval,
)
from spark_otel.model import AttributeValue, MetricSample
from spark_otel.views.gauges import evidence

S = 1_000_000_000


GPU = {sc.GPU_ID: "0"}


def levels(
    throughputs: Sequence[float], *, engine: str = "qwen", seconds: int = 10, t0: int = 1_000 * S
) -> list[LoadInterval]:
    """Back-to-back levels ``seconds`` long, 5 s apart, each at its throughput on ``engine``."""
    out = []
    for k, tp in enumerate(throughputs):
        start = t0 + k * (seconds + 5) * S
        out.append(
            LoadInterval(
                label=f"level {k}",
                source="probe",
                start_unix_ns=start,
                end_unix_ns=start + seconds * S,
                throughput=tp,
                engines={engine: tp},
            )
        )
    return out


def gauge(
    name: str,
    intervals: Sequence[LoadInterval],
    values: Sequence[float],
    attributes: dict[str, AttributeValue],
    *,
    per: int = 3,
) -> list[MetricSample]:
    """``per`` samples of ``values[k]`` spread inside interval k."""
    out = []
    for interval, value in zip(intervals, values, strict=True):
        step = (interval.end_unix_ns - interval.start_unix_ns) // (per + 1)
        out.extend(
            MetricSample(
                name=name, unix_ns=interval.start_unix_ns + (j + 1) * step, value=value, attributes=attributes
            )
            for j in range(per)
        )
    return out


_GRADED: dict[int, InstrumentsReport] = {}
"""The report each verdict came from, for the sentence the views layer writes for it."""


def by_name(report: InstrumentsReport) -> dict[str, InstrumentVerdict]:
    _GRADED.update((id(v), report) for v in report.instruments)
    return {v.instrument: v for v in report.instruments}


def said(v: InstrumentVerdict) -> str:
    """The evidence sentence `views.gauges` writes for ``v`` (graded through `by_name` or `one`)."""
    return evidence(v, _GRADED[id(v)])


LOAD = [10.0, 20.0, 40.0, 80.0, 160.0, 320.0]
