"""Recent cells as a list and as JSON: what ``spark-otel cells`` prints, one row per cell with
each one's energy share, and the same cells as scripts read them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .._clock import NS_PER_S
from ..analysis.energy import EnergyShare
from ..model import Cell
from .tables import seconds, time_scales

__all__ = ["ENERGY_NOTES", "cells_json", "cells_list"]

ENERGY_NOTES = {
    "energy J": "the cell's share of the box's GPU energy over its lifetime, split by tokens among "
    "the cells in flight (~: integrated from power, no energy counter); - where no GPU readings "
    "cover it"
}

_PRIORITIES = (0, 0, 2, 3, 0, 3, 1, 1, 0, 4, 4, 2)
"""Which columns a narrow terminal leaves out first (highest first): the eval, the cell, its
status and its rate always stay; then tokens and time, engine and start, workers and prompt,
energy and findings."""


def _joules(energy: EnergyShare | None) -> str:
    if energy is None:
        return "-"
    return ("~" if energy.estimated else "") + f"{energy.share_j:,.1f}"


def cells_list(
    cells: Sequence[Cell], energy: Mapping[str, EnergyShare]
) -> tuple[list[str], list[list[str]], tuple[int, ...]]:
    """The columns, one row per cell, and each column's priority in a narrow terminal."""
    columns = [
        "eval",
        "cell",
        "engine",
        "workers",
        "status",
        "prompt tok",
        "output tok",
        f"elapsed {seconds(time_scales(cells))}",
        "tok/s",
        "energy J",
        "salvaged findings",
        "started (UTC)",
    ]
    rows = [
        [
            c.eval_name,
            c.cell_id,
            c.engine or "",
            "" if c.workers is None else str(c.workers),
            c.status.value + (" (degraded)" if c.degraded else ""),
            "" if c.prompt_tokens is None else str(c.prompt_tokens),
            "" if c.completion_tokens is None else str(c.completion_tokens),
            f"{c.elapsed_s:.1f}",
            f"{c.decode_rate:.2f}" if c.decode_rate is not None else "-",
            _joules(energy.get(c.uid)),
            str(c.salvaged_findings),
            datetime.fromtimestamp(c.start_unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M:%S"),
        ]
        for c in cells
    ]
    return columns, rows, _PRIORITIES


def _energy_json(cell: Cell, energy: EnergyShare | None) -> dict[str, object] | None:
    if energy is None:
        return None
    tokens = cell.completion_tokens
    return {
        "box_j": energy.box_j,
        "share_j": energy.share_j,
        "j_per_token": energy.share_j / tokens if tokens else None,
        "estimated": energy.estimated,
    }


def cells_json(cells: Sequence[Cell], energy: Mapping[str, EnergyShare]) -> list[dict[str, Any]]:
    """The cells as the store keeps them, each with its elapsed time, rate and energy."""
    return [
        c.model_dump(mode="json")
        | {
            "elapsed_s": c.elapsed_s,
            "decode_rate": c.decode_rate,
            "energy": _energy_json(c, energy.get(c.uid)),
        }
        for c in cells
    ]
