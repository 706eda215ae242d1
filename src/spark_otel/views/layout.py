"""Which columns of a list fit a terminal, as ``kubectl get`` decides: a list keeps one line per
item, so where every column does not fit side by side, the lowest-priority columns are left out
(the highest number first, the rightmost of a priority first), and the list says which, and that
a wide mode shows them all. Columns of priority 0 are always shown.

Widths are terminal cells: a wide (East Asian) character takes two, a combining mark none.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Fit", "display_width", "fit_columns"]


def display_width(text: str) -> int:
    """How many terminal cells ``text`` takes on one line."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


@dataclass(frozen=True, slots=True)
class Fit:
    """The columns a list shows (their indexes, in order) and those it leaves out."""

    shown: tuple[int, ...]
    hidden: tuple[int, ...]


def fit_columns(
    columns: Sequence[str], rows: Sequence[Sequence[str]], width: int, priorities: Sequence[int]
) -> Fit:
    """The columns that fit ``width`` with every row on one line (a header may wrap at its spaces;
    a table's borders and padding count three cells a column and one more), dropping by priority;
    every column when all fit, and the priority-0 ones at least, whatever the width."""
    if len(priorities) != len(columns):
        raise ValueError(f"{len(columns)} columns but {len(priorities)} priorities")
    need = [
        max(
            [
                *(display_width(word) for word in columns[i].split()),
                *(display_width(row[i]) for row in rows if i < len(row)),
            ]
        )
        for i in range(len(columns))
    ]
    shown = list(range(len(columns)))
    # The highest priority number goes first; of one priority, the rightmost column.
    for i in sorted(shown, key=lambda i: (priorities[i], i), reverse=True):
        if sum(need[j] for j in shown) + 3 * len(shown) + 1 <= width or priorities[i] == 0:
            break
        shown.remove(i)
    hidden = tuple(i for i in range(len(columns)) if i not in shown)
    return Fit(tuple(shown), hidden)
