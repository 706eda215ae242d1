"""Where each cell's wall time went, and each eval's: the recorded budget, with the engine's own
split of the wait for first tokens where its server spans were joined.

A cell's budget (`spark_otel.time_budget`) is measured by the client: admission (the governor's
wait, before the cell started), first_token, decode, unsplit, other and, where the runner marked
its grading, scoring (which add up to elapsed). Where the engine's server span answered some of
the cell's requests (`ServerTiming`, joined through the injected ``traceparent``), first_token is
split further into the engine's
``queue`` and ``prefill`` in the proportion the engine reported for those requests (sum of queue
over sum of queue and prefill): the client's wait also holds the network, and parallel requests
overlap, so the engine's seconds are not added as they are. Every figure says its source.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pydantic import Field

from ..model import Cell, Request, ServerTiming
from ..time_budget import IN_CELL_PHASES, SCORING
from ._result import Result

__all__ = ["BUDGET_PHASES", "CellBudget", "EvalBudget", "cell_budgets", "eval_budgets"]

BUDGET_PHASES = ("admission", "queue", "prefill", "first_token", "decode", "unsplit", "other", "scoring")
"""The phases a budget shows, in order: `time_budget.PHASES` with first_token split by the
engine into queue and prefill where it can be (what stays first_token was not split); scoring
only in cells that marked their grading (`time_budget.SCORING`)."""

CLIENT = "client"
"""Source of a figure the client measured (the cell's own span)."""
ENGINE = "engine server spans"
"""Source of the queue/prefill split: the engine's ``llm_request`` spans of the cell's requests."""


class CellBudget(Result):
    uid: str
    eval_name: str
    cell_id: str
    status: str
    elapsed_s: float
    wall_s: float = Field(description="admission + elapsed: from entering cell() to its end")
    seconds: dict[str, float] = Field(description="per phase of BUDGET_PHASES present")
    sources: dict[str, str] = Field(description="per phase: what measured it")
    requests: int
    joined: int = Field(description="requests the engine's server span answered")

    def share(self, phase: str) -> float | None:
        """The phase's share of wall time; None when it is not in the budget or wall time is 0."""
        value = self.seconds.get(phase)
        return None if value is None or self.wall_s <= 0 else value / self.wall_s


class EvalBudget(Result):
    eval_name: str
    n_cells: int = Field(description="cells with a budget")
    unsplit_cells: int = Field(description="cells recorded without one (older or backfilled)")
    requests: int
    joined: int = Field(description="requests the engine's server span answered")
    wall_s: float
    seconds: dict[str, float]
    sources: dict[str, str]

    def share(self, phase: str) -> float | None:
        value = self.seconds.get(phase)
        return None if value is None or self.wall_s <= 0 else value / self.wall_s


def _engine_split(
    requests: Sequence[Request], timings: Mapping[str, ServerTiming]
) -> tuple[float, float, int] | None:
    """(sum of queue, sum of prefill, requests joined) over the requests the engine answered."""
    queue = prefill = 0.0
    joined = 0
    for r in requests:
        t = timings.get(r.uid)
        if t is None or t.queue_s is None or t.prefill_s is None:
            continue
        queue += t.queue_s
        prefill += t.prefill_s
        joined += 1
    return (queue, prefill, joined) if joined and queue + prefill > 0 else None


def cell_budgets(
    cells: Iterable[Cell],
    requests: Iterable[Request] = (),
    timings: Mapping[str, ServerTiming] | None = None,
) -> list[CellBudget]:
    """The budget of every cell that has one (cells without are left out, never estimated)."""
    by_cell: dict[str, list[Request]] = defaultdict(list)
    for r in requests:
        if r.cell_uid is not None:
            by_cell[r.cell_uid].append(r)
    out = []
    for c in cells:
        if not c.has_budget:
            continue
        seconds: dict[str, float] = {}
        sources: dict[str, str] = {}
        if c.admission_s is not None:
            seconds["admission"], sources["admission"] = c.admission_s, "governor"
        for phase in (*IN_CELL_PHASES, SCORING):
            value = getattr(c, f"{phase}_s")
            if value is not None:
                seconds[phase], sources[phase] = value, c.source if c.source != "live" else CLIENT
        mine = by_cell.get(c.uid, [])
        split = _engine_split(mine, timings or {})
        joined = 0
        if split is not None and seconds.get("first_token"):
            queue, prefill, joined = split
            wait = seconds.pop("first_token")
            sources.pop("first_token")
            seconds["queue"] = wait * queue / (queue + prefill)
            seconds["prefill"] = wait - seconds["queue"]
            sources["queue"] = sources["prefill"] = ENGINE
        out.append(
            CellBudget(
                uid=c.uid,
                eval_name=c.eval_name,
                cell_id=c.cell_id,
                status=c.status.value,
                elapsed_s=c.elapsed_s,
                wall_s=c.elapsed_s + (c.admission_s or 0.0),
                seconds={p: seconds[p] for p in BUDGET_PHASES if p in seconds},
                sources={p: sources[p] for p in BUDGET_PHASES if p in sources},
                requests=len(mine),
                joined=joined,
            )
        )
    return out


def eval_budgets(budgets: Iterable[CellBudget], cells: Iterable[Cell] = ()) -> list[EvalBudget]:
    """Each eval's phases summed over its cells with a budget; ``cells`` (all of them) counts the
    ones recorded without a budget, so a partial sum says so."""
    grouped: dict[str, list[CellBudget]] = defaultdict(list)
    for b in budgets:
        grouped[b.eval_name].append(b)
    without: dict[str, int] = defaultdict(int)
    for c in cells:
        if not c.has_budget:
            without[c.eval_name] += 1
    out = []
    for name in sorted(set(grouped) | set(without)):
        members = grouped.get(name, [])
        seconds: dict[str, float] = {}
        sources: dict[str, set[str]] = defaultdict(set)
        for b in members:
            for phase, value in b.seconds.items():
                seconds[phase] = seconds.get(phase, 0.0) + value
                sources[phase].add(b.sources[phase])
        out.append(
            EvalBudget(
                eval_name=name,
                n_cells=len(members),
                unsplit_cells=without.get(name, 0),
                requests=sum(b.requests for b in members),
                joined=sum(b.joined for b in members),
                wall_s=sum(b.wall_s for b in members),
                seconds={p: seconds[p] for p in BUDGET_PHASES if p in seconds},
                sources={p: "; ".join(sorted(sources[p])) for p in BUDGET_PHASES if p in sources},
            )
        )
    return out
