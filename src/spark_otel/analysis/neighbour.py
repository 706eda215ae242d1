"""What other load on the box cost an eval: the article's Act 4 and Appendix D.

The eval is its own instrument: each cell's decode rate (completion tokens over elapsed) is
compared with the eval's *baseline*, the rates of its cells that overlapped no other load at
all. Every other load is a window: other evals' cells (merged per engine and worker count),
probe levels and loads recorded in the store, work on another engine. A cell is attributed to
a window when at least ``min_overlap_fraction`` of the cell's own duration falls inside it
(default 0.25, so a cell that only brushes a window's edge does not speak for it); cells
overlapping some window by less than that are neither baseline nor attributed. A window's cost
is ``1 - median(attributed rates) / baseline median``.

Timeouts (status deadline, a ceiling hit, or no completion tokens) and failed cells are listed
and counted per window but kept out of every rate: a cut-off cell's tokens over the ceiling
understate its rate by an unknown amount.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from .. import _semconv as sc
from .._exceptions import ConfigError, InputError
from ..model import NS_PER_S, Cell, CellStatus, LoadWindow
from ._rows import rows
from .stats import RateSummary, summarize
from .windows import overlapping_pairs, windows_from_cells

__all__ = ["CellRate", "NeighbourReport", "WindowCost", "is_timeout", "neighbour_cost", "windows_touched"]

DEFAULT_MIN_OVERLAP_FRACTION = 0.25


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CellRate(_Result):
    """One of the eval's cells: its rate (None for timeouts) and the windows it overlapped."""

    uid: str
    cell_id: str
    engine: str | None
    start_unix_ns: int
    end_unix_ns: int
    elapsed_s: float
    completion_tokens: int | None
    decode_rate: float | None
    status: CellStatus
    timed_out: bool
    baseline: bool = Field(description="overlapped no other load")
    windows: tuple[str, ...] = Field(description="names of the windows the cell is attributed to")
    overlapped: tuple[str, ...] = Field(description="names of every window it touched at all")


class WindowCost(_Result):
    """One other load and what the eval's cells decoded while it ran."""

    uid: str
    name: str
    kind: str
    engine: str | None
    streams: int | None
    start_unix_ns: int
    end_unix_ns: int
    same_engine: bool | None
    n_cells: int
    timeouts: int
    rate: RateSummary
    min_rate: float | None
    max_rate: float | None
    cost: float | None = Field(description="1 - median rate / baseline median; None without rates")


class NeighbourReport(_Result):
    eval_name: str
    engine: str | None
    min_overlap_fraction: float
    n_cells: int
    timeouts: int
    baseline: RateSummary
    baseline_timeouts: int
    windows: list[WindowCost]
    cells: list[CellRate]

    def window(self, name: str) -> WindowCost:
        """The window called ``name`` (KeyError if absent)."""
        for w in self.windows:
            if w.name == name:
                return w
        raise KeyError(name)


def is_timeout(cell: Cell) -> bool:
    """A cell kept out of rates: cut off at its ceiling, failed, or without completion tokens."""
    return (
        cell.status in (CellStatus.DEADLINE, CellStatus.ERROR)
        or cell.deadline_hit
        or cell.decode_rate is None
    )


def _is_own_window(window: LoadWindow, eval_name: str) -> bool:
    return window.attributes.get(sc.EVAL_NAME) == eval_name or (
        window.kind == "eval" and window.name == eval_name
    )


def neighbour_cost(
    eval_name: str,
    cells: Iterable[Cell],
    windows: Iterable[LoadWindow] = (),
    *,
    min_overlap_fraction: float = DEFAULT_MIN_OVERLAP_FRACTION,
    derive_from_cells: bool = True,
    merge_gap_s: float = 60.0,
) -> NeighbourReport:
    """The neighbour-cost analysis of ``eval_name`` against every other load.

    ``cells`` may hold every eval's cells: the eval's own are analysed and, with
    ``derive_from_cells``, the others become windows (`windows_from_cells`). ``windows`` adds
    recorded loads (probe levels, imposed jobs); any recorded window of the eval itself is
    ignored.
    """
    if not 0.0 <= min_overlap_fraction <= 1.0:
        raise ConfigError(f"min_overlap_fraction {min_overlap_fraction} must be within 0..1")
    all_cells = list(cells)
    own = sorted((c for c in all_cells if c.eval_name == eval_name), key=lambda c: c.start_unix_ns)
    if not own:
        raise InputError(f"no cells recorded for eval {eval_name!r}")
    loads = [w for w in windows if not _is_own_window(w, eval_name)]
    if derive_from_cells:
        loads += windows_from_cells(all_cells, exclude_eval=eval_name, merge_gap_s=merge_gap_s)
    loads.sort(key=lambda w: (w.start_unix_ns, w.name))
    engines = Counter(c.engine for c in own if c.engine)
    engine = engines.most_common(1)[0][0] if engines else None

    touched: dict[int, list[int]] = defaultdict(list)
    attributed: dict[int, list[int]] = defaultdict(list)
    for i, j, overlap_ns in overlapping_pairs(
        [(c.start_unix_ns, c.end_unix_ns) for c in own], [(w.start_unix_ns, w.end_unix_ns) for w in loads]
    ):
        touched[i].append(j)
        if overlap_ns >= min_overlap_fraction * (own[i].end_unix_ns - own[i].start_unix_ns):
            attributed[i].append(j)

    timed_out = [is_timeout(c) for c in own]
    rates = [None if t else c.decode_rate for c, t in zip(own, timed_out, strict=True)]
    baseline_idx = [i for i, c in enumerate(own) if i not in touched and c.end_unix_ns > c.start_unix_ns]
    baseline = summarize(rates[i] for i in baseline_idx)

    per_window: dict[int, list[int]] = defaultdict(list)
    for i, js in attributed.items():
        for j in js:
            per_window[j].append(i)
    window_costs = []
    for j, w in enumerate(loads):
        members = per_window.get(j, [])
        member_rates = [r for i in members if (r := rates[i]) is not None]
        summary = summarize(member_rates)
        cost = None
        if summary.median is not None and baseline.median:
            cost = 1.0 - summary.median / baseline.median
        window_costs.append(
            WindowCost(
                uid=w.uid,
                name=w.name,
                kind=w.kind,
                engine=w.engine,
                streams=w.streams,
                start_unix_ns=w.start_unix_ns,
                end_unix_ns=w.end_unix_ns,
                same_engine=(w.engine == engine) if w.engine and engine else None,
                n_cells=len(members),
                timeouts=sum(timed_out[i] for i in members),
                rate=summary,
                min_rate=min(member_rates, default=None),
                max_rate=max(member_rates, default=None),
                cost=cost,
            )
        )

    baseline_set = set(baseline_idx)
    cell_rows = rows(
        CellRate,
        (
            {
                "uid": c.uid,
                "cell_id": c.cell_id,
                "engine": c.engine,
                "start_unix_ns": c.start_unix_ns,
                "end_unix_ns": c.end_unix_ns,
                "elapsed_s": (c.end_unix_ns - c.start_unix_ns) / NS_PER_S,
                "completion_tokens": c.completion_tokens,
                "decode_rate": rates[i],
                "status": c.status,
                "timed_out": timed_out[i],
                "baseline": i in baseline_set,
                "windows": tuple(loads[j].name for j in attributed[i]) if i in attributed else (),
                "overlapped": tuple(loads[j].name for j in touched[i]) if i in touched else (),
            }
            for i, c in enumerate(own)
        ),
    )
    return NeighbourReport(
        eval_name=eval_name,
        engine=engine,
        min_overlap_fraction=min_overlap_fraction,
        n_cells=len(own),
        timeouts=sum(timed_out),
        baseline=baseline,
        baseline_timeouts=sum(timed_out[i] for i in baseline_idx),
        windows=window_costs,
        cells=cell_rows,
    )


def windows_touched(report: NeighbourReport) -> Sequence[WindowCost]:
    """The windows at least one of the eval's cells is attributed to, in time order."""
    return [w for w in report.windows if w.n_cells]
