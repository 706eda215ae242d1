"""Why each cell that hit its ceiling did: slowed by a load, long by itself, or queued.

For every cell cut off at its ceiling: the tokens it produced before the cut, the rate it ran at
against its eval's baseline (the eval's cells that overlapped no other load, as `neighbour_cost`
prices them), the loads it overlapped, and what it would have needed: at baseline speed for the
tokens it produced (a lower bound), and, where the same cell id ran again and completed, that
run's length and rate. A cut-off cell with no tokens (a non-streamed call returns nothing) is
judged by the rate of the eval's cells inside the same loads, and says so.

The verdict's rule (`TimeoutKind`): queued when the governor held it for at least
`QUEUED_SHARE` of its ceiling; slowed when it ran (or the eval's cells inside its loads ran)
below `SLOWED_BELOW` of baseline; long by itself when it ran at baseline speed and still did not
fit; otherwise no verdict (`Unjudged` says what is missing). The line a person reads is
`views.timeouts.verdict_line`'s.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..model import Cell, CellStatus, LoadWindow
from ._result import Result
from .neighbour import CellRate, NeighbourReport, neighbour_costs
from .rates import ceiling_hit
from .request_cells import REQUEST_SOURCE, is_request_cell

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ..records.cell_columns import CellColumns

__all__ = [
    "QUEUED_SHARE",
    "SLOWED_BELOW",
    "Rerun",
    "TimeoutKind",
    "TimeoutVerdict",
    "Unjudged",
    "cut_off_uids",
    "timeout_verdicts",
    "timeout_verdicts_of_columns",
]

SLOWED_BELOW = 0.9
"""A cell that ran below this share of its eval's baseline was slowed (the article's baseline
spread, p10 to p90, is 10.51 to 11.70 tok/s: within 9% of its median)."""
QUEUED_SHARE = 0.1
"""A governor wait of at least this share of the ceiling is named as the reason first."""


class TimeoutKind(StrEnum):
    """Why a cell hit its ceiling."""

    QUEUED = "queued"
    """the governor held it for a share of its ceiling before it started"""
    SLOWED = "slowed"
    """it ran below `SLOWED_BELOW` of its eval's baseline, beside other load"""
    LONG = "long"
    """it ran at baseline speed and still did not fit"""
    UNKNOWN = "unknown"
    """the records cannot say (`Unjudged` names what is missing)"""


class Unjudged(StrEnum):
    """What a cut-off cell without a verdict lacks."""

    NO_BASELINE = "no baseline"
    """no cell of its eval ran alone"""
    NO_TOKENS = "no tokens"
    """it overlapped no measured load and recorded no tokens"""
    NO_RATE = "no rate"
    """it overlapped no measured load and has no rate"""


class Rerun(Result):
    uid: str
    elapsed_s: float
    completion_tokens: int
    share_of_baseline: float | None


class TimeoutVerdict(Result):
    uid: str
    eval_name: str
    cell_id: str
    engine: str | None
    start_unix_ns: int
    elapsed_s: float
    ceiling_s: float
    completion_tokens: int | None = Field(description="tokens it produced before the cut")
    rate: float | None = Field(description="completion tokens over elapsed; None without tokens")
    baseline_rate: float | None
    baseline_n: int
    share_of_baseline: float | None = Field(
        description="its rate (or the eval's inside its loads) over baseline"
    )
    share_cells: int | None = Field(
        description="None: the share is its own rate's; else the eval's cells inside its loads it rests on"
    )
    loads: list[str] = Field(description="the loads it is attributed to")
    admission_s: float | None
    needed_at_baseline_s: float | None = Field(description="its tokens at baseline speed: a lower bound")
    rerun: Rerun | None
    kind: TimeoutKind
    unjudged: Unjudged | None = Field(description="unknown: what is missing for a verdict")
    request_as_cell: bool = Field(
        default=False, description="a request standing in for a cell: its ceiling is its elapsed time"
    )


Rated = dict[str, list[tuple[float, int]]]
"""The median rate and its n of each window of a report with one, by window name."""


def _rated_windows(report: NeighbourReport) -> Rated:
    """The report's windows with a median rate, by name: looked up per cut-off cell instead of
    scanned (a long history has thousands of windows and of timeouts)."""
    by_name: Rated = {}
    for w in report.windows:
        if w.rate.median is not None:
            by_name.setdefault(w.name, []).append((w.rate.median, w.rate.n))
    return by_name


def _share(
    tokens: int | None,
    elapsed_s: float,
    windows: Iterable[str],
    baseline: float | None,
    rated: Rated,
    *,
    inside: dict[frozenset[str], tuple[float, int] | None] | None = None,
) -> tuple[float | None, int | None]:
    """The cell's rate over its eval's baseline, or the eval's cells' inside its loads (and how
    many they are); None where neither is known. ``windows``: the loads the cell is attributed to;
    ``rated``: `_rated_windows` of its report; ``inside``: the median and n of the eval's cells
    inside each set of loads found so far, for ``rated`` (a long history's timeouts share them)."""
    if not baseline:
        return None, None
    if tokens and elapsed_s > 0:
        return tokens / elapsed_s / baseline, None
    names = frozenset(windows)
    if inside is None or names not in inside:
        medians = [w for name in names for w in rated.get(name, ())]
        found = (statistics.median(m for m, _ in medians), sum(n for _, n in medians)) if medians else None
        if inside is None:
            inside = {}
        inside[names] = found
    found = inside[names]
    if found is None:
        return None, None
    rate, n = found
    return rate / baseline, n


def _rerun(cell: Cell, later: list[Cell], baseline: float | None) -> Rerun | None:
    for c in later:
        if (
            c.start_unix_ns >= cell.end_unix_ns
            and not ceiling_hit(c)
            and c.completion_tokens
            and c.decode_rate
        ):
            share = c.decode_rate / baseline if baseline else None
            return Rerun(
                uid=c.uid,
                elapsed_s=c.elapsed_s,
                completion_tokens=c.completion_tokens,
                share_of_baseline=share,
            )
    return None


def _kind(v: dict[str, Any]) -> tuple[TimeoutKind, Unjudged | None]:
    """The verdict of one cut-off cell, from its figures."""
    share, rerun = v["share_of_baseline"], v["rerun"]
    if v["admission_s"] is not None and v["admission_s"] >= QUEUED_SHARE * v["ceiling_s"]:
        return TimeoutKind.QUEUED, None
    if v["baseline_rate"] is None:
        return TimeoutKind.UNKNOWN, Unjudged.NO_BASELINE
    if share is not None and share < SLOWED_BELOW:
        return TimeoutKind.SLOWED, None
    if share is not None or (rerun is not None and rerun.elapsed_s >= v["ceiling_s"]):
        return TimeoutKind.LONG, None
    return TimeoutKind.UNKNOWN, Unjudged.NO_TOKENS if not v["completion_tokens"] else Unjudged.NO_RATE


def timeout_verdicts(
    cells: Iterable[Cell], windows: Iterable[LoadWindow] = (), *, eval_name: str | None = None
) -> list[TimeoutVerdict]:
    """A verdict for every cell that hit its ceiling (of ``eval_name``, else of every eval), in time order."""
    all_cells = sorted(cells, key=lambda c: c.start_unix_ns)
    cut = [c for c in all_cells if ceiling_hit(c) and (eval_name is None or c.eval_name == eval_name)]
    if not cut:
        return []
    names = sorted({c.eval_name for c in cut})
    reports = neighbour_costs(all_cells, list(windows), eval_names=names, min_cells=1)
    placed: dict[str, tuple[CellRate, NeighbourReport]] = {}
    rated = {id(report): _rated_windows(report) for report in reports}
    for report in reports:
        for cr in report.cells:
            placed.setdefault(cr.uid, (cr, report))
    by_id: dict[tuple[str, str], list[Cell]] = {}
    for c in all_cells:
        by_id.setdefault((c.eval_name, c.cell_id), []).append(c)
    out = []
    for c in cut:
        cell_rate, report = placed[c.uid]
        baseline = report.baseline.median
        share, share_cells = _share(
            cell_rate.completion_tokens, cell_rate.elapsed_s, cell_rate.windows, baseline, rated[id(report)]
        )
        out.append(
            _verdict(
                {
                    "uid": c.uid,
                    "eval_name": c.eval_name,
                    "cell_id": c.cell_id,
                    "engine": c.engine,
                    "start_unix_ns": c.start_unix_ns,
                    "elapsed_s": c.elapsed_s,
                    "ceiling_s": c.deadline_s if c.deadline_s is not None else c.elapsed_s,
                    "completion_tokens": c.completion_tokens,
                    "rate": c.decode_rate,
                    "baseline_rate": baseline,
                    "baseline_n": report.baseline.n,
                    "share_of_baseline": share,
                    "share_cells": share_cells,
                    "loads": list(cell_rate.windows),
                    "admission_s": c.admission_s,
                    "needed_at_baseline_s": c.completion_tokens / baseline
                    if c.completion_tokens and baseline
                    else None,
                    "rerun": _rerun(c, by_id[(c.eval_name, c.cell_id)], baseline),
                    "request_as_cell": is_request_cell(c),
                }
            )
        )
    return out


def _verdict(values: dict[str, Any]) -> TimeoutVerdict:
    values["kind"], values["unjudged"] = _kind(values)
    return TimeoutVerdict(**values)


def cut_off_uids(cells: CellColumns, *, eval_name: str | None = None) -> list[str]:
    """The uids of the cells that hit their ceiling (of ``eval_name``, else of every eval): the
    cells whose governor wait (`Cell.admission_s`) `timeout_verdicts_of_columns` asks for."""
    import numpy as np

    return [cells.uid[k] for k in np.flatnonzero(_cut_off(cells, eval_name)).tolist()]


def _cut_off(cells: CellColumns, eval_name: str | None) -> NDArray[np.bool_]:
    import numpy as np

    from ..records.cell_columns import STATUSES

    hit: NDArray[np.bool_] = cells.status == STATUSES.index(CellStatus.DEADLINE)
    if eval_name is not None:
        hit &= np.array([name == eval_name for name in cells.eval_name], dtype=np.bool_)
    return hit


def timeout_verdicts_of_columns(
    cells: CellColumns,
    windows: Iterable[LoadWindow] = (),
    *,
    eval_name: str | None = None,
    admissions: Mapping[str, float] | None = None,
) -> list[TimeoutVerdict]:
    """`timeout_verdicts` of the cells ``cells`` holds: the same verdicts, priced over columns
    (`neighbour_columns`). ``admissions``: each cut-off cell's governor wait in seconds
    (`Cell.admission_s`), by uid, where it has one; the columns do not carry it."""
    import numpy as np

    from .._clock import NS_PER_S
    from ..records.cell_columns import STATUSES
    from .neighbour_columns import neighbour_costs_of_columns

    starts = cells.start_unix_ns
    if len(cells) > 1 and not bool((starts[1:] >= starts[:-1]).all()):
        cells = cells.take(np.argsort(starts, kind="stable"))  # as `timeout_verdicts` sorts them
    cut = np.flatnonzero(_cut_off(cells, eval_name)).tolist()
    if not cut:
        return []
    names = sorted({cells.eval_name[k] for k in cut})
    reports = neighbour_costs_of_columns(cells, list(windows), eval_names=names, min_cells=1)
    wanted = {cells.uid[k] for k in cut}
    placed: dict[str, tuple[int, int]] = {}  # each cut-off cell's report (the first that holds it) and row
    for r, found in enumerate(reports):
        uids = found.cells.columns["uid"]
        rows = dict(zip(reversed(uids), range(len(uids) - 1, -1, -1), strict=True))  # the first of a uid
        for uid in wanted - placed.keys():
            if uid in rows:
                placed[uid] = (r, rows[uid])
    rated = [found.rated_windows() for found in reports]
    inside: list[dict[frozenset[str], tuple[float, int] | None]] = [{} for _ in reports]
    keys = {(cells.eval_name[k], cells.cell_id[k]) for k in cut}
    by_id: dict[tuple[str, str], list[int]] = {}
    for k, key in enumerate(zip(cells.eval_name, cells.cell_id, strict=True)):
        if key in keys:
            by_id.setdefault(key, []).append(k)
    start, end = cells.start_unix_ns.tolist(), cells.end_unix_ns.tolist()
    known, tokens = cells.completion_known.tolist(), cells.completion_tokens.tolist()
    deadline = STATUSES.index(CellStatus.DEADLINE)
    ceiling = cells.deadline_s.tolist()
    admissions = admissions or {}

    # A re-run: not cut off, with tokens and a rate (`Cell.decode_rate`: tokens over positive elapsed).
    finished = (cells.status != deadline) & cells.completion_known & (cells.completion_tokens != 0)
    finished &= cells.end_unix_ns > cells.start_unix_ns
    complete = finished.tolist()
    starts_of = {key: [start[m] for m in ms] for key, ms in by_id.items()}  # in start order

    def token_count(k: int) -> int | None:
        return tokens[k] if known[k] else None

    def decode_rate(k: int) -> float | None:
        n = token_count(k)
        return n / ((end[k] - start[k]) / NS_PER_S) if n and end[k] > start[k] else None

    def rerun(k: int, baseline: float | None) -> Rerun | None:
        key = (cells.eval_name[k], cells.cell_id[k])
        later = by_id[key]
        for m in later[bisect_left(starts_of[key], end[k]) :]:  # the runs that start after it ends
            if complete[m] and (rate := decode_rate(m)):
                return Rerun(
                    uid=cells.uid[m],
                    elapsed_s=(end[m] - start[m]) / NS_PER_S,
                    completion_tokens=tokens[m],
                    share_of_baseline=rate / baseline if baseline else None,
                )
        return None

    out = []
    for k in cut:
        uid = cells.uid[k]
        r, at = placed[uid]
        found = reports[r]
        baseline, column = found.head.baseline, found.cells.columns
        elapsed = (end[k] - start[k]) / NS_PER_S
        completion = token_count(k)
        share, share_cells = _share(
            column["completion_tokens"][at],
            column["elapsed_s"][at],
            column["windows"][at],
            baseline.median,
            rated[r],
            inside=inside[r],
        )
        out.append(
            _verdict(
                {
                    "uid": uid,
                    "eval_name": cells.eval_name[k],
                    "cell_id": cells.cell_id[k],
                    "engine": cells.engine[k],
                    "start_unix_ns": start[k],
                    "elapsed_s": elapsed,
                    "ceiling_s": elapsed if ceiling[k] != ceiling[k] else ceiling[k],  # NaN: none declared
                    "completion_tokens": completion,
                    "rate": decode_rate(k),
                    "baseline_rate": baseline.median,
                    "baseline_n": baseline.n,
                    "share_of_baseline": share,
                    "share_cells": share_cells,
                    "loads": list(column["windows"][at]),
                    "admission_s": admissions.get(uid),
                    "needed_at_baseline_s": completion / baseline.median
                    if completion and baseline.median
                    else None,
                    "rerun": rerun(k, baseline.median),
                    "request_as_cell": cells.source[k] == REQUEST_SOURCE,
                }
            )
        )
    return out
