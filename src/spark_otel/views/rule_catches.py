"""Which cells each rule catches, in words: the table `rules check --store` and `lanes` print,
and its JSON (`spark_otel.governor.matching` computes the facts)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .._clock import NS_PER_S
from ..governor.matching import Caught, Seen, StoreCatch

__all__ = ["catches_json", "catches_table", "store_catch_json", "store_catch_title"]

_SHOWN = 3
"""Evals named per cell of the table; the rest are counted."""

_NOTES = {
    "catches": "the cells the rule counts against its cap (a cross-engine rule: those on its engine while "
    "it holds)",
    "held while": "a cross-engine rule's: the cells that make it hold (ceiling-bound, of its eval, or with "
    "a ceiling, as the rule says)",
}


def _evals(cells: Sequence[Seen]) -> str:
    if not cells:
        return "-"
    counts = Counter(s.cell.eval_name for s in cells).most_common()
    text = ", ".join(f"{name} {n}" for name, n in counts[:_SHOWN])
    return text + (f", {len(counts) - _SHOWN} more evals" if len(counts) > _SHOWN else "")


def catches_table(caught: Sequence[Caught]) -> tuple[list[str], list[list[Any]], dict[str, str]]:
    """Headers, rows and notes: per rule, the cells it catches and the cells that make it hold."""
    headers = ["rule", "form", "catches", "caught evals", "held while", "holding evals"]
    rows = [
        [
            c.rule.describe(),
            "by eval" if c.rule.by_eval else "general",
            len(c.held),
            _evals(c.held),
            len(c.triggers) if c.rule.kind == "cross_engine" else "-",
            _evals(c.triggers) if c.rule.kind == "cross_engine" else "-",
        ]
        for c in caught
    ]
    return headers, rows, dict(_NOTES)


def _when(ns: int) -> str:
    return datetime.fromtimestamp(ns / NS_PER_S, tz=UTC).strftime("%Y-%m-%d %H:%M")


def store_catch_title(store: str, catch: StoreCatch) -> str:
    """The title over `catches_table` for a store: which cells were looked at."""
    if catch.since_ns is None or catch.until_ns is None:
        return f"what each rule would have caught in {store}: no cells"
    skipped = f"; {catch.no_engine} naming no engine left out" if catch.no_engine else ""
    n = catch.cells
    return (
        f"what each rule would have caught in {store}: {n} cell{'' if n == 1 else 's'} started "
        f"{_when(catch.since_ns)} to {_when(catch.until_ns)} UTC{skipped}"
    )


def _state(s: Seen) -> str:
    return "waiting" if s.waiting else ("running" if s.end_ns is None else "ended")


def _cells(cells: Sequence[Seen]) -> list[dict[str, Any]]:
    return [
        {
            "eval": s.cell.eval_name,
            "cell": s.cell_id,
            "engine": s.cell.engine,
            "class": s.cell.cell_class,
            "ceiling_bound": s.cell.bound,
            "state": _state(s),
        }
        for s in cells
    ]


def catches_json(caught: Sequence[Caught]) -> list[dict[str, Any]]:
    """Per rule: its words, kind and form, and the cells it catches and that make it hold."""
    return [
        {
            "rule": c.rule.describe(),
            "kind": c.rule.kind,
            "by_eval": c.rule.by_eval,
            "catches": _cells(c.held),
            "held_while": _cells(c.triggers),
        }
        for c in caught
    ]


def store_catch_json(catch: StoreCatch) -> dict[str, Any]:
    """`catches_json` with the window of the store's cells it looked at."""
    return {
        "since_unix_ns": catch.since_ns,
        "until_unix_ns": catch.until_ns,
        "cells": catch.cells,
        "no_engine": catch.no_engine,
        "rules": catches_json(catch.caught),
    }
