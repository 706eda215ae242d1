"""What a report shows: every analysis the recorded inputs allow, run the way `advise` runs them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import _semconv as sc
from .._exceptions import InputError
from ..analysis.outcomes import DeadlineOutcome, deadline_outcomes
from ..views.tables import time_scales
from .inputs import ReportInputs

if TYPE_CHECKING:
    from ..analysis.adaptive_decisions import AdaptiveDecisions
    from ..analysis.advisor import Advice, AdvisorConfig
    from ..analysis.budget import CellBudget, EvalBudget
    from ..analysis.concurrency import ConcurrencyReport
    from ..analysis.energy import EnergyReport
    from ..analysis.gauges import InstrumentsReport
    from ..analysis.neighbour import NeighbourReport
    from ..analysis.overview import Overview
    from ..analysis.timeouts import TimeoutVerdict
    from ..model import Cell
    from ..records.cell_columns import CellColumns
    from ..records.probe_report import ProbeReport
    from ..records.rate_curve import RateCurve
    from ..views.answers import Answer

__all__ = ["ReportContent", "build_report", "eval_time_scales", "overview_from_inputs"]


@dataclass
class ReportContent:
    """Everything the page shows; each part is None or empty where the data does not allow it."""

    source: str
    eval_name: str | None
    n_cells: int
    n_windows: int
    probes: list[ProbeReport]
    curves: list[RateCurve]
    concurrency: ConcurrencyReport | None
    neighbours: list[NeighbourReport]
    outcomes: list[DeadlineOutcome]
    advice: Advice | None
    notes: list[str] = field(default_factory=list)
    time_scales: dict[str, float] = field(default_factory=dict)
    """Evals recorded under a model clock, and its speed: their times are labelled model time."""
    engine_urls: dict[str, str] = field(default_factory=dict)
    """Where each engine answered: what a measuring command names."""
    scales: list[float] = field(default_factory=lambda: [1.0])
    """The time scales the cells were recorded under (1: real time), for model-time labels."""
    answers: list[Answer] = field(default_factory=list)
    """The questions answered in a line each (`spark_otel.views.answers`): the page opens with them."""
    energy: EnergyReport | None = None
    """Each eval's joules per token and per cell, where GPU readings cover its cells."""
    instruments: InstrumentsReport | None = None
    """Which gauges measured load (`instrument_verdicts`), where the inputs hold load and gauges."""
    budgets: list[CellBudget] = field(default_factory=list)
    """Where each cell's wall time went, for the cells recorded with a time budget."""
    eval_budgets: list[EvalBudget] = field(default_factory=list)
    timeouts: list[TimeoutVerdict] = field(default_factory=list)
    """A verdict for every cell that hit its ceiling."""
    requests_as_cells: int = 0
    """Of the ``n_cells``, requests no cell held, each standing in for a cell (`analysis.request_cells`)."""
    decisions: AdaptiveDecisions | None = None
    """What the adaptive governor decided for the cells reported on (none decided: ``any`` False)."""


def overview_from_inputs(
    inputs: ReportInputs,
    *,
    config: AdvisorConfig | None = None,
    eval_name: str | None = None,
    engine: str | None = None,
    with_concurrency: bool = True,
    with_cells: bool = True,
    columns: CellColumns | None = None,
) -> Overview:
    """`spark_otel.analysis.overview` of recorded inputs: the one call `spark-otel advise` and
    `spark-otel report` both make, so the same records give the same rules. The cells are
    ``columns`` (the inputs' cells as columns, made once by a caller that reads them too), else
    the inputs' columns where they were read as columns, else their records;
    ``with_concurrency=False`` leaves the concurrency report out and ``with_cells=False`` the
    per-cell rows (for an answer that shows none). An unknown ``eval_name`` is an `InputError`
    naming the inputs' source."""
    from ..analysis.overview import overview

    try:
        return overview(
            columns if columns is not None else _cells_of(inputs),
            inputs.windows,
            inputs.curves or [p.curve for p in inputs.probes],
            config=config,
            gpu_utilization=inputs.gpu_utilization,
            token_rates=inputs.token_rates or None,
            eval_name=eval_name,
            engine=engine,
            engine_urls=inputs.engine_urls,
            with_concurrency=with_concurrency,
            with_cells=with_cells,
        )
    except InputError as exc:
        raise InputError(f"{inputs.source}: {exc}") from exc


def _cells_of(inputs: ReportInputs) -> CellColumns | list[Cell]:
    return inputs.cell_columns if inputs.cell_columns is not None else inputs.cells


def build_report(
    inputs: ReportInputs, *, eval_name: str | None = None, config: AdvisorConfig | None = None
) -> ReportContent:
    """Run every analysis the inputs allow, as `spark-otel advise` does (``config`` holds the
    ceiling and threshold). Raises `InputError` when there is nothing to report."""
    from ..analysis.request_cells import count_requests_as_cells

    if not (inputs.cells or inputs.probes or inputs.curves or inputs.windows):
        from ..views.requests import no_cells

        what = "cells, load windows or probe runs to report on"
        raise InputError(no_cells(inputs.source, inputs.holdings, what=what))
    from ..analysis.adaptive_decisions import adaptive_decisions
    from ..analysis.budget import cell_budgets, eval_budgets
    from ..analysis.energy import attribute, restrict
    from ..views.answers import answers

    columns = _columns_of(inputs)
    found = overview_from_inputs(inputs, config=config, eval_name=eval_name, columns=columns)
    outcome_cells = [c for c in inputs.cells if eval_name is None or c.eval_name == eval_name]
    energy = attribute(inputs.cells, inputs.gpu_energy)  # every cell on the box shares its energy
    if energy is not None and eval_name is not None:
        energy = restrict(energy, eval_name=eval_name)
    budgets = cell_budgets(outcome_cells, inputs.requests, inputs.server_timings)
    return ReportContent(
        source=inputs.source,
        eval_name=eval_name,
        n_cells=len(inputs.cells),
        n_windows=len(inputs.windows),
        probes=inputs.probes,
        curves=found.curves,
        concurrency=found.concurrency,
        neighbours=found.neighbours,
        outcomes=deadline_outcomes(outcome_cells),
        advice=found.advice,
        notes=found.notes,
        time_scales=eval_time_scales(inputs.cells),
        engine_urls=inputs.engine_urls,
        answers=answers(found),
        scales=time_scales(inputs.cells) or [1.0],
        energy=energy,
        instruments=inputs.instruments,
        budgets=budgets,
        eval_budgets=eval_budgets(budgets, outcome_cells),
        timeouts=_timeouts(inputs, columns, eval_name),
        requests_as_cells=count_requests_as_cells(inputs.cells),
        decisions=adaptive_decisions(outcome_cells),
    )


def _columns_of(inputs: ReportInputs) -> CellColumns | None:
    """The inputs' cells as columns, made once for every analysis that reads columns; None where
    there are none (the row path then, and numpy need not be installed)."""
    if inputs.cell_columns is not None:
        return inputs.cell_columns
    if not inputs.cells:
        return None
    from ..records.cell_columns import CellColumns

    return CellColumns.from_cells(inputs.cells)


def _timeouts(
    inputs: ReportInputs, columns: CellColumns | None, eval_name: str | None
) -> list[TimeoutVerdict]:
    """`timeout_verdicts` of the inputs' cells, over their columns where there are any (the same
    verdicts: `tests/analysis/test_timeout_columns.py`), with each cut-off cell's governor wait
    from its record, which the columns do not carry."""
    from ..analysis.timeouts import cut_off_uids, timeout_verdicts, timeout_verdicts_of_columns

    if columns is None:
        return timeout_verdicts(inputs.cells, inputs.windows, eval_name=eval_name)
    cut = set(cut_off_uids(columns, eval_name=eval_name))
    if not cut:
        return []
    waits = {c.uid: c.admission_s for c in inputs.cells if c.uid in cut and c.admission_s is not None}
    return timeout_verdicts_of_columns(columns, inputs.windows, eval_name=eval_name, admissions=waits)


def eval_time_scales(cells: Iterable[Cell]) -> dict[str, float]:
    """Each eval recorded under a model clock, with its speed (the largest, if cells differ)."""
    scales: dict[str, float] = {}
    for c in cells:
        scale = c.attributes.get(sc.TIME_SCALE)
        if isinstance(scale, int | float) and scale != 1:
            scales[c.eval_name] = max(float(scale), scales.get(c.eval_name, 0.0))
    return scales
