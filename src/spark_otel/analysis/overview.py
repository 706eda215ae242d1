"""Every analysis of one box's records at once: the curves, concurrency, neighbour costs, advice.

`spark-otel advise` and `spark-otel report` (and the demo, through the report) call this one
function, so the same store gives the same rules wherever they are read. It decides once:

* **Curves.** Candidates per engine: every probe curve, and the curve the engine's recorded cells
  trace out (every eval's cells on it: a curve belongs to the engine, not to an eval). A probe
  whose levels overlapped cells on its engine was measured under load, and says so. The cells'
  curve leaves out cells that ran beside load their in-flight count does not see (a probe level,
  a recorded load, another engine's cells); when that leaves none, it uses them all and is
  marked under load. The advisor picks among the candidates (`advisor.choose_curves`).
* **Neighbour costs.** `neighbour_costs` for the evals in scope (all, or ``eval_name``) with at
  least `MIN_CELLS_FOR_NEIGHBOUR` cells, one report per worker count where an eval ran at
  several; reports that priced nothing (no baseline and no window touched) are dropped, and with
  ``engine``, so are those of evals that neither ran on it nor ran beside load on it.
* **Advice.** `advise` over every cell (so in-flight levels see all the load), narrowed to
  ``eval_name`` and ``engine``, with the GPU utilization and token-rate samples given.

Pure: records and numbers in, a frozen result out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from .. import _semconv as sc
from .._exceptions import ConfigError, InputError
from ..model import Cell, LoadWindow
from ..records.rate_curve import RateCurve
from ._result import Result
from .advisor import Advice, AdvisorConfig, advise, choose_curves
from .concurrency import UNKNOWN_ENGINE, ConcurrencyReport, concurrency
from .curve import curve_from_concurrency
from .neighbour import MIN_CELLS_FOR_NEIGHBOUR, NeighbourReport, neighbour_costs, windows_touched
from .windows import DEFAULT_MERGE_GAP_S, overlapping_pairs, windows_from_cells

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


def _probe_under_load(curve: RateCurve, cells: Sequence[Cell], windows: Sequence[LoadWindow]) -> RateCurve:
    """The probe curve, marked under load when cells ran on its engine during its levels."""
    if curve.under_load is not None or curve.run is None:
        return curve
    levels = [
        (w.start_unix_ns, w.end_unix_ns)
        for w in windows
        if w.kind == "probe" and w.engine == curve.engine and w.attributes.get(sc.PROBE_RUN) == curve.run
    ]
    engine_cells = [c for c in cells if c.engine == curve.engine]
    intervals = [(c.start_unix_ns, c.end_unix_ns) for c in engine_cells]
    beside = sorted({i for i, _, _ in overlapping_pairs(intervals, levels)})
    if not beside:
        return curve
    evals = ", ".join(sorted({engine_cells[i].eval_name for i in beside}))
    return curve.model_copy(
        update={"under_load": f"{len(beside)} cells of {evals} ran on {curve.engine} during the probe"}
    )


def _beside_unseen_load(cells: Sequence[Cell], windows: Sequence[LoadWindow], engine: str) -> frozenset[str]:
    """Cells on ``engine`` that overlapped load their in-flight count does not see: recorded
    windows (probe levels, loads) on any engine, and other engines' cells."""
    own = [c for c in cells if (c.engine or UNKNOWN_ENGINE) == engine]
    unseen = [(w.start_unix_ns, w.end_unix_ns) for w in windows if w.kind != "eval" or w.engine != engine]
    unseen += [
        (w.start_unix_ns, w.end_unix_ns)
        for w in windows_from_cells(c for c in cells if (c.engine or UNKNOWN_ENGINE) != engine)
    ]
    pairs = overlapping_pairs([(c.start_unix_ns, c.end_unix_ns) for c in own], unseen)
    return frozenset(own[i].uid for i, _, _ in pairs)


def _curve_candidates(
    probe_curves: Iterable[RateCurve],
    cells: Sequence[Cell],
    windows: Sequence[LoadWindow],
    everything: ConcurrencyReport | None,
    notes: list[str],
) -> list[RateCurve]:
    candidates = [_probe_under_load(curve, cells, windows) for curve in probe_curves]
    if everything is None:
        return candidates
    for engine in everything.engines:
        name = engine.engine
        try:
            clean = curve_from_concurrency(
                everything, name, exclude=_beside_unseen_load(cells, windows, name)
            )
        except InputError:
            clean = None
        try:
            if clean is None:
                loaded = curve_from_concurrency(everything, name)
                clean = loaded.model_copy(
                    update={"under_load": f"every cell on {name} ran beside a probe or another engine's load"}
                )
            candidates.append(clean)
        except (InputError, ConfigError) as exc:
            notes.append(f"no curve from cells on {name}: {exc}")
    return candidates


def _touches(report: NeighbourReport, engine: str) -> bool:
    """The eval ran on ``engine``, or some of its cells ran beside load on it."""
    return report.engine == engine or any(w.engine == engine for w in windows_touched(report))


def _concurrency_over_columns(cells: list[Cell]) -> Callable[..., ConcurrencyReport]:
    """`concurrency` of ``cells``, over columns where numpy is installed (the same report in a
    third of the time), else over the cells (the advice then says which extra it needs)."""
    try:
        from ..records.cell_columns import CellColumns
        from .concurrency_columns import concurrency_of_columns
    except ImportError:
        return lambda **options: concurrency(cells, **options)
    columns = CellColumns.from_cells(cells)
    return lambda **options: concurrency_of_columns(columns, **options)


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
    engine_urls: Mapping[str, str] | None = None,
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
    over_columns = _concurrency_over_columns(all_cells)
    everything = over_columns(merge_gap_s=merge_gap_s) if all_cells else None
    candidates = _curve_candidates(probe_curves, all_cells, all_windows, everything, notes)
    curves = [c for c in choose_curves(candidates).values() if engine is None or c.engine == engine]
    shown = everything
    if everything is not None and eval_name is not None:
        # Levels, runs and throughput sum the reported cells only: one eval's need a pass of their own.
        shown = over_columns(eval_name=eval_name, engine=engine, merge_gap_s=merge_gap_s)
    elif everything is not None and engine is not None:
        kept = [e for e in everything.engines if e.engine == engine]
        shown = ConcurrencyReport(
            eval_name=None, engines=kept, requests_as_cells=sum(e.requests_as_cells for e in kept)
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
