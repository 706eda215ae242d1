"""`overview` and `advise` as they were before issue 38 moved them onto columns: one `Cell` per
row, the model one cell at a time (`predict._predict` over `_Job` records), the concurrency
report's rows read back for each engine's curve. Kept, figure for figure, as the reference the
columnar path is held equal to (`tests/analysis/test_overview_columns.py`, `bench_scale.py`).
The bootstrap is the production one (`predict._speedup_interval`), given the same cells in the
same order, so the intervals too are equal."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

from spark_otel import _semconv as sc
from spark_otel._exceptions import ConfigError, InputError
from spark_otel.analysis.advisor import Advice, AdvisorConfig, choose_curves
from spark_otel.analysis.advisor.advice import _gauge_rules, supports_worker_counts
from spark_otel.analysis.advisor.advice_model import CellClass, ClassAdvice, QueueRule
from spark_otel.analysis.advisor.predict import (
    _SPEEDUP_TIE,
    _Job,
    _predict,
    _speedup_interval,
    classify,
    fit_prefill_contention,
    per_stream_cost_interval,
)
from spark_otel.analysis.advisor.queue_rules import (
    batch_rule,
    cross_engine_rules,
    lane_rule,
    measure_first_rule,
)
from spark_otel.analysis.concurrency import (
    UNKNOWN_ENGINE,
    ConcurrencyReport,
    concurrency,
    in_flight,
    in_flight_level,
)
from spark_otel.analysis.curve import curve_from_concurrency
from spark_otel.analysis.neighbour import (
    MIN_CELLS_FOR_NEIGHBOUR,
    NeighbourReport,
    neighbour_costs,
    windows_touched,
)
from spark_otel.analysis.overview import Overview
from spark_otel.analysis.rates import ceiling_hit, rated_decode_rate
from spark_otel.analysis.request_cells import count_requests_as_cells
from spark_otel.analysis.stats import percentile, summarize
from spark_otel.analysis.windows import DEFAULT_MERGE_GAP_S, overlapping_pairs, windows_from_cells
from spark_otel.model import Cell, LoadWindow
from spark_otel.records.rate_curve import RateCurve

__all__ = ["reference_advise", "reference_overview"]


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


def reference_overview(
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
    everything = concurrency(all_cells, merge_gap_s=merge_gap_s) if all_cells else None
    candidates = _curve_candidates(probe_curves, all_cells, all_windows, everything, notes)
    curves = [c for c in choose_curves(candidates).values() if engine is None or c.engine == engine]
    shown = everything
    if everything is not None and eval_name is not None:
        # Levels, runs and throughput sum the reported cells only: one eval's need a pass of their own.
        shown = concurrency(all_cells, eval_name=eval_name, engine=engine, merge_gap_s=merge_gap_s)
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
        advice = reference_advise(
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


def reference_advise(
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


def class_advice(
    engine: str,
    eval_name: str,
    *,
    cell_class: CellClass,
    members: list[tuple[Cell, int]],
    curve: RateCurve,
    config: AdvisorConfig,
) -> ClassAdvice:
    top = curve.max_streams

    def rate_at(level: int) -> float:
        return curve.per_stream_rate_at(min(max(level, 1), top))

    elapsed_by_level: dict[int, list[float]] = defaultdict(list)
    for cell, level in members:
        if not ceiling_hit(cell):
            elapsed_by_level[level].append(cell.elapsed_s)
    fitted = None
    if cell_class is not CellClass.GENERATION_HEAVY:
        fitted = fit_prefill_contention(elapsed_by_level)
    contention = fitted if fitted is not None else config.prefill_contention

    # A timeout produced at least the curve's rate times its elapsed time; a cell that timed out
    # at a low level would not have fit at a higher one, so each cell id keeps its largest bound.
    bound: dict[str, float] = defaultdict(float)
    for cell, level in members:
        if ceiling_hit(cell):
            tokens = max(float(cell.completion_tokens or 0), rate_at(level) * cell.elapsed_s)
            bound[cell.cell_id] = max(bound[cell.cell_id], tokens)
    jobs = []
    for cell, level in members:
        prefill = 1 + contention * (level - 1)
        if ceiling_hit(cell):
            jobs.append(_Job(0.0, bound[cell.cell_id], level, True))
        else:
            tokens = float(cell.completion_tokens or 0)
            prompt_s = max(0.0, cell.elapsed_s - tokens / rate_at(level)) / prefill
            jobs.append(_Job(prompt_s, tokens, level, False))

    candidates_n = sorted({1, *(s for s in curve.streams if s <= curve.peak_aggregate_streams)})
    run_size = len({cell.cell_id for cell, _ in members})
    raw = [
        _predict(jobs, curve, n, contention=contention, config=config, run_size=run_size)
        for n in candidates_n
    ]
    serial = raw[0]
    candidates = [
        c.model_copy(update={"speedup": serial.wall_s / c.wall_s if c.wall_s > 0 else 1.0}) for c in raw
    ]
    allowed = [
        c for c in candidates if c.timeout_fraction <= serial.timeout_fraction + config.timeout_tolerance
    ]
    best = max(c.speedup for c in allowed)
    chosen = min((c for c in allowed if c.speedup >= best * (1 - _SPEEDUP_TIE)), key=lambda c: c.workers)

    serial_times = sorted(j.prompt_s + j.output_tokens / serial.per_stream_rate for j in jobs)
    cost = 1 - chosen.per_stream_rate / serial.per_stream_rate
    speedup_interval = _speedup_interval(
        jobs,
        curve,
        chosen.workers,
        contention=contention,
        config=config,
        run_size=run_size,
        seed=f"{engine}/{eval_name}/{cell_class.value}",
    )
    outputs = sorted(j.output_tokens for j in jobs if not j.timed_out)
    serial_p90 = percentile(serial_times, 0.9)
    return ClassAdvice(
        engine=engine,
        eval_name=eval_name,
        cell_class=cell_class,
        ceiling_bound=serial_p90 >= config.ceiling_bound_fraction * config.ceiling_s,
        serial_p90_s=serial_p90,
        n_cells=len(members),
        historical_timeouts=sum(j.timed_out for j in jobs),
        prompt_tokens_median=summarize(float(c.prompt_tokens) for c, _ in members if c.prompt_tokens).median,
        output_tokens_p90=percentile(outputs, 0.9) if outputs else None,
        prefill_contention=contention,
        prefill_contention_fitted=fitted is not None,
        recommended_workers=chosen.workers,
        timeout_fraction=chosen.timeout_fraction,
        serial_timeout_fraction=serial.timeout_fraction,
        speedup=chosen.speedup,
        speedup_interval=speedup_interval,
        per_stream_cost=cost,
        per_stream_cost_interval=per_stream_cost_interval(curve, chosen.workers),
        candidates=candidates,
    )
