"""Cells as columns of their fields' values: what a reader of many records (backfill) makes and
the store writes (`Store.write_cell_batch`), with no validated `Cell` per row.

A `Cell` costs a few µs to validate and as much again to turn into a store row or JSON; at a
million backfilled records that alone is seconds. A batch holds the same values a field at a
time: each field a list (one value per cell, in order), or `Every` (one value every cell has, as
a backfill's ``source``). The values are the cells' own, in the model's types (a `CellStatus`, an
attributes dict, which cells may share), so `cells` gives the cells a `Cell` per record would
have been, and `from_cells` the batch of given cells. No numpy: the core install's readers use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

from .._clock import NS_PER_S
from ..model import Cell

__all__ = ["FIELDS", "CellBatch", "Column", "Every"]

FIELDS: tuple[str, ...] = tuple(Cell.model_fields)
"""The cell's fields, in the model's order (a `model_dump`'s keys, before the computed ones)."""

_DEFAULTS = {name: field.get_default(call_default_factory=True) for name, field in Cell.model_fields.items()}


@dataclass(frozen=True, slots=True)
class Every:
    """One value every cell of a batch has."""

    value: Any


Column = list[Any] | Every
"""A field's values: one per cell, or `Every` cell's."""


def _same(a: Any, b: Any) -> bool:
    """Whether two constant values are the same value of the same type (1, 1.0 and True differ)."""
    return type(a) is type(b) and a == b


@dataclass(frozen=True, eq=False)
class CellBatch:
    """Cells as columns: ``columns[name]`` holds field ``name`` of every cell, in order; a field
    not in ``columns`` is its default (`Cell`'s) on every cell."""

    size: int
    columns: dict[str, Column]

    def __post_init__(self) -> None:
        for name, column in self.columns.items():
            if name not in _DEFAULTS:
                raise ValueError(f"{name!r} is not a cell field")
            if isinstance(column, list) and len(column) != self.size:
                raise ValueError(f"{name}: {len(column)} values for {self.size} cells")

    def __len__(self) -> int:
        return self.size

    def constant(self, name: str) -> Every | None:
        """``name``'s value on every cell where they all have one (by construction: a list of equal
        values is not looked through), else None."""
        column = self.columns.get(name, Every(_DEFAULTS[name]))
        return column if isinstance(column, Every) else None

    def column(self, name: str) -> list[Any]:
        """Field ``name`` of every cell, in order."""
        column = self.columns.get(name, Every(_DEFAULTS[name]))
        return [column.value] * self.size if isinstance(column, Every) else column

    def distinct(self, name: str) -> list[Any]:
        """The distinct objects (by identity: cells may share an attributes dict) field ``name``
        holds, in the order cells first hold them."""
        column = self.columns.get(name, Every(_DEFAULTS[name]))
        if isinstance(column, Every):
            return [column.value] if self.size else []
        return list({id(v): v for v in column}.values())

    def values(self, names: Sequence[str] = FIELDS) -> Iterator[tuple[Any, ...]]:
        """Each cell's ``names`` fields, a tuple per cell."""
        return zip(*(self.column(name) for name in names), strict=True) if self.size else iter(())

    def cells(self) -> list[Cell]:
        """The cells, validated as any `Cell` is."""
        validate = Cell.model_validate
        return [validate(dict(zip(FIELDS, row, strict=True))) for row in self.values()]

    def elapsed_s(self) -> list[float]:
        """Each cell's `Cell.elapsed_s`."""
        return [(end - start) / NS_PER_S for start, end in self.values(("start_unix_ns", "end_unix_ns"))]

    def decode_rates(self) -> list[float | None]:
        """Each cell's `Cell.decode_rate`: completion tokens per second of its wall clock."""
        return [
            None if not tokens or end <= start else tokens / ((end - start) / NS_PER_S)
            for start, end, tokens in self.values(("start_unix_ns", "end_unix_ns", "completion_tokens"))
        ]

    def compress(self, keep: Sequence[bool]) -> CellBatch:
        """The cells where ``keep`` is true, in order."""
        size = sum(keep)
        if size == self.size:
            return self
        return CellBatch(
            size,
            {
                name: column if isinstance(column, Every) else list(compress(column, keep))
                for name, column in self.columns.items()
            },
        )

    def take(self, order: Sequence[int]) -> CellBatch:
        """The cells at ``order``'s positions, in that order."""
        return CellBatch(
            len(order),
            {
                name: column if isinstance(column, Every) else [column[i] for i in order]
                for name, column in self.columns.items()
            },
        )

    @classmethod
    def from_cells(cls, cells: Sequence[Cell]) -> CellBatch:
        """The batch of ``cells``, in their order."""
        columns: dict[str, Column] = {name: [getattr(c, name) for c in cells] for name in FIELDS}
        return cls(len(cells), columns)

    @classmethod
    def joined(cls, batches: Iterable[CellBatch]) -> CellBatch:
        """The cells of ``batches``, one after the other."""
        parts = [b for b in batches if b.size]
        if len(parts) == 1:
            return parts[0]
        columns: dict[str, Column] = {}
        for name in {name for b in parts for name in b.columns}:
            constants = [b.constant(name) for b in parts]
            first = constants[0]
            if first is not None and all(c is not None and _same(c.value, first.value) for c in constants):
                columns[name] = first
            else:
                columns[name] = [value for b in parts for value in b.column(name)]
        return cls(sum(b.size for b in parts), columns)

    @classmethod
    def empty(cls) -> CellBatch:
        return cls(0, {})
