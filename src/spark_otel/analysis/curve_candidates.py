"""The curves `overview` offers the advisor for each engine, from cells given as columns.

Candidates per engine: every probe curve, marked under load when cells on its engine ran during
its levels, and the curve the engine's recorded cells trace out, leaving out the cells that ran
beside load their in-flight count does not see (recorded windows: probe levels and loads on any
engine, and the windows other engines' cells make). When that leaves no curve, it uses every
cell and says it is under load.

Over columns (numpy): which cells overlap a set of intervals is one sort of the intervals' union
and one binary search per cell, and the other engines' windows are each (eval, engine, workers)
group's runs as `windows.split_at_gaps` cuts them, so no interval is a Python object. The same
curves as the row path (`tests/support/overview_reference.py`; `tests/analysis/test_overview_columns.py`
holds them equal): intervals are half-open (`windows.overlapping_pairs`: touching is no overlap, an
empty interval overlaps nothing), and the cells' levels and rates are `concurrency_of_columns`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from .. import _semconv as sc
from .._clock import NS_PER_S
from .._exceptions import ConfigError, InputError
from ..model import CellStatus, LoadWindow
from ..records.cell_columns import STATUSES, CellColumns
from ..records.rate_curve import RateCurve
from .concurrency import UNKNOWN_ENGINE, concurrency
from .concurrency_columns import _as_cells, _level_summaries, in_flight_of_columns
from .curve import curve_from_concurrency, curve_from_levels
from .windows import DEFAULT_MERGE_GAP_S, merge_gap_ns

__all__ = ["codes_of", "curve_candidates", "engine_codes", "overlapping_any"]

T = TypeVar("T")

Ints = NDArray[np.int64]
Flags = NDArray[np.bool_]
Positions = NDArray[np.intp]

_DEADLINE = STATUSES.index(CellStatus.DEADLINE)
_ERROR = STATUSES.index(CellStatus.ERROR)


def _union(start: Ints, end: Ints) -> tuple[Ints, Ints]:
    """The union of half-open intervals as disjoint ones in time order (empty ones dropped;
    touching ones joined: their union is one interval)."""
    timed = end > start
    order = np.argsort(start[timed], kind="stable")
    s, e = start[timed][order], end[timed][order]
    if not len(s):
        return s, e
    reach = np.maximum.accumulate(e)
    fresh = np.ones(len(s), np.bool_)
    fresh[1:] = s[1:] > reach[:-1]
    firsts = np.flatnonzero(fresh)
    return s[firsts], np.maximum.reduceat(e, firsts)


def overlapping_any(start: Ints, end: Ints, spans: tuple[Ints, Ints]) -> Flags:
    """Which intervals ``[start, end)`` share time with any of ``spans`` (starts, ends), as
    `windows.overlapping_pairs` pairs them."""
    union_start, union_end = _union(*spans)
    hit = np.zeros(len(start), np.bool_)
    if not len(union_start):
        return hit
    timed = end > start
    first_after = np.searchsorted(union_end, start, side="right")  # the first span ending past a start
    inside = first_after < len(union_start)
    hit[inside] = union_start[first_after[inside]] < end[inside]
    return hit & timed


def _spans(windows: Iterable[LoadWindow]) -> tuple[Ints, Ints]:
    found = [(w.start_unix_ns, w.end_unix_ns) for w in windows]
    return (
        np.array([s for s, _ in found], dtype=np.int64),
        np.array([e for _, e in found], dtype=np.int64),
    )


def codes_of(values: Sequence[T]) -> tuple[Ints, list[T]]:
    """Each value's code and the distinct values (``distinct[code]``), in no particular order:
    text columns grouped in one pass instead of a tuple and a list per cell."""
    distinct = list(set(values))
    lookup = {value: code for code, value in enumerate(distinct)}
    return np.fromiter(map(lookup.__getitem__, values), dtype=np.int64, count=len(values)), distinct


def engine_codes(cols: CellColumns) -> tuple[Ints, list[str]]:
    """Each cell's engine by name (`UNKNOWN_ENGINE` for none) as `codes_of` codes, and the names."""
    raw, distinct = codes_of(cols.engine)
    codes, names = codes_of([engine or UNKNOWN_ENGINE for engine in distinct])
    return codes[raw], names


def _cell_windows(cols: CellColumns, among: Positions, gap_ns: int) -> tuple[Ints, Ints]:
    """The spans of `windows.windows_from_cells` of the cells at ``among``: per eval, engine and
    worker count, runs of cells each starting within ``gap_ns`` of the run's latest end so far."""
    groups: dict[tuple[str, str | None, int | None], list[int]] = {}
    timed = among[cols.end_unix_ns[among] > cols.start_unix_ns[among]].tolist()
    workers, known = cols.workers.tolist(), cols.workers_known.tolist()
    for k in timed:
        groups.setdefault((cols.eval_name[k], cols.engine[k], workers[k] if known[k] else None), []).append(k)
    starts, ends = [], []
    for positions in groups.values():
        index = np.array(positions, dtype=np.intp)
        order = np.argsort(cols.start_unix_ns[index], kind="stable")
        s, e = cols.start_unix_ns[index][order], cols.end_unix_ns[index][order]
        reach = np.maximum.accumulate(e)
        fresh = np.ones(len(s), np.bool_)
        fresh[1:] = s[1:] > reach[:-1] + gap_ns
        firsts = np.flatnonzero(fresh)
        starts.append(s[firsts])
        ends.append(np.maximum.reduceat(e, firsts))
    if not starts:
        empty = np.zeros(0, np.int64)
        return empty, empty
    return np.concatenate(starts), np.concatenate(ends)


def _probe_under_load(curve: RateCurve, cols: CellColumns, windows: Sequence[LoadWindow]) -> RateCurve:
    """The probe curve, marked under load when cells ran on its engine during its levels."""
    if curve.under_load is not None or curve.run is None:
        return curve
    levels = [
        w
        for w in windows
        if w.kind == "probe" and w.engine == curve.engine and w.attributes.get(sc.PROBE_RUN) == curve.run
    ]
    on_engine = np.flatnonzero(np.array([e == curve.engine for e in cols.engine], dtype=np.bool_))
    beside = on_engine[
        overlapping_any(cols.start_unix_ns[on_engine], cols.end_unix_ns[on_engine], _spans(levels))
    ]
    if not len(beside):
        return curve
    evals = ", ".join(sorted({cols.eval_name[k] for k in beside.tolist()}))
    return curve.model_copy(
        update={"under_load": f"{len(beside)} cells of {evals} ran on {curve.engine} during the probe"}
    )


def _beside_unseen_load(cols: CellColumns, own: Flags, windows: Sequence[LoadWindow], engine: str) -> Flags:
    """Which cells on ``engine`` (``own``) overlapped load their in-flight count does not see:
    recorded windows (probe levels, loads) on any engine, and other engines' cells."""
    recorded = _spans(w for w in windows if w.kind != "eval" or w.engine != engine)
    derived = _cell_windows(cols, np.flatnonzero(~own), merge_gap_ns(DEFAULT_MERGE_GAP_S))
    unseen = (np.concatenate([recorded[0], derived[0]]), np.concatenate([recorded[1], derived[1]]))
    mine = np.flatnonzero(own)
    beside = np.zeros(len(cols), np.bool_)
    beside[mine] = overlapping_any(cols.start_unix_ns[mine], cols.end_unix_ns[mine], unseen)
    return beside


def _exact_enough(start: Ints, end: Ints, completion: Ints) -> bool:
    """`concurrency_columns._exact_enough` of these cells: whether int64 and float64 hold every
    figure as Python's integers would."""
    duration = end - start
    positive = duration[duration > 0]
    return (
        float(positive.sum(dtype=np.float64)) < 2**62
        and not (positive >= 2**53).any()
        and not (completion >= 2**53).any()
    )


def _cells_curve(engine: str, cols: CellColumns, mine: Positions, exclude: frozenset[str]) -> RateCurve:
    """`curve_from_concurrency(concurrency(cells), engine, exclude=exclude)` with the engine's
    cells at ``mine``: each in-flight level's rates over the cells not excluded, each cell at its
    level among all the engine's cells, as `concurrency_of_columns` counts them. Raises
    `InputError` where no level has a rate."""
    start, end = cols.start_unix_ns[mine], cols.end_unix_ns[mine]
    if not _exact_enough(start, end, cols.completion_tokens[mine]):  # the rows' own arithmetic
        rows = _as_cells(cols.take(mine))
        return curve_from_concurrency(concurrency(rows), engine, exclude=exclude)
    weight, weighed = in_flight_of_columns(start, end)
    duration = end - start
    elapsed = duration / NS_PER_S
    status, completion = cols.status[mine], cols.completion_tokens[mine]
    hit, fail = status == _DEADLINE, status == _ERROR
    has_rate = cols.completion_known[mine] & (completion != 0) & (duration > 0) & ~hit & ~fail
    rate = np.full(len(mine), np.nan)
    rate[has_rate] = completion[has_rate] / elapsed[has_rate]
    level = np.maximum(1, np.floor(np.where(weighed, weight, 0.0) + 0.5))
    kept = np.arange(len(mine))
    if exclude:
        kept = np.flatnonzero(np.array([cols.uid[k] not in exclude for k in mine.tolist()], dtype=np.bool_))
    summaries = _level_summaries(
        level[kept].astype(np.int64), weighed[kept], rate[kept], hit[kept], fail[kept]
    )
    return curve_from_levels(engine, summaries, measured_unix_ns=int(end.max()))


def curve_candidates(
    probe_curves: Iterable[RateCurve], cols: CellColumns, windows: Sequence[LoadWindow], notes: list[str]
) -> list[RateCurve]:
    """Every probe curve (marked under load where cells ran beside it), then for each engine
    that ran a cell, by name, the curve of its cells; a line in ``notes`` for an engine whose
    cells make no curve."""
    candidates = [_probe_under_load(curve, cols, windows) for curve in probe_curves]
    codes, names = engine_codes(cols)
    for code, name in sorted(enumerate(names), key=lambda c: c[1]):
        own = codes == code
        mine = np.flatnonzero(own)
        beside = _beside_unseen_load(cols, own, windows, name)
        try:
            clean: RateCurve | None = _cells_curve(
                name, cols, mine, frozenset(cols.uid[k] for k in np.flatnonzero(beside).tolist())
            )
        except InputError:
            clean = None
        try:
            if clean is None:
                loaded = _cells_curve(name, cols, mine, frozenset())
                clean = loaded.model_copy(
                    update={"under_load": f"every cell on {name} ran beside a probe or another engine's load"}
                )
            candidates.append(clean)
        except (InputError, ConfigError) as exc:
            notes.append(f"no curve from cells on {name}: {exc}")
    return candidates
