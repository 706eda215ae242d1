"""The concurrency analysis over columns: `concurrency`'s report, from `CellColumns` rather than a
`Cell` per row.

Same rules, same figures (`tests/analysis/test_concurrency_columns.py` holds it equal to
`concurrency` on the fixtures and on generated cells): the in-flight sweep is numpy's (endpoints
sorted once, the running integral a cumulative sum of exact int64 cell-nanoseconds), rates and
flags are array operations, and so are the runs (the cells sorted once by eval, worker count and
start; a run breaks where a start passes the group's running latest end by the merge gap; its
busy time the union of its cells' intervals, each cell adding what it covers past the latest end
before it) and every group's rate summary (`stats.summarize_groups`). What stays in Python is per
run, not per cell: its validated `RunSummary`, its cell ids for `_speedups`. The per-cell rows,
where asked for, are one validated `CellLoad` each: about half the analysis's time at 100,000
cells, so an answer that prints no cell leaves them out (``with_cells=False``).

Where int64 or float64 could not hold a figure exactly as `concurrency` computes it in Python's
integers (more cell-nanoseconds in a sweep than 2**62, an integral or a duration past 2**53), the
cells of that engine go through `concurrency`'s own code instead.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from .._clock import NS_PER_S
from ..model import Cell, CellStatus
from ..records.cell_columns import STATUSES, CellColumns
from .concurrency import (
    UNKNOWN_ENGINE,
    CellLoad,
    ConcurrencyReport,
    EngineConcurrency,
    LevelSummary,
    RunSummary,
    _engine_report,
    _speedups,
)
from .request_cells import REQUEST_SOURCE
from .stats import RateSummary, summarize, summarize_groups
from .windows import DEFAULT_MERGE_GAP_S, merge_gap_ns

__all__ = ["concurrency_of_columns", "in_flight_of_columns"]

_EXACT = 2**53
"""Integers below this convert to float64 exactly."""
_SWEEP_BOUND = 2**62
"""Cell-nanoseconds a sweep may add up to in int64 with room to spare."""
_DEADLINE = STATUSES.index(CellStatus.DEADLINE)
_ERROR = STATUSES.index(CellStatus.ERROR)

Floats = NDArray[np.float64]
Flags = NDArray[np.bool_]
_K = TypeVar("_K", bound=Hashable)


def in_flight_of_columns(
    start: NDArray[np.int64], end: NDArray[np.int64]
) -> tuple[Floats, NDArray[np.bool_]]:
    """`concurrency.in_flight` of cells given as their start and end: each cell's time-weighted
    count of cells in flight (itself included), and a mask of the cells that have one (positive
    duration; the weight is NaN elsewhere). Exact as `in_flight` is, provided the cells' durations
    add up to less than 2**62 ns (the caller checks)."""
    duration = end - start
    timed = duration > 0
    n_timed = int(timed.sum())
    instants, which = np.unique(np.concatenate([start[timed], end[timed]]), return_inverse=True)
    starting = np.bincount(which[:n_timed], minlength=len(instants))
    count = np.cumsum(
        starting - np.bincount(which[n_timed:], minlength=len(instants))
    )  # just after each instant
    integral = np.zeros(len(instants), np.int64)
    if len(instants) > 1:
        np.cumsum(count[:-1] * np.diff(instants), out=integral[1:])
    weight = np.full(len(start), np.nan)
    if not timed.any():
        return weight, timed
    at_start = integral[np.searchsorted(instants, start[timed])]
    at_end = integral[np.searchsorted(instants, end[timed])]
    covered, spans = at_end - at_start, duration[timed]
    weights = covered / spans
    inexact = (covered >= _EXACT) | (spans >= _EXACT)
    for k in np.flatnonzero(inexact).tolist():  # as Python's integers divide, correctly rounded
        weights[k] = int(covered[k]) / int(spans[k])
    weight[timed] = weights
    return weight, timed


def _groups(keys: Sequence[_K]) -> dict[_K, list[int]]:
    """Positions of each key, keys in order of first appearance, positions in order."""
    out: dict[_K, list[int]] = {}
    for k, key in enumerate(keys):
        found = out.get(key)
        if found is None:
            out[key] = [k]
        else:
            found.append(k)
    return out


def _distinct(values: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """The distinct ``values`` in ascending order, and each value's position among them: counted
    in one pass where they span a range no wider than about their number (in-flight levels and
    worker counts), else sorted (`numpy.unique`)."""
    if not len(values):
        return values, np.zeros(0, np.intp)
    low = int(values.min())
    if int(values.max()) - low > 4 * len(values) + 1_024:
        distinct, which = np.unique(values, return_inverse=True)
        return distinct, which.reshape(-1)
    offset = values - low
    present = np.bincount(offset) > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, rank[offset]


def _level_summaries(
    levels: NDArray[np.int64], grouped: Flags, rate: Floats, hit: Flags, fail: Flags
) -> list[LevelSummary]:
    """`concurrency.level_summaries` over columns: the cells where ``grouped`` by their
    ``levels``, in ascending order."""
    values, which = _distinct(levels[grouped])
    n = len(values)
    return [
        LevelSummary(level=level, n_cells=count, rate=summary, ceiling_hits=hits, failures=fails)
        for level, count, summary, hits, fails in zip(
            values.tolist(),
            np.bincount(which, minlength=n).tolist(),
            summarize_groups(rate[grouped], which, n),
            np.bincount(which, hit[grouped], minlength=n).astype(np.int64).tolist(),
            np.bincount(which, fail[grouped], minlength=n).astype(np.int64).tolist(),
            strict=True,
        )
    ]


def _split(
    members: list[int], start: list[int], end: list[int], gap_ns: int
) -> Iterator[tuple[list[int], int]]:
    """`windows.split_at_gaps` of the cells at ``members``, each run with the nanoseconds its
    cells' intervals cover (`concurrency.union_seconds`' union, in ns)."""
    ordered = sorted(members, key=start.__getitem__)
    run: list[int] = []
    run_end = covered = 0
    piece_start: int | None = None
    piece_end = 0
    for k in ordered:
        s, e = start[k], end[k]
        if run and s <= run_end + gap_ns:
            run.append(k)
            run_end = max(run_end, e)
        else:
            if run:
                yield run, covered + (piece_end - piece_start if piece_start is not None else 0)
            run, run_end, covered, piece_start = [k], e, 0, None
        if e > s:
            if piece_start is None or s > piece_end:
                if piece_start is not None:
                    covered += piece_end - piece_start
                piece_start, piece_end = s, e
            else:
                piece_end = max(piece_end, e)
    if run:
        yield run, covered + (piece_end - piece_start if piece_start is not None else 0)


def _union_ns(start: NDArray[np.int64], end: NDArray[np.int64]) -> int:
    """Nanoseconds covered by the union of the intervals (empty ones covering nothing)."""
    timed = end > start
    if not timed.any():
        return 0
    order = np.argsort(start[timed], kind="stable")
    s, e = start[timed][order], end[timed][order]
    reach = np.maximum.accumulate(e)
    fresh = np.ones(len(s), np.bool_)
    fresh[1:] = s[1:] > reach[:-1]
    firsts = np.flatnonzero(fresh)
    return int((np.maximum.reduceat(e, firsts) - s[firsts]).sum(dtype=np.int64))


def _exact_enough(cols: CellColumns) -> bool:
    """Whether int64 and float64 hold every figure of these cells as Python's integers would."""
    duration = cols.end_unix_ns - cols.start_unix_ns
    positive = duration[duration > 0]
    return (
        float(positive.sum(dtype=np.float64)) < _SWEEP_BOUND
        and not (positive >= _EXACT).any()
        and not (cols.completion_tokens >= _EXACT).any()
    )


def _as_cells(cols: CellColumns) -> list[Cell]:
    """The columns as cells (for the rare engine `concurrency`'s own integers must answer)."""
    return [
        Cell(
            uid=cols.uid[k],
            eval_name=cols.eval_name[k],
            cell_id=cols.cell_id[k],
            engine=cols.engine[k],
            start_unix_ns=int(cols.start_unix_ns[k]),
            end_unix_ns=int(cols.end_unix_ns[k]),
            prompt_tokens=int(cols.prompt_tokens[k]) if cols.prompt_known[k] else None,
            completion_tokens=int(cols.completion_tokens[k]) if cols.completion_known[k] else None,
            status=STATUSES[cols.status[k]],
            deadline_s=None if np.isnan(cols.deadline_s[k]) else float(cols.deadline_s[k]),
            workers=int(cols.workers[k]) if cols.workers_known[k] else None,
            source=cols.source[k],
        )
        for k in range(len(cols))
    ]


def _loads(
    engine: str,
    sel: CellColumns,
    figures: tuple[NDArray[np.float64], list[float], list[bool], list[bool]],
    in_flight: tuple[NDArray[np.float64], NDArray[np.bool_]],
    *,
    workers: list[int | None],
    levels: list[int | None],
) -> list[CellLoad]:
    """Each cell's row: ``figures`` its elapsed seconds, rate (NaN: none), ceiling hit and
    failure; ``in_flight`` its weight and whether it has one."""
    elapsed, rates, hits, fails = figures
    weight, weighed = in_flight
    starts, ends = sel.start_unix_ns.tolist(), sel.end_unix_ns.tolist()
    prompts = [
        p if known else None
        for p, known in zip(sel.prompt_tokens.tolist(), sel.prompt_known.tolist(), strict=True)
    ]
    completed = [
        c if known else None
        for c, known in zip(sel.completion_tokens.tolist(), sel.completion_known.tolist(), strict=True)
    ]
    weights = [w if ok else None for w, ok in zip(weight.tolist(), weighed.tolist(), strict=True)]
    return [
        CellLoad(
            uid=sel.uid[k],
            eval_name=sel.eval_name[k],
            cell_id=sel.cell_id[k],
            engine=engine,
            workers=workers[k],
            start_unix_ns=starts[k],
            end_unix_ns=ends[k],
            elapsed_s=elapsed_k,
            prompt_tokens=prompts[k],
            completion_tokens=completed[k],
            decode_rate=rates[k] if rates[k] == rates[k] else None,
            status=STATUSES[code],
            ceiling_hit=hits[k],
            failed=fails[k],
            in_flight=weights[k],
            level=levels[k],
            request_as_cell=sel.source[k] == REQUEST_SOURCE,
        )
        for k, (elapsed_k, code) in enumerate(zip(elapsed.tolist(), sel.status.tolist(), strict=True))
    ]


@dataclass(frozen=True)
class _Figures:
    """The shown cells' figures the runs and summaries read, in the cells' order."""

    sel: CellColumns
    rate: Floats
    """NaN where the cell has no rate."""
    hit: Flags
    fail: Flags
    tokens: NDArray[np.int64]
    """Completion tokens, 0 where unknown."""


def _run_summary(
    engine: str,
    eval_name: str,
    *,
    workers: int | None,
    span: tuple[int, int],
    counts: tuple[int, int, int, int],
    covered_ns: int,
    rate: RateSummary,
) -> RunSummary:
    """A run from its figures: ``span`` its first start and last end, ``counts`` its cells,
    tokens, ceiling hits and failures, ``covered_ns`` the union of its cells' intervals."""
    first, last = span
    n_cells, tokens, hits, fails = counts
    busy_s = covered_ns / NS_PER_S
    return RunSummary(
        eval_name=eval_name,
        engine=engine,
        workers=workers,
        start_unix_ns=first,
        end_unix_ns=last,
        n_cells=n_cells,
        wall_s=(last - first) / NS_PER_S,
        completion_tokens=tokens,
        aggregate_rate=tokens / busy_s if busy_s > 0 else None,
        rate=rate,
        ceiling_hits=hits,
        failures=fails,
    )


def _take(cols: CellColumns, rows: NDArray[np.intp]) -> CellColumns:
    """`CellColumns.take` of ascending ``rows``, the columns themselves where that is all of them
    (copying each text column is most of a take's time)."""
    return cols if len(rows) == len(cols) else cols.take(rows)


def _codes(names: list[str]) -> tuple[list[str], NDArray[np.int64]]:
    """The distinct ``names`` in sorted order, and each name's position among them."""
    distinct = sorted(set(names))
    code = {name: k for k, name in enumerate(distinct)}
    return distinct, np.fromiter(map(code.__getitem__, names), np.int64, len(names))


def _later_of_none_and_zero(
    evals: NDArray[np.int64], n_evals: int, workers: NDArray[np.int64], known: Flags
) -> NDArray[np.int64]:
    """1 for the cells of whichever of an eval's groups at no worker count (None) and at 0
    appeared later, 0 elsewhere: both sort as 0 and `concurrency` keeps them in the order they
    first appeared."""
    unknown, zero = ~known, known & (workers == 0)
    seen = []
    for which in (unknown, zero):
        first = np.full(n_evals, len(evals), np.int64)
        np.minimum.at(first, evals[which], np.flatnonzero(which))
        seen.append(first)
    none_first, zero_first = seen
    later = np.zeros(len(evals), np.int64)
    later[unknown] = none_first[evals[unknown]] > zero_first[evals[unknown]]
    later[zero] = zero_first[evals[zero]] > none_first[evals[zero]]
    return later


def _runs_in_python(
    engine: str, f: _Figures, gap_ns: int
) -> tuple[list[RunSummary], dict[int, frozenset[str]]]:
    """The runs a group at a time in Python (`_split`), for cells that end before they start:
    `_runs`' running latest end over a whole group holds only where every cell ends after it
    starts."""
    sel = f.sel
    starts, ends = sel.start_unix_ns.tolist(), sel.end_unix_ns.tolist()
    rates, hits, fails, tokens = f.rate.tolist(), f.hit.tolist(), f.fail.tolist(), f.tokens.tolist()
    workers: list[int | None] = [
        w if known else None
        for w, known in zip(sel.workers.tolist(), sel.workers_known.tolist(), strict=True)
    ]
    runs: list[RunSummary] = []
    cell_ids: dict[int, frozenset[str]] = {}
    by_run = _groups(list(zip(sel.eval_name, workers, strict=True)))
    for (ev, count), group in sorted(by_run.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        for members, covered in _split(group, starts, ends, gap_ns):
            run = _run_summary(
                engine,
                ev,
                workers=count,
                span=(min(starts[k] for k in members), max(ends[k] for k in members)),
                counts=(
                    len(members),
                    sum(tokens[k] for k in members),
                    sum(hits[k] for k in members),
                    sum(fails[k] for k in members),
                ),
                covered_ns=covered,
                rate=summarize([rates[k] for k in members]),
            )
            runs.append(run)
            cell_ids[id(run)] = frozenset(sel.cell_id[k] for k in members)
    return runs, cell_ids


def _runs(engine: str, f: _Figures, gap_ns: int) -> tuple[list[RunSummary], dict[int, frozenset[str]]]:
    """`concurrency`'s runs (one eval at one worker count, split where an idle gap passes
    ``gap_ns``) and each run's cell ids, as arrays: the cells sorted once by eval, worker count
    (None as 0, after 0 if it appeared later, as `concurrency` sorts its groups) and start; a run
    breaks where a cell starts more than ``gap_ns`` after the latest end before it in its group,
    and covers, of its cells' intervals, what each adds past that latest end."""
    sel = f.sel
    start, end = sel.start_unix_ns, sel.end_unix_ns
    if (end < start).any() or (len(sel) and int(end.max()) >= _SWEEP_BOUND - gap_ns):
        return _runs_in_python(engine, f, gap_ns)
    names, evals = _codes(sel.eval_name)
    later = _later_of_none_and_zero(evals, len(names), sel.workers, sel.workers_known)
    order = np.lexsort((start, later, sel.workers, evals))
    s, e = start[order], end[order]
    keys = (evals[order], sel.workers[order], later[order])
    changed = np.zeros(len(e), np.bool_)
    for key in keys:
        changed[1:] |= key[1:] != key[:-1]
    changed[:1] = True
    group_starts = np.flatnonzero(changed)
    latest = np.empty_like(e)  # before each cell, the latest end of its group's earlier cells
    for a, b in zip(group_starts.tolist(), [*group_starts[1:].tolist(), len(e)], strict=True):
        latest[a] = s[a]
        np.maximum.accumulate(e[a : b - 1], out=latest[a + 1 : b])
    breaks = s > latest + gap_ns
    breaks[group_starts] = True
    covered = np.maximum(e - np.maximum(s, latest), 0)
    firsts = np.flatnonzero(breaks)
    run_of = np.cumsum(breaks) - 1
    n_runs = len(firsts)
    lasts = np.maximum.reduceat(e, firsts)
    sizes = np.diff(np.r_[firsts, len(e)])
    summaries = summarize_groups(f.rate[order], run_of, n_runs)
    ids = [sel.cell_id[k] for k in order.tolist()]
    by_cell = order[firsts]
    runs: list[RunSummary] = []
    cell_ids: dict[int, frozenset[str]] = {}
    for k, (a, size, ev, count, known, span, figures) in enumerate(
        zip(
            firsts.tolist(),
            sizes.tolist(),
            evals[by_cell].tolist(),
            sel.workers[by_cell].tolist(),
            sel.workers_known[by_cell].tolist(),
            zip(s[firsts].tolist(), lasts.tolist(), strict=True),
            zip(
                np.add.reduceat(f.tokens[order], firsts).tolist(),
                np.add.reduceat(f.hit[order].astype(np.int64), firsts).tolist(),
                np.add.reduceat(f.fail[order].astype(np.int64), firsts).tolist(),
                np.add.reduceat(covered, firsts).tolist(),
                strict=True,
            ),
            strict=True,
        )
    ):
        tokens, hits, fails, covered_ns = figures
        run = _run_summary(
            engine,
            names[ev],
            workers=count if known else None,
            span=span,
            counts=(size, tokens, hits, fails),
            covered_ns=covered_ns,
            rate=summaries[k],
        )
        runs.append(run)
        cell_ids[id(run)] = frozenset(ids[a : a + size])
    return runs, cell_ids


def _engine_of_columns(
    engine: str,
    cols: CellColumns,
    eval_name: str | None,
    gap_ns: int,
    start_range: tuple[int | None, int | None],
    *,
    with_cells: bool,
) -> EngineConcurrency | None:
    since, until = start_range
    shown = np.ones(len(cols), np.bool_) if eval_name is None else np.array(cols.eval_name) == eval_name
    if since is not None:
        shown &= cols.start_unix_ns >= since
    if until is not None:
        shown &= cols.start_unix_ns <= until
    if not _exact_enough(cols):
        report = _engine_report(engine, _as_cells(cols), eval_name, gap_ns, shown=shown.tolist())
        return report if report is None or with_cells else report.model_copy(update={"cells": []})
    weight, weighed = in_flight_of_columns(cols.start_unix_ns, cols.end_unix_ns)
    chosen = np.flatnonzero(shown)
    if not len(chosen):
        return None
    sel = _take(cols, chosen)
    weight, weighed = weight[chosen], weighed[chosen]
    duration = sel.end_unix_ns - sel.start_unix_ns
    elapsed = duration / NS_PER_S
    hit = sel.status == _DEADLINE
    fail = sel.status == _ERROR
    has_rate = sel.completion_known & (sel.completion_tokens != 0) & (duration > 0) & ~hit & ~fail
    rate = np.full(len(sel), np.nan)
    rate[has_rate] = sel.completion_tokens[has_rate] / elapsed[has_rate]
    level = np.maximum(1, np.floor(weight + 0.5))
    level_of = np.where(weighed, level, 0).astype(np.int64)
    completions = np.where(sel.completion_known, sel.completion_tokens, 0)

    loads: list[CellLoad] = []
    if with_cells:
        workers: list[int | None] = [
            w if known else None
            for w, known in zip(sel.workers.tolist(), sel.workers_known.tolist(), strict=True)
        ]
        levels: list[int | None] = [
            int(lv) if ok else None for lv, ok in zip(level.tolist(), weighed.tolist(), strict=True)
        ]
        loads = _loads(
            engine,
            sel,
            (elapsed, rate.tolist(), hit.tolist(), fail.tolist()),
            (weight, weighed),
            workers=workers,
            levels=levels,
        )
    runs, cell_ids = _runs(engine, _Figures(sel, rate, hit, fail, completions), gap_ns)
    total_tokens = int(completions.sum())
    busy_s = _union_ns(sel.start_unix_ns, sel.end_unix_ns) / NS_PER_S
    return EngineConcurrency(
        engine=engine,
        n_cells=len(sel),
        wall_s=busy_s,
        completion_tokens=total_tokens,
        aggregate_rate=total_tokens / busy_s if busy_s > 0 else None,
        ceiling_hits=int(hit.sum()),
        failures=int(fail.sum()),
        levels=_level_summaries(level_of, weighed, rate, hit, fail),
        by_workers=_level_summaries(sel.workers, sel.workers_known, rate, hit, fail),
        runs=runs,
        speedups=_speedups(runs, cell_ids),
        cells=loads,
        requests_as_cells=sel.source.count(REQUEST_SOURCE),
    )


def concurrency_of_columns(
    cells: CellColumns,
    *,
    eval_name: str | None = None,
    engine: str | None = None,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
    since_unix_ns: int | None = None,
    until_unix_ns: int | None = None,
    with_cells: bool = True,
) -> ConcurrencyReport:
    """`concurrency` of the cells ``cells`` holds, the same report from columns.

    ``with_cells=False`` leaves each engine's per-cell rows (``cells``) empty, every other figure
    the same: they are most of the report's size and time, and an answer may not list them.

    ``since_unix_ns`` and ``until_unix_ns`` report only the cells that start in that range (as
    ``eval_name`` and ``engine`` choose cells), while every cell given still counts in flight:
    given the cells that overlap the range (`Store.cell_columns(overlapping=True)`), a cell at
    its edge weighs the neighbours that started before it."""
    gap_ns = merge_gap_ns(merge_gap_s)
    names, codes = _codes([e or UNKNOWN_ENGINE for e in cells.engine])
    engines = []
    for code, name in enumerate(names):
        if engine is not None and name != engine:
            continue
        report = _engine_of_columns(
            name,
            _take(cells, np.flatnonzero(codes == code)),
            eval_name,
            gap_ns,
            (since_unix_ns, until_unix_ns),
            with_cells=with_cells,
        )
        if report is not None:
            engines.append(report)
    return ConcurrencyReport(
        eval_name=eval_name, engines=engines, requests_as_cells=sum(e.requests_as_cells for e in engines)
    )
