"""Rate curves (`records.rate_curve`) built from what was measured: `curve_from_concurrency` from
real cells, `curves_from_documents` from stored probe documents. A curve measured beside a
running eval reads slower than the engine is, so each says why when it was (``under_load``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .._exceptions import ConfigError, InputError
from ..records.rate_curve import CurvePoint, RateCurve

if TYPE_CHECKING:
    from .concurrency import ConcurrencyReport, LevelSummary

__all__ = ["curve_from_concurrency", "curve_from_levels", "curves_from_documents"]


def curve_from_concurrency(
    report: ConcurrencyReport,
    engine: str | None = None,
    *,
    min_cells: int = 3,
    model: str | None = None,
    exclude: frozenset[str] = frozenset(),
) -> RateCurve:
    """An engine's curve from real cells: each in-flight level's median per-cell rate.

    ``engine`` may be omitted when the report holds one engine. The aggregate at a level is the
    level times the median per-cell rate (what that many such cells decode together). Levels
    with fewer than ``min_cells`` rated cells are left out (one cell that happened to overlap
    two others is an anecdote, not a point of the curve), unless no level has that many.
    ``exclude`` leaves out cells (by uid) that ran beside load the in-flight count does not see
    (a probe, another engine's work); they still count toward the others' levels.
    """
    engines = {e.engine: e for e in report.engines}
    if engine is None:
        if len(engines) != 1:
            raise ConfigError(f"name an engine: the cells ran on {sorted(engines) or 'no engine'}")
        (engine,) = engines
    if engine not in engines:
        raise InputError(f"no recorded cells on engine {engine!r} (have: {', '.join(sorted(engines))})")
    found = engines[engine]
    levels = found.levels
    if exclude:
        from .concurrency import level_summaries

        levels = level_summaries((c.level, c) for c in found.cells if c.uid not in exclude)
    last = max((c.end_unix_ns for c in found.cells), default=None)
    return curve_from_levels(engine, levels, min_cells=min_cells, model=model, measured_unix_ns=last)


def curve_from_levels(
    engine: str,
    levels: Iterable[LevelSummary],
    *,
    min_cells: int = 3,
    model: str | None = None,
    measured_unix_ns: int | None = None,
) -> RateCurve:
    """`curve_from_concurrency`'s curve from an engine's in-flight levels (`LevelSummary`), however
    they were counted (`concurrency`'s rows, or columns)."""
    rated = [(level, level.rate.median) for level in levels if level.rate.median]
    supported = [(level, median) for level, median in rated if level.rate.n >= min_cells] or rated
    points = [
        CurvePoint(
            streams=level.level,
            per_stream_rate=median,
            aggregate_rate=level.level * median,
            p10=level.rate.p10,
            p90=level.rate.p90,
            n=level.rate.n,
            ci_low=level.rate.ci_low,
            ci_high=level.rate.ci_high,
        )
        for level, median in supported
    ]
    if not points:
        raise InputError(f"engine {engine!r}: no completed cells with token counts to build a curve from")
    return RateCurve(
        engine=engine, points=points, source="cells", model=model, measured_unix_ns=measured_unix_ns
    )


def curves_from_documents(documents: Iterable[Mapping[str, Any]]) -> tuple[list[RateCurve], list[str]]:
    """The ``curve`` of each stored probe document (``{"name", "body"}``, as
    ``Store.documents("probe")`` returns them), in their order, and a problem line for each
    document without a valid one. Only the curve is read, so every reader of a store (advise,
    report) sees the same curves whatever else a probe report holds."""
    curves: list[RateCurve] = []
    problems: list[str] = []
    for doc in documents:
        try:
            curves.append(RateCurve.model_validate(doc["body"]["curve"]))
        except (KeyError, TypeError, ValidationError) as exc:
            problems.append(f"probe document {doc.get('name')!r} has no valid curve: {exc}")
    return curves, problems
