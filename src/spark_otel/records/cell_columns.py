"""Cells as columns: one numpy array (or list, for text) per field an analysis reads, in place of a
`Cell` per row.

A validated `Cell` costs about 2 µs to build and a few hundred bytes to hold; at a lab's history
(a million cells) that alone is seconds and hundreds of MB before any answer. The store reads
these columns straight from SQLite (`Store.cell_columns`), and the analyses that work over
columns (`analysis.concurrency_columns`) take them whole. The values are the cells' own:
`from_cells` builds the same columns from `Cell` records (requests standing in for cells, tests),
so either way in gives the same answer.

Nullable integers are an int64 array beside a ``*_known`` mask (0 where unknown); the ceiling is
float64 with NaN where unknown; the status is a code into `STATUSES`. numpy is the ``cli``
extra's: this module is loaded only by the reads and analyses that use it, never on import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..model import Cell, CellStatus

__all__ = ["COLUMNS", "STATUSES", "CellColumns"]

STATUSES: tuple[CellStatus, ...] = tuple(CellStatus)
"""A status code's status: ``STATUSES[code]``."""
_STATUS_CODE = {status.value: code for code, status in enumerate(STATUSES)}

COLUMNS = (
    "uid",
    "eval_name",
    "cell_id",
    "engine",
    "start_unix_ns",
    "end_unix_ns",
    "prompt_tokens",
    "completion_tokens",
    "status",
    "deadline_s",
    "workers",
    "source",
)
"""The cells' fields the columns hold, in the order `from_rows` takes a row's values."""

Ints = NDArray[np.int64]
Flags = NDArray[np.bool_]


def _nullable_ints(values: Sequence[int | None]) -> tuple[Ints, Flags]:
    """Integers that may be None as values (0 where None) and a mask of the known ones. Read
    through float64 (None becomes NaN in one C pass), exact for the token counts and worker
    counts it holds (below 2**53)."""
    floats = np.array(values, dtype=np.float64)
    known = ~np.isnan(floats)
    return np.where(known, floats, 0.0).astype(np.int64), known


@dataclass(frozen=True, eq=False)
class CellColumns:
    """Cells as columns, row ``i`` of each column one cell's field."""

    uid: list[str]
    eval_name: list[str]
    cell_id: list[str]
    engine: list[str | None]
    start_unix_ns: Ints
    end_unix_ns: Ints
    prompt_tokens: Ints
    prompt_known: Flags
    completion_tokens: Ints
    completion_known: Flags
    status: NDArray[np.int8]
    """Codes into `STATUSES`."""
    deadline_s: NDArray[np.float64]
    """NaN where the cell declared no ceiling."""
    workers: Ints
    workers_known: Flags
    source: list[str]

    def __len__(self) -> int:
        return len(self.uid)

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]]) -> CellColumns:
        """Rows of the store's ``cells`` table, their values in `COLUMNS` order."""
        if not rows:
            return cls.empty()
        uid, eval_name, cell_id, engine, start, end, prompt, completion, status, ceiling, workers, source = (
            zip(*rows, strict=True)
        )
        prompt_tokens, prompt_known = _nullable_ints(prompt)
        completion_tokens, completion_known = _nullable_ints(completion)
        worker_counts, workers_known = _nullable_ints(workers)
        return cls(
            uid=list(uid),
            eval_name=list(eval_name),
            cell_id=list(cell_id),
            engine=list(engine),
            start_unix_ns=np.array(start, dtype=np.int64),
            end_unix_ns=np.array(end, dtype=np.int64),
            prompt_tokens=prompt_tokens,
            prompt_known=prompt_known,
            completion_tokens=completion_tokens,
            completion_known=completion_known,
            status=np.array([_STATUS_CODE[s] for s in status], dtype=np.int8),
            deadline_s=np.array(ceiling, dtype=np.float64),
            workers=worker_counts,
            workers_known=workers_known,
            source=list(source),
        )

    @classmethod
    def from_cells(cls, cells: Iterable[Cell]) -> CellColumns:
        """The columns of ``cells``, in their order."""
        return cls.from_rows(
            [
                (
                    c.uid,
                    c.eval_name,
                    c.cell_id,
                    c.engine,
                    c.start_unix_ns,
                    c.end_unix_ns,
                    c.prompt_tokens,
                    c.completion_tokens,
                    c.status.value,
                    c.deadline_s,
                    c.workers,
                    c.source,
                )
                for c in cells
            ]
        )

    @classmethod
    def empty(cls) -> CellColumns:
        ints, flags = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_)
        return cls(
            uid=[],
            eval_name=[],
            cell_id=[],
            engine=[],
            start_unix_ns=ints,
            end_unix_ns=ints,
            prompt_tokens=ints,
            prompt_known=flags,
            completion_tokens=ints,
            completion_known=flags,
            status=np.zeros(0, dtype=np.int8),
            deadline_s=np.zeros(0, dtype=np.float64),
            workers=ints,
            workers_known=flags,
            source=[],
        )

    def take(self, index: NDArray[np.intp] | Sequence[int]) -> CellColumns:
        """The cells at ``index`` (positions), in that order."""
        rows = np.asarray(index, dtype=np.intp)
        positions = rows.tolist()
        return CellColumns(
            uid=[self.uid[i] for i in positions],
            eval_name=[self.eval_name[i] for i in positions],
            cell_id=[self.cell_id[i] for i in positions],
            engine=[self.engine[i] for i in positions],
            start_unix_ns=self.start_unix_ns[rows],
            end_unix_ns=self.end_unix_ns[rows],
            prompt_tokens=self.prompt_tokens[rows],
            prompt_known=self.prompt_known[rows],
            completion_tokens=self.completion_tokens[rows],
            completion_known=self.completion_known[rows],
            status=self.status[rows],
            deadline_s=self.deadline_s[rows],
            workers=self.workers[rows],
            workers_known=self.workers_known[rows],
            source=[self.source[i] for i in positions],
        )

    def merged(self, other: CellColumns) -> CellColumns:
        """These cells and ``other``'s in start order, each side's ties kept in its order and
        before the other's (as a stable sort of the two lists, one after the other, puts them)."""
        if not len(other):
            return self
        joined = CellColumns(
            uid=self.uid + other.uid,
            eval_name=self.eval_name + other.eval_name,
            cell_id=self.cell_id + other.cell_id,
            engine=self.engine + other.engine,
            start_unix_ns=np.concatenate([self.start_unix_ns, other.start_unix_ns]),
            end_unix_ns=np.concatenate([self.end_unix_ns, other.end_unix_ns]),
            prompt_tokens=np.concatenate([self.prompt_tokens, other.prompt_tokens]),
            prompt_known=np.concatenate([self.prompt_known, other.prompt_known]),
            completion_tokens=np.concatenate([self.completion_tokens, other.completion_tokens]),
            completion_known=np.concatenate([self.completion_known, other.completion_known]),
            status=np.concatenate([self.status, other.status]),
            deadline_s=np.concatenate([self.deadline_s, other.deadline_s]),
            workers=np.concatenate([self.workers, other.workers]),
            workers_known=np.concatenate([self.workers_known, other.workers_known]),
            source=self.source + other.source,
        )
        return joined.take(np.argsort(joined.start_unix_ns, kind="stable"))
