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
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import Field

from ..model import Cell, LoadWindow
from ._result import Result
from .neighbour import CellRate, NeighbourReport, WindowCost, neighbour_costs
from .rates import ceiling_hit
from .request_cells import is_request_cell

__all__ = [
    "QUEUED_SHARE",
    "SLOWED_BELOW",
    "Rerun",
    "TimeoutKind",
    "TimeoutVerdict",
    "Unjudged",
    "timeout_verdicts",
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


def _rated_windows(report: NeighbourReport) -> dict[str, list[WindowCost]]:
    """The report's windows with a median rate, by name: looked up per cut-off cell instead of
    scanned (a long history has thousands of windows and of timeouts)."""
    by_name: dict[str, list[WindowCost]] = {}
    for w in report.windows:
        if w.rate.median is not None:
            by_name.setdefault(w.name, []).append(w)
    return by_name


def _share(
    cell_rate: CellRate, report: NeighbourReport, rated: dict[str, list[WindowCost]]
) -> tuple[float | None, int | None]:
    """The cell's rate over its eval's baseline, or the eval's cells' inside its loads (and how
    many they are); None where neither is known. ``rated``: `_rated_windows` of ``report``."""
    baseline = report.baseline.median
    if not baseline:
        return None, None
    if cell_rate.completion_tokens and cell_rate.elapsed_s > 0:
        return cell_rate.completion_tokens / cell_rate.elapsed_s / baseline, None
    inside = [w for name in set(cell_rate.windows) for w in rated.get(name, ())]
    if not inside:
        return None, None
    n = sum(w.rate.n for w in inside)
    rate = statistics.median(w.rate.median for w in inside if w.rate.median is not None)
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
        share, share_cells = _share(cell_rate, report, rated[id(report)])
        values: dict[str, Any] = {
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
        values["kind"], values["unjudged"] = _kind(values)
        out.append(TimeoutVerdict(**values))
    return out
