"""Per-cell decode rate against the number of cells in flight, from recorded cells.

Answers "what did concurrency buy, and what did it cost each cell" from any eval's cells, live
or backfilled (the article's Act 3 and Appendix C). For each cell, the load it ran under is the
*time-weighted* number of cells in flight on its engine during it: the integral of the in-flight
count over the cell's interval divided by its duration, counting the cell itself. A serial cell
reads 1.0; eight cells started together read 8.0 for the shortest and less for longer ones, as
their neighbours finish. Cells of every eval on the engine count, since they all share it.

One sweep over the sorted interval endpoints per engine gives the in-flight step function and
its running integral, so every cell's average is two lookups: O(n log n), never all pairs.

A *run* is one eval's cells at one ``workers`` value on one engine that follow each other
within ``merge_gap_s`` (the rule `windows_from_cells` uses): the same eval run serially on two
days is two runs, never one with a day-long wall clock. Rates are `rated_decode_rate`: cells cut
off at the ceiling, failed cells and cells without tokens are counted but never rated.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence

from pydantic import Field

from .._clock import NS_PER_S
from ..model import Cell, CellStatus
from ._result import Result
from .rates import ceiling_hit, failed, rated_decode_rate
from .request_cells import is_request_cell
from .stats import RateSummary, summarize
from .windows import DEFAULT_MERGE_GAP_S, merge_gap_ns, split_at_gaps

__all__ = [
    "CellLoad",
    "ConcurrencyReport",
    "EngineConcurrency",
    "LevelSummary",
    "RunSummary",
    "Speedup",
    "concurrency",
    "in_flight",
    "in_flight_level",
    "level_summaries",
    "union_seconds",
]

UNKNOWN_ENGINE = "unknown"


class CellLoad(Result):
    """One cell with the load it ran under."""

    uid: str
    eval_name: str
    cell_id: str
    engine: str
    workers: int | None
    start_unix_ns: int
    end_unix_ns: int
    elapsed_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    decode_rate: float | None
    status: CellStatus
    ceiling_hit: bool
    failed: bool
    in_flight: float | None
    level: int | None
    request_as_cell: bool = Field(default=False, description="a request standing in for a cell")


class LevelSummary(Result):
    """Cells grouped by in-flight level (or by their ``workers`` value): rates and ceiling hits."""

    level: int
    n_cells: int
    rate: RateSummary
    ceiling_hits: int
    failures: int


class RunSummary(Result):
    """A run: cells of one eval at one ``workers`` value on one engine, without idle gaps."""

    eval_name: str
    engine: str
    workers: int | None
    start_unix_ns: int
    end_unix_ns: int
    n_cells: int
    wall_s: float
    completion_tokens: int
    aggregate_rate: float | None
    rate: RateSummary
    ceiling_hits: int
    failures: int


class Speedup(Result):
    """Wall-clock speedup of an N-worker run over the eval's serial (or fewest-worker) run.

    ``speedup`` compares wall time per cell, which is the plain wall ratio when both runs hold
    the same number of cells (the article's 8,507 s / 1,801 s = 4.7x); ``same_cells`` says
    whether they ran the same cell ids. When the eval ran at the base worker count several
    times, the base is a run over the same cell ids if there is one, else the nearest in time.
    """

    eval_name: str
    engine: str
    base_workers: int
    workers: int
    base_start_unix_ns: int
    start_unix_ns: int
    base_wall_s: float
    wall_s: float
    base_cells: int
    n_cells: int
    speedup: float
    same_cells: bool
    base_rate_median: float | None
    rate_median: float | None
    per_cell_cost: float | None


class EngineConcurrency(Result):
    """Everything measured on one engine."""

    engine: str
    n_cells: int
    wall_s: float
    completion_tokens: int
    aggregate_rate: float | None
    ceiling_hits: int
    failures: int
    levels: list[LevelSummary]
    by_workers: list[LevelSummary]
    runs: list[RunSummary]
    speedups: list[Speedup]
    cells: list[CellLoad]
    requests_as_cells: int = Field(default=0, description="of n_cells, requests standing in for cells")


class ConcurrencyReport(Result):
    """Per-engine results, engines in name order."""

    eval_name: str | None
    engines: list[EngineConcurrency]
    requests_as_cells: int = Field(
        default=0, description="of the engines' cells, requests standing in for cells (no cell() held them)"
    )


def in_flight(cells: Sequence[Cell]) -> list[float | None]:
    """Time-weighted cells in flight during each cell (itself included), in input order.

    All cells are taken to share one engine. A zero-length cell has no duration to weigh
    over and gets None.
    """
    deltas: dict[int, int] = defaultdict(int)
    for c in cells:
        if c.end_unix_ns > c.start_unix_ns:
            deltas[c.start_unix_ns] += 1
            deltas[c.end_unix_ns] -= 1
    # integral[t] = integral of the in-flight count from the first endpoint up to t (cell-ns)
    integral: dict[int, int] = {}
    running = count = 0
    prev_t: int | None = None
    for t in sorted(deltas):
        if prev_t is not None:
            running += count * (t - prev_t)
        integral[t] = running
        count += deltas[t]
        prev_t = t
    out: list[float | None] = []
    for c in cells:
        duration = c.end_unix_ns - c.start_unix_ns
        if duration <= 0:
            out.append(None)
        else:
            out.append((integral[c.end_unix_ns] - integral[c.start_unix_ns]) / duration)
    return out


def in_flight_level(weight: float) -> int:
    """The in-flight level a time-weighted count reads as: rounded half up, at least 1 (the
    cell itself)."""
    return max(1, math.floor(weight + 0.5))


def union_seconds(intervals: Iterable[tuple[int, int]]) -> float:
    """Seconds covered by the union of ``(start_unix_ns, end_unix_ns)`` intervals."""
    total = 0
    cur_start: int | None = None
    cur_end = 0
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if cur_start is None or start > cur_end:
            if cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_start is not None:
        total += cur_end - cur_start
    return total / NS_PER_S


def _load_interval(load: CellLoad) -> tuple[int, int]:
    return load.start_unix_ns, load.end_unix_ns


def level_summaries(pairs: Iterable[tuple[int | None, CellLoad]]) -> list[LevelSummary]:
    """Cells grouped by a level (their in-flight level, or their ``workers``): rates and outcomes."""
    groups: dict[int, list[CellLoad]] = defaultdict(list)
    for level, load in pairs:
        if level is not None:
            groups[level].append(load)
    return [
        LevelSummary(
            level=level,
            n_cells=len(loads),
            rate=summarize(x.decode_rate for x in loads),
            ceiling_hits=sum(x.ceiling_hit for x in loads),
            failures=sum(x.failed for x in loads),
        )
        for level, loads in sorted(groups.items())
    ]


def _run(eval_name: str, engine: str, workers: int | None, loads: list[CellLoad]) -> RunSummary:
    tokens = sum(x.completion_tokens or 0 for x in loads)
    busy_s = union_seconds((x.start_unix_ns, x.end_unix_ns) for x in loads)
    start = min(x.start_unix_ns for x in loads)
    end = max(x.end_unix_ns for x in loads)
    return RunSummary(
        eval_name=eval_name,
        engine=engine,
        workers=workers,
        start_unix_ns=start,
        end_unix_ns=end,
        n_cells=len(loads),
        wall_s=(end - start) / NS_PER_S,
        completion_tokens=tokens,
        aggregate_rate=tokens / busy_s if busy_s > 0 else None,
        rate=summarize(x.decode_rate for x in loads),
        ceiling_hits=sum(x.ceiling_hit for x in loads),
        failures=sum(x.failed for x in loads),
    )


class _Bases:
    """An eval's runs at its fewest worker count, found by cell ids and by time in O(log n)."""

    def __init__(self, bases: list[RunSummary], cell_ids: dict[int, frozenset[str]]) -> None:
        self._all = sorted(bases, key=lambda r: r.start_unix_ns)
        grouped: dict[frozenset[str], list[RunSummary]] = defaultdict(list)
        for base in self._all:
            grouped[cell_ids[id(base)]].append(base)
        self._by_ids = {ids: ([r.start_unix_ns for r in runs], runs) for ids, runs in grouped.items()}
        self._starts = [r.start_unix_ns for r in self._all]

    def for_run(self, run: RunSummary, ids: frozenset[str]) -> RunSummary:
        """A base over the same cell ids if there is one, else the nearest in time."""
        starts, runs = self._by_ids.get(ids, (self._starts, self._all))
        i = bisect_left(starts, run.start_unix_ns)
        return min(runs[max(0, i - 1) : i + 1], key=lambda r: abs(r.start_unix_ns - run.start_unix_ns))


def _speedups(runs: list[RunSummary], cell_ids: dict[int, frozenset[str]]) -> list[Speedup]:
    by_eval: dict[str, list[RunSummary]] = defaultdict(list)
    for run in runs:
        if run.workers is not None and run.wall_s > 0:
            by_eval[run.eval_name].append(run)
    out: list[Speedup] = []
    for eval_name, eval_runs in sorted(by_eval.items()):
        fewest = min(r.workers or 0 for r in eval_runs)
        bases = _Bases([r for r in eval_runs if r.workers == fewest], cell_ids)
        for run in sorted(eval_runs, key=lambda r: (r.workers or 0, r.start_unix_ns)):
            if run.workers == fewest or run.workers is None:
                continue
            base = bases.for_run(run, cell_ids[id(run)])
            assert base.workers is not None
            base_med, med = base.rate.median, run.rate.median
            out.append(
                Speedup(
                    eval_name=eval_name,
                    engine=run.engine,
                    base_workers=base.workers,
                    workers=run.workers,
                    base_start_unix_ns=base.start_unix_ns,
                    start_unix_ns=run.start_unix_ns,
                    base_wall_s=base.wall_s,
                    wall_s=run.wall_s,
                    base_cells=base.n_cells,
                    n_cells=run.n_cells,
                    speedup=(base.wall_s / base.n_cells) / (run.wall_s / run.n_cells),
                    same_cells=cell_ids[id(base)] == cell_ids[id(run)],
                    base_rate_median=base_med,
                    rate_median=med,
                    per_cell_cost=1 - med / base_med if base_med and med is not None else None,
                )
            )
    return out


def _engine_report(
    engine: str,
    engine_cells: list[Cell],
    eval_name: str | None,
    gap_ns: int,
    *,
    shown: list[bool] | None = None,
) -> EngineConcurrency | None:
    """One engine's figures; ``shown``: which of ``engine_cells`` are reported (else those of
    ``eval_name``), every one of them counting in flight."""
    weights = in_flight(engine_cells)
    if shown is None:
        shown = [eval_name is None or cell.eval_name == eval_name for cell in engine_cells]
    loads = [
        CellLoad(
            uid=cell.uid,
            eval_name=cell.eval_name,
            cell_id=cell.cell_id,
            engine=engine,
            workers=cell.workers,
            start_unix_ns=cell.start_unix_ns,
            end_unix_ns=cell.end_unix_ns,
            elapsed_s=(cell.end_unix_ns - cell.start_unix_ns) / NS_PER_S,
            prompt_tokens=cell.prompt_tokens,
            completion_tokens=cell.completion_tokens,
            decode_rate=rated_decode_rate(cell),
            status=cell.status,
            ceiling_hit=ceiling_hit(cell),
            failed=failed(cell),
            in_flight=weight,
            level=None if weight is None else in_flight_level(weight),
            request_as_cell=is_request_cell(cell),
        )
        for cell, weight, keep in zip(engine_cells, weights, shown, strict=True)
        if keep
    ]
    if not loads:
        return None
    groups: dict[tuple[str, int | None], list[CellLoad]] = defaultdict(list)
    for load in loads:
        groups[(load.eval_name, load.workers)].append(load)
    runs: list[RunSummary] = []
    cell_ids: dict[int, frozenset[str]] = {}
    for (ev, workers), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        for members in split_at_gaps(group, gap_ns, _load_interval):
            run = _run(ev, engine, workers, members)
            runs.append(run)
            cell_ids[id(run)] = frozenset(x.cell_id for x in members)
    tokens = sum(x.completion_tokens or 0 for x in loads)
    busy_s = union_seconds((x.start_unix_ns, x.end_unix_ns) for x in loads)
    return EngineConcurrency(
        engine=engine,
        n_cells=len(loads),
        wall_s=busy_s,
        completion_tokens=tokens,
        aggregate_rate=tokens / busy_s if busy_s > 0 else None,
        ceiling_hits=sum(x.ceiling_hit for x in loads),
        failures=sum(x.failed for x in loads),
        levels=level_summaries((x.level, x) for x in loads),
        by_workers=level_summaries((x.workers, x) for x in loads),
        runs=runs,
        speedups=_speedups(runs, cell_ids),
        cells=loads,
        requests_as_cells=sum(x.request_as_cell for x in loads),
    )


def concurrency(
    cells: Iterable[Cell],
    *,
    eval_name: str | None = None,
    engine: str | None = None,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
) -> ConcurrencyReport:
    """The concurrency analysis of recorded cells, per engine.

    ``eval_name`` and ``engine`` choose which cells are reported; the in-flight count always
    includes every cell given on the same engine, whatever its eval. ``wall_s`` and
    ``aggregate_rate`` of an engine use the union of its reported cells' intervals, so idle
    gaps between runs do not dilute throughput. Cells of one eval at one worker count more
    than ``merge_gap_s`` apart are separate runs.
    """
    gap_ns = merge_gap_ns(merge_gap_s)
    by_engine: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_engine[cell.engine or UNKNOWN_ENGINE].append(cell)
    engines = []
    for name in sorted(by_engine):
        if engine is not None and name != engine:
            continue
        report = _engine_report(name, by_engine[name], eval_name, gap_ns)
        if report is not None:
            engines.append(report)
    return ConcurrencyReport(
        eval_name=eval_name, engines=engines, requests_as_cells=sum(e.requests_as_cells for e in engines)
    )
