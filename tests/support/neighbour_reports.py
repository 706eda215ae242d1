"""Neighbour-cost results built from plain figures: a window's cost, and an eval's report beside
its baseline."""

from __future__ import annotations

from typing import Any

from spark_otel.analysis.neighbour import NeighbourReport, WindowCost
from spark_otel.analysis.stats import RateSummary

BASELINE = RateSummary(n=20, median=10.0, ci_low=9.0, ci_high=11.0)


def window_cost(uid: str, cost: float | None, **kw: Any) -> WindowCost:
    """A window of nemotron load, 5 cells of q's eval at 4.0 tok/s in it; ``kw`` overrides."""
    fields: dict[str, Any] = {
        "uid": uid,
        "name": f"run {uid}",
        "kind": "eval",
        "engine": "nemotron",
        "streams": 4,
        "start_unix_ns": 0,
        "end_unix_ns": 1_000,
        "same_engine": False,
        "n_cells": 5,
        "timeouts": 2,
        "failures": 0,
        "rate": RateSummary(n=5, median=4.0, ci_low=3.0, ci_high=5.0),
        "min_rate": 3.0,
        "max_rate": 5.0,
        "cost": cost,
    }
    return WindowCost(**(fields | kw))


def neighbour_report(windows: list[WindowCost], **kw: Any) -> NeighbourReport:
    """Eval g on engine q, its baseline 10.0 tok/s over 20 cells; ``kw`` overrides."""
    fields: dict[str, Any] = {
        "eval_name": "g",
        "engine": "q",
        "workers": None,
        "min_overlap_fraction": 0.5,
        "n_cells": 30,
        "timeouts": 2,
        "failures": 0,
        "baseline": BASELINE,
        "baseline_timeouts": 0,
        "windows": windows,
        "cells": [],
        "warnings": [],
    }
    return NeighbourReport(**(fields | kw))
