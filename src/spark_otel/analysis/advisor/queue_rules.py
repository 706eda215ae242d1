"""The queue rules as a person reads them: each rule with the evidence it rests on (n, the levels
measured, intervals), and for what cannot be answered yet, the command that would measure it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from ...records.rate_curve import RateCurve
from ..neighbour import NeighbourReport, WindowCost
from ..stats import summarize
from .advice_model import AdvisorConfig, CellClass, ClassAdvice, Evidence, QueueRule, RuleKind
from .evidence import describe_curve, engine_url, lane_shape, probe_command

__all__ = ["batch_rule", "cross_engine_rules", "gauge_rule", "lane_rule", "measure_first_rule"]

_FIRST_LEVELS = (1, 2, 4, 8)


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _pct_interval(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f" (95% CI {_pct(interval[0])} to {_pct(interval[1])})"


def _x_interval(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f" (95% CI {interval[0]:.1f}x to {interval[1]:.1f}x)"


def _label(a: ClassAdvice) -> str:
    bound = " ceiling-bound" if a.ceiling_bound else ""
    return f"{a.eval_name} {a.cell_class.value}{bound} cells on {a.engine}"


def _curve_figures(curve: RateCurve) -> Evidence:
    return Evidence(
        levels=curve.streams,
        curve=describe_curve(curve),
        under_load=curve.under_load is not None,
        model=curve.model,
        measured_unix_ns=curve.measured_unix_ns,
    )


def batch_rule(a: ClassAdvice, curve: RateCurve, urls: Mapping[str, str]) -> QueueRule:
    """Workers for one class, with n, the curve it rests on and both intervals."""
    chosen = next(c for c in a.candidates if c.workers == a.recommended_workers)
    label = _label(a)
    rule = (
        f"{label}: stay serial" if a.recommended_workers == 1 else f"{label} batch to {a.recommended_workers}"
    )
    if a.cell_class is not CellClass.GENERATION_HEAVY and a.recommended_workers > 1:
        rule += f"; prefill-bound, the gain caps near {a.speedup:.1f}x"
    over = [c for c in a.candidates if c.workers > a.recommended_workers]
    why_not = ""
    if over:
        nxt = over[0]
        why_not = f"; {nxt.workers} would predict {nxt.timeout_fraction:.0%} timeouts and {nxt.speedup:.1f}x"
    loaded = ""
    if curve.under_load:
        again = probe_command(a.engine, engine_url(a.engine, urls), curve.streams)
        loaded = (
            "; the curve was measured under load and is used because nothing better was measured: "
            f"re-measure on an idle engine with {again}"
        )
    evidence = (
        f"n={a.n_cells} cells (p90 output {a.output_tokens_p90 or 0:,.0f} tok, median prompt "
        f"{a.prompt_tokens_median or 0:,.0f} tok); curve: {describe_curve(curve)}; at "
        f"{a.recommended_workers}: {chosen.per_stream_rate:.2f} tok/s per stream, "
        f"{_pct(a.per_stream_cost)} slower{_pct_interval(a.per_stream_cost_interval)}, "
        f"predicted {a.speedup:.1f}x wall"
        f"{_x_interval(a.speedup_interval)}, {a.timeout_fraction:.0%} timeouts vs "
        f"{a.serial_timeout_fraction:.0%} serial{why_not}{loaded}"
    )
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
        rule=rule,
        evidence=evidence,
        kind=RuleKind.BATCH,
        engine=a.engine,
        eval_name=a.eval_name,
        cell_class=a.cell_class,
        workers=a.recommended_workers,
        ceiling_bound=a.ceiling_bound,
        figures=figures,
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
    url = engine_url(engine, urls)
    if curve is None:
        missing = "no rate curve"
    elif not curve.measured_single_stream:
        missing = f"no single-stream rate: the curve starts at {curve.streams[0]} streams"
    else:
        missing = f"one level only ({curve.streams[0]} stream): nothing to compare"
    command = probe_command(engine, url, _FIRST_LEVELS)
    who = f"{eval_name} cells on {engine}" if eval_name else f"{engine}"
    return QueueRule(
        rule=f"Measure {engine} first: no worker count for {who} yet",
        evidence=(
            f"{n_cells} cells recorded, {missing}"
            + (f" ({describe_curve(curve)})" if curve is not None else "")
            + f"; run: {command}, or run the eval at 1 and N workers"
        ),
        kind=RuleKind.MEASURE,
        engine=engine,
        eval_name=eval_name,
        command=command,
        figures=(_curve_figures(curve) if curve is not None else Evidence()).model_copy(
            update={"n_cells": n_cells}
        ),
    )


def lane_rule(curve: RateCurve, config: AdvisorConfig, urls: Mapping[str, str]) -> QueueRule:
    """A cap where the aggregate fell or flattened; otherwise what to measure to find one."""
    shape = lane_shape(curve, config.flat_gain)
    figures = _curve_figures(curve)
    described = f"{shape.evidence} ({describe_curve(curve)})"
    if shape.kind in ("falls", "flattens"):
        return QueueRule(
            rule=f"{curve.engine} lane at most {shape.streams} stream{'s' if shape.streams > 1 else ''}",
            evidence=described,
            kind=RuleKind.CAP,
            engine=curve.engine,
            workers=shape.streams,
            figures=figures,
        )
    top = shape.streams
    command = probe_command(curve.engine, engine_url(curve.engine, urls), (top, 2 * top, 4 * top))
    return QueueRule(
        rule=f"{curve.engine}: no lane cap yet, measure past {top} stream{'s' if top > 1 else ''}",
        evidence=f"{described}; run: {command}",
        kind=RuleKind.MEASURE,
        engine=curve.engine,
        workers=None,
        command=command,
        figures=figures,
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
    rules = []
    for (load_engine, eval_name), by_window in flagged.items():
        hits = list(by_window.values())
        report, w = max(hits, key=lambda hit: hit[1].cost or 0.0)
        base = report.baseline.median
        assert base is not None
        assert w.cost is not None
        assert w.rate.median is not None
        bound = (report.engine or "", eval_name) in ceiling_bound
        who = "a ceiling-bound eval" if bound else eval_name
        failures = f", {w.failures} failed" if w.failures else ""
        more = len(hits) - 1
        alone = [x for x in single[(load_engine, eval_name)] if x.cost is not None]
        one_ok = bool(alone) and all((x.cost or 0.0) <= threshold for x in alone)
        limit = 1 if one_ok else 0
        if one_ok:
            at_one = summarize(x.cost for x in alone).median or 0.0
            limit_why = f"; beside one {load_engine} cell it cost {_pct(at_one)}: at most 1 there"
        else:
            limit_why = (
                f"; {load_engine} at one worker beside it was not measured under the threshold: it yields"
            )
        cost_interval = _neighbour_cost_interval(report, w)
        rules.append(
            QueueRule(
                rule=(
                    f"Do not batch {load_engine} while {who} runs on {report.engine}"
                    if limit == 1
                    else f"{load_engine} yields while {who} runs on {report.engine}"
                ),
                evidence=(
                    f"{w.name}: {report.label} decoded {w.rate.median:.2f} tok/s (n={w.rate.n}) against its "
                    f"{base:.2f} baseline (n={report.baseline.n}), cost {w.cost:.0%}"
                    f"{_pct_interval(cost_interval)} > {threshold:.0%}; "
                    f"{w.timeouts} of {w.n_cells} cells in the window timed out{failures}"
                    + (
                        f"; {more} more window{'s' if more > 1 else ''} on {load_engine} past the threshold"
                        if more
                        else ""
                    )
                    + limit_why
                ),
                kind=RuleKind.CROSS_ENGINE,
                engine=load_engine,
                eval_name=eval_name,
                workers=limit,
                while_engine=report.engine,
                ceiling_bound=bound,
                figures=Evidence(
                    n_cells=w.rate.n,
                    neighbour_cost=w.cost,
                    neighbour_cost_interval=cost_interval,
                    measured_unix_ns=w.end_unix_ns,
                ),
            )
        )
    return rules


def gauge_rule(
    utilization: Sequence[float], token_rates: Sequence[float], config: AdvisorConfig
) -> QueueRule | None:
    util = summarize(utilization)
    rates = [r for r in token_rates if r > 0]
    if util.median is None or util.p10 is None or util.p90 is None or len(rates) < 2:
        return None
    scale = 100.0 if util.median > 1.0 else 1.0  # accept percent or fraction
    pinned = (
        util.median / scale >= config.pinned_utilization
        and (util.p90 - util.p10) / scale <= config.pinned_spread
    )
    spread = max(rates) / min(rates)
    if not pinned or spread < config.rate_variation:
        return None
    return QueueRule(
        rule="Read load from token counts, never from the GPU utilization gauge",
        evidence=(
            f"utilization median {util.median / scale:.0%} (p10 {util.p10 / scale:.0%}, p90 "
            f"{util.p90 / scale:.0%}) over {util.n} samples while token rate ranged {min(rates):.1f} to "
            f"{max(rates):.1f} tok/s ({spread:.1f}x)"
        ),
        kind=RuleKind.GAUGE,
        figures=Evidence(n_cells=None),
    )
