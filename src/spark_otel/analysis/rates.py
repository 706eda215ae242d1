"""Which cells have a decode rate the analyses may use: the one predicate they all share.

A cell's rate is completion tokens over its elapsed wall clock (`Cell.decode_rate`). Three
kinds of cell have none that means anything, and every analysis (concurrency, neighbour cost,
the advisor, the report) keeps them out of its rates through `rated_decode_rate`:

* cut off at its ceiling (status ``deadline``, `Cell.deadline_hit`): tokens streamed before the
  cut-off, over the ceiling, understate the rate by an unknown amount;
* failed (status ``error``): it stopped for a reason that says nothing about decode speed;
* without completion tokens (or without duration).

Timeouts and failures are counted separately: a ceiling hit is what load causes, a failure
usually is not.
"""

from __future__ import annotations

from ..model import Cell, CellStatus

__all__ = ["ceiling_hit", "failed", "rated_decode_rate"]


def ceiling_hit(cell: Cell) -> bool:
    """The cell was cut off at its wall-clock ceiling (a timeout)."""
    return cell.deadline_hit


def failed(cell: Cell) -> bool:
    """The cell failed for another reason than its ceiling."""
    return cell.status is CellStatus.ERROR


def rated_decode_rate(cell: Cell) -> float | None:
    """The cell's decode rate where an analysis may use it; None for timeouts, failures and cells
    without completion tokens."""
    if cell.status is CellStatus.DEADLINE or cell.status is CellStatus.ERROR:
        return None
    return cell.decode_rate
