"""Load windows: which intervals overlap which, and windows derived from other evals' cells.

Intervals are half-open ``[start_unix_ns, end_unix_ns)``: two that merely touch (one cell ends
as the next starts) do not overlap, and a zero-length interval overlaps nothing. Overlaps are
found by one sweep over the sorted endpoints, so the cost is O((n + m) log(n + m) + pairs),
never n x m.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .. import _semconv as sc
from .._clock import NS_PER_S
from .._exceptions import ConfigError
from ..model import Cell, LoadWindow

__all__ = [
    "DEFAULT_MERGE_GAP_S",
    "keyed_windows_from_cells",
    "merge_gap_ns",
    "overlapping_pairs",
    "peak_concurrency",
    "split_at_gaps",
    "windows_from_cells",
]

DEFAULT_MERGE_GAP_S = 60.0
"""Cells of one eval this close together are one load (and one run): a serial runner's pause
between cells does not take its load away."""

Interval = tuple[int, int]
EvalRun = tuple[str, int | None]
"""An eval's cells at one ``workers`` value: ``(eval_name, workers)``."""
_T = TypeVar("_T")


def overlapping_pairs(left: Sequence[Interval], right: Sequence[Interval]) -> list[tuple[int, int, int]]:
    """Every ``(i, j, overlap_ns)`` where ``left[i]`` and ``right[j]`` share time.

    At equal timestamps ends sort before starts, which is what makes touching intervals not
    overlap. Each pair is emitted once, by whichever interval starts later.
    """
    events: list[tuple[int, int, int, int]] = []
    for side, intervals in enumerate((left, right)):
        for idx, (start, end) in enumerate(intervals):
            if end > start:
                events.append((start, 1, side, idx))
                events.append((end, 0, side, idx))
    events.sort()
    active: tuple[dict[int, int], dict[int, int]] = ({}, {})  # idx -> end
    pairs: list[tuple[int, int, int]] = []
    for t, is_start, side, idx in events:
        if not is_start:
            del active[side][idx]
            continue
        end = (left if side == 0 else right)[idx][1]
        for other, other_end in active[1 - side].items():
            overlap = min(end, other_end) - t
            pairs.append((idx, other, overlap) if side == 0 else (other, idx, overlap))
        active[side][idx] = end
    return pairs


def peak_concurrency(intervals: Iterable[Interval]) -> int:
    """The most intervals open at one instant."""
    events = sorted((t, kind) for s, e in intervals if e > s for t, kind in ((s, 1), (e, -1)))
    peak = count = 0
    for _, kind in events:
        count += kind
        peak = max(peak, count)
    return peak


def split_at_gaps(items: Iterable[_T], gap_ns: int, interval: Callable[[_T], Interval]) -> list[list[_T]]:
    """Group items into runs: an item joins the current run while it starts no later than
    ``gap_ns`` after the run's latest end so far, else it starts a new run. Runs and the items
    in each are in start order."""
    runs: list[list[_T]] = []
    run_end = 0
    for item in sorted(items, key=lambda x: interval(x)[0]):
        start, end = interval(item)
        if runs and start <= run_end + gap_ns:
            runs[-1].append(item)
            run_end = max(run_end, end)
        else:
            runs.append([item])
            run_end = end
    return runs


MAX_MERGE_GAP_S = 31_536_000.0
"""A year: a longer gap merges nothing more (and past about 292 years its nanoseconds overflow)."""


def merge_gap_ns(merge_gap_s: float) -> int:
    """``merge_gap_s`` in nanoseconds; a negative gap would split cells that overlap into separate
    runs, so it is refused here, for every analysis that merges cells, as is one past a year."""
    if not merge_gap_s >= 0:
        raise ConfigError(f"merge gap {merge_gap_s} s must not be negative")
    if not merge_gap_s <= MAX_MERGE_GAP_S:
        raise ConfigError(f"merge gap {merge_gap_s:g} s is past a year ({MAX_MERGE_GAP_S:,.0f} s)")
    return int(merge_gap_s * NS_PER_S)


def _cell_interval(cell: Cell) -> Interval:
    return cell.start_unix_ns, cell.end_unix_ns


def keyed_windows_from_cells(
    cells: Iterable[Cell], *, merge_gap_s: float = DEFAULT_MERGE_GAP_S
) -> list[tuple[EvalRun, LoadWindow]]:
    """`windows_from_cells`, each window with the ``(eval_name, workers)`` of its cells, so one
    derivation over every eval serves each eval priced against the others (`neighbour_costs`)."""
    gap_ns = merge_gap_ns(merge_gap_s)
    groups: dict[tuple[str, str | None, int | None], list[Cell]] = defaultdict(list)
    for cell in cells:
        if cell.end_unix_ns > cell.start_unix_ns:
            groups[(cell.eval_name, cell.engine, cell.workers)].append(cell)
    keys: list[EvalRun] = []
    windows: list[LoadWindow] = []
    for (eval_name, engine, workers), group in groups.items():
        runs = split_at_gaps(group, gap_ns, _cell_interval)
        label = f"{eval_name} eval" + (f", {workers} worker{'s' if workers > 1 else ''}" if workers else "")
        label += f" on {engine}" if engine else ""
        for run in runs:
            start = run[0].start_unix_ns
            keys.append((eval_name, workers))
            windows.append(
                LoadWindow(
                    uid=f"eval:{eval_name}:{engine}:{workers}:{start}",
                    name=label,
                    kind="eval",
                    engine=engine,
                    start_unix_ns=start,
                    end_unix_ns=max(c.end_unix_ns for c in run),
                    streams=workers or peak_concurrency((c.start_unix_ns, c.end_unix_ns) for c in run),
                    attributes={sc.EVAL_NAME: eval_name, "cells": len(run)},
                )
            )
    keyed = list(zip(keys, windows, strict=True))
    keyed.sort(key=lambda kw: (kw[1].start_unix_ns, kw[1].name))
    return keyed


def windows_from_cells(
    cells: Iterable[Cell], *, merge_gap_s: float = DEFAULT_MERGE_GAP_S
) -> list[LoadWindow]:
    """Merge each eval's cells into load windows, per engine and ``workers`` value, in time order.

    Cells of one eval at one worker count on one engine become one window while they overlap
    or follow each other within ``merge_gap_s`` (a serial eval's runner pauses between cells
    without the load going away). A window's ``streams`` is the cells' ``workers`` value, or
    the peak number in flight when they carry none.
    """
    return [window for _, window in keyed_windows_from_cells(cells, merge_gap_s=merge_gap_s)]
