"""`advise`: every rule the evidence supports, and for the rest, what to measure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ...model import Cell
from ...records.rate_curve import RateCurve
from ..neighbour import NeighbourReport
from .advice_model import Advice, AdvisorConfig, ClassAdvice, QueueRule
from .evidence import choose_curves
from .predict import require_numpy
from .queue_rules import batch_rule, cross_engine_rules, gauge_rule, lane_rule, measure_first_rule

if TYPE_CHECKING:
    from ...records.cell_columns import CellColumns

__all__ = ["advise", "supports_worker_counts"]


def supports_worker_counts(curve: RateCurve | None) -> bool:
    """A curve a worker count may rest on: one stream alone measured, and a second level."""
    return curve is not None and curve.measured_single_stream and len(curve.points) >= 2


def advise(
    cells: Iterable[Cell] | CellColumns,
    curves: Iterable[RateCurve],
    *,
    neighbour: Iterable[NeighbourReport] = (),
    config: AdvisorConfig | None = None,
    gpu_utilization: Sequence[float] = (),
    token_rates: Sequence[float] | None = None,
    eval_name: str | None = None,
    engine: str | None = None,
    engine_urls: Mapping[str, str] | None = None,
) -> Advice:
    """The queue rules, computed: one batch rule per (engine, eval, class) whose engine has a curve
    that measured one stream and a second level (else one rule saying what to measure), one lane
    rule per curve (a cap where the aggregate fell or flattened, else what to measure),
    cross-engine rules from ``neighbour`` reports (one per engine and eval), and the gauge rule
    when ``gpu_utilization`` (fraction or percent) stays pinned while ``token_rates`` vary (by
    default the curves' aggregate rates).

    ``cells`` are records or their columns (`CellColumns`, as the store reads them: the same
    advice without a `Cell` per row); either way the work is over columns (numpy, the ``cli``
    extra: `ConfigError` naming it where it is missing). ``curves`` may hold several per engine
    (probes, the engine's cells); `choose_curves` picks the one each engine's rules rest on.
    ``engine_urls`` fill the commands a rule prints. ``eval_name`` and ``engine`` narrow the
    advice; every cell given still counts toward the load the others ran under."""
    require_numpy()
    from ...records.cell_columns import CellColumns
    from . import classes

    config = config or AdvisorConfig()
    urls = engine_urls or {}
    columns = cells if isinstance(cells, CellColumns) else CellColumns.from_cells(list(cells))
    in_scope = classes.scope_mask(columns, eval_name, engine)
    curve_by_engine = {
        name: curve for name, curve in choose_curves(curves).items() if engine is None or name == engine
    }
    advised: list[ClassAdvice] = []
    measure_first: list[QueueRule] = []
    for name, engine_cells in classes.engines_to_advise(columns, eval_name=eval_name, engine=engine):
        curve = curve_by_engine.get(name)
        per_eval = classes.members_by_eval(engine_cells, eval_name)
        if supports_worker_counts(curve):
            assert curve is not None
            advised += [
                classes.class_advice(
                    name, ev, cell_class=cell_class, members=group, curve=curve, config=config
                )
                for ev, members in per_eval.items()
                for cell_class, group in classes.by_class(members, config)
            ]
        elif not per_eval:  # the engine's cells tell nothing about length: one rule for it
            measure_first.append(measure_first_rule(name, None, len(engine_cells), curve, urls))
        else:  # what to measure, one rule per eval
            measure_first += [
                measure_first_rule(name, ev, len(members), curve, urls) for ev, members in per_eval.items()
            ]
    rules = [batch_rule(a, curve_by_engine[a.engine], urls) for a in advised] + measure_first
    rules += [lane_rule(c, config, urls) for c in curve_by_engine.values()]
    bound = {(a.engine, a.eval_name) for a in advised if a.ceiling_bound}
    reports = [r for r in neighbour if eval_name is None or r.eval_name == eval_name]
    rules += cross_engine_rules(reports, bound, config.threshold, engine)
    rules += _gauge_rules(gpu_utilization, token_rates, curve_by_engine.values(), config)
    return Advice(
        config=config,
        classes=advised,
        rules=rules,
        n_cells=int(in_scope.sum()),
        requests_as_cells=classes.requests_in(columns, in_scope),
    )


def _gauge_rules(
    gpu_utilization: Sequence[float],
    token_rates: Sequence[float] | None,
    curves: Iterable[RateCurve],
    config: AdvisorConfig,
) -> list[QueueRule]:
    """The gauge rule (read load from token counts) when GPU utilization stays pinned while token
    rates vary; by default the rates are the curves' aggregate rates."""
    if token_rates is None:
        token_rates = [p.aggregate_rate for c in curves for p in c.points]
    gauge = gauge_rule(gpu_utilization, token_rates, config)
    return [] if gauge is None else [gauge]
