"""What the adaptive governor decided, in words, tables and JSON: the line that says at a glance
whether it held anything, for how long and why; the tables the report shows per eval; and the
recent decisions `spark-otel lanes` lists (`spark_otel.analysis.adaptive_decisions` has the facts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis.adaptive_decisions import AdaptiveDecisions, CellDecision, HoldCount, Spread
from .tables import fmt_number

__all__ = [
    "GOVERN_COMMAND",
    "decisions_json",
    "evals_table",
    "holds_tables",
    "no_decisions_line",
    "recent_json",
    "recent_table",
    "summary_line",
]

GOVERN_COMMAND = "SPARK_OTEL_GOVERN=adaptive <your eval command>"
"""What records the decisions: any eval run with adaptive governing on."""

_FOR_SHOWN = 3
"""Protected cells named in a row before the rest are counted."""


def _s(value: float) -> str:
    return f"{value:,.1f} s"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def no_decisions_line(cells_seen: int, *, newest: bool = False) -> str:
    """Why there is nothing to show, and the command that would record it; ``newest``: the cells
    were a store's newest (as `lanes` reads them)."""
    which = "the store's newest" if newest else "these"
    among = f"among {which} {cells_seen:,} cells"
    if not cells_seen:
        among = "(no cells recorded)"
    return (
        f"No adaptive governor decision recorded {among}: run an eval with adaptive governing, "
        f"`{GOVERN_COMMAND}`, and each cell's span records what it was admitted or held on."
    )


def _held_for(d: CellDecision) -> str:
    return f", protecting {d.held_for}" if d.held_for else ""


def summary_line(d: AdaptiveDecisions, unit: str = "s") -> str:
    """At a glance: how many cells the law decided, whether it held any, for how long and why."""
    if not d.any:
        return no_decisions_line(d.cells_seen)
    evals = f"{len(d.evals)} eval" + ("" if len(d.evals) == 1 else "s")
    at_once = sum(e.at_once for e in d.evals)
    head = f"The adaptive governor decided {d.cells:,} cells of {evals}: {at_once:,} admitted at once"
    if d.longest is None:
        return head + ", none held."
    longest = d.longest
    reasons = [c for e in d.evals for c in e.reasons]
    why = _merged(reasons)
    because = "; ".join(f"{c.key} ({c.cells:,})" for c in why)
    return (
        f"{head}, {d.held:,} held for {d.hold_s:,.1f} {unit} in all (because: {because}); "
        f"the longest, {longest.cell_id} of {longest.eval_name}, held {longest.hold_s:,.1f} {unit} "
        f"({longest.held_reason}{_held_for(longest)})."
    )


def _merged(counts: Sequence[HoldCount]) -> list[HoldCount]:
    cells: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for c in counts:
        cells[c.key] = cells.get(c.key, 0) + c.cells
        seconds[c.key] = seconds.get(c.key, 0.0) + c.hold_s
    return [
        HoldCount(key=k, cells=cells[k], hold_s=seconds[k])
        for k in sorted(cells, key=lambda k: (-cells[k], -seconds[k], k))
    ]


def _spread(s: Spread, fmt: str) -> str:
    if s.n == 0 or s.low is None or s.median is None:
        return "-"
    if fmt == "%":
        return f"{s.low:.0%} / {s.median:.0%} (n={s.n})"
    return f"{s.low:,.1f} / {s.median:,.1f} (n={s.n})"


def evals_table(d: AdaptiveDecisions, unit: str = "s") -> tuple[list[str], list[list[str]], dict[str, str]]:
    """Columns, one row per eval the law decided cells of, and what each column means."""
    columns = [
        "eval",
        "engines",
        "decided",
        "at once",
        "held",
        "waited on rules",
        f"hold {unit}",
        f"longest hold {unit}",
        "margin min / median",
        "rate used tok/s min / median",
    ]
    rows = [
        [
            e.eval_name,
            ", ".join(e.engines) or "-",
            f"{e.cells:,}",
            f"{e.at_once:,}",
            f"{e.held:,}",
            f"{e.waited_for_rules:,}",
            fmt_number(e.hold_s, 1) if e.held else "-",
            fmt_number(e.longest.hold_s, 1) if e.longest is not None else "-",
            _spread(e.margin, "%"),
            _spread(e.rate_used, "tok/s"),
        ]
        for e in d.evals
    ]
    notes = {
        "decided": "cells whose admission the deadline-slack law judged",
        "at once": "admitted without waiting",
        "held": "held by the law at least once before they started",
        "waited on rules": "waited, but only on a static rule or the queue, never on the law",
        f"hold {unit}": "the law's share of the held cells' waits added up (a cell recorded without it "
        "counts its whole wait, any part a static rule held it included)",
        "margin min / median": "(ceiling - projected finish) / ceiling of the protected cell each admission "
        "was judged against, after the admission; n: admissions with a projection",
        "rate used tok/s min / median": "that protected cell's decode rate the projection used, after "
        "the admission",
    }
    return columns, rows, notes


def holds_tables(d: AdaptiveDecisions, unit: str = "s") -> list[tuple[str, list[str], list[list[str]]]]:
    """The holds by why and by whom: a title, columns and rows for each; none without holds."""
    if d.held == 0:
        return []
    why = [[e.eval_name, c.key, f"{c.cells:,}", fmt_number(c.hold_s, 1)] for e in d.evals for c in e.reasons]
    whom = [
        [e.eval_name, c.key, f"{c.cells:,}", fmt_number(c.hold_s, 1)] for e in d.evals for c in e.held_for
    ]
    return [
        ("why the law held cells", ["eval", "held because", "cells", f"hold {unit}"], why),
        ("whom each hold protected", ["eval", "protected cell", "cells", f"hold {unit}"], whom),
    ]


def decisions_json(d: AdaptiveDecisions) -> dict[str, Any]:
    """The facts, with the glance line beside them."""
    return {"summary": summary_line(d), **d.model_dump(mode="json")}


def _decision(d: CellDecision) -> str:
    return d.reason if d.reason is not None else "none: ran ungoverned (failed open)"


def _held(d: CellDecision) -> str:
    if d.held_reason is None:
        return "-"
    return d.held_reason + (f" ({d.held_for})" if d.held_for else "")


def recent_table(decisions: Sequence[CellDecision]) -> tuple[list[str], list[list[str]], dict[str, str]]:
    """Columns and a row per recently finished cell the law decided, newest first."""
    columns = ["engine", "eval", "cell", "admitted on", "margin", "protecting", "waited s"]
    columns.append("last held because")
    rows = [
        [
            d.engine or "-",
            d.eval_name,
            d.cell_id,
            _decision(d),
            _pct(d.margin),
            d.protected or "-",
            fmt_number(d.waited_s, 1),
            _held(d),
        ]
        for d in decisions
    ]
    notes = {
        "admitted on": "why the law let it start (slack: every protected cell projected inside its margin)",
        "margin": "(ceiling - projected finish) / ceiling of the protected cell, after this admission",
        "waited s": "seconds it waited before it started (model seconds where it ran on a model clock)",
    }
    return columns, rows, notes


def recent_json(decisions: Sequence[CellDecision]) -> list[dict[str, Any]]:
    return [d.model_dump(mode="json") for d in decisions]
