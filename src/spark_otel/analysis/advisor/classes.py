"""The advisor's cells by engine, eval and class, and each class's advice, over columns.

`advise` reads a box's cells as `CellColumns` (numpy arrays, no `Cell` per row): each engine's
in-flight levels are one sweep (`in_flight_of_columns`), the cells that tell something about
length, their classes and each class's jobs are array operations, and each candidate's prediction
is `predict._predict_columns`. Only what is per class or per level stays in Python (the prefill
fit's means, the timeouts' bounds per cell id, the candidates).

The same figures as the model one cell at a time (`tests/support/overview_reference.py` keeps
that path; `tests/analysis/test_advice_columns.py` holds the two equal on the article's cells,
edges and generated boxes): every per-cell value is the same IEEE operation on the same values,
sums of many values are `math.fsum` (exact, so order-free) as before, and the resamples index
the class's cells in the same order, so the bootstrap draws the same speedups. Token counts are
exact below 2**53, as the columns hold them; cell durations of that many nanoseconds or more
(104 days) are divided as Python's integers divide.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..._clock import NS_PER_S
from ...model import Cell, CellStatus
from ...records.cell_columns import STATUSES, CellColumns
from ...records.rate_curve import RateCurve
from ..concurrency import in_flight, in_flight_level
from ..concurrency_columns import _as_cells, _exact_enough, in_flight_of_columns
from ..curve_candidates import engine_codes
from ..request_cells import REQUEST_SOURCE
from ..stats import percentile, summarize
from . import predict
from .advice_model import AdvisorConfig, CellClass, ClassAdvice
from .predict import _Jobs, _predict_columns, choose, fit_prefill_contention, per_stream_cost_interval

__all__ = [
    "Members",
    "by_class",
    "class_advice",
    "engines_to_advise",
    "members_by_eval",
    "requests_in",
    "scope_mask",
]

Ints = NDArray[np.int64]
Floats = NDArray[np.float64]
Flags = NDArray[np.bool_]
Positions = NDArray[np.intp]

_DEADLINE = STATUSES.index(CellStatus.DEADLINE)
_ERROR = STATUSES.index(CellStatus.ERROR)
_EXACT = 2**53
_CLASSES = tuple(CellClass)
_UNKNOWN = -1
"""A cell whose class cannot be told (a timeout, a failure, no token count)."""


@dataclass(frozen=True, eq=False)
class Members:
    """Cells that tell something about length (a rated decode or a ceiling hit), with the level
    each ran at, as columns: what a class's advice reads of each."""

    cell_id: list[str]
    elapsed_s: Floats
    prompt_tokens: Ints
    """0 where unknown (as ``prompt_tokens or 0`` reads it)."""
    completion_tokens: Ints
    """0 where unknown."""
    timed_out: Flags
    """Cut off at its ceiling."""
    rated: Flags
    """Has a decode rate the analyses may use (`rated_decode_rate`)."""
    level: Ints

    def __len__(self) -> int:
        return len(self.cell_id)

    @classmethod
    def of_cells(cls, members: Sequence[tuple[Cell, int]]) -> Members:
        """Cells given as records, each with the level it ran at."""
        cols = CellColumns.from_cells([cell for cell, _ in members])
        hit, rated = _outcomes(cols)
        return cls(
            cell_id=cols.cell_id,
            elapsed_s=_elapsed_s(cols),
            prompt_tokens=np.where(cols.prompt_known, cols.prompt_tokens, 0),
            completion_tokens=np.where(cols.completion_known, cols.completion_tokens, 0),
            timed_out=hit,
            rated=rated,
            level=np.array([level for _, level in members], dtype=np.int64),
        )

    def take(self, index: Positions) -> Members:
        return Members(
            cell_id=[self.cell_id[k] for k in index.tolist()],
            elapsed_s=self.elapsed_s[index],
            prompt_tokens=self.prompt_tokens[index],
            completion_tokens=self.completion_tokens[index],
            timed_out=self.timed_out[index],
            rated=self.rated[index],
            level=self.level[index],
        )


def scope_mask(cols: CellColumns, eval_name: str | None, engine: str | None) -> Flags:
    """The cells of ``eval_name`` on ``engine`` (either None: any)."""
    mask = np.ones(len(cols), np.bool_)
    if eval_name is not None:
        mask &= np.array(cols.eval_name, dtype=object) == eval_name
    if engine is not None:
        codes, names = engine_codes(cols)
        mask &= np.isin(codes, [code for code, name in enumerate(names) if name == engine])
    return mask


def requests_in(cols: CellColumns, mask: Flags) -> int:
    """How many of the cells at ``mask`` are requests standing in for cells."""
    return sum(1 for k in np.flatnonzero(mask).tolist() if cols.source[k] == REQUEST_SOURCE)


def engines_to_advise(
    cols: CellColumns, *, eval_name: str | None, engine: str | None
) -> Iterator[tuple[str, CellColumns]]:
    """Each engine advice is asked for (``engine``, else every one that ran a cell of
    ``eval_name``) with all its cells, by name: every cell counts toward the load the others ran
    under."""
    codes, names = engine_codes(cols)
    evals = None if eval_name is None else np.array(cols.eval_name, dtype=object) == eval_name
    distinct = sorted(enumerate(names), key=lambda c: c[1])
    for code, name in distinct:
        if engine is not None and name != engine:
            continue
        positions = np.flatnonzero(codes == code)
        if evals is not None and not evals[positions].any():
            continue
        yield name, cols if len(distinct) == 1 else cols.take(positions)


def _levels(cols: CellColumns) -> Ints:
    """The in-flight level each cell ran at (`in_flight_level`; 1 for a cell without duration),
    all ``cols`` taken to share one engine."""
    if not _exact_enough(cols):  # past float64's exact integers: as `in_flight` counts them
        weights = in_flight(_as_cells(cols))
        return np.array([in_flight_level(x) if x is not None else 1 for x in weights], dtype=np.int64)
    weight, weighed = in_flight_of_columns(cols.start_unix_ns, cols.end_unix_ns)
    return np.where(weighed, np.maximum(1.0, np.floor(np.where(weighed, weight, 0.0) + 0.5)), 1.0).astype(
        np.int64
    )


def _outcomes(cols: CellColumns) -> tuple[Flags, Flags]:
    """Which cells hit their ceiling (`ceiling_hit`), and which have a decode rate the analyses
    may use (`rated_decode_rate`: not cut off, not failed, tokens and a duration)."""
    hit = cols.status == _DEADLINE
    rated = (
        ~hit
        & (cols.status != _ERROR)
        & cols.completion_known
        & (cols.completion_tokens != 0)
        & (cols.end_unix_ns > cols.start_unix_ns)
    )
    return hit, rated


def _elapsed_s(cols: CellColumns) -> Floats:
    """Each cell's `Cell.elapsed_s`: its nanoseconds over `NS_PER_S`, correctly rounded."""
    duration = cols.end_unix_ns - cols.start_unix_ns
    elapsed = duration / NS_PER_S
    for k in np.flatnonzero(np.abs(duration) >= _EXACT).tolist():
        elapsed[k] = int(duration[k]) / NS_PER_S
    return elapsed


def members_by_eval(engine_cells: CellColumns, eval_name: str | None) -> dict[str, Members]:
    """The cells that tell something about length (a rated decode or a ceiling hit), with the
    level each ran at, by eval (sorted); only ``eval_name``'s when given. Failed cells and cells
    without tokens tell nothing about length: they count as load only."""
    cols = engine_cells
    hit, rated = _outcomes(cols)
    usable = hit | rated
    if eval_name is not None:
        usable &= np.array(cols.eval_name, dtype=object) == eval_name
    chosen = np.flatnonzero(usable)
    if not len(chosen):
        return {}
    everyone = Members(
        cell_id=cols.cell_id,
        elapsed_s=_elapsed_s(cols),
        prompt_tokens=np.where(cols.prompt_known, cols.prompt_tokens, 0),
        completion_tokens=np.where(cols.completion_known, cols.completion_tokens, 0),
        timed_out=hit,
        rated=rated,
        level=_levels(cols),
    )
    by_eval: dict[str, list[int]] = {}
    for k in chosen.tolist():
        by_eval.setdefault(cols.eval_name[k], []).append(k)
    return {ev: everyone.take(np.array(by_eval[ev], dtype=np.intp)) for ev in sorted(by_eval)}


def _class_codes(members: Members, config: AdvisorConfig) -> Ints:
    """`predict.classify` of each member, as an index into `CellClass` (`_UNKNOWN`: none)."""
    prompt, completion = members.prompt_tokens, members.completion_tokens
    codes = np.full(len(members), _UNKNOWN, dtype=np.int64)
    told = members.rated & (completion != 0)
    heavy = prompt >= config.prompt_heavy_fraction * (prompt + completion)
    # an int compared with a float as Python compares them, where float64 would round the int
    for k in np.flatnonzero(told & (np.abs(prompt) >= _EXACT)).tolist():
        heavy[k] = int(prompt[k]) >= config.prompt_heavy_fraction * (int(prompt[k]) + int(completion[k]))
    codes[told & heavy] = _CLASSES.index(CellClass.PROMPT_HEAVY)
    codes[told & ~heavy] = _CLASSES.index(CellClass.GENERATION_HEAVY)
    codes[prompt >= config.long_context_prompt_tokens] = _CLASSES.index(CellClass.LONG_CONTEXT)
    return codes


def by_class(members: Members, config: AdvisorConfig) -> list[tuple[CellClass, Members]]:
    """An eval's cells by class, in `CellClass` order; a cell whose class cannot be told joins
    the eval's most common class (the first seen of those as common; generation-heavy when none
    can be told)."""
    codes = _class_codes(members, config)
    known = codes[codes != _UNKNOWN]
    if len(known):
        counts = np.bincount(known, minlength=len(_CLASSES))
        tied = np.flatnonzero(counts == counts.max())
        first_seen = [int(np.argmax(known == code)) for code in tied.tolist()]
        dominant = int(tied[int(np.argmin(first_seen))])
    else:
        dominant = _CLASSES.index(CellClass.GENERATION_HEAVY)
    codes = np.where(codes == _UNKNOWN, dominant, codes)
    return [
        (cell_class, members.take(np.flatnonzero(codes == code)))
        for code, cell_class in enumerate(_CLASSES)
        if (codes == code).any()
    ]


def _rates_at(levels: Ints, curve: RateCurve) -> Floats:
    """The curve's per-stream rate at each level, clamped to the measured streams."""
    distinct, where = np.unique(levels, return_inverse=True)
    top = curve.max_streams
    rates = [curve.per_stream_rate_at(min(max(int(level), 1), top)) for level in distinct.tolist()]
    return np.array(rates, dtype=np.float64)[where.reshape(-1)]


def _fitted_contention(members: Members) -> float | None:
    """`fit_prefill_contention` of the cells that did not time out, their elapsed seconds by
    level in the order the levels first appear (the fit's sums run in that order)."""
    kept = ~members.timed_out
    levels, elapsed = members.level[kept], members.elapsed_s[kept]
    distinct, first = np.unique(levels, return_index=True)
    by_level = {int(distinct[i]): elapsed[levels == distinct[i]].tolist() for i in np.argsort(first).tolist()}
    return fit_prefill_contention(by_level)


def _jobs(members: Members, curve: RateCurve, contention: float) -> _Jobs:
    """The class's cells as the model's jobs: a timeout's output is at least the curve's rate
    times its elapsed time, and a cell id that timed out keeps its largest bound (it would not
    have fit at a higher level either); a completed cell's prompt seconds are what its elapsed
    time leaves after decoding its tokens at the rate for the load it ran under."""
    rate = _rates_at(members.level, curve)
    tokens = members.completion_tokens.astype(np.float64)
    hit = members.timed_out
    bound: dict[str, float] = {}
    at_rate = rate * members.elapsed_s
    for k in np.flatnonzero(hit).tolist():
        found = tokens[k] if not at_rate[k] > tokens[k] else at_rate[k]
        previous = bound.get(members.cell_id[k], 0.0)
        bound[members.cell_id[k]] = float(found) if found > previous else previous
    prefill = 1 + contention * (members.level - 1)
    left = members.elapsed_s - tokens / rate
    prompt_s = np.where(left > 0.0, left, 0.0) / prefill
    output = tokens.copy()
    for k in np.flatnonzero(hit).tolist():
        output[k] = bound[members.cell_id[k]]
    return _Jobs(
        prompt_s=np.where(hit, 0.0, prompt_s),
        output_tokens=output,
        level=members.level,
        timed_out=hit,
    )


def class_advice(
    engine: str,
    eval_name: str,
    *,
    cell_class: CellClass,
    members: Members | Sequence[tuple[Cell, int]],
    curve: RateCurve,
    config: AdvisorConfig,
) -> ClassAdvice:
    """One (engine, eval, class)'s advice, predicted from its curve (`predict` holds the model);
    ``members`` are the class's cells as columns, or as records each with the in-flight level it
    ran at."""
    if not isinstance(members, Members):
        members = Members.of_cells(members)
    fitted = None if cell_class is CellClass.GENERATION_HEAVY else _fitted_contention(members)
    contention = fitted if fitted is not None else config.prefill_contention
    jobs = _jobs(members, curve, contention)
    candidates_n = sorted({1, *(s for s in curve.streams if s <= curve.peak_aggregate_streams)})
    run_size = len(set(members.cell_id))
    candidates, chosen = choose(
        [
            _predict_columns(jobs, curve, n, contention=contention, config=config, run_size=run_size)
            for n in candidates_n
        ],
        config,
    )
    serial = candidates[0]
    serial_times = np.sort(jobs.prompt_s + jobs.output_tokens / serial.per_stream_rate).tolist()
    outputs = np.sort(jobs.output_tokens[~jobs.timed_out]).tolist()
    prompts = members.prompt_tokens[members.prompt_tokens != 0].astype(np.float64).tolist()
    serial_p90 = percentile(serial_times, 0.9)
    return ClassAdvice(
        engine=engine,
        eval_name=eval_name,
        cell_class=cell_class,
        ceiling_bound=serial_p90 >= config.ceiling_bound_fraction * config.ceiling_s,
        serial_p90_s=serial_p90,
        n_cells=len(members),
        historical_timeouts=int(jobs.timed_out.sum()),
        prompt_tokens_median=summarize(prompts).median,
        output_tokens_p90=percentile(outputs, 0.9) if outputs else None,
        prefill_contention=contention,
        prefill_contention_fitted=fitted is not None,
        recommended_workers=chosen.workers,
        timeout_fraction=chosen.timeout_fraction,
        serial_timeout_fraction=serial.timeout_fraction,
        speedup=chosen.speedup,
        # through the module: a comparison may put the reference bootstrap in its place
        speedup_interval=predict._speedup_interval(
            jobs,
            curve,
            chosen.workers,
            contention=contention,
            config=config,
            run_size=run_size,
            seed=f"{engine}/{eval_name}/{cell_class.value}",
        ),
        per_stream_cost=1 - chosen.per_stream_rate / serial.per_stream_rate,
        per_stream_cost_interval=per_stream_cost_interval(curve, chosen.workers),
        candidates=candidates,
    )
