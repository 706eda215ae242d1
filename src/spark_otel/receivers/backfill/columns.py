"""A file's records as cells a field at a time: each mapped field read from every record at once
and converted as a column, by the rules of `conversions`, into a `CellBatch` with no `Cell` per
record.

Read one at a time (`records.cell_from_record`), a record costs about 80 µs in the mapping's
interpretation: a scope, each field's path looked up through the general `value_of`, a label for
the message each conversion might raise, a validated `Cell`. Here a plain path is one lookup per
record in a list comprehension, and a conversion is the same expression the per-record rule
evaluates, over the column. A record where anything is other than it plainly reads (a value that
does not convert, a time outside 2000-2100, a status the mapping does not know, a cell placed by the
file's mtime) is not decided here: its index is returned in ``redo`` and the caller reads it
through `cell_from_record`, which makes its cell or raises its precise message. So every cell here
is the cell that path would have made, and every refusal is its refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import add
from typing import Any, Protocol

from ..._clock import NS_PER_S
from ..._validate import EARLIEST_NS, LATEST_NS, MAX_COUNT
from ...model import CellStatus
from ...records.cell_batch import CellBatch, Column, Every
from .conversions import (
    BUDGET_SLACK,
    FLAG_WORDS,
    MAX_ELAPSED_S,
    SECONDS_PER_UNIT,
    cell_attributes,
    iso_ns,
    number,
    unix_ns,
)
from .mapping import FieldMapping
from .values import MISSING, FieldSpec, Scope, lookup, segments, text_of, value_of

__all__ = ["ColumnRead", "CsvRows", "DictRecords", "Records", "read_columns"]

_BAD: Any = object()
"""A value the column path leaves to the record path (`cell_from_record`)."""
_INF = float("inf")


class Records(Protocol):
    """A file's records (each a JSON object, or a CSV row read as one), as the column path reads them."""

    text_only: bool
    """Every value is text (a CSV's)."""

    def __len__(self) -> int: ...

    def key(self, name: str) -> Sequence[Any] | None:
        """Every record's value at the top-level key ``name`` (None where a record has none);
        None where no record can have one (a CSV without that column)."""

    def scopes(self) -> Sequence[Scope]:
        """Every record as the general path (`value_of`, `text_of`) reads it."""


@dataclass(frozen=True)
class ColumnRead:
    batch: CellBatch
    """The cells of the records not in ``redo``, in the records' order."""
    redo: list[int]
    """The records (their indices) to read one at a time, in order."""
    present: dict[str, bool]
    """For each field the mapping reads by a plain path: whether any record has it."""


def read_columns(
    records: Records,
    mapping: FieldMapping,
    *,
    uids: list[str],
    eval_name: str | None,
    engine: str | None,
    statuses: Mapping[str, CellStatus],
    file_mtime_ns: int | None,
) -> ColumnRead:
    """``records`` (each a dict) as cells, by ``mapping``; ``uids`` are theirs, in order."""
    reader = _Reader(records)
    n = len(records)
    cell_id = reader.text(mapping.cell_id)
    names: dict[str, Column] = {"uid": uids, "cell_id": cell_id, "source": Every("backfill")}
    if mapping.eval_name:
        found = reader.text(mapping.eval_name)
        names["eval_name"] = [eval_name if v is MISSING else v for v in found]
    else:
        names["eval_name"] = Every(eval_name)
    if mapping.engine:
        found = reader.text(mapping.engine)
        names["engine"] = [engine if v is MISSING else v for v in found]
    else:
        names["engine"] = Every(engine)
    scale = SECONDS_PER_UNIT[mapping.elapsed_unit]
    start, end = _interval(reader, mapping, scale, file_mtime_ns)
    first_token = reader.durations(mapping.first_token, scale)
    decode = reader.durations(mapping.decode, scale)
    queue_wait = reader.durations(mapping.queue_wait, scale)
    status = _statuses(reader, mapping, statuses)
    columns: dict[str, Column] = {
        **names,
        "start_unix_ns": start,
        "end_unix_ns": end,
        "prompt_tokens": reader.counts(mapping.prompt_tokens),
        "completion_tokens": reader.counts(mapping.completion_tokens),
        "status": status,
        "deadline_s": _deadline(reader, mapping),
        "workers": reader.counts(mapping.workers),
        "first_token_s": first_token,
        "decode_s": decode,
    }
    bad = _bad_rows(columns, n) | reader.failed
    if not isinstance(names["eval_name"], Every) or not names["eval_name"].value:
        bad |= {i for i, name in enumerate(reader.column(names["eval_name"])) if not name}
    if cell_id:
        bad |= {i for i, v in enumerate(cell_id) if v is MISSING}
    if not (isinstance(first_token, Every) and isinstance(decode, Every)):
        bad |= _past_elapsed(start, end, reader.column(first_token), reader.column(decode), bad)
    columns["attributes"] = _attributes(reader, mapping, status, queue_wait)
    keep = [True] * n
    for i in bad:
        keep[i] = False
    batch = CellBatch(n, columns).compress(keep) if bad else CellBatch(n, columns)
    return ColumnRead(batch, sorted(bad), reader.present)


class _Reader:
    """Columns of ``records`` by spec, each path read once."""

    def __init__(self, records: Records) -> None:
        self.records = records
        self.n = len(records)
        self.present: dict[str, bool] = {}
        self.failed: set[int] = set()
        """Records where a general path raised (a sum over a value that is not a number)."""
        self._scopes: Sequence[Scope] | None = None

    def scopes(self) -> Sequence[Scope]:
        if self._scopes is None:
            self._scopes = self.records.scopes()
        return self._scopes

    def column(self, column: Column) -> list[Any]:
        return [column.value] * self.n if isinstance(column, Every) else column

    def raw(self, spec: FieldSpec) -> list[Any]:
        """`value_of` ``spec`` in every record (`MISSING` where it finds nothing)."""
        if isinstance(spec, str):
            parts = segments(spec)
            if len(parts) == 1:
                values = self.records.key(parts[0])
                if values is None:
                    found = [MISSING] * self.n
                elif self.records.text_only and "" not in map(str.strip, values):
                    found = list(values)  # CSV text, none blank: as `lookup` gives it
                else:
                    found = [
                        MISSING if v is None or (v.__class__ is str and not v.strip()) else v for v in values
                    ]
            else:
                found = [lookup(s.record, parts) for s in self.scopes()]
            self.present[spec] = any(v is not MISSING for v in found)
            return found
        return self._general(value_of, spec)

    def absent(self, spec: FieldSpec) -> bool:
        """Whether no record has ``spec`` (known once `raw` read it as a plain path)."""
        return isinstance(spec, str) and not self.present.get(spec, True)

    def _general(self, read: Callable[[FieldSpec, Scope], Any], spec: FieldSpec) -> list[Any]:
        """``read(spec, scope)`` of every record; `_BAD` (and the record in `failed`) where it raises."""
        found = []
        for i, scope in enumerate(self.scopes()):
            try:
                found.append(read(spec, scope))
            except ValueError:
                found.append(_BAD)
                self.failed.add(i)
        return found

    def text(self, spec: FieldSpec) -> list[Any]:
        """`text_of` ``spec`` in every record."""
        if isinstance(spec, str) and "{" not in spec and "||" not in spec:
            raw = self.raw(spec)
            if self.records.text_only:
                return raw
            return [v if v is MISSING or v.__class__ is str else str(v) for v in raw]
        return self._general(text_of, spec)

    def numbers(self, spec: FieldSpec | None) -> Column:
        """`conversions.number` of each value (None where missing, `_BAD` where it raises)."""
        if not spec:
            return Every(None)
        raw = self.raw(spec)
        if self.absent(spec):
            return Every(None)
        try:  # text, as every CSV value is: the rule's own expression, a column at a time
            return [
                None
                if v is MISSING
                else (x if (x := float(v.replace(",", "").strip())) >= 0 and x != _INF else _BAD)
                for v in raw
            ]
        except (AttributeError, ValueError):
            return [None if v is MISSING else _number_or_bad(v) for v in raw]

    def counts(self, spec: FieldSpec | None) -> Column:
        """`conversions.count` of each value."""
        found = self.numbers(spec)
        if isinstance(found, Every):
            return found
        return [
            x if x is None or x is _BAD else (int(x) if x < MAX_COUNT and x.is_integer() else _BAD)
            for x in found
        ]

    def durations(self, spec: FieldSpec | None, scale: float) -> Column:
        """A duration field in seconds."""
        found = self.numbers(spec)
        if isinstance(found, Every):
            return found
        return [x if x is None or x is _BAD else x * scale for x in found]

    def times(self, spec: FieldSpec | None) -> Column:
        """`conversions.time_ns` of each value."""
        if not spec:
            return Every(None)
        raw = self.raw(spec)
        if self.absent(spec):
            return Every(None)
        return [None if v is MISSING else _time_or_bad(v) for v in raw]


def _number_or_bad(value: Any) -> Any:
    try:
        return number(value, "")
    except ValueError:
        return _BAD


def _time_or_bad(value: Any) -> Any:
    """`conversions.time_ns`, `_BAD` where it raises."""
    try:
        if value.__class__ is str:
            text = value.strip()
            if ":" in text:  # never a number: ISO 8601 without float's try first
                ns = iso_ns(text)
            else:
                try:
                    found = float(text)
                except ValueError:
                    ns = iso_ns(text)
                else:
                    ns = unix_ns(found) if found >= 0 and found != _INF else _BAD
        else:
            ns = unix_ns(number(value, ""))
    except ValueError:
        return _BAD
    return ns if ns is not _BAD and EARLIEST_NS <= ns < LATEST_NS else _BAD


def _interval(
    reader: _Reader, mapping: FieldMapping, scale: float, file_mtime_ns: int | None
) -> tuple[list[Any], list[Any]]:
    """Each record's start and end (records.py's `_interval_ns`); `_BAD` in both where that raises,
    or where the cell would be placed by the file's mtime (left to the record path)."""
    elapsed = reader.numbers(mapping.elapsed)
    if isinstance(elapsed, list):
        elapsed = [
            e
            if e is None or e is _BAD
            else (_BAD if e * scale > MAX_ELAPSED_S else round(e * scale * NS_PER_S))
            for e in elapsed
        ]
    by_mtime = mapping.mtime_is_end and file_mtime_ns is not None
    start, end = reader.times(mapping.start), reader.times(mapping.end)
    plain = _start_plus_elapsed(start, end, elapsed)
    if plain is not None:
        return plain
    starts, ends = [], []
    for placed in zip(reader.column(start), reader.column(end), reader.column(elapsed), strict=True):
        first, last = _placed(*placed, by_mtime=by_mtime)
        starts.append(first)
        ends.append(last)
    return starts, ends


def _start_plus_elapsed(start: Column, end: Column, elapsed: Column) -> tuple[list[Any], list[Any]] | None:
    """The common case at C speed: every record has a start and an elapsed time and none an end,
    and every end made lands in 2000-2100 (each start was checked as it was read). None otherwise."""
    if not (isinstance(start, list) and isinstance(elapsed, list) and end == Every(None)) or not start:
        return None
    if None in start or _BAD in start or None in elapsed or _BAD in elapsed:
        return None
    ends = list(map(add, start, elapsed))
    if min(ends) < EARLIEST_NS or max(ends) >= LATEST_NS:
        return None
    return start, ends


def _placed(start: Any, end: Any, took: Any, *, by_mtime: bool) -> tuple[Any, Any]:
    """One record's (start, end) from its start, end and elapsed ns, or `_BAD` twice."""
    if start is _BAD or end is _BAD or took is _BAD:
        return _BAD, _BAD
    if took is not None:
        if end is None and start is not None:
            end = start + took
            if not EARLIEST_NS <= end < LATEST_NS:
                return _BAD, _BAD
        elif start is None and end is not None:
            start = end - took
            if not EARLIEST_NS <= start < LATEST_NS:
                return _BAD, _BAD
        elif start is None and by_mtime:
            return _BAD, _BAD  # placed by the file's mtime, only for a file of one record
    if start is None or end is None or end < start:
        return _BAD, _BAD
    return start, end


def _past_elapsed(
    start: list[Any], end: list[Any], first_token: list[Any], decode: list[Any], bad: set[int]
) -> set[int]:
    """The records whose first-token and decode times pass their elapsed time (`_check_within_elapsed`)."""
    return {
        i
        for i, (s, e, f, d) in enumerate(zip(start, end, first_token, decode, strict=True))
        if i not in bad
        and f is not _BAD
        and d is not _BAD
        and (f or 0.0) + (d or 0.0) > (e - s) / NS_PER_S * (1 + BUDGET_SLACK) + BUDGET_SLACK
    }


def _statuses(reader: _Reader, mapping: FieldMapping, statuses: Mapping[str, CellStatus]) -> Column:
    """Each record's status (records.py's `_status`): its status string through ``statuses``, a
    true timeout flag a deadline."""
    if not mapping.status and not mapping.timeout_flag:
        return Every(CellStatus.OK)
    found: list[Any] = [CellStatus.OK] * reader.n
    if mapping.status:
        found = _by_text(reader.raw(mapping.status), lambda v: statuses.get(str(v).strip().lower(), _BAD))
        found = [CellStatus.OK if s is MISSING else s for s in found]
    if mapping.timeout_flag:
        flags = _by_text(reader.raw(mapping.timeout_flag), _flag_of)
        found = [
            CellStatus.DEADLINE if f is True and s is not _BAD else s
            for s, f in zip(found, flags, strict=True)
        ]
    return found


def _flag_of(value: Any) -> bool:
    if value is MISSING:
        return False
    if isinstance(value, str):
        return value.strip().lower() in FLAG_WORDS
    return bool(value)


def _by_text(values: list[Any], convert: Callable[[Any], Any]) -> list[Any]:
    """``convert`` of each value, once per distinct text (`MISSING` stays), each other value on its own."""
    if all(v.__class__ is str or v is MISSING for v in values):
        table = {v: convert(v) for v in set(values) if v is not MISSING}
        table[MISSING] = MISSING
        return [table[v] for v in values]
    return [MISSING if v is MISSING else convert(v) for v in values]


def _deadline(reader: _Reader, mapping: FieldMapping) -> Column:
    if isinstance(mapping.deadline_s, int | float):
        return Every(float(mapping.deadline_s))
    return reader.numbers(mapping.deadline_s)


def _attributes(reader: _Reader, mapping: FieldMapping, status: Column, queue_wait: Column) -> Column:
    """Each record's attributes (`conversions.cell_attributes`); records alike share one dict."""
    if not mapping.attributes and isinstance(queue_wait, Every):
        if isinstance(status, Every):
            return Every(cell_attributes(mapping.name, (), status.value, None))
        by_status = {s: cell_attributes(mapping.name, (), s, None) for s in CellStatus}
        return [by_status.get(s) for s in status]
    mapped = [[(attr, value) for value in reader.raw(spec)] for attr, spec in mapping.attributes.items()]
    rows = zip(*mapped, strict=True) if mapped else iter([()] * reader.n)
    return [
        cell_attributes(mapping.name, row, s, None if w is _BAD else w)
        for row, s, w in zip(rows, reader.column(status), reader.column(queue_wait), strict=True)
    ]


def _bad_rows(columns: dict[str, Column], n: int) -> set[int]:
    """The records where any column holds `_BAD`."""
    bad: set[int] = set()
    for column in columns.values():
        if isinstance(column, list) and _BAD in column:  # `in` compares at C speed; nothing equals `_BAD`
            bad.update(i for i, v in enumerate(column) if v is _BAD)
    return bad


class DictRecords:
    """JSON records (dicts), each with the document it was found in (None: the record itself)."""

    text_only = False

    def __init__(self, records: Sequence[dict[str, Any]], documents: Sequence[Any]) -> None:
        self.records = records
        self.documents = documents

    def __len__(self) -> int:
        return len(self.records)

    def key(self, name: str) -> list[Any]:
        return [r.get(name) for r in self.records]

    def scopes(self) -> list[Scope]:
        return [Scope(r, r if d is None else d) for r, d in zip(self.records, self.documents, strict=True)]


class CsvRows:
    """CSV rows of the header's width, each read as `csv.DictReader` reads it (a later column of
    a name the header repeats is that name's value)."""

    text_only = True

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.header = header
        self.rows = rows
        self._index = {name: i for i, name in enumerate(header)}
        self._columns: list[tuple[str, ...]] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def key(self, name: str) -> Sequence[Any] | None:
        i = self._index.get(name)
        if i is None:
            return None
        if self._columns is None:
            self._columns = list(zip(*self.rows, strict=True))
        return self._columns[i] if self._columns else []

    def record(self, i: int) -> dict[str, str]:
        return dict(zip(self.header, self.rows[i], strict=True))

    def scopes(self) -> list[Scope]:
        return [Scope(d, d) for d in (dict(zip(self.header, row, strict=True)) for row in self.rows)]
