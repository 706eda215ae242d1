"""Each queue rule with the facts it rests on (n, the levels measured, intervals, the curve, the
costliest window), and for what cannot be answered yet, the command that would measure it. The
rule and its evidence in words are `views.rules`'."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from ...records.rate_curve import RateCurve
from ..neighbour import NeighbourReport, WindowCost
from ..stats import summarize
from .advice_model import (
    AdvisorConfig,
    ClassAdvice,
    CrossEngineEvidence,
    Evidence,
    GaugeEvidence,
    MeasureReason,
    QueueRule,
    RuleKind,
)
from .evidence import engine_url, lane_shape, probe_command

__all__ = ["batch_rule", "cross_engine_rules", "gauge_rule", "lane_rule", "measure_first_rule"]

_FIRST_LEVELS = (1, 2, 4, 8)


def _curve_figures(curve: RateCurve) -> Evidence:
    return Evidence(
        levels=curve.streams,
        under_load=curve.under_load is not None,
        model=curve.model,
        measured_unix_ns=curve.measured_unix_ns,
    )


def batch_rule(a: ClassAdvice, curve: RateCurve, urls: Mapping[str, str]) -> QueueRule:
    """Workers for one class, with n, the curve it rests on and both intervals; under load, the
    probe that would measure it idle."""
    again = probe_command(a.engine, engine_url(a.engine, urls), curve.streams) if curve.under_load else None
    figures = _curve_figures(curve).model_copy(
        update={
            "n_cells": a.n_cells,
            "per_stream_cost": a.per_stream_cost,
            "per_stream_cost_interval": a.per_stream_cost_interval,
            "speedup": a.speedup,
            "speedup_interval": a.speedup_interval,
        }
    )
    return QueueRule(
        kind=RuleKind.BATCH,
        engine=a.engine,
        eval_name=a.eval_name,
        cell_class=a.cell_class,
        workers=a.recommended_workers,
        ceiling_bound=a.ceiling_bound,
        command=again,
        figures=figures,
        curve=curve,
        advice=a,
    )


def measure_first_rule(
    engine: str,
    eval_name: str | None,
    n_cells: int,
    curve: RateCurve | None,
    urls: Mapping[str, str],
) -> QueueRule:
    """What stands between an eval's cells and a worker count: no curve, no measured single
    stream, or a single level."""
    missing: MeasureReason
    if curve is None:
        missing = "no curve"
    elif not curve.measured_single_stream:
        missing = "no single stream"
    else:
        missing = "one level"
    return QueueRule(
        kind=RuleKind.MEASURE,
        engine=engine,
        eval_name=eval_name,
        command=probe_command(engine, engine_url(engine, urls), _FIRST_LEVELS),
        figures=(_curve_figures(curve) if curve is not None else Evidence()).model_copy(
            update={"n_cells": n_cells}
        ),
        curve=curve,
        missing=missing,
    )


def lane_rule(curve: RateCurve, config: AdvisorConfig, urls: Mapping[str, str]) -> QueueRule:
    """A cap where the aggregate fell or flattened; otherwise what to measure to find one."""
    shape = lane_shape(curve, config.flat_gain)
    if shape.kind in ("falls", "flattens"):
        return QueueRule(
            kind=RuleKind.CAP,
            engine=curve.engine,
            workers=shape.streams,
            figures=_curve_figures(curve),
            curve=curve,
            shape=shape,
        )
    top = shape.streams
    return QueueRule(
        kind=RuleKind.MEASURE,
        engine=curve.engine,
        command=probe_command(curve.engine, engine_url(curve.engine, urls), (top, 2 * top, 4 * top)),
        figures=_curve_figures(curve),
        curve=curve,
        shape=shape,
        missing="lane still rising",
    )


def _neighbour_cost_interval(base: NeighbourReport, w: WindowCost) -> tuple[float, float] | None:
    b, r = base.baseline, w.rate
    if None in (b.ci_low, b.ci_high, r.ci_low, r.ci_high) or not b.ci_low or not b.ci_high:
        return None
    assert b.ci_low is not None
    assert b.ci_high is not None
    assert r.ci_low is not None
    assert r.ci_high is not None
    return 1 - r.ci_high / b.ci_low, 1 - r.ci_low / b.ci_high


def _flagged(
    reports: Iterable[NeighbourReport], threshold: float, engine: str | None
) -> tuple[
    dict[tuple[str, str], dict[str, tuple[NeighbourReport, WindowCost]]],
    dict[tuple[str, str], list[WindowCost]],
]:
    """Per (other engine, eval): the windows of that engine past ``threshold`` (the costliest per
    window), and its one-worker windows whatever their cost."""
    flagged: dict[tuple[str, str], dict[str, tuple[NeighbourReport, WindowCost]]] = defaultdict(dict)
    single: dict[tuple[str, str], list[WindowCost]] = defaultdict(list)
    for report in reports:
        if report.baseline.median is None:
            continue
        for w in report.windows:
            if w.same_engine is not False or w.cost is None or w.engine is None:
                continue
            if engine is not None and engine not in (w.engine, report.engine):
                continue
            if w.streams == 1:
                single[(w.engine, report.eval_name)].append(w)
            if w.cost <= threshold:
                continue
            seen = flagged[(w.engine, report.eval_name)]
            if w.uid not in seen or w.cost > (seen[w.uid][1].cost or 0.0):
                seen[w.uid] = (report, w)
    return flagged, single


def cross_engine_rules(
    reports: Iterable[NeighbourReport],
    ceiling_bound: set[tuple[str, str]],
    threshold: float,
    engine: str | None = None,
) -> list[QueueRule]:
    """One rule per (other engine, eval): the costliest window past ``threshold`` is its evidence,
    however many windows (or worker-count reports of the eval) agree. With ``engine``, only
    rules that name it (as the load's engine or the eval's).

    The rule limits the other engine while the eval runs: to one cell (no batching) when the
    eval's cells beside that engine at one worker cost at most ``threshold``, else to none."""
    flagged, single = _flagged(reports, threshold, engine)
    rules = []
    for (load_engine, eval_name), by_window in flagged.items():
        hits = list(by_window.values())
        report, w = max(hits, key=lambda hit: hit[1].cost or 0.0)
        assert report.baseline.median is not None
        assert w.cost is not None
        assert w.rate.median is not None
        alone = [x for x in single[(load_engine, eval_name)] if x.cost is not None]
        one_ok = bool(alone) and all((x.cost or 0.0) <= threshold for x in alone)
        cost_interval = _neighbour_cost_interval(report, w)
        rules.append(
            QueueRule(
                kind=RuleKind.CROSS_ENGINE,
                engine=load_engine,
                eval_name=eval_name,
                workers=1 if one_ok else 0,
                while_engine=report.engine,
                ceiling_bound=(report.engine or "", eval_name) in ceiling_bound,
                figures=Evidence(
                    n_cells=w.rate.n,
                    neighbour_cost=w.cost,
                    neighbour_cost_interval=cost_interval,
                    measured_unix_ns=w.end_unix_ns,
                ),
                cross=CrossEngineEvidence(
                    window=w.name,
                    eval_label=report.label,
                    rate=w.rate.median,
                    rate_n=w.rate.n,
                    baseline=report.baseline.median,
                    baseline_n=report.baseline.n,
                    threshold=threshold,
                    timeouts=w.timeouts,
                    failures=w.failures,
                    n_cells=w.n_cells,
                    more_windows=len(hits) - 1,
                    cost_at_one=(summarize(x.cost for x in alone).median or 0.0) if one_ok else None,
                ),
            )
        )
    return rules


def gauge_rule(
    utilization: Sequence[float], token_rates: Sequence[float], config: AdvisorConfig
) -> QueueRule | None:
    """Read load from token counts: where utilization stayed pinned while the token rate varied."""
    util = summarize(utilization)
    rates = [r for r in token_rates if r > 0]
    if util.median is None or util.p10 is None or util.p90 is None or len(rates) < 2:
        return None
    scale = 100.0 if util.median > 1.0 else 1.0  # accept percent or fraction
    pinned = (
        util.median / scale >= config.pinned_utilization
        and (util.p90 - util.p10) / scale <= config.pinned_spread
    )
    if not pinned or max(rates) / min(rates) < config.rate_variation:
        return None
    return QueueRule(
        kind=RuleKind.GAUGE,
        figures=Evidence(n_cells=None),
        gauge=GaugeEvidence(
            utilization_median=util.median / scale,
            utilization_p10=util.p10 / scale,
            utilization_p90=util.p90 / scale,
            samples=util.n,
            rate_min=min(rates),
            rate_max=max(rates),
        ),
    )
