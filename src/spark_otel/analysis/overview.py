"""Every analysis of one box's records at once: the curves, concurrency, neighbour costs, advice.

`spark-otel advise` and `spark-otel report` (and the demo, through the report) call this one
function, so the same store gives the same rules wherever they are read. It decides once:

* **Curves.** One per engine: the newest probe curve (``probe_curves`` oldest first), else the
  curve the engine's recorded cells trace out (every eval's cells on it: a curve belongs to the
  engine, not to an eval).
* **Neighbour costs.** `neighbour_costs` for the evals in scope (all, or ``eval_name``) with at
  least `MIN_CELLS_FOR_NEIGHBOUR` cells, one report per worker count where an eval ran at
  several; reports that priced nothing (no baseline and no window touched) are dropped, and with
  ``engine``, so are those of evals that neither ran on it nor ran beside load on it.
* **Advice.** `advise` over every cell (so in-flight levels see all the load), narrowed to
  ``eval_name`` and ``engine``, with the GPU utilization and token-rate samples given.

Pure: records and numbers in, a frozen result out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .._exceptions import ConfigError, InputError
from ..model import Cell, LoadWindow
from ._rows import Result
from .advisor import Advice, AdvisorConfig, advise
from .concurrency import ConcurrencyReport, concurrency
from .curve import RateCurve, curve_from_concurrency
from .neighbour import MIN_CELLS_FOR_NEIGHBOUR, NeighbourReport, neighbour_costs, windows_touched
from .windows import DEFAULT_MERGE_GAP_S

__all__ = ["Overview", "overview"]


class Overview(Result):
    """What `overview` found; ``concurrency`` and ``advice`` are None without cells in scope."""

    eval_name: str | None
    engine: str | None
    config: AdvisorConfig
    curves: list[RateCurve]
    concurrency: ConcurrencyReport | None
    neighbours: list[NeighbourReport]
    advice: Advice | None
    notes: list[str]


def _curves(
    probe_curves: Iterable[RateCurve], everything: ConcurrencyReport | None, notes: list[str]
) -> dict[str, RateCurve]:
    curves: dict[str, RateCurve] = {}
    for curve in probe_curves:  # oldest first: the newest probe of an engine wins
        curves[curve.engine] = curve
    if everything is not None:
        for engine in everything.engines:
            if engine.engine in curves:
                continue
            try:
                curves[engine.engine] = curve_from_concurrency(everything, engine.engine)
            except (InputError, ConfigError) as exc:
                notes.append(f"no curve from cells on {engine.engine}: {exc}")
    return curves


def _touches(report: NeighbourReport, engine: str) -> bool:
    """The eval ran on ``engine``, or some of its cells ran beside load on it."""
    return report.engine == engine or any(w.engine == engine for w in windows_touched(report))


def overview(
    cells: Iterable[Cell],
    windows: Iterable[LoadWindow] = (),
    probe_curves: Iterable[RateCurve] = (),
    *,
    config: AdvisorConfig | None = None,
    gpu_utilization: Sequence[float] = (),
    token_rates: Sequence[float] | None = None,
    eval_name: str | None = None,
    engine: str | None = None,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
) -> Overview:
    """Curves, concurrency, neighbour costs and advice from one box's records.

    ``token_rates`` default to the curves' aggregate rates (see `advise`). Raises `InputError`
    when ``eval_name`` names no eval in ``cells``.
    """
    config = config or AdvisorConfig()
    all_cells = list(cells)
    all_windows = list(windows)
    evals = sorted({c.eval_name for c in all_cells})
    if eval_name is not None and eval_name not in evals:
        raise InputError(f"no cells recorded for eval {eval_name!r} (evals: {', '.join(evals) or 'none'})")
    notes: list[str] = []
    everything = concurrency(all_cells, merge_gap_s=merge_gap_s) if all_cells else None
    curves = [
        c for c in _curves(probe_curves, everything, notes).values() if engine is None or c.engine == engine
    ]
    shown = everything
    if everything is not None and eval_name is not None:
        # Levels, runs and throughput sum the reported cells only: one eval's need a pass of their own.
        shown = concurrency(all_cells, eval_name=eval_name, engine=engine, merge_gap_s=merge_gap_s)
    elif everything is not None and engine is not None:
        shown = ConcurrencyReport(
            eval_name=None, engines=[e for e in everything.engines if e.engine == engine]
        )
    neighbours = [
        report
        for report in neighbour_costs(
            all_cells,
            all_windows,
            eval_names=[eval_name] if eval_name else None,
            min_cells=MIN_CELLS_FOR_NEIGHBOUR,
            merge_gap_s=merge_gap_s,
        )
        if (report.baseline.n or windows_touched(report)) and (engine is None or _touches(report, engine))
    ]
    for report in neighbours:
        notes.extend(report.warnings)
    advice = None
    if all_cells:
        advice = advise(
            all_cells,
            curves,
            neighbour=neighbours,
            config=config,
            gpu_utilization=gpu_utilization,
            token_rates=token_rates,
            eval_name=eval_name,
            engine=engine,
        )
    return Overview(
        eval_name=eval_name,
        engine=engine,
        config=config,
        curves=curves,
        concurrency=shown,
        neighbours=neighbours,
        advice=advice,
        notes=notes,
    )
