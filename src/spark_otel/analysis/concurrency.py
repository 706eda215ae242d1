"""Per-cell decode rate against the number of cells in flight, from recorded cells.

Answers "what did concurrency buy, and what did it cost each cell" from any eval's cells, live
or backfilled (the article's Act 3 and Appendix C). For each cell, the load it ran under is the
*time-weighted* number of cells in flight on its engine during it: the integral of the in-flight
count over the cell's interval divided by its duration, counting the cell itself. A serial cell
reads 1.0; eight cells started together read 8.0 for the shortest and less for longer ones, as
their neighbours finish. Cells of every eval on the engine count, since they all share it.

One sweep over the sorted interval endpoints per engine gives the in-flight step function and
its running integral, so every cell's average is two lookups: O(n log n), never all pairs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from ..model import NS_PER_S, Cell, CellStatus
from ._rows import rows
from .stats import RateSummary, summarize

__all__ = [
    "CellLoad",
    "ConcurrencyReport",
    "EngineConcurrency",
    "LevelSummary",
    "RunSummary",
    "Speedup",
    "concurrency",
    "in_flight",
    "union_seconds",
]

UNKNOWN_ENGINE = "unknown"


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CellLoad(_Result):
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
    in_flight: float | None
    level: int | None


class LevelSummary(_Result):
    """Cells grouped by in-flight level (or by their ``workers`` value): rates and ceiling hits."""

    level: int
    n_cells: int
    rate: RateSummary
    ceiling_hits: int


class RunSummary(_Result):
    """A run: the cells of one eval at one ``workers`` value on one engine."""

    eval_name: str
    engine: str
    workers: int | None
    n_cells: int
    wall_s: float
    completion_tokens: int
    aggregate_rate: float | None
    rate: RateSummary
    ceiling_hits: int


class Speedup(_Result):
    """Wall-clock speedup of an N-worker run over the eval's serial (or fewest-worker) run.

    ``speedup`` compares wall time per cell, which is the plain wall ratio when both runs hold
    the same number of cells (the article's 8,507 s / 1,801 s = 4.7x); ``same_cells`` says
    whether they ran the same cell ids.
    """

    eval_name: str
    engine: str
    base_workers: int
    workers: int
    base_wall_s: float
    wall_s: float
    base_cells: int
    n_cells: int
    speedup: float
    same_cells: bool
    base_rate_median: float | None
    rate_median: float | None
    per_cell_cost: float | None


class EngineConcurrency(_Result):
    """Everything measured on one engine."""

    engine: str
    n_cells: int
    wall_s: float
    completion_tokens: int
    aggregate_rate: float | None
    ceiling_hits: int
    levels: list[LevelSummary]
    by_workers: list[LevelSummary]
    runs: list[RunSummary]
    speedups: list[Speedup]
    cells: list[CellLoad]


class ConcurrencyReport(_Result):
    """Per-engine results, engines in name order."""

    eval_name: str | None
    engines: list[EngineConcurrency]


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


def _levels(pairs: Iterable[tuple[int | None, CellLoad]]) -> list[LevelSummary]:
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
        )
        for level, loads in sorted(groups.items())
    ]


def _run(eval_name: str, engine: str, workers: int | None, loads: list[CellLoad]) -> RunSummary:
    tokens = sum(x.completion_tokens or 0 for x in loads)
    busy_s = union_seconds((x.start_unix_ns, x.end_unix_ns) for x in loads)
    wall_s = (max(x.end_unix_ns for x in loads) - min(x.start_unix_ns for x in loads)) / NS_PER_S
    return RunSummary(
        eval_name=eval_name,
        engine=engine,
        workers=workers,
        n_cells=len(loads),
        wall_s=wall_s,
        completion_tokens=tokens,
        aggregate_rate=tokens / busy_s if busy_s > 0 else None,
        rate=summarize(x.decode_rate for x in loads),
        ceiling_hits=sum(x.ceiling_hit for x in loads),
    )


def _speedups(runs: list[RunSummary], cell_ids: dict[tuple[str, int | None], set[str]]) -> list[Speedup]:
    by_eval: dict[str, list[RunSummary]] = defaultdict(list)
    for run in runs:
        if run.workers is not None and run.wall_s > 0:
            by_eval[run.eval_name].append(run)
    out: list[Speedup] = []
    for eval_name, eval_runs in sorted(by_eval.items()):
        eval_runs.sort(key=lambda r: r.workers or 0)
        base = eval_runs[0]
        assert base.workers is not None
        for run in eval_runs[1:]:
            assert run.workers is not None
            base_med, med = base.rate.median, run.rate.median
            out.append(
                Speedup(
                    eval_name=eval_name,
                    engine=run.engine,
                    base_workers=base.workers,
                    workers=run.workers,
                    base_wall_s=base.wall_s,
                    wall_s=run.wall_s,
                    base_cells=base.n_cells,
                    n_cells=run.n_cells,
                    speedup=(base.wall_s / base.n_cells) / (run.wall_s / run.n_cells),
                    same_cells=cell_ids[(eval_name, base.workers)] == cell_ids[(eval_name, run.workers)],
                    base_rate_median=base_med,
                    rate_median=med,
                    per_cell_cost=1 - med / base_med if base_med and med is not None else None,
                )
            )
    return out


def _engine_report(engine: str, engine_cells: list[Cell], eval_name: str | None) -> EngineConcurrency | None:
    weights = in_flight(engine_cells)
    loads = rows(
        CellLoad,
        (
            {
                "uid": cell.uid,
                "eval_name": cell.eval_name,
                "cell_id": cell.cell_id,
                "engine": engine,
                "workers": cell.workers,
                "start_unix_ns": cell.start_unix_ns,
                "end_unix_ns": cell.end_unix_ns,
                "elapsed_s": (cell.end_unix_ns - cell.start_unix_ns) / NS_PER_S,
                "prompt_tokens": cell.prompt_tokens,
                "completion_tokens": cell.completion_tokens,
                "decode_rate": cell.decode_rate,
                "status": cell.status,
                "ceiling_hit": cell.status is CellStatus.DEADLINE or cell.deadline_hit,
                "in_flight": weight,
                "level": None if weight is None else max(1, math.floor(weight + 0.5)),
            }
            for cell, weight in zip(engine_cells, weights, strict=True)
            if eval_name is None or cell.eval_name == eval_name
        ),
    )
    if not loads:
        return None
    run_groups: dict[tuple[str, int | None], list[CellLoad]] = defaultdict(list)
    for load in loads:
        run_groups[(load.eval_name, load.workers)].append(load)
    runs = [
        _run(ev, engine, workers, group)
        for (ev, workers), group in sorted(run_groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))
    ]
    cell_ids = {key: {x.cell_id for x in group} for key, group in run_groups.items()}
    tokens = sum(x.completion_tokens or 0 for x in loads)
    busy_s = union_seconds((x.start_unix_ns, x.end_unix_ns) for x in loads)
    return EngineConcurrency(
        engine=engine,
        n_cells=len(loads),
        wall_s=busy_s,
        completion_tokens=tokens,
        aggregate_rate=tokens / busy_s if busy_s > 0 else None,
        ceiling_hits=sum(x.ceiling_hit for x in loads),
        levels=_levels((x.level, x) for x in loads),
        by_workers=_levels((x.workers, x) for x in loads),
        runs=runs,
        speedups=_speedups(runs, cell_ids),
        cells=loads,
    )


def concurrency(
    cells: Iterable[Cell], *, eval_name: str | None = None, engine: str | None = None
) -> ConcurrencyReport:
    """The concurrency analysis of recorded cells, per engine.

    ``eval_name`` and ``engine`` choose which cells are reported; the in-flight count always
    includes every cell given on the same engine, whatever its eval. ``wall_s`` and
    ``aggregate_rate`` of an engine use the union of its reported cells' intervals, so idle
    gaps between runs do not dilute throughput.
    """
    by_engine: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_engine[cell.engine or UNKNOWN_ENGINE].append(cell)
    engines = []
    for name in sorted(by_engine):
        if engine is not None and name != engine:
            continue
        report = _engine_report(name, by_engine[name], eval_name)
        if report is not None:
            engines.append(report)
    return ConcurrencyReport(eval_name=eval_name, engines=engines)
