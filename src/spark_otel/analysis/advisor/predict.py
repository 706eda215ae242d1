"""Worker counts per cell class under a per-cell ceiling, and neighbours not to batch beside.

The article's queue rules (its decision table) were written by hand from a probe curve, real
cells and the neighbour's records. `advise` computes them from the same evidence:

* **Classes.** A cell is *long-context* when its prompt reaches ``long_context_prompt_tokens``
  (24K: the article's heavy PRs "about 24K and up" went two at a time), *prompt-heavy* when the
  prompt is at least ``prompt_heavy_fraction`` of its tokens (0.9: Nemotron's card cells were
  98% prompt), else *generation-heavy*. Timeouts, whose output is unknown, join the dominant
  class of their eval. A group (engine, eval, class) is *ceiling-bound* when its p90 predicted
  serial time reaches ``ceiling_bound_fraction`` of the ceiling.
* **Model.** A cell that produced ``o`` tokens and spent ``p`` seconds on its prompt alone takes
  ``p * (1 + c * (N - 1)) + o / r(N)`` at N workers, where ``r(N)`` is the curve's per-stream
  rate and ``c`` the prefill contention (compute-bound prefills share the SMs). ``p`` is what the
  cell's elapsed time leaves after decoding ``o`` tokens at the curve's rate for the load it
  actually ran under. ``c`` is fitted from the group's own cells when they ran at several
  levels, else the article's 0.37 (Nemotron cards: 2.15x at 4 workers, 3.5x at 8).
  A timeout's tokens are taken as the curve's rate times its elapsed time (a lower bound).
  Failed cells and cells without token counts say nothing about length and are left out
  (`rated_decode_rate`), though they count toward the load the others ran under.
* **Choice.** For each measured stream count up to where the curve's aggregate peaks: the
  predicted fraction of cells that would not finish inside ``ceiling * (1 - ceiling_headroom)``
  (output length varies per seed, so a cell predicted to end in the last 10% of the ceiling is
  counted as a likely timeout), and the predicted wall clock of one run over the class's
  distinct cell ids, ``max(K * mean(min(t, ceiling)) / N, max(min(t, ceiling)))`` for K ids,
  against serial. The recommendation is
  the best speedup whose timeout fraction is at most the serial one plus ``timeout_tolerance``;
  speedups within 1% of the best count as equal, and the fewer workers win.

Assumptions: cells of a class keep their historical lengths; the queue is full (no idle
workers); the curve was measured with the engine otherwise idle.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ..model import Cell
from ._rows import Result
from .concurrency import UNKNOWN_ENGINE, in_flight, in_flight_level
from .curve import RateCurve
from .neighbour import NeighbourReport, WindowCost
from .rates import ceiling_hit, rated_decode_rate
from .stats import percentile, summarize

__all__ = [
    "Advice",
    "AdvisorConfig",
    "CandidatePrediction",
    "CellClass",
    "ClassAdvice",
    "QueueRule",
    "advise",
    "classify",
    "fit_prefill_contention",
]

ARTICLE_PREFILL_CONTENTION = 0.37
_SPEEDUP_TIE = 0.01


class CellClass(StrEnum):
    GENERATION_HEAVY = "generation-heavy"
    PROMPT_HEAVY = "prompt-heavy"
    LONG_CONTEXT = "long-context"


class AdvisorConfig(BaseModel):
    """The advisor's thresholds; defaults are the article's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ceiling_s: float = Field(default=1800.0, gt=0, description="per-cell wall-clock ceiling")
    threshold: float = Field(default=0.2, ge=0, le=1, description="neighbour cost that flags a load")
    prompt_heavy_fraction: float = Field(default=0.9, gt=0, le=1)
    long_context_prompt_tokens: int = Field(default=24_000, ge=1)
    ceiling_bound_fraction: float = Field(default=0.75, gt=0)
    timeout_tolerance: float = Field(default=0.02, ge=0, le=1)
    ceiling_headroom: float = Field(
        default=0.1, ge=0, lt=1, description="share of the ceiling a predicted cell must leave free"
    )
    prefill_contention: float = Field(default=ARTICLE_PREFILL_CONTENTION, ge=0)
    pinned_utilization: float = Field(default=0.9, ge=0, le=1, description="utilization read as pinned")
    pinned_spread: float = Field(default=0.05, ge=0, description="max p90 - p10 of a pinned gauge")
    rate_variation: float = Field(default=2.0, gt=1, description="max/min token rate that counts as varying")


class CandidatePrediction(Result):
    workers: int
    per_stream_rate: float
    timeout_fraction: float
    wall_s: float
    speedup: float


class ClassAdvice(Result):
    engine: str
    eval_name: str
    cell_class: CellClass
    ceiling_bound: bool
    n_cells: int
    historical_timeouts: int
    prompt_tokens_median: float | None
    output_tokens_p90: float | None
    prefill_contention: float
    prefill_contention_fitted: bool
    recommended_workers: int
    timeout_fraction: float
    serial_timeout_fraction: float
    speedup: float
    candidates: list[CandidatePrediction]


class QueueRule(Result):
    rule: str
    evidence: str
    kind: str = Field(description='"batch", "cap", "cross-engine", "gauge" or "no-curve"')
    engine: str | None = None
    eval_name: str | None = None
    workers: int | None = None


class Advice(Result):
    config: AdvisorConfig
    classes: list[ClassAdvice]
    rules: list[QueueRule]


def classify(cell: Cell, config: AdvisorConfig | None = None) -> CellClass | None:
    """The cell's class from its token counts; None when its output is unknown (a timeout, a
    failure or no token count)."""
    config = config or AdvisorConfig()
    prompt = cell.prompt_tokens or 0
    if prompt >= config.long_context_prompt_tokens:
        return CellClass.LONG_CONTEXT
    if rated_decode_rate(cell) is None or not cell.completion_tokens:
        return None
    if prompt >= config.prompt_heavy_fraction * (prompt + cell.completion_tokens):
        return CellClass.PROMPT_HEAVY
    return CellClass.GENERATION_HEAVY


def fit_prefill_contention(elapsed_by_level: dict[int, list[float]]) -> float | None:
    """Least-squares ``c`` in ``elapsed(L) / elapsed(1) = 1 + c (L - 1)``; None without level-1
    cells and at least one other level."""
    serial = elapsed_by_level.get(1)
    if not serial or len(elapsed_by_level) < 2:
        return None
    base = math.fsum(serial) / len(serial)
    if base <= 0:
        return None
    num = den = 0.0
    for level, elapsed in elapsed_by_level.items():
        if level > 1 and elapsed:
            ratio = math.fsum(elapsed) / len(elapsed) / base
            num += (ratio - 1) * (level - 1)
            den += (level - 1) ** 2
    return max(0.0, num / den) if den else None


class _Job:
    """One historical cell reduced to what the model needs: prompt seconds and output tokens."""

    __slots__ = ("level", "output_tokens", "prompt_s", "timed_out")

    def __init__(self, prompt_s: float, output_tokens: float, level: int, timed_out: bool) -> None:
        self.prompt_s = prompt_s
        self.output_tokens = output_tokens
        self.level = level
        self.timed_out = timed_out


def _predict(
    jobs: Sequence[_Job],
    curve: RateCurve,
    workers: int,
    *,
    contention: float,
    config: AdvisorConfig,
    run_size: int,
) -> CandidatePrediction:
    rate = curve.per_stream_rate_at(workers)
    prefill = 1 + contention * (workers - 1)
    ceiling_s = config.ceiling_s
    limit_s = ceiling_s * (1 - config.ceiling_headroom)
    times = [j.prompt_s * prefill + j.output_tokens / rate for j in jobs]
    capped = [min(t, ceiling_s) for t in times]
    wall = max(run_size * math.fsum(capped) / len(capped) / workers, *capped)
    return CandidatePrediction(
        workers=workers,
        per_stream_rate=rate,
        # A recorded timeout predicted to take exactly the ceiling again still times out.
        timeout_fraction=sum(
            t > limit_s or (j.timed_out and t >= limit_s * (1 - 1e-9))
            for t, j in zip(times, jobs, strict=True)
        )
        / len(times),
        wall_s=wall,
        speedup=1.0,  # filled in against serial by the caller
    )


def _class_advice(
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
    outputs = sorted(j.output_tokens for j in jobs if not j.timed_out)
    return ClassAdvice(
        engine=engine,
        eval_name=eval_name,
        cell_class=cell_class,
        ceiling_bound=percentile(serial_times, 0.9) >= config.ceiling_bound_fraction * config.ceiling_s,
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
        candidates=candidates,
    )


def _batch_rule(a: ClassAdvice) -> QueueRule:
    label = (
        f"{a.eval_name} {a.cell_class.value}{' ceiling-bound' if a.ceiling_bound else ''} cells on {a.engine}"
    )
    chosen = next(c for c in a.candidates if c.workers == a.recommended_workers)
    serial = a.candidates[0]
    slower = 1 - chosen.per_stream_rate / serial.per_stream_rate
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
    evidence = (
        f"n={a.n_cells} (p90 output {a.output_tokens_p90 or 0:,.0f} tok, median prompt "
        f"{a.prompt_tokens_median or 0:,.0f} tok); at {a.recommended_workers}: {chosen.per_stream_rate:.2f} "
        f"tok/s per stream ({slower:.0%} slower), predicted {a.speedup:.1f}x wall, "
        f"{a.timeout_fraction:.0%} timeouts vs {a.serial_timeout_fraction:.0%} serial{why_not}"
    )
    return QueueRule(
        rule=rule,
        evidence=evidence,
        kind="batch",
        engine=a.engine,
        eval_name=a.eval_name,
        workers=a.recommended_workers,
    )


def _cap_rule(curve: RateCurve) -> QueueRule:
    peak = curve.peak_aggregate_streams
    peak_pt = next(p for p in curve.points if p.streams == peak)
    after = [p for p in curve.points if p.streams > peak]
    if after:
        evidence = (
            f"aggregate peaks at {peak_pt.aggregate_rate:.0f} tok/s at {peak} streams and falls to "
            f"{after[0].aggregate_rate:.0f} at {after[0].streams} ({curve.source} curve)"
        )
    else:
        evidence = (
            f"aggregate still rising at {peak} streams ({peak_pt.aggregate_rate:.0f} tok/s), the most "
            f"measured ({curve.source} curve)"
        )
    return QueueRule(
        rule=f"{curve.engine} lane at most {peak} streams",
        evidence=evidence,
        kind="cap",
        engine=curve.engine,
        workers=peak,
    )


def _cross_engine_rules(
    reports: Iterable[NeighbourReport],
    ceiling_bound: set[tuple[str, str]],
    threshold: float,
    engine: str | None = None,
) -> list[QueueRule]:
    """One rule per (other engine, eval): the costliest window past ``threshold`` is its evidence,
    however many windows (or worker-count reports of the eval) agree. With ``engine``, only
    rules that name it (as the load's engine or the eval's)."""
    flagged: dict[tuple[str, str], dict[str, tuple[NeighbourReport, WindowCost]]] = defaultdict(dict)
    for report in reports:
        if report.baseline.median is None:
            continue
        for w in report.windows:
            if w.same_engine is not False or w.cost is None or w.cost <= threshold or w.engine is None:
                continue
            if engine is not None and engine not in (w.engine, report.engine):
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
        rules.append(
            QueueRule(
                rule=f"Do not batch {load_engine} while {who} runs on {report.engine}",
                evidence=(
                    f"{w.name}: {report.label} decoded {w.rate.median:.2f} tok/s against its "
                    f"{base:.2f} baseline (n={report.baseline.n}), cost {w.cost:.0%} > {threshold:.0%}; "
                    f"{w.timeouts} of {w.n_cells} cells in the window timed out{failures}"
                    + (
                        f"; {more} more window{'s' if more > 1 else ''} on {load_engine} past the threshold"
                        if more
                        else ""
                    )
                ),
                kind="cross-engine",
                engine=load_engine,
                eval_name=eval_name,
            )
        )
    return rules


def _gauge_rule(
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
        kind="gauge",
    )


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
) -> Advice:
    """The queue rules, computed: one batch rule per (engine, eval, class) with a curve, one cap
    per curve, cross-engine flags from ``neighbour`` reports (one per engine and eval), and the
    gauge rule when ``gpu_utilization`` (fraction or percent) stays pinned while ``token_rates``
    vary (by default the curves' aggregate rates).

    ``eval_name`` and ``engine`` narrow the advice; every cell given still counts toward the
    load the others ran under."""
    config = config or AdvisorConfig()
    curve_by_engine = {c.engine: c for c in curves if engine is None or c.engine == engine}
    by_engine: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_engine[cell.engine or UNKNOWN_ENGINE].append(cell)

    classes: list[ClassAdvice] = []
    rules: list[QueueRule] = []
    for name in sorted(by_engine):
        engine_cells = by_engine[name]
        chosen = [c for c in engine_cells if eval_name is None or c.eval_name == eval_name]
        if (engine is not None and name != engine) or not chosen:
            continue
        curve = curve_by_engine.get(name)
        if curve is None:
            rules.append(
                QueueRule(
                    rule=f"measure {name} before batching it",
                    evidence=f"{len(chosen)} cells recorded but no rate curve: run spark-otel probe",
                    kind="no-curve",
                    engine=name,
                )
            )
            continue
        levels = [in_flight_level(x) if x is not None else 1 for x in in_flight(engine_cells)]
        per_eval: dict[str, list[tuple[Cell, int]]] = defaultdict(list)
        for cell, level in zip(engine_cells, levels, strict=True):
            # Failed cells and cells without tokens tell nothing about length: load only.
            usable = ceiling_hit(cell) or rated_decode_rate(cell) is not None
            if usable and (eval_name is None or cell.eval_name == eval_name):
                per_eval[cell.eval_name].append((cell, level))
        for ev, members in sorted(per_eval.items()):
            labels = [classify(cell, config) for cell, _ in members]
            known = Counter(x for x in labels if x is not None)
            dominant = known.most_common(1)[0][0] if known else CellClass.GENERATION_HEAVY
            groups: dict[CellClass, list[tuple[Cell, int]]] = defaultdict(list)
            for member, label in zip(members, labels, strict=True):
                groups[label or dominant].append(member)
            for cell_class in CellClass:
                if groups.get(cell_class):
                    classes.append(
                        _class_advice(
                            name,
                            ev,
                            cell_class=cell_class,
                            members=groups[cell_class],
                            curve=curve,
                            config=config,
                        )
                    )
    rules = [_batch_rule(a) for a in classes] + rules
    rules += [_cap_rule(c) for c in curve_by_engine.values()]
    bound = {(a.engine, a.eval_name) for a in classes if a.ceiling_bound}
    reports = [r for r in neighbour if eval_name is None or r.eval_name == eval_name]
    rules += _cross_engine_rules(reports, bound, config.threshold, engine)
    if token_rates is None:
        token_rates = [p.aggregate_rate for c in curve_by_engine.values() for p in c.points]
    gauge = _gauge_rule(gpu_utilization, token_rates, config)
    if gauge is not None:
        rules.append(gauge)
    return Advice(config=config, classes=classes, rules=rules)
