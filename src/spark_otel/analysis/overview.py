"""Every analysis of one box's records at once: the curves, concurrency, neighbour costs, advice.

`spark-otel advise` and `spark-otel report` (and the demo, through the report) call this one
function, so the same store gives the same rules wherever they are read. It decides once:

* **Curves.** Candidates per engine: every probe curve, and the curve the engine's recorded cells
  trace out (every eval's cells on it: a curve belongs to the engine, not to an eval). A probe
  whose levels overlapped cells on its engine was measured under load, and says so. The cells'
  curve leaves out cells that ran beside load their in-flight count does not see (a probe level,
  a recorded load, another engine's cells); when that leaves none, it uses them all and is
  marked under load. The advisor picks among the candidates (`advisor.choose_curves`).
* **Neighbour costs.** `neighbour_costs` (over columns: `neighbour_costs_of_columns`) for the
  evals in scope (all, or ``eval_name``) with at least `MIN_CELLS_FOR_NEIGHBOUR` cells, one report
  per worker count where an eval ran at several; reports that priced nothing (no baseline and no
  window touched) are dropped, and with ``engine``, so are those of evals that neither ran on it
  nor ran beside load on it.
* **Advice.** `advise` over every cell (so in-flight levels see all the load), narrowed to
  ``eval_name`` and ``engine``, with the GPU utilization and token-rate samples given.

Over columns: the cells come in as `CellColumns` (or as records, made columns once), and the
concurrency, the curves (`curve_candidates`), the neighbour costs and the advice are computed
over them without a `Cell` per row. Pure: records or columns and numbers in, a frozen result out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from .._exceptions import InputError
from ..model import Cell, LoadWindow
from ..records.rate_curve import RateCurve
from ._result import Result
from .advisor import Advice, AdvisorConfig, advise, choose_curves
from .advisor.predict import require_numpy
from .concurrency import ConcurrencyReport
from .neighbour import MIN_CELLS_FOR_NEIGHBOUR, NeighbourReport, windows_touched
from .windows import DEFAULT_MERGE_GAP_S

if TYPE_CHECKING:
    from ..records.cell_columns import CellColumns

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


def _touches(report: NeighbourReport, engine: str) -> bool:
    """The eval ran on ``engine``, or some of its cells ran beside load on it."""
    return report.engine == engine or any(w.engine == engine for w in windows_touched(report))


def overview(
    cells: Iterable[Cell] | CellColumns,
    windows: Iterable[LoadWindow] = (),
    probe_curves: Iterable[RateCurve] = (),
    *,
    config: AdvisorConfig | None = None,
    gpu_utilization: Sequence[float] = (),
    token_rates: Sequence[float] | None = None,
    eval_name: str | None = None,
    engine: str | None = None,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
    engine_urls: Mapping[str, str] | None = None,
    with_cells: bool = True,
    with_concurrency: bool = True,
) -> Overview:
    """Curves, concurrency, neighbour costs and advice from one box's records.

    ``cells`` are records or their columns (`CellColumns`, as `Store.cell_columns` reads them):
    the same overview either way, computed over columns (numpy, the ``cli`` extra: `ConfigError`
    naming it where it is missing). ``with_cells=False`` leaves the concurrency report's per-cell
    rows out, and the neighbour reports' rows no answer reads (`NeighbourColumns.report`: the cells
    but those `no_baseline_reason` reads, the windows no cell is attributed to), for an answer that
    shows none, every other figure the same; ``with_concurrency=False``
    leaves the whole report out (None: an answer that shows none, as `advise`; the curves are the
    same, from the cells' levels either way). ``token_rates`` default
    to the curves' aggregate rates (see `advise`). Raises `InputError` when ``eval_name`` names
    no eval in ``cells``.
    """
    require_numpy()
    from ..records.cell_columns import CellColumns
    from .concurrency_columns import concurrency_of_columns
    from .curve_candidates import curve_candidates
    from .neighbour_columns import neighbour_costs_of_columns

    config = config or AdvisorConfig()
    rows = None if isinstance(cells, CellColumns) else list(cells)
    columns = cells if isinstance(cells, CellColumns) else CellColumns.from_cells(rows or [])
    all_windows = list(windows)
    evals = sorted(set(columns.eval_name))
    if eval_name is not None and eval_name not in evals:
        raise InputError(f"no cells recorded for eval {eval_name!r} (evals: {', '.join(evals) or 'none'})")
    notes: list[str] = []
    candidates = curve_candidates(probe_curves, columns, all_windows, notes)
    curves = [c for c in choose_curves(candidates).values() if engine is None or c.engine == engine]
    everything = None
    if len(columns) and with_concurrency:
        everything = concurrency_of_columns(columns, merge_gap_s=merge_gap_s, with_cells=with_cells)
    shown = everything
    if everything is not None and eval_name is not None:
        # Levels, runs and throughput sum the reported cells only: one eval's need a pass of their own.
        shown = concurrency_of_columns(
            columns, eval_name=eval_name, engine=engine, merge_gap_s=merge_gap_s, with_cells=with_cells
        )
    elif everything is not None and engine is not None:
        kept = [e for e in everything.engines if e.engine == engine]
        shown = ConcurrencyReport(
            eval_name=None, engines=kept, requests_as_cells=sum(e.requests_as_cells for e in kept)
        )
    priced = [
        found.report(with_cells=with_cells, all_windows=with_cells)
        for found in neighbour_costs_of_columns(
            columns,
            all_windows,
            eval_names=[eval_name] if eval_name else None,
            min_cells=MIN_CELLS_FOR_NEIGHBOUR,
            merge_gap_s=merge_gap_s,
        )
    ]
    neighbours = [
        report
        for report in priced
        if (report.baseline.n or windows_touched(report)) and (engine is None or _touches(report, engine))
    ]
    for report in neighbours:
        notes.extend(report.warnings)
    advice = None
    if len(columns):
        advice = advise(
            columns,
            curves,
            engine_urls=engine_urls,
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
