"""Neighbour cost over columns: `neighbour_costs`' reports from `CellColumns`, with no `Cell` read
and no `CellRate` or `WindowCost` built until a caller asks for them.

Same rules, same figures (`tests/analysis/test_neighbour_columns.py` holds every report equal to
`neighbour_costs`' and `neighbour_cost`'s on the fixtures and on generated boxes). At a lab's
history the row path spent most of its time building validated rows (290,926 `WindowCost` for
`advise`'s 22 reports at 100,000 cells) and reading a `Cell` per row; here:

* other evals' windows are derived per (eval, engine, workers) group with numpy (each group's
  runs where a start passes the running latest end by more than the merge gap, a run without a
  worker count its peak in flight from its cells' sorted endpoints), once for every report of a
  call, as arrays (a derived window's uid is written only when read); which loads are other load
  for an eval is array arithmetic on their runs' codes (a recorded window's verdict once per eval);
* the overlaps of the priced cells with the loads are two sorted-range joins (the windows that
  start inside a cell, the cells that start inside a window), O((n + m) log(n + m) + pairs);
* each window's summary is `summarize`'s arithmetic on its sorted members' rates, vectorised
  (type 7 percentiles, the order-statistic interval), its mean `math.fsum` as `summarize` takes it;
* the report is columns (`NeighbourColumns`): its head figures are computed at once, each row
  column from the arrays only when read, and only at the rows read (`advise` reads the windows
  some cell is attributed to: about 6% of them); its JSON (`dump`) is written from them
  straight, the same document `NeighbourReport.model_dump(mode="json")` gives, and the validated
  report (`report`) is built only where a caller needs the models, its rows validated as one
  list (the windows without rates given one shared frozen summary).

Where int64 or float64 could not hold a figure as Python's integers do (a timestamp outside
0..2**62, a duration or a count past 2**53), the cells go through `neighbour_costs` instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import TypeAdapter

from .._clock import NS_PER_S
from .._exceptions import InputError
from ..model import CellStatus, LoadWindow
from ..records.cell_columns import STATUSES, CellColumns
from ._result import Result
from .concurrency_columns import _as_cells
from .neighbour import (
    DEFAULT_MIN_OVERLAP_FRACTION,
    MIN_CELLS_FOR_NEIGHBOUR,
    CellRate,
    NeighbourReport,
    WindowCost,
    _check_fraction,
    _is_other_load,
    mixed_counts_warnings,
    neighbour_cost,
    neighbour_costs,
    no_cells_at,
)
from .request_cells import REQUEST_SOURCE
from .stats import _Z95, RateSummary, summarize
from .windows import DEFAULT_MERGE_GAP_S, merge_gap_ns

__all__ = [
    "NeighbourColumns",
    "neighbour_cost_of_columns",
    "neighbour_costs_of_columns",
]

_EXACT = 2**53
"""Integers below this convert to float64 exactly."""
_TIME_BOUND = 2**62
"""Timestamps in 0..this subtract in int64 without overflow."""
_DEADLINE = STATUSES.index(CellStatus.DEADLINE)
_ERROR = STATUSES.index(CellStatus.ERROR)
_STATUS_VALUES = [status.value for status in STATUSES]
_NO_RATES: dict[str, Any] = RateSummary(n=0).model_dump(mode="json")
_NO_RATE_SUMMARY = RateSummary.model_validate(_NO_RATES)
"""A window's summary without rates, validated as its dump is: frozen, so one serves every row."""

Ints = NDArray[np.int64]
Index = NDArray[np.intp]


Column = Callable[[Index | None], list[Any]]
"""One field of a model's rows: its values (as the model's JSON dump has them) at the given row
positions, in their order, or at every row (None)."""


class _Columns(Mapping[str, list[Any]]):
    """A model's fields, each column built when first read (in full), or only at the rows asked
    for (`take`): a caller that reads a few rows of a long report builds no other row."""

    def __init__(self, build: dict[str, Column]) -> None:
        self._build = build
        self._built: dict[str, list[Any]] = {}

    def __getitem__(self, name: str) -> list[Any]:
        if name not in self._built:
            self._built[name] = self._build[name](None)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build)

    def __len__(self) -> int:
        return len(self._build)

    def take(self, name: str, keep: Index | None) -> list[Any]:
        """The column ``name`` at the rows ``keep`` (None: every row)."""
        if keep is None or name in self._built:
            column = self[name]
            return column if keep is None else [column[k] for k in keep.tolist()]
        return self._build[name](keep)


@dataclass(frozen=True, eq=False)
class _Rows:
    """Rows of one result model as columns: ``columns[field]`` holds every row's value of that
    field as the model's JSON dump has it, the fields in the model's order, each built on demand."""

    model: type[Result]
    n: int
    columns: _Columns
    inputs: dict[str, Column] = field(default_factory=dict)
    """The validator's input for a field where another is quicker than its JSON dump's value (a
    shared frozen model for the many rows that hold an equal one)."""

    def __len__(self) -> int:
        return self.n

    def dumped(self, keep: Sequence[int] | Index | None = None) -> list[dict[str, Any]]:
        """Each row as ``model_dump(mode="json")`` gives it (``keep``: only these rows)."""
        at = None if keep is None else np.asarray(keep, dtype=np.intp)
        return self._dicts([self.columns.take(name, at) for name in self.columns])

    def rows(self, keep: Sequence[int] | Index | None = None) -> list[Any]:
        """Each row as its validated model (validated as a list at once: pydantic's list validator
        builds the same models as the constructor, in one call)."""
        at = None if keep is None else np.asarray(keep, dtype=np.intp)
        values = [
            self.inputs[name](at) if name in self.inputs else self.columns.take(name, at)
            for name in self.columns
        ]
        return _validator(self.model).validate_python(self._dicts(values))

    def _dicts(self, values: list[list[Any]]) -> list[dict[str, Any]]:
        names = list(self.columns)
        return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]

    @classmethod
    def of(cls, model: type[Result], rows: Sequence[Result]) -> _Rows:
        dumps = [r.model_dump(mode="json") for r in rows]
        return cls.given(model, len(dumps), {name: [d[name] for d in dumps] for name in model.model_fields})

    @classmethod
    def given(
        cls,
        model: type[Result],
        n: int,
        columns: dict[str, list[Any] | Column],
        inputs: dict[str, Column] | None = None,
    ) -> _Rows:
        """Rows of ``n`` from columns built (lists) or to build (`Column`), in the model's order."""
        return cls(
            model, n, _Columns({name: _column(columns[name]) for name in model.model_fields}), inputs or {}
        )


def _column(values: list[Any] | Column) -> Column:
    if callable(values):
        return values
    return lambda at: values if at is None else [values[k] for k in at.tolist()]


def _of(values: list[Any]) -> Column:
    """The column of a list of every row's value."""
    return _column(values)


def _numbers(values: NDArray[Any]) -> Column:
    """The column of an array of every row's value (int64, float64, bool): Python's numbers."""
    return lambda at: (values if at is None else values[at]).tolist()


def _picked(values: list[Any], at: NDArray[np.integer[Any]]) -> Column:
    """The column whose row k is ``values[at[k]]``."""
    return lambda keep: [values[k] for k in (at if keep is None else at[keep]).tolist()]


@functools.cache
def _validator(model: type[Result]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


@dataclass(frozen=True, eq=False)
class NeighbourColumns:
    """One `NeighbourReport` as columns: ``head`` every figure but its rows (``windows`` and
    ``cells`` empty), ``windows`` and ``cells`` its rows' fields, in its order; ``attributed`` each
    window's ``n_cells``. ``loads`` and ``untouched``, where given: each window's load (its
    position among the call's loads) and the call's validated rows of windows no cell is
    attributed to, by load and ``same_engine``, shared by its reports."""

    head: NeighbourReport
    windows: _Rows
    cells: _Rows
    attributed: Ints
    loads: Index | None = None
    untouched: dict[tuple[int, bool | None], WindowCost] | None = None

    def report(self, *, with_cells: bool = True, all_windows: bool = True) -> NeighbourReport:
        """The validated report. ``with_cells=False`` leaves its per-cell rows out but for those
        `no_baseline_reason` reads (a report with no baseline keeps the cells that ran alone);
        ``all_windows=False`` keeps only the windows some cell is attributed to (`windows_touched`),
        the rest (no cell, no rate, no cost) being most rows in a long history."""
        keep = np.arange(len(self.attributed)) if all_windows else self.touched()
        cells = self.cells.rows(None if with_cells else self._alone_without_baseline())
        return self.head.model_copy(update={"windows": self._window_rows(keep), "cells": cells})

    def _window_rows(self, keep: Index) -> list[WindowCost]:
        """The windows at ``keep`` as validated rows. A window no cell is attributed to is its load
        and whether it is on the eval's engine, nothing else (no cell, no rate, no cost): one
        frozen row serves every report of the call that holds it, validated once."""
        if self.loads is None or self.untouched is None:
            rows: list[WindowCost] = self.windows.rows(keep)
            return rows
        out: list[Any] = [None] * len(keep)
        bare = self.attributed[keep] == 0
        some, none = np.flatnonzero(~bare), np.flatnonzero(bare)
        for k, row in zip(some.tolist(), self.windows.rows(keep[some]), strict=True):
            out[k] = row
        keys = list(
            zip(
                self.loads[keep[none]].tolist(),
                self.windows.columns.take("same_engine", keep[none]),
                strict=True,
            )
        )
        shared = self.untouched
        new = np.array([m for m, key in enumerate(keys) if key not in shared], dtype=np.intp)
        for m, row in zip(new.tolist(), self.windows.rows(keep[none][new]), strict=True):
            shared[keys[m]] = row
        for k, key in zip(none.tolist(), keys, strict=True):
            out[k] = shared[key]
        return out

    def _alone_without_baseline(self) -> list[int]:
        """Positions of the cells that ran alone where they give no baseline; none where they do."""
        if self.head.baseline.median is not None:
            return []
        return [k for k, alone in enumerate(self.cells.columns["baseline"]) if alone]

    def dump(self) -> dict[str, Any]:
        """``report().model_dump(mode="json")``, written from the columns."""
        out = self.head.model_dump(mode="json")
        out["windows"] = self.windows.dumped()
        out["cells"] = self.cells.dumped()
        return out

    def touched(self) -> Index:
        """Positions of the windows at least one cell is attributed to."""
        return np.flatnonzero(self.attributed)

    def rated_windows(self) -> dict[str, list[tuple[float, int]]]:
        """The median rate and its n of each window with one, by window name (a window with a
        rate has a cell attributed to it: only those are read)."""
        by_name: dict[str, list[tuple[float, int]]] = {}
        keep = self.touched()
        names, rates = self.windows.columns.take("name", keep), self.windows.columns.take("rate", keep)
        for name, rate in zip(names, rates, strict=True):
            if rate["median"] is not None:
                by_name.setdefault(name, []).append((rate["median"], rate["n"]))
        return by_name

    @classmethod
    def from_report(cls, report: NeighbourReport) -> NeighbourColumns:
        return cls(
            head=report.model_copy(update={"windows": [], "cells": []}),
            windows=_Rows.of(WindowCost, report.windows),
            cells=_Rows.of(CellRate, report.cells),
            attributed=np.array([w.n_cells for w in report.windows], dtype=np.int64),
        )


Group = tuple[str, str | None, int | None]
"""Cells of one eval on one engine at one worker count: (eval, engine, workers)."""


@dataclass(frozen=True, eq=False)
class _Codes:
    """The cells' evals and engines as codes (in order of first appearance) and which cells are
    requests standing in for cells: read once for every report of a call."""

    eval: Ints
    evals: list[str]
    engine: Ints
    engines: list[str | None]
    request: NDArray[np.bool_]

    @classmethod
    def of(cls, cols: CellColumns) -> _Codes:
        ev, evals = _codes(cols.eval_name)
        en, engines = _codes(cols.engine)
        request = np.asarray(np.array(cols.source, dtype=object) == REQUEST_SOURCE, dtype=np.bool_)
        return cls(ev, evals, en, engines, request.reshape(len(cols)))

    def most_common_engine(self, own: Index) -> str | None:
        """`Counter.most_common`'s engine of the cells at ``own`` (None and "" left out; the first
        seen of equally common ones), as `neighbour._priced` names the eval's engine."""
        codes = self.engine[own]
        named = np.array([bool(e) for e in self.engines], dtype=np.bool_)
        counts = np.bincount(codes[named[codes]], minlength=len(self.engines)) if len(codes) else codes
        if not counts.any():
            return None
        best = np.flatnonzero(counts == counts.max())
        first_seen = [int(np.argmax(codes == b)) for b in best.tolist()]
        return self.engines[int(best[int(np.argmin(first_seen))])]


@dataclass(frozen=True, eq=False)
class _Derived:
    """The windows other evals' cells make (`windows.keyed_windows_from_cells`), as arrays: each
    window's start, end, width (``streams``) and group (an index into ``groups``), groups in order
    of first appearance, each group's runs in time order."""

    start: Ints
    end: Ints
    streams: Ints
    group: Ints
    groups: list[Group]

    def label(self, group: Group) -> str:
        eval_name, engine, count = group
        label = f"{eval_name} eval" + (f", {count} worker{'s' if count > 1 else ''}" if count else "")
        return label + (f" on {engine}" if engine else "")


@dataclass(frozen=True, eq=False)
class _Loads:
    """Every load any eval may be priced against, in `neighbour._candidate_loads`' order: recorded
    windows (``group`` -1; ``recorded`` their positions in ``windows``) and the windows other evals'
    cells make (``group`` their group in ``groups``; ``run_eval``, ``run_workers`` and
    ``run_counted`` its eval's code in ``eval_codes``, its count and whether it has one)."""

    start: Ints
    end: Ints
    name: list[str]
    kind: list[str]
    engine: list[str | None]
    streams: list[int | None]
    group: Ints
    groups: list[Group]
    recorded: Ints
    windows: list[LoadWindow]
    run_eval: Ints
    run_workers: Ints
    run_counted: NDArray[np.bool_]
    eval_codes: dict[str, int]
    evals: set[str]
    _recorded_others: dict[str, NDArray[np.bool_]] = field(default_factory=dict)
    _uids: dict[str, list[str]] = field(default_factory=dict)
    untouched: dict[tuple[int, bool | None], WindowCost] = field(default_factory=dict)
    """The validated rows of windows no cell is attributed to, shared by the call's reports
    (`NeighbourColumns._window_rows`)."""

    def others(self, eval_name: str, workers: int | None) -> Index:
        """Positions of the loads that are other load for ``eval_name`` at ``workers``
        (`neighbour._is_other_load` of each)."""
        other = self.run_eval != self.eval_codes.get(eval_name, -2)
        if workers is not None:
            other |= ~self.run_counted | (self.run_workers != workers)
        recorded = np.flatnonzero(self.group < 0)
        if eval_name not in self._recorded_others:  # a recorded window's answer: the same at any count
            self._recorded_others[eval_name] = np.array(
                [
                    _is_other_load(self.windows[k], None, eval_name, None, self.evals)
                    for k in self.recorded[recorded].tolist()
                ],
                dtype=np.bool_,
            )
        other[recorded] = self._recorded_others[eval_name]
        return np.flatnonzero(other)

    def uids(self, at: Index, *, every: bool) -> list[str]:
        """The uids of the loads at ``at`` (a derived window's written only when read): picked
        from every load's, written once, where ``every`` (a report that reads all its windows)
        or they are already written; else only theirs."""
        if every or "uid" in self._uids:
            if "uid" not in self._uids:
                self._uids["uid"] = self._uid(np.arange(len(self.start)))
            written = self._uids["uid"]
            return [written[k] for k in at.tolist()]
        return self._uid(at)

    def _uid(self, at: Index) -> list[str]:
        out = []
        rows = zip(self.recorded[at].tolist(), self.group[at].tolist(), self.start[at].tolist(), strict=True)
        for k, group, start in rows:
            if group < 0:
                out.append(self.windows[k].uid)
            else:
                eval_name, engine, count = self.groups[group]
                out.append(f"eval:{eval_name}:{engine}:{count}:{start}")
        return out


def _workers(cols: CellColumns) -> list[int | None]:
    return [w if k else None for w, k in zip(cols.workers.tolist(), cols.workers_known.tolist(), strict=True)]


def _codes(values: Iterable[Any]) -> tuple[Ints, list[Any]]:
    """Each value's code and the distinct values, codes in order of first appearance."""
    seen = list(values)
    distinct = list(dict.fromkeys(seen))
    code = {v: k for k, v in enumerate(distinct)}
    return np.fromiter(map(code.__getitem__, seen), dtype=np.int64, count=len(seen)), distinct


def _members(codes: Ints, n_codes: int) -> list[Index]:
    """Positions of each code's values, in order."""
    if not n_codes:
        return []
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.cumsum(np.bincount(codes, minlength=n_codes))[:-1].tolist())


def _peaks(start: Ints, end: Ints, counts: Ints) -> Ints:
    """`windows.peak_concurrency` of each run of cells (consecutive ``counts`` of them)."""
    runs = np.repeat(np.arange(len(counts)), counts)
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(len(start), np.int64), np.full(len(end), -1, np.int64)])
    order = np.lexsort((steps, times, np.concatenate([runs, runs])))  # ends first at one instant
    level = np.cumsum(steps[order])  # each run's steps add up to 0: the count restarts per run
    firsts = np.concatenate([[0], np.cumsum(2 * counts)[:-1]])
    peaks: Ints = np.maximum.reduceat(level, firsts)
    return peaks


def _run_groups(cols: CellColumns, codes: _Codes, at: Index) -> tuple[Ints, list[Group]]:
    """The (eval, engine, workers) group of each cell at ``at``: its code, codes in order of first
    appearance, and each code's group."""
    ev, en, evals, engines = codes.eval, codes.engine, codes.evals, codes.engines
    counts, wv = np.unique(cols.workers, return_inverse=True)
    if len(evals) * len(engines) * 2 * len(counts) >= _TIME_BOUND:  # one int64 key would overflow
        workers = _workers(cols)
        return _codes((cols.eval_name[k], cols.engine[k], workers[k]) for k in at.tolist())
    key = ((ev * len(engines) + en) * 2 + cols.workers_known) * len(counts) + wv.reshape(-1)
    _, first, inverse = np.unique(key[at], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    groups: list[Group] = []
    for k in at[first[order]].tolist():
        count = int(cols.workers[k]) if cols.workers_known[k] else None
        groups.append((evals[int(ev[k])], engines[int(en[k])], count))
    return rank[inverse.reshape(-1)], groups


def _derived(cols: CellColumns, codes: _Codes, gap_ns: int) -> _Derived:
    """`windows.keyed_windows_from_cells` over the columns, unsorted: groups in order of first
    appearance, runs in time order."""
    timed = np.flatnonzero(cols.end_unix_ns > cols.start_unix_ns)
    group_of, groups = _run_groups(cols, codes, timed)
    parts: list[tuple[Ints, Ints, Ints]] = []
    for (_, _, count), members in zip(groups, _members(group_of, len(groups)), strict=True):
        at = timed[members]
        order = np.argsort(cols.start_unix_ns[at], kind="stable")
        s, e = cols.start_unix_ns[at][order], cols.end_unix_ns[at][order]
        fresh = np.flatnonzero(s[1:] - np.maximum.accumulate(e)[:-1] > gap_ns) + 1
        firsts = np.concatenate([[0], fresh])
        counts = np.diff(np.append(firsts, len(s)))
        streams = np.full(len(firsts), count, dtype=np.int64) if count else _peaks(s, e, counts)
        parts.append((s[firsts], np.maximum.reduceat(e, firsts), streams))
    sizes = [len(p[0]) for p in parts]
    return _Derived(
        start=np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64),
        end=np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64),
        streams=np.concatenate([p[2] for p in parts]) if parts else np.empty(0, np.int64),
        group=np.repeat(np.arange(len(groups), dtype=np.int64), sizes),
        groups=groups,
    )


def _loads(windows: Sequence[LoadWindow], derived: _Derived, codes: _Codes) -> _Loads:
    """The recorded windows and the derived ones, sorted by start and name (recorded first at
    equal ones), as `neighbour._candidate_loads` sorts them."""
    n = len(windows)
    labels = [derived.label(g) for g in derived.groups]
    names = [w.name for w in windows] + labels  # a recorded window's, then each group's
    rank = {name: k for k, name in enumerate(sorted(set(names)))}
    ranks = np.array([rank[name] for name in names], dtype=np.int64)
    of = np.concatenate([np.arange(n, dtype=np.int64), n + derived.group])  # each load's row in names
    start = np.concatenate([np.array([w.start_unix_ns for w in windows], dtype=np.int64), derived.start])
    end = np.concatenate([np.array([w.end_unix_ns for w in windows], dtype=np.int64), derived.end])
    order = np.lexsort((ranks[of], start))
    of = of[order]
    rows = of.tolist()
    streams = [w.streams for w in windows] + derived.streams.tolist()
    kinds = [w.kind for w in windows] + ["eval"] * len(labels)
    engines = [w.engine for w in windows] + [g[1] for g in derived.groups]
    group = np.concatenate([np.full(n, -1, dtype=np.int64), derived.group])[order]
    evals = {name: k for k, name in enumerate(codes.evals)}
    group_eval = np.array([evals[g[0]] for g in derived.groups] + [-1], dtype=np.int64)
    group_workers = np.array([g[2] or 0 for g in derived.groups] + [0], dtype=np.int64)
    group_counted = np.array([g[2] is not None for g in derived.groups] + [False], dtype=np.bool_)
    return _Loads(
        start=start[order],
        end=end[order],
        name=[names[k] for k in rows],
        kind=[kinds[k] for k in rows],
        engine=[engines[k] for k in rows],
        streams=[streams[k] for k in order.tolist()],
        group=group,
        groups=derived.groups,
        recorded=np.where(group < 0, of, -1),
        windows=list(windows),
        run_eval=group_eval[group],  # a recorded window's (group -1): the table's last, -1
        run_workers=group_workers[group],
        run_counted=group_counted[group],
        eval_codes=evals,
        evals=set(codes.evals),
    )


def _expand(low: Index, high: Index) -> tuple[Index, Index]:
    """Every (k, m) with ``low[k] <= m < high[k]``, by k then m."""
    counts = high - low
    owner = np.repeat(np.arange(len(low)), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, np.repeat(low, counts) + offsets


def _pairs(cs: Ints, ce: Ints, ws: Ints, we: Ints) -> tuple[Index, Index, Ints]:
    """`windows.overlapping_pairs` of cells and windows each in start order: every (i, j,
    overlap ns) where they share time, sorted by cell, then window."""
    tc = np.flatnonzero(ce > cs)
    tw = np.flatnonzero(we > ws)
    a_start, a_end, b_start, b_end = cs[tc], ce[tc], ws[tw], we[tw]
    # The windows that start inside a cell, after it; then the cells that start inside a window.
    a1, b1 = _expand(np.searchsorted(b_start, a_start, "right"), np.searchsorted(b_start, a_end, "left"))
    b2, a2 = _expand(np.searchsorted(a_start, b_start, "left"), np.searchsorted(a_start, b_end, "left"))
    i = tc[np.concatenate([a1, a2])]
    j = tw[np.concatenate([b1, b2])]
    order = np.lexsort((j, i))
    i, j = i[order], j[order]
    return i, j, np.minimum(ce[i], we[j]) - np.maximum(cs[i], ws[j])


def _names(n: int, i: Index, j: Index, names: list[str]) -> Column:
    """The column of each of ``n`` cells' window names, one per pair (``i`` the pair's cell,
    sorted; ``j`` its window, an index into ``names``), in pair order."""

    def column(at: Index | None) -> list[Any]:
        cells = np.arange(n) if at is None else at
        low, high = np.searchsorted(i, cells, "left"), np.searchsorted(i, cells, "right")
        _, pair = _expand(low, high)
        flat = [names[k] for k in j[pair].tolist()]
        lasts = np.cumsum(high - low)
        firsts = lasts - (high - low)
        return [flat[first:last] for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True)]

    return column


def _same_engine(engines: list[str | None], at: Index, engine: str | None) -> Column:
    """The column of whether each window (``engines[at[k]]``) is on ``engine``, None where either
    is unknown."""
    return lambda keep: [(e == engine) if e and engine else None for e in _picked(engines, at)(keep)]


def _nones(n: int) -> Column:
    """The column of ``n`` rows of None."""
    return lambda at: [None] * (n if at is None else len(at))


def _optional(values: NDArray[Any], known: NDArray[np.bool_]) -> Column:
    """The column of ``values`` where ``known``, None elsewhere."""

    def column(at: Index | None) -> list[Any]:
        got, ok = (values, known) if at is None else (values[at], known[at])
        return [v if o else None for v, o in zip(got.tolist(), ok.tolist(), strict=True)]

    return column


@dataclass(frozen=True, eq=False)
class _Summaries:
    """`summarize` of each window's member rates, as arrays over the windows with rates: ``slot``
    is each window's row in them (-1 for a window without rates), ``first`` where its rates start
    in ``values`` (every window's, each window's sorted)."""

    slot: Index
    n: Ints
    first: Ints
    median: NDArray[np.float64]
    p10: NDArray[np.float64]
    p90: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    values: NDArray[np.float64]

    def rate(self, at: Index | None, *, shared: bool = False) -> list[Any]:
        """The column of each window's `RateSummary` as its JSON dump; ``shared``: as the
        validator's input, a window without rates given the one frozen summary of none."""
        slots = self.slot if at is None else self.slot[at]
        out: list[Any] = [_NO_RATE_SUMMARY] * len(slots) if shared else [dict(_NO_RATES) for _ in slots]
        rated = np.flatnonzero(slots >= 0)
        flat, n, first = self.values.tolist(), self.n.tolist(), self.first.tolist()
        median, p10, p90 = self.median.tolist(), self.p10.tolist(), self.p90.tolist()
        ci_low, ci_high = self.ci_low.tolist(), self.ci_high.tolist()
        for k, s in zip(rated.tolist(), slots[rated].tolist(), strict=True):
            size = n[s]
            out[k] = {
                "n": size,
                "median": median[s],
                "p10": p10[s],
                "p90": p90[s],
                "mean": math.fsum(flat[first[s] : first[s] + size]) / size,
                "ci_low": ci_low[s] if size >= 2 else None,
                "ci_high": ci_high[s] if size >= 2 else None,
            }
        return out

    def each(self, values: NDArray[np.float64]) -> Column:
        """The column of ``values`` (one per window with rates) per window, None without rates."""

        def column(at: Index | None) -> list[Any]:
            slots = self.slot if at is None else self.slot[at]
            if not len(values):
                return [None] * len(slots)
            return _optional(values[np.maximum(slots, 0)], slots >= 0)(None)

        return column


def _summaries(window: Index, rate: NDArray[np.float64], n_windows: int) -> _Summaries:
    """`summarize` of each window's member rates (``window`` the member's window)."""
    order = np.lexsort((rate, window))
    values = rate[order]
    counts = np.bincount(window, minlength=n_windows)
    some = np.flatnonzero(counts)
    n = counts[some]
    at = (np.cumsum(counts) - counts)[some]

    def percentile(q: float) -> NDArray[np.float64]:
        rank = q * (n - 1)
        low = np.floor(rank).astype(np.int64)
        high = np.minimum(low + 1, n - 1)
        below, above = values[at + low], values[at + high]
        result: NDArray[np.float64] = below + (above - below) * (rank - low)
        return result

    half_width = _Z95 * np.sqrt(n) / 2
    low = np.maximum(1, np.rint(n / 2 - half_width)).astype(np.int64)
    high = np.minimum(n, np.rint(1 + n / 2 + half_width)).astype(np.int64)
    slot = np.full(n_windows, -1, dtype=np.intp)
    slot[some] = np.arange(len(some))
    return _Summaries(
        slot=slot,
        n=n.astype(np.int64),
        first=at.astype(np.int64),
        median=percentile(0.5),
        p10=percentile(0.1),
        p90=percentile(0.9),
        ci_low=values[at + low - 1],
        ci_high=values[at + high - 1],
        values=values,
    )


def _priced(
    eval_name: str,
    cols: CellColumns,
    own: Index,
    loads: _Loads,
    codes: _Codes,
    *,
    workers: int | None,
    fraction: float,
    warnings: list[str],
    without_count: bool = False,
) -> NeighbourColumns:
    """`neighbour._priced` of the cells at ``own`` (positions, in start order): the report's head
    figures now, its rows' columns when read."""
    at = loads.others(eval_name, workers)
    start, end = cols.start_unix_ns[own], cols.end_unix_ns[own]
    duration = end - start
    engine = codes.most_common_engine(own)

    i, j, overlap = _pairs(start, end, loads.start[at], loads.end[at])
    attributed = overlap >= fraction * duration[i]
    status = cols.status[own]
    hit, fail = status == _DEADLINE, status == _ERROR
    elapsed = duration / NS_PER_S
    tokens, known = cols.completion_tokens[own], cols.completion_known[own]
    rated = known & (tokens != 0) & (duration > 0) & ~hit & ~fail
    rate = np.full(len(own), np.nan)
    rate[rated] = tokens[rated] / elapsed[rated]
    alone = (np.bincount(i, minlength=len(own)) == 0) & (duration > 0)
    baseline = summarize(rate[alone & rated].tolist())

    n_loads = len(at)
    ia, ja = i[attributed], j[attributed]
    with_rate = rated[ia]
    summaries = _summaries(ja[with_rate], rate[ia[with_rate]], n_loads)
    cost = _nones(n_loads)  # no baseline to price against
    if baseline.median:
        cost = summaries.each(1.0 - summaries.median / baseline.median)

    attributed_to = np.bincount(ja, minlength=n_loads)
    windows = _Rows.given(
        WindowCost,
        n_loads,
        {
            "uid": lambda keep: loads.uids(at if keep is None else at[keep], every=keep is None),
            "name": _picked(loads.name, at),
            "kind": _picked(loads.kind, at),
            "engine": _picked(loads.engine, at),
            "streams": _picked(loads.streams, at),
            "start_unix_ns": _numbers(loads.start[at]),
            "end_unix_ns": _numbers(loads.end[at]),
            "same_engine": _same_engine(loads.engine, at, engine),
            "n_cells": _numbers(attributed_to),
            "timeouts": _numbers(np.bincount(ja[hit[ia]], minlength=n_loads)),
            "failures": _numbers(np.bincount(ja[fail[ia]], minlength=n_loads)),
            "rate": summaries.rate,
            "min_rate": summaries.each(summaries.values[summaries.first]),
            "max_rate": summaries.each(summaries.values[summaries.first + summaries.n - 1]),
            "cost": cost,
        },
        {"rate": functools.partial(summaries.rate, shared=True)},
    )
    request = codes.request[own]
    cells = _Rows.given(
        CellRate,
        len(own),
        {
            "uid": _picked(cols.uid, own),
            "cell_id": _picked(cols.cell_id, own),
            "engine": _picked(cols.engine, own),
            "workers": _optional(cols.workers[own], cols.workers_known[own]),
            "start_unix_ns": _numbers(start),
            "end_unix_ns": _numbers(end),
            "elapsed_s": _numbers(elapsed),
            "completion_tokens": _optional(tokens, known),
            "decode_rate": _optional(rate, rated),
            "status": _picked(_STATUS_VALUES, status),
            "timed_out": _numbers(hit),
            "failed": _numbers(fail),
            "baseline": _numbers(alone),
            "windows": _names(len(own), ia, at[ja], loads.name),
            "overlapped": _names(len(own), i, at[j], loads.name),
            "request_as_cell": _numbers(request),
        },
    )
    head = NeighbourReport(
        eval_name=eval_name,
        engine=engine,
        workers=workers,
        without_count=without_count,
        min_overlap_fraction=fraction,
        n_cells=len(own),
        timeouts=int(hit.sum()),
        failures=int(fail.sum()),
        baseline=baseline,
        baseline_timeouts=int((hit & alone).sum()),
        windows=[],
        cells=[],
        warnings=warnings,
        requests_as_cells=int(request.sum()),
    )
    return NeighbourColumns(
        head=head,
        windows=windows,
        cells=cells,
        attributed=attributed_to,
        loads=at,
        untouched=loads.untouched,
    )


def _exact_enough(cols: CellColumns, windows: Sequence[LoadWindow]) -> bool:
    """Whether int64 and float64 hold every figure as Python's integers would: timestamps in
    0..2**62 (their differences never overflow), durations and token counts below 2**53."""
    if any(not (0 <= w.start_unix_ns <= _TIME_BOUND and 0 <= w.end_unix_ns <= _TIME_BOUND) for w in windows):
        return False
    if not len(cols):
        return True
    start, end = cols.start_unix_ns, cols.end_unix_ns
    return bool(
        start.min() >= 0
        and end.min() >= 0
        and start.max() <= _TIME_BOUND
        and end.max() <= _TIME_BOUND
        and (np.abs(end - start) < _EXACT).all()
        and (cols.completion_tokens < _EXACT).all()
        and (cols.completion_tokens > -_EXACT).all()
    )


def _in_start_order(cols: CellColumns, positions: Sequence[int] | Index) -> Index:
    at = np.asarray(positions, dtype=np.intp)
    return at[np.argsort(cols.start_unix_ns[at], kind="stable")]


def neighbour_costs_of_columns(
    cells: CellColumns,
    windows: Iterable[LoadWindow] = (),
    *,
    eval_names: Iterable[str] | None = None,
    min_cells: int = MIN_CELLS_FOR_NEIGHBOUR,
    min_overlap_fraction: float = DEFAULT_MIN_OVERLAP_FRACTION,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
) -> list[NeighbourColumns]:
    """`neighbour_costs` of the cells ``cells`` holds: the same reports, as columns."""
    _check_fraction(min_overlap_fraction)
    gap_ns = merge_gap_ns(merge_gap_s)
    recorded = list(windows)
    if not _exact_enough(cells, recorded):
        reports = neighbour_costs(
            _as_cells(cells),
            recorded,
            eval_names=eval_names,
            min_cells=min_cells,
            min_overlap_fraction=min_overlap_fraction,
            merge_gap_s=merge_gap_s,
        )
        return [NeighbourColumns.from_report(r) for r in reports]
    codes = _Codes.of(cells)
    by_eval = dict(zip(codes.evals, _members(codes.eval, len(codes.evals)), strict=True))
    names = sorted(by_eval) if eval_names is None else [n for n in eval_names if n in by_eval]
    loads = _loads(recorded, _derived(cells, codes, gap_ns), codes)
    out = []
    for name in names:
        mine = np.array(by_eval[name], dtype=np.intp)
        known = cells.workers_known[mine]
        counts = np.unique(cells.workers[mine][known]).tolist()
        groups: list[tuple[int | None, Index, bool]] = [(None, mine, False)]
        if len(counts) > 1:
            groups = [(w, mine[known & (cells.workers[mine] == w)], False) for w in counts]
            if not known.all():
                groups.append((None, mine[~known], True))
        for count, group, without_count in groups:
            if len(group) >= min_cells:
                out.append(
                    _priced(
                        name,
                        cells,
                        _in_start_order(cells, group),
                        loads,
                        codes,
                        workers=count,
                        fraction=min_overlap_fraction,
                        warnings=[],  # a mix of counts is priced one count at a time: nothing to warn of
                        without_count=without_count,
                    )
                )
    return out


def neighbour_cost_of_columns(
    eval_name: str,
    cells: CellColumns,
    windows: Iterable[LoadWindow] = (),
    *,
    workers: int | None = None,
    min_overlap_fraction: float = DEFAULT_MIN_OVERLAP_FRACTION,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
) -> NeighbourColumns:
    """`neighbour_cost` of ``eval_name`` (at ``workers``) over the columns, other evals' cells
    derived into windows: the same report, as columns."""
    _check_fraction(min_overlap_fraction)
    gap_ns = merge_gap_ns(merge_gap_s)
    recorded = list(windows)
    if not _exact_enough(cells, recorded):
        report = neighbour_cost(
            eval_name,
            _as_cells(cells),
            recorded,
            workers=workers,
            min_overlap_fraction=min_overlap_fraction,
            merge_gap_s=merge_gap_s,
        )
        return NeighbourColumns.from_report(report)
    counts = _workers(cells)
    mine = [k for k, name in enumerate(cells.eval_name) if name == eval_name]
    if not mine:
        raise InputError(f"no cells recorded for eval {eval_name!r}")
    if workers is None:
        own, warnings = mine, mixed_counts_warnings(eval_name, (counts[k] for k in mine))
    else:
        own, warnings = [k for k in mine if counts[k] == workers], []
        if not own:
            raise no_cells_at(eval_name, workers, (counts[k] for k in mine))
    codes = _Codes.of(cells)
    return _priced(
        eval_name,
        cells,
        _in_start_order(cells, own),
        _loads(recorded, _derived(cells, codes, gap_ns), codes),
        codes,
        workers=workers,
        fraction=min_overlap_fraction,
        warnings=warnings,
    )
