"""The advisor's model: a class's cells at N workers, predicted from the curve and their history.

The article's queue rules (its decision table) were written by hand from a probe curve, real
cells and the neighbour's records. `advise` computes them from the same evidence; this module
holds the model:

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

* **Intervals.** The predicted speedup's 95% interval is a bootstrap over the class's cells
  (resampled with replacement, ``bootstrap_resamples`` times, all at once with numpy, seeded by
  the class so a run is reproducible); the per-stream cost's combines the curve's intervals on
  both rates, the ends taken against each other, so it is wide rather than optimistic.

`classes` applies the model to a class's cells as columns (`_Jobs`, `_predict_columns`);
`_predict` is the same prediction one cell at a time, the reference the tests hold it to.

Assumptions: cells of a class keep their historical lengths; the queue is full (no idle
workers); the curve was measured with the engine otherwise idle (`evidence` says when not).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...model import Cell
from ...records.rate_curve import RateCurve
from ..rates import rated_decode_rate
from ..stats import percentile
from .advice_model import AdvisorConfig, CandidatePrediction, CellClass

__all__ = [
    "choose",
    "classify",
    "fit_prefill_contention",
    "per_stream_cost_interval",
    "require_numpy",
]

_SPEEDUP_TIE = 0.01


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


@dataclass(frozen=True, eq=False)
class _Jobs:
    """A class's cells as the model needs them, as columns (numpy arrays): job ``k`` is each
    array's ``k``-th value. Indexing gives one `_Job`, so `_predict` (the model one cell at a
    time, the reference the tests hold the arrays to) reads a resample of them as it did."""

    prompt_s: Any
    output_tokens: Any
    level: Any
    timed_out: Any

    def __len__(self) -> int:
        return len(self.prompt_s)

    def __getitem__(self, k: int) -> _Job:
        return _Job(
            float(self.prompt_s[k]), float(self.output_tokens[k]), int(self.level[k]), bool(self.timed_out[k])
        )


def _predict(
    jobs: Sequence[_Job],
    curve: RateCurve,
    workers: int,
    *,
    contention: float,
    config: AdvisorConfig,
    run_size: int,
) -> CandidatePrediction:
    """The model's prediction for ``jobs`` at ``workers``, one cell at a time: the reference
    `_predict_columns` computes in arrays, figure for figure."""
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


def _predict_columns(
    jobs: _Jobs,
    curve: RateCurve,
    workers: int,
    *,
    contention: float,
    config: AdvisorConfig,
    run_size: int,
) -> CandidatePrediction:
    """`_predict` over the jobs' arrays: the same operations in the same order on each cell's
    values (so the same floats), the mean's sum exact (`math.fsum`) as there."""
    np = require_numpy()
    rate = curve.per_stream_rate_at(workers)
    prefill = 1 + contention * (workers - 1)
    ceiling_s = config.ceiling_s
    limit_s = ceiling_s * (1 - config.ceiling_headroom)
    times = jobs.prompt_s * prefill + jobs.output_tokens / rate
    capped = np.minimum(times, ceiling_s)
    wall = max(run_size * math.fsum(capped.tolist()) / len(jobs) / workers, float(capped.max()))
    late = (times > limit_s) | (jobs.timed_out & (times >= limit_s * (1 - 1e-9)))
    return CandidatePrediction(
        workers=workers,
        per_stream_rate=rate,
        timeout_fraction=int(late.sum()) / len(jobs),
        wall_s=wall,
        speedup=1.0,  # filled in against serial by the caller
    )


def choose(
    candidates: list[CandidatePrediction], config: AdvisorConfig
) -> tuple[list[CandidatePrediction], CandidatePrediction]:
    """Each candidate with its speedup over serial (the first), and the recommendation: the best
    speedup whose timeout fraction is at most serial's plus the tolerance, the fewer workers
    among speedups within `_SPEEDUP_TIE` of it."""
    serial = candidates[0]
    scored = [
        c.model_copy(update={"speedup": serial.wall_s / c.wall_s if c.wall_s > 0 else 1.0})
        for c in candidates
    ]
    allowed = [c for c in scored if c.timeout_fraction <= serial.timeout_fraction + config.timeout_tolerance]
    best = max(c.speedup for c in allowed)
    chosen = min((c for c in allowed if c.speedup >= best * (1 - _SPEEDUP_TIE)), key=lambda c: c.workers)
    return scored, chosen


def _speedup_interval(
    jobs: Sequence[_Job] | _Jobs,
    curve: RateCurve,
    workers: int,
    *,
    contention: float,
    config: AdvisorConfig,
    run_size: int,
    seed: str,
) -> tuple[float, float] | None:
    """The 95% bootstrap interval over the cells on the speedup at ``workers``; None for a
    class of one cell (nothing to resample) or when serial is the recommendation.

    All resamples at once (numpy): each is a row of indices into the class's cells, drawn by a
    generator seeded by the class, and `_predict`'s wall time is computed for every row as
    arrays, a block of rows at a time so memory stays bounded however large the class."""
    if len(jobs) < 2 or workers == 1:
        return None
    np = require_numpy()
    n, resamples = len(jobs), config.bootstrap_resamples
    serial_t = _capped_times(jobs, curve, 1, contention=contention, config=config)
    batched_t = _capped_times(jobs, curve, workers, contention=contention, config=config)
    rng = np.random.default_rng(zlib.crc32(seed.encode()))
    block = max(1, _BOOTSTRAP_BLOCK // n)
    speedups = [
        _speedups(
            serial_t, batched_t, rng.integers(0, n, size=(min(block, resamples - done), n)), run_size, workers
        )
        for done in range(0, resamples, block)
    ]
    ordered = np.sort(np.concatenate(speedups)).tolist()
    return percentile(ordered, 0.025), percentile(ordered, 0.975)


def _capped_times(
    jobs: Sequence[_Job] | _Jobs, curve: RateCurve, workers: int, *, contention: float, config: AdvisorConfig
) -> Any:
    """Each cell's predicted time at ``workers`` capped at the ceiling, as `_predict` computes it."""
    np = require_numpy()
    if isinstance(jobs, _Jobs):
        prompt_s, output = jobs.prompt_s, jobs.output_tokens
    else:
        prompt_s = np.fromiter((j.prompt_s for j in jobs), dtype=np.float64, count=len(jobs))
        output = np.fromiter((j.output_tokens for j in jobs), dtype=np.float64, count=len(jobs))
    times = prompt_s * (1 + contention * (workers - 1)) + output / curve.per_stream_rate_at(workers)
    return np.minimum(times, config.ceiling_s)


def _speedups(serial_t: Any, batched_t: Any, rows: Any, run_size: int, workers: int) -> Any:
    """Each resample's speedup, serial wall over batched wall as `_predict` computes them, a
    resample being a row of indices into the cells' capped times; one whose batched wall is 0 is
    left out."""
    serial = _wall(serial_t[rows], run_size, 1)
    batched = _wall(batched_t[rows], run_size, workers)
    kept = batched > 0
    return serial[kept] / batched[kept]


_BOOTSTRAP_BLOCK = 1_000_000
"""Resampled cells held at once (rows x cells): about 8 MB per array of them."""


def _wall(capped: Any, run_size: int, workers: int) -> Any:
    """`_predict`'s wall time for each row of capped cell times: the run's cells spread over the
    workers, or the longest cell when that is longer."""
    np = require_numpy()
    return np.maximum(run_size * capped.mean(axis=1) / workers, capped.max(axis=1))


def require_numpy() -> Any:
    """numpy, which the advisor's columns and bootstrap need (the ``cli`` extra; the core install
    that `instrument()` needs leaves it out); a command calls it before it reads the store."""
    try:
        import numpy
    except ImportError:
        from ..._exceptions import ConfigError

        raise ConfigError(
            "the advisor reads cells as numpy columns, which the core install leaves out: "
            "pip install 'spark-otel[cli]'"
        ) from None
    return numpy


def per_stream_cost_interval(curve: RateCurve, workers: int) -> tuple[float, float] | None:
    """The 95% interval on ``1 - rate(workers) / rate(1)`` from the curve's intervals on both
    rates: the fastest batched rate against the slowest alone, and the other way round."""
    alone = curve.per_stream_interval_at(1)
    batched = curve.per_stream_interval_at(workers)
    if alone is None or batched is None or alone[0] <= 0 or alone[1] <= 0:
        return None
    return 1 - batched[1] / alone[0], 1 - batched[0] / alone[1]
