"""`advise`: every rule the evidence supports, and for the rest, what to measure."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ...model import Cell
from ...records.rate_curve import RateCurve
from ..concurrency import UNKNOWN_ENGINE, in_flight, in_flight_level
from ..neighbour import NeighbourReport
from ..rates import ceiling_hit, rated_decode_rate
from ..request_cells import count_requests_as_cells
from .advice_model import Advice, AdvisorConfig, CellClass, ClassAdvice, QueueRule
from .evidence import choose_curves
from .predict import class_advice, classify
from .queue_rules import batch_rule, cross_engine_rules, gauge_rule, lane_rule, measure_first_rule

__all__ = ["advise", "supports_worker_counts"]


def supports_worker_counts(curve: RateCurve | None) -> bool:
    """A curve a worker count may rest on: one stream alone measured, and a second level."""
    return curve is not None and curve.measured_single_stream and len(curve.points) >= 2


def advise(
    cells: Iterable[Cell],
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

    ``curves`` may hold several per engine (probes, the engine's cells); `choose_curves` picks
    the one each engine's rules rest on. ``engine_urls`` fill the commands a rule prints.
    ``eval_name`` and ``engine`` narrow the advice; every cell given still counts toward the
    load the others ran under."""
    config = config or AdvisorConfig()
    urls = engine_urls or {}
    cells = list(cells)
    in_scope = [
        c
        for c in cells
        if (eval_name is None or c.eval_name == eval_name)
        and (engine is None or (c.engine or UNKNOWN_ENGINE) == engine)
    ]
    curve_by_engine = {
        name: curve for name, curve in choose_curves(curves).items() if engine is None or name == engine
    }
    classes: list[ClassAdvice] = []
    measure_first: list[QueueRule] = []
    for name, engine_cells in _engines_to_advise(cells, eval_name=eval_name, engine=engine):
        curve = curve_by_engine.get(name)
        per_eval = _members_by_eval(engine_cells, eval_name)
        if supports_worker_counts(curve):
            assert curve is not None
            classes += _class_advice(name, per_eval, curve, config)
        else:
            measure_first += _measure_first_rules(name, engine_cells, per_eval, curve, urls)
    rules = [batch_rule(a, curve_by_engine[a.engine], urls) for a in classes] + measure_first
    rules += [lane_rule(c, config, urls) for c in curve_by_engine.values()]
    bound = {(a.engine, a.eval_name) for a in classes if a.ceiling_bound}
    reports = [r for r in neighbour if eval_name is None or r.eval_name == eval_name]
    rules += cross_engine_rules(reports, bound, config.threshold, engine)
    rules += _gauge_rules(gpu_utilization, token_rates, curve_by_engine.values(), config)
    return Advice(
        config=config,
        classes=classes,
        rules=rules,
        n_cells=len(in_scope),
        requests_as_cells=count_requests_as_cells(in_scope),
    )


_Member = tuple[Cell, int]
"""A cell and the in-flight level it ran at."""


def _engines_to_advise(
    cells: Iterable[Cell], *, eval_name: str | None, engine: str | None
) -> Iterator[tuple[str, list[Cell]]]:
    """Each engine advice is asked for (``engine``, else every one that ran a cell of ``eval_name``)
    with all its cells, by name: every cell counts toward the load the others ran under."""
    by_engine: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_engine[cell.engine or UNKNOWN_ENGINE].append(cell)
    for name in sorted(by_engine):
        engine_cells = by_engine[name]
        if (engine is None or name == engine) and any(
            eval_name is None or c.eval_name == eval_name for c in engine_cells
        ):
            yield name, engine_cells


def _members_by_eval(engine_cells: Sequence[Cell], eval_name: str | None) -> dict[str, list[_Member]]:
    """The cells that tell something about length (a rated decode or a ceiling hit), with the
    level each ran at, by eval; only ``eval_name``'s when given."""
    levels = [in_flight_level(x) if x is not None else 1 for x in in_flight(engine_cells)]
    per_eval: dict[str, list[_Member]] = defaultdict(list)
    for cell, level in zip(engine_cells, levels, strict=True):
        # Failed cells and cells without tokens tell nothing about length: load only.
        usable = ceiling_hit(cell) or rated_decode_rate(cell) is not None
        if usable and (eval_name is None or cell.eval_name == eval_name):
            per_eval[cell.eval_name].append((cell, level))
    return per_eval


def _measure_first_rules(
    name: str,
    engine_cells: Sequence[Cell],
    per_eval: Mapping[str, list[_Member]],
    curve: RateCurve | None,
    urls: Mapping[str, str],
) -> list[QueueRule]:
    """For an engine whose curve cannot carry a worker count: what to measure, one rule per eval."""
    if not per_eval:  # the engine's cells tell nothing about length: one rule for it
        return [measure_first_rule(name, None, len(engine_cells), curve, urls)]
    return [
        measure_first_rule(name, ev, len(members), curve, urls) for ev, members in sorted(per_eval.items())
    ]


def _class_advice(
    name: str, per_eval: Mapping[str, list[_Member]], curve: RateCurve, config: AdvisorConfig
) -> list[ClassAdvice]:
    """One engine's advice per (eval, cell class), predicted from its curve."""
    return [
        class_advice(name, ev, cell_class=cell_class, members=group, curve=curve, config=config)
        for ev, members in sorted(per_eval.items())
        for cell_class, group in _by_class(members, config)
    ]


def _by_class(members: Sequence[_Member], config: AdvisorConfig) -> list[tuple[CellClass, list[_Member]]]:
    """An eval's cells by class, in `CellClass` order; a cell whose class cannot be told joins
    the eval's most common class (generation-heavy when none can be told)."""
    labels = [classify(cell, config) for cell, _ in members]
    known = Counter(x for x in labels if x is not None)
    dominant = known.most_common(1)[0][0] if known else CellClass.GENERATION_HEAVY
    groups: dict[CellClass, list[_Member]] = defaultdict(list)
    for member, label in zip(members, labels, strict=True):
        groups[label or dominant].append(member)
    return [(cell_class, groups[cell_class]) for cell_class in CellClass if groups.get(cell_class)]


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
