"""What other load on the box cost an eval: the article's Act 4 and Appendix D.

The eval is its own instrument: each cell's decode rate (completion tokens over elapsed) is
compared with the eval's *baseline*, the rates of its cells that overlapped no other load at
all. Every other load is a window: other evals' cells (merged per engine and worker count),
probe levels and loads recorded in the store, work on another engine. A cell is attributed to
a window when at least ``min_overlap_fraction`` of the cell's own duration falls inside it
(default 0.25, so a cell that only brushes a window's edge does not speak for it); cells
overlapping some window by less than that are neither baseline nor attributed. A window's cost
is ``1 - median(attributed rates) / baseline median``.

Timeouts (cut off at the ceiling) and failed cells are listed and counted per window, each
separately, but kept out of every rate (`rated_decode_rate`): a cut-off cell's tokens over the
ceiling understate its rate by an unknown amount.

An eval run at several worker counts decodes slower per cell at more workers whatever else
runs, so one baseline across them would price its own batching as a neighbour's cost. Pass
``workers`` to price one worker count (the eval's cells at other counts then count as other
load, like any other eval's); without it, a report over mixed worker counts carries a warning.
`neighbour_costs` prices every eval, one report per worker count where an eval ran at several.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from pydantic import Field

from .. import _semconv as sc
from .._clock import NS_PER_S
from .._exceptions import ConfigError, InputError
from ..model import Cell, CellStatus, LoadWindow
from ._result import Result
from .rates import ceiling_hit, failed, rated_decode_rate
from .request_cells import is_request_cell
from .stats import RateSummary, summarize
from .windows import DEFAULT_MERGE_GAP_S, EvalRun, keyed_windows_from_cells, overlapping_pairs

__all__ = [
    "CellRate",
    "NeighbourReport",
    "WindowCost",
    "neighbour_cost",
    "neighbour_costs",
    "no_baseline_reason",
    "windows_touched",
]

DEFAULT_MIN_OVERLAP_FRACTION = 0.25
MIN_CELLS_FOR_NEIGHBOUR = 3


class CellRate(Result):
    """One of the eval's cells: its rate (None for timeouts and failures) and the windows it
    overlapped."""

    uid: str
    cell_id: str
    engine: str | None
    workers: int | None
    start_unix_ns: int
    end_unix_ns: int
    elapsed_s: float
    completion_tokens: int | None
    decode_rate: float | None
    status: CellStatus
    timed_out: bool
    failed: bool
    baseline: bool = Field(description="overlapped no other load")
    windows: tuple[str, ...] = Field(description="names of the windows the cell is attributed to")
    overlapped: tuple[str, ...] = Field(description="names of every window it touched at all")
    request_as_cell: bool = Field(default=False, description="a request standing in for a cell")


class WindowCost(Result):
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
    failures: int
    rate: RateSummary
    min_rate: float | None
    max_rate: float | None
    cost: float | None = Field(description="1 - median rate / baseline median; None without rates")


class NeighbourReport(Result):
    eval_name: str
    engine: str | None
    workers: int | None = Field(
        description="the worker count priced; None: all the eval's cells, or those without a count"
    )
    without_count: bool = Field(
        default=False, description="the eval's cells without a worker count, beside its counted ones"
    )
    min_overlap_fraction: float
    n_cells: int
    timeouts: int
    failures: int
    baseline: RateSummary
    baseline_timeouts: int
    windows: list[WindowCost]
    cells: list[CellRate]
    warnings: list[str]
    requests_as_cells: int = Field(default=0, description="of n_cells, requests standing in for cells")

    @property
    def label(self) -> str:
        """The eval's name, with the worker count when the report prices one (or that it prices
        the cells without one)."""
        if self.without_count:
            return f"{self.eval_name} (cells without a worker count)"
        if self.workers is None:
            return self.eval_name
        return f"{self.eval_name} at {self.workers} worker{'' if self.workers == 1 else 's'}"

    def window(self, name: str) -> WindowCost:
        """The window called ``name`` (KeyError if absent)."""
        for w in self.windows:
            if w.name == name:
                return w
        raise KeyError(name)


def _is_own_window(window: LoadWindow, eval_name: str) -> bool:
    return window.attributes.get(sc.EVAL_NAME) == eval_name or (
        window.kind == "eval" and window.name == eval_name
    )


def _is_other_load(
    window: LoadWindow, run: EvalRun | None, eval_name: str, workers: int | None, evals: set[str]
) -> bool:
    """Whether ``window`` is other load for ``eval_name`` (at ``workers``, None: every count).

    A derived window (``run`` is its cells' eval and worker count) is, unless it is the priced
    cells'. A recorded one (``run`` None) is, unless it is the eval's own or an eval window of
    an eval whose cells are in ``evals`` (they become windows of their own, run by run, so it
    would count twice)."""
    if run is not None:
        return run[0] != eval_name or (workers is not None and run[1] != workers)
    return not _is_own_window(window, eval_name) and not (
        window.kind == "eval" and (window.attributes.get(sc.EVAL_NAME) or window.name) in evals
    )


def _candidate_loads(
    windows: Iterable[LoadWindow], derived: list[tuple[EvalRun, LoadWindow]]
) -> list[tuple[EvalRun | None, LoadWindow]]:
    """Every load any eval may be priced against, in time order (recorded windows first at equal
    times and names), each with the run a derived window came from."""
    loads: list[tuple[EvalRun | None, LoadWindow]] = [(None, w) for w in windows]
    loads += derived
    loads.sort(key=lambda rw: (rw[1].start_unix_ns, rw[1].name))
    return loads


def _own_cells(eval_name: str, mine: list[Cell], workers: int | None) -> tuple[list[Cell], list[str]]:
    """The cells priced, in start order, and the warning a mix of worker counts deserves."""
    warnings: list[str] = []
    if workers is None:
        warnings = mixed_counts_warnings(eval_name, {c.workers for c in mine})
        own = list(mine)
    else:
        own = [c for c in mine if c.workers == workers]
        if not own:
            raise no_cells_at(eval_name, workers, {c.workers for c in mine})
    own.sort(key=lambda c: c.start_unix_ns)
    return own, warnings


def mixed_counts_warnings(eval_name: str, counts: Iterable[int | None]) -> list[str]:
    """The warning a report over several worker counts of ``eval_name`` carries (none for one)."""
    known = sorted({w for w in counts if w is not None})
    if len(known) < 2:
        return []
    return [
        f"{eval_name} ran at {', '.join(map(str, known))} workers: one baseline across them "
        "prices its own batching as load; price one worker count at a time"
    ]


def no_cells_at(eval_name: str, workers: int, counts: Iterable[int | None]) -> InputError:
    """The refusal of a worker count none of the eval's cells (at ``counts``) ran at."""
    have = sorted({str(w) for w in counts})
    return InputError(f"eval {eval_name!r} has no cells at {workers} workers (has: {', '.join(have)})")


def _check_fraction(min_overlap_fraction: float) -> None:
    if not 0.0 <= min_overlap_fraction <= 1.0:
        raise ConfigError(f"min_overlap_fraction {min_overlap_fraction} must be within 0..1")


def neighbour_cost(
    eval_name: str,
    cells: Iterable[Cell],
    windows: Iterable[LoadWindow] = (),
    *,
    workers: int | None = None,
    min_overlap_fraction: float = DEFAULT_MIN_OVERLAP_FRACTION,
    derive_from_cells: bool = True,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
) -> NeighbourReport:
    """The neighbour-cost analysis of ``eval_name`` against every other load.

    ``cells`` may hold every eval's cells: the eval's own are analysed and, with
    ``derive_from_cells``, the others become windows (`windows_from_cells`). ``windows`` adds
    recorded loads (probe levels, imposed jobs); any recorded window of the eval itself is
    ignored, and so is a recorded eval window of an eval whose cells are given. ``workers``
    prices only the eval's cells at that worker count.
    """
    _check_fraction(min_overlap_fraction)
    all_cells = list(cells)
    mine = [c for c in all_cells if c.eval_name == eval_name]
    if not mine:
        raise InputError(f"no cells recorded for eval {eval_name!r}")
    own, warnings = _own_cells(eval_name, mine, workers)
    derived: list[tuple[EvalRun, LoadWindow]] = []
    evals: set[str] = set()
    if derive_from_cells:
        others = [c for c in all_cells if not (c.eval_name == eval_name and workers in (None, c.workers))]
        derived = keyed_windows_from_cells(others, merge_gap_s=merge_gap_s)
        evals = {c.eval_name for c in others}
    return _priced(
        eval_name,
        own,
        _candidate_loads(windows, derived),
        workers=workers,
        evals=evals,
        min_overlap_fraction=min_overlap_fraction,
        warnings=warnings,
    )


_NO_RATES = RateSummary(n=0)


def _priced(
    eval_name: str,
    own: list[Cell],
    candidates: list[tuple[EvalRun | None, LoadWindow]],
    *,
    workers: int | None,
    evals: set[str],
    min_overlap_fraction: float,
    warnings: list[str],
    untouched: dict[tuple[int, bool | None], WindowCost] | None = None,
) -> NeighbourReport:
    """The report of ``own`` (in start order) against the candidates that are other load.

    ``untouched`` holds the rows of windows none of an eval's cells ran beside, shared by the
    reports of one `neighbour_costs` call: such a row depends only on the window and whether it
    is on the eval's engine, and in a long history most windows are such for most evals."""
    loads = [w for run, w in candidates if _is_other_load(w, run, eval_name, workers, evals)]
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

    timed_out = [ceiling_hit(c) for c in own]
    failures = [failed(c) for c in own]
    rates = [rated_decode_rate(c) for c in own]
    baseline_idx = [i for i, c in enumerate(own) if i not in touched and c.end_unix_ns > c.start_unix_ns]
    baseline = summarize(rates[i] for i in baseline_idx)

    per_window: dict[int, list[int]] = defaultdict(list)
    for i, js in attributed.items():
        for j in js:
            per_window[j].append(i)

    def window_cost(j: int, w: LoadWindow) -> WindowCost:
        members = per_window.get(j, [])  # most windows, in a long history: nothing of the eval beside them
        same_engine = (w.engine == engine) if w.engine and engine else None
        if not members and untouched is not None:
            key = (id(w), same_engine)
            row = untouched.get(key)
            if row is None:
                row = untouched[key] = _window_row(w, same_engine=same_engine, members=0)
            return row
        member_rates = [r for i in members if (r := rates[i]) is not None]
        summary = summarize(member_rates) if members else _NO_RATES
        cost = None
        if summary.median is not None and baseline.median:
            cost = 1.0 - summary.median / baseline.median
        return _window_row(
            w,
            same_engine=same_engine,
            members=len(members),
            timeouts=sum(timed_out[i] for i in members),
            failures=sum(failures[i] for i in members),
            rates=member_rates,
            summary=summary,
            cost=cost,
        )

    window_costs = [window_cost(j, w) for j, w in enumerate(loads)]
    baseline_set = set(baseline_idx)
    cell_rows = [
        CellRate(
            uid=c.uid,
            cell_id=c.cell_id,
            engine=c.engine,
            workers=c.workers,
            start_unix_ns=c.start_unix_ns,
            end_unix_ns=c.end_unix_ns,
            elapsed_s=(c.end_unix_ns - c.start_unix_ns) / NS_PER_S,
            completion_tokens=c.completion_tokens,
            decode_rate=rates[i],
            status=c.status,
            timed_out=timed_out[i],
            failed=failures[i],
            baseline=i in baseline_set,
            windows=tuple(loads[j].name for j in attributed[i]) if i in attributed else (),
            overlapped=tuple(loads[j].name for j in touched[i]) if i in touched else (),
            request_as_cell=is_request_cell(c),
        )
        for i, c in enumerate(own)
    ]
    return NeighbourReport(
        eval_name=eval_name,
        engine=engine,
        workers=workers,
        min_overlap_fraction=min_overlap_fraction,
        n_cells=len(own),
        timeouts=sum(timed_out),
        failures=sum(failures),
        baseline=baseline,
        baseline_timeouts=sum(timed_out[i] for i in baseline_idx),
        windows=window_costs,
        cells=cell_rows,
        warnings=warnings,
        requests_as_cells=sum(r.request_as_cell for r in cell_rows),
    )


def _window_row(
    w: LoadWindow,
    *,
    same_engine: bool | None,
    members: int,
    timeouts: int = 0,
    failures: int = 0,
    rates: Sequence[float] = (),
    summary: RateSummary = _NO_RATES,
    cost: float | None = None,
) -> WindowCost:
    """One window's row, from what its member cells did (by default: none beside it)."""
    return WindowCost(
        uid=w.uid,
        name=w.name,
        kind=w.kind,
        engine=w.engine,
        streams=w.streams,
        start_unix_ns=w.start_unix_ns,
        end_unix_ns=w.end_unix_ns,
        same_engine=same_engine,
        n_cells=members,
        timeouts=timeouts,
        failures=failures,
        rate=summary,
        min_rate=min(rates, default=None),
        max_rate=max(rates, default=None),
        cost=cost,
    )


def neighbour_costs(
    cells: Iterable[Cell],
    windows: Iterable[LoadWindow] = (),
    *,
    eval_names: Iterable[str] | None = None,
    min_cells: int = MIN_CELLS_FOR_NEIGHBOUR,
    min_overlap_fraction: float = DEFAULT_MIN_OVERLAP_FRACTION,
    merge_gap_s: float = DEFAULT_MERGE_GAP_S,
) -> list[NeighbourReport]:
    """Every eval's neighbour cost (or ``eval_names``'), one report per worker count when an eval
    ran at several, and then one more (``workers`` None) for its cells without a count (records
    backfilled beside live ones), which no count's report holds; evals with fewer than
    ``min_cells`` cells (per group) are skipped.

    Each report equals `neighbour_cost` of that eval (and worker count) over the same input; the
    windows every eval's cells make are derived and put in time order once for all of them."""
    _check_fraction(min_overlap_fraction)
    all_cells = list(cells)
    by_eval: dict[str, list[Cell]] = defaultdict(list)
    for c in all_cells:
        by_eval[c.eval_name].append(c)
    names = sorted(by_eval) if eval_names is None else [n for n in eval_names if n in by_eval]
    candidates = _candidate_loads(windows, keyed_windows_from_cells(all_cells, merge_gap_s=merge_gap_s))
    evals = set(by_eval)
    untouched: dict[tuple[int, bool | None], WindowCost] = {}
    reports = []
    for name in names:
        mine = by_eval[name]
        counts = sorted({c.workers for c in mine if c.workers is not None})
        groups: list[tuple[int | None, list[Cell]]] = [(None, mine)]
        if len(counts) > 1:
            groups = [(w, [c for c in mine if c.workers == w]) for w in counts]
            uncounted = [c for c in mine if c.workers is None]
            if uncounted:
                groups.append((None, uncounted))
        for workers, group in groups:
            if len(group) >= min_cells:
                own, warnings = _own_cells(name, group, workers)
                report = _priced(
                    name,
                    own,
                    candidates,
                    workers=workers,
                    evals=evals,
                    min_overlap_fraction=min_overlap_fraction,
                    warnings=warnings,
                    untouched=untouched,
                )
                if workers is None and group is not mine:
                    report = report.model_copy(update={"without_count": True})
                reports.append(report)
    return reports


def windows_touched(report: NeighbourReport) -> list[WindowCost]:
    """The windows at least one of the eval's cells is attributed to, in time order."""
    return [w for w in report.windows if w.n_cells]


def no_baseline_reason(report: NeighbourReport) -> str | None:
    """Why the report has no baseline to price against, in one line with what would give one;
    None when it has one. Without a baseline no window has a cost, so a reader needs this
    line, not an empty table."""
    if report.baseline.median is not None:
        return None
    alone = [c for c in report.cells if c.baseline]
    if not alone:
        return (
            f"no baseline: every one of the {report.n_cells} cells of {report.label} ran beside other "
            "load, so nothing says what it decodes alone; run a few of its cells with the box "
            "otherwise idle"
        )
    unrated = sum(1 for c in alone if c.decode_rate is None)
    return (
        f"no baseline: the {len(alone)} cells of {report.label} that ran alone all timed out or "
        f"failed ({unrated} not rated), so nothing says what it decodes alone; run a few cells "
        "with the box otherwise idle, under a ceiling they finish within"
    )
