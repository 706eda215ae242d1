"""Backfill: eval records that already exist (JSON, JSON Lines, CSV) as cells with their real times.

The article's neighbour-cost numbers came from the eval's own records: per cell,
``usage.completion_tokens / elapsed_s``, with the cell's start reconstructed from the record
file's mtime minus its elapsed time (Appendix D). A `FieldMapping` says declaratively where
each cell field lives in a record: dotted paths (``usage.completion_tokens``), templates that
join several fields (``"{pr} {angle} run{run}"``), how status strings map to cell statuses,
and where the time comes from, in this order: start and end fields; start plus elapsed; end
minus elapsed; the file's mtime minus elapsed (only for a file holding a single record: in a
file of many, the mtime is when the last one ended). Unix times are told apart by magnitude
(s, ms, µs, ns); one that lands outside 2000-2100 is an error, not a guess, and so is a start or
end made from an elapsed time that lands there. Counts are whole numbers from 0 to 2**53.

A timeout (a true ``timeout_flag`` or a status that maps to ``deadline``) becomes a
``deadline`` cell; without tokens it stays a timeout with no rate, listed but never averaged.
Deadline and error cells carry ``error.type`` (``deadline``, else ``_OTHER``) and their spans
end with ERROR status, as live cells do.
Each cell's uid is a hash of (file, record position), so backfilling the same files again
replaces those cells instead of duplicating them. A record that does not fit is reported
with its file and line and skipped; the others still load. In JSON Lines and CSV that holds for
a line that is not UTF-8 (a multi-byte character cut short at the end of a file still being
written) or not JSON (nested past the parser's limit, say); a CSV the csv module cannot read on
keeps the rows before the line where it stopped.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..._clock import NS_PER_S
from ..._exceptions import InputError
from ..._files import MIB, read_input
from ...model import Cell, CellStatus
from ...records.cell_batch import CellBatch, Every
from ...store.schema import collector_paused
from .columns import CsvRows, DictRecords, Records, read_columns
from .conversions import (
    BUDGET_SLACK,
    MAX_ELAPSED_S,
    SECONDS_PER_UNIT,
    UNIT_HINT,
    cell_attributes,
    check_era,
    count,
    flag,
    number,
    short,
    time_ns,
)
from .inspect_log import inspect_cells
from .lm_eval import LM_EVAL_SAMPLES, is_lm_eval_sample
from .mapping import BUILTIN_MAPPINGS, FieldMapping, Layout, mapping_statuses
from .values import MISSING, FieldSpec, Scope, lookup, segments, shown, text_of, value_of

__all__ = [
    "CEILING_MULTIPLE",
    "MAX_INPUT_BYTES",
    "BackfillResult",
    "RecordError",
    "backfill_files",
    "cell_from_record",
    "file_warnings",
    "read_records",
    "record_uid",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class RecordError:
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"


def error_lines(
    errors: list[RecordError], *, per_message: int = 3, most: int = 20, listed_by: str = "--json"
) -> list[str]:
    """The errors as a person reads them: each distinct message at its first ``per_message``
    places, then a count of the rest; at most ``most`` places in all (a file of 30,000
    records with one wrong field is one problem, not 30,000 lines). ``listed_by`` names what
    lists every one, as the command that prints the lines has it."""
    counts = Counter(e.message for e in errors)
    shown: Counter[str] = Counter()
    lines: list[str] = []
    accounted = 0
    for error in errors:
        if shown[error.message] >= per_message or sum(shown.values()) >= most:
            continue
        shown[error.message] += 1
        lines.append(str(error))
        accounted += 1
        rest = counts[error.message] - per_message
        if shown[error.message] == per_message and rest > 0:
            lines.append(f"... and {rest:,} more with the same error")
            accounted += rest
    if accounted < len(errors):
        lines.append(f"... and {len(errors) - accounted:,} more errors ({listed_by} lists every one)")
    return lines


@dataclass
class BackfillResult:
    batch: CellBatch = field(default_factory=CellBatch.empty)
    """The cells, as columns (`cells` builds a `Cell` of each)."""
    errors: list[RecordError] = field(default_factory=list)
    records: int = 0
    warnings: list[str] = field(default_factory=list)
    """What loaded but reads as a mapping mistake: a field no record of a file has, elapsed times
    whose size says the unit is wrong."""

    @property
    def cells(self) -> list[Cell]:
        """The cells, a validated `Cell` each, in order."""
        return self.batch.cells()


# -- reading records -----------------------------------------------------------------------------------
def _json(text: str) -> Any:
    """`json.loads`, with nesting past the parser's recursion limit as a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def _decoded_lines(data: bytes) -> Iterator[tuple[int, str | InputError]]:
    """(line number, text) for each line, each decoded on its own: a line that is not UTF-8
    (a multi-byte character cut short at the end of a file still being written) is an
    `InputError` for that line, and the lines around it still read. A BOM opens line 1 only."""
    # Lines end as in text mode: at \n, \r\n or \r (csv needs each line's own ending kept).
    for lineno, raw in enumerate(data.removeprefix(codecs.BOM_UTF8).splitlines(keepends=True), start=1):
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield lineno, InputError(f"not UTF-8 text: byte {raw[exc.start]:#04x} at column {exc.start + 1}")


def _csv_rows(data: bytes) -> Iterator[tuple[int | None, Any]]:
    bad: dict[int, InputError] = {}
    read = [0]  # the line the reader took last: where a csv.Error is

    def lines() -> Iterator[str]:
        for lineno, text in _decoded_lines(data):
            read[0] = lineno
            if isinstance(text, InputError):
                bad[lineno] = text
                yield "\n"  # csv skips a blank row, and the line numbers stay the file's
            else:
                yield text

    reader = csv.DictReader(lines())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a field past the csv module's size limit: the rest is unreadable
            yield from _pop_bad(bad)
            yield read[0], InputError(f"not readable as CSV: {exc}")
            return
        yield from _pop_bad(bad)
        if None in row:
            yield reader.line_num, InputError(f"{len(row[None])} more fields than the header has")
        elif None in row.values():  # DictReader fills the fields a short row lacks with None
            lacking = sum(1 for v in row.values() if v is None)
            yield reader.line_num, InputError(f"{lacking} fewer fields than the header has")
        else:
            yield reader.line_num, row
    yield from _pop_bad(bad)


def _pop_bad(bad: dict[int, InputError]) -> Iterator[tuple[int | None, Any]]:
    for lineno in sorted(bad):
        yield lineno, bad.pop(lineno)


def _csv_table(data: bytes) -> tuple[list[str], list[tuple[int | None, Any]]] | None:
    """The header and what `_csv_rows` reads, each row as a list (the header's width) or the
    `InputError` it gives, when every line is UTF-8 (else None: `_csv_rows` reads it line by
    line). Each row's line is the one `csv.DictReader` gives it: the last it spans."""
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError:
        return None
    # newline="": lines end at \n, \r\n or \r, each ending kept, as `_decoded_lines` splits them.
    if '"' not in text:  # no field spans lines: each line is one row, read at C speed
        plain = _csv_lines(text)
        if plain is not None:
            return plain
    reader = csv.reader(io.StringIO(text, newline=""))
    items: list[tuple[int | None, Any]] = []
    try:
        header = next(reader)
    except StopIteration:
        return [], []
    except csv.Error as exc:
        return [], [(reader.line_num, InputError(f"not readable as CSV: {exc}"))]
    width = len(header)
    while True:
        try:
            row = next(reader)
            while not row:  # DictReader skips blank lines
                row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a field past the csv module's size limit: the rest is unreadable
            items.append((reader.line_num, InputError(f"not readable as CSV: {exc}")))
            break
        # DictReader's line: the row's last (its own, past any blank lines before it).
        items.append((reader.line_num, row if len(row) == width else _ragged(header, row)))
    return header, items


def _csv_lines(text: str) -> tuple[list[str], list[tuple[int | None, Any]]] | None:
    """`_csv_table` of a CSV text without quotes, where it has no blank line, every row is the
    header's width and the csv module reads it whole: row ``k`` (from 0) is line ``k + 2``. Else None."""
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error:
        return None
    if not rows or [] in rows:
        return None
    header = rows[0]
    if set(map(len, rows)) != {len(header)}:
        return None
    return header, list(zip(range(2, len(rows) + 1), rows[1:], strict=True))


def _ragged(header: list[str], row: list[str]) -> InputError:
    """A row longer or shorter than the header, as `_csv_rows` refuses it from `csv.DictReader`'s dict."""
    if len(row) > len(header):
        return InputError(f"{len(row) - len(header)} more fields than the header has")
    fields: dict[str, str | None] = dict(zip(header, row, strict=False))
    fields.update(dict.fromkeys(header[len(row) :]))
    lacking = sum(1 for v in fields.values() if v is None)
    return InputError(f"{lacking} fewer fields than the header has")


Read = tuple[int | None, Any, Any]
"""(line or position, record or the `InputError` it gave, the document it was found in)."""


def read_records(path: Path, data: bytes, *, root: str | tuple[str, ...] | None = None) -> Iterator[Read]:
    """(line or position, record, document) for each record of ``data``, ``path``'s bytes; a
    record that cannot be parsed (not JSON, not UTF-8, not CSV) comes as an `InputError` so the
    caller reports it and goes on. A JSON array's records, and those of the list at ``root`` (a
    mapping's records root, JSON documents only), are numbered from 1 by position; a whole JSON
    file that cannot be read, or has no list at ``root``, raises `InputError` naming it."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".csv"):
        if root is not None:
            raise InputError(
                f"{path}: the mapping's records root ({'.'.join(segments(root))!r}) applies to a JSON "
                f"document, and this is {'CSV' if suffix == '.csv' else 'JSON Lines'}"
            )
        rows = _csv_rows(data) if suffix == ".csv" else _json_lines(data)
        for position, record in rows:
            yield position, record, record
        return
    try:
        document = _json(data.removeprefix(codecs.BOM_UTF8).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text: {exc}") from exc
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); use .jsonl for JSON Lines") from exc
    if root is None:
        if isinstance(document, list):
            for position, record in enumerate(document, start=1):
                yield position, record, record
        else:
            yield None, document, document
        return
    nested = lookup(document, segments(root))
    if not isinstance(nested, list):
        found = "nothing" if nested is MISSING else f"{type(nested).__name__}"
        raise InputError(
            f"{path}: the mapping's records root {'.'.join(segments(root))!r} holds {found}, "
            "not a list of records"
        )
    for position, record in enumerate(nested, start=1):
        yield position, record, document


def _json_lines(data: bytes) -> Iterator[tuple[int | None, Any]]:
    for lineno, line in _decoded_lines(data):
        if isinstance(line, InputError):
            yield lineno, line
            continue
        if not line.strip():
            continue
        try:
            yield lineno, _json(line)
        except ValueError as exc:
            yield lineno, InputError(f"not valid JSON: {exc}")


# -- one record ------------------------------------------------------------------------------------------
def record_uid(resolved_path: Path, position: int | None) -> str:
    """16 hex digits: usable as an OTel span id, so store and OTLP paths agree on it.

    ``resolved_path`` is the file's `Path.resolve`, taken once per file by the caller.
    """
    digest = hashlib.sha256(f"{resolved_path}|{position}".encode()).hexdigest()
    uid = digest[:16]
    return uid if uid != "0" * 16 else "0" * 15 + "1"


def cell_from_record(
    record: Any,
    mapping: FieldMapping,
    *,
    uid: str,
    eval_name: str | None,
    engine: str | None = None,
    file_mtime_ns: int | None = None,
    file_records: int = 1,
    statuses: Mapping[str, CellStatus] | None = None,
    document: Any = None,
) -> Cell:
    """One record to one cell (pure). Raises ValueError saying which field does not fit.

    ``document`` is what the record was found in (a mapping's records root), for the fields the
    mapping reads from it; without one, the record itself.

    ``file_mtime_ns`` places a record without start and end fields (mtime minus elapsed) only
    when its file holds that one record (``file_records`` == 1): a file of many records was
    last written when the last of them ended, so the mtime would stack them all on one interval.
    ``statuses`` is `mapping_statuses` of ``mapping``, for a caller that builds it once for many records.
    """
    if not isinstance(record, dict):
        raise ValueError(f"a record must be an object, got {type(record).__name__}")
    scope = Scope(record, record if document is None else document)
    # Each step raises for the first field that does not fit, in the order the fields are read.
    cell_id, name, cell_engine = _cell_names(scope, mapping, eval_name=eval_name, engine=engine)
    prompt = _optional(scope, mapping.prompt_tokens, count, "prompt tokens")
    completion = _optional(scope, mapping.completion_tokens, count, "completion tokens")
    scale = SECONDS_PER_UNIT[mapping.elapsed_unit]
    start, end = _interval_ns(scope, mapping, scale, file_mtime_ns=file_mtime_ns, file_records=file_records)
    first_token, decode, queue_wait = _durations_s(scope, mapping, scale)
    _check_within_elapsed(first_token, decode, (end - start) / NS_PER_S, mapping)
    status = _status(scope, mapping, statuses)
    return Cell(
        uid=uid,
        eval_name=name,
        cell_id=cell_id,
        engine=cell_engine,
        start_unix_ns=start,
        end_unix_ns=end,
        prompt_tokens=prompt,
        completion_tokens=completion,
        status=status,
        deadline_s=_deadline_s(scope, mapping),
        workers=_optional(scope, mapping.workers, count, "workers"),
        source="backfill",
        first_token_s=first_token,
        decode_s=decode,
        attributes=_cell_attributes(scope, mapping, status, queue_wait),
    )


def _optional(
    scope: Scope, spec: FieldSpec | None, convert: Callable[[Any, str], _T], what: str
) -> _T | None:
    """An optional field converted, or None where the mapping has no path or the record no value;
    a value that does not convert raises naming the field and its path."""
    if not spec:
        return None
    raw = value_of(spec, scope)
    return None if raw is MISSING else convert(raw, f"{what} ({shown(spec)})")


def _cell_names(
    scope: Scope, mapping: FieldMapping, *, eval_name: str | None, engine: str | None
) -> tuple[str, str, str | None]:
    """The cell's id, eval and engine: the record's own where the mapping finds them, else the
    caller's eval and engine. Without an id or an eval name a cell cannot be told apart."""
    cell_id = text_of(mapping.cell_id, scope)
    if cell_id is MISSING:
        raise ValueError(f"no cell id at {shown(mapping.cell_id)!r}")
    name = eval_name
    if mapping.eval_name:
        found = text_of(mapping.eval_name, scope)
        name = str(found) if found is not MISSING else eval_name
    if not name:
        where = shown(mapping.eval_name) if mapping.eval_name else None
        raise ValueError(f"no eval name at {where!r}; give --eval NAME")
    record_engine = text_of(mapping.engine, scope) if mapping.engine else MISSING
    return str(cell_id), str(name), (str(record_engine) if record_engine is not MISSING else engine)


def _interval_ns(
    scope: Scope,
    mapping: FieldMapping,
    scale: float,
    *,
    file_mtime_ns: int | None,
    file_records: int,
) -> tuple[int, int]:
    """The cell's start and end in Unix ns, from the sources in the module docstring's order;
    a cell that cannot be placed, or that ends before it starts, raises."""
    elapsed_ns = _elapsed_ns(scope, mapping, scale)
    start = _optional(scope, mapping.start, time_ns, "start")
    end = _optional(scope, mapping.end, time_ns, "end")
    if elapsed_ns is not None:
        start, end = _completed_by_elapsed(
            start, end, elapsed_ns, mapping, file_mtime_ns=file_mtime_ns, file_records=file_records
        )
    if start is None or end is None:
        raise ValueError(
            "cannot place the cell in time: need start and end, or one of them and elapsed"
            + (
                f" (elapsed at {shown(mapping.elapsed)!r} is missing)"
                if mapping.elapsed and elapsed_ns is None
                else ""
            )
        )
    if end < start:
        raise ValueError(f"ends before it starts ({(end - start) / NS_PER_S:.3f} s)")
    return start, end


def _elapsed_ns(scope: Scope, mapping: FieldMapping, scale: float) -> int | None:
    """The record's elapsed time in ns; more than a century is a unit mistake, not a cell."""
    elapsed = _optional(scope, mapping.elapsed, number, "elapsed")
    if elapsed is None or mapping.elapsed is None:
        return None
    if elapsed * scale > MAX_ELAPSED_S:
        raise ValueError(
            f"elapsed ({shown(mapping.elapsed)}) is {elapsed:g} {mapping.elapsed_unit}, more than a "
            f"century; {UNIT_HINT}"
        )
    return round(elapsed * scale * NS_PER_S)


def _completed_by_elapsed(
    start: int | None,
    end: int | None,
    elapsed_ns: int,
    mapping: FieldMapping,
    *,
    file_mtime_ns: int | None,
    file_records: int,
) -> tuple[int | None, int | None]:
    """Start or end, whichever the record lacks, from the other and elapsed; lacking both, the
    file's mtime as the end where the mapping allows it. A made time outside 2000-2100 raises."""
    if start is not None and end is None:
        end = start + elapsed_ns
        check_era(end, "the end (start plus elapsed)", UNIT_HINT)
    elif end is not None and start is None:
        start = end - elapsed_ns
        check_era(start, "the start (end minus elapsed)", UNIT_HINT)
    elif start is None and end is None and mapping.mtime_is_end and file_mtime_ns is not None:
        start, end = _interval_from_mtime(file_mtime_ns, elapsed_ns, file_records)
    return start, end


def _interval_from_mtime(file_mtime_ns: int, elapsed_ns: int, file_records: int) -> tuple[int, int]:
    """(start, end) ending at the file's mtime, only for a file of one record: a file of many was
    last written when the last of them ended, so its mtime would stack them on one interval."""
    if file_records != 1:
        raise ValueError(
            "cannot place the cell in time: no start or end field, and the file's mtime "
            f"is used as the end only for a file holding one record (this one holds {file_records})"
        )
    check_era(file_mtime_ns, "the file's mtime")
    start = file_mtime_ns - elapsed_ns
    check_era(start, "the start (the file's mtime minus elapsed)", UNIT_HINT)
    return start, file_mtime_ns


def _durations_s(
    scope: Scope, mapping: FieldMapping, scale: float
) -> tuple[float | None, float | None, float | None]:
    """Time to first token, decode time and queue wait in seconds, each as the record has it."""
    return (
        _duration_s(scope, mapping.first_token, "time to first token", scale),
        _duration_s(scope, mapping.decode, "decode time", scale),
        _duration_s(scope, mapping.queue_wait, "queue wait", scale),
    )


def _check_within_elapsed(
    first_token: float | None, decode: float | None, elapsed_s: float, mapping: FieldMapping
) -> None:
    """First-token and decode times together past the cell's elapsed time (beyond rounding) mean
    the duration fields are in another unit than ``elapsed_unit`` says."""
    in_requests = (first_token or 0.0) + (decode or 0.0)
    if in_requests > elapsed_s * (1 + BUDGET_SLACK) + BUDGET_SLACK:
        raise ValueError(
            f"time to first token and decode time ({in_requests:g} s) are more than the cell's elapsed "
            f"time ({elapsed_s:g} s); is elapsed_unit ({mapping.elapsed_unit!r}) right for them?"
        )


def _status(scope: Scope, mapping: FieldMapping, statuses: Mapping[str, CellStatus] | None) -> CellStatus:
    """The record's status through the mapping's status strings (OK without one); a true timeout
    flag makes it a deadline whatever the status says. A string the mapping does not know raises
    rather than guessing."""
    status = CellStatus.OK
    if mapping.status:
        raw_status = value_of(mapping.status, scope)
        if raw_status is not MISSING:
            key = str(raw_status).strip().lower()
            known = statuses if statuses is not None else mapping_statuses(mapping)
            if key not in known:
                raise ValueError(
                    f"status {short(raw_status)} at {shown(mapping.status)!r} is not one this mapping knows "
                    "(add it to status_values)"
                )
            status = known[key]
    if mapping.timeout_flag:
        raw_flag = value_of(mapping.timeout_flag, scope)
        if raw_flag is not MISSING and flag(raw_flag):
            status = CellStatus.DEADLINE
    return status


def _deadline_s(scope: Scope, mapping: FieldMapping) -> float | None:
    """The cell's ceiling: a number in the mapping is every record's, a path is each record's own."""
    if isinstance(mapping.deadline_s, int | float):
        return float(mapping.deadline_s)
    return _optional(scope, mapping.deadline_s, number, "deadline")


def _cell_attributes(
    scope: Scope, mapping: FieldMapping, status: CellStatus, queue_wait: float | None
) -> dict[str, str | int | float | bool]:
    """The cell's attributes (`cell_attributes`) from the record's attribute fields."""
    mapped = ((attr, value_of(path, scope)) for attr, path in mapping.attributes.items())
    return cell_attributes(mapping.name, mapped, status, queue_wait)


def _duration_s(scope: Scope, spec: FieldSpec | None, what: str, scale: float) -> float | None:
    """A duration field (a finite number >= 0) in seconds: what the record says, never estimated."""
    value = _optional(scope, spec, number, what)
    return None if value is None else value * scale


CEILING_MULTIPLE = 10.0
"""An elapsed time past this many times the cell's own ceiling reads as a unit mistake (a
"seconds" field holding milliseconds), since a cell is cut off at its ceiling."""


_CONSEQUENCES = {
    "completion_tokens": "its cells have no decode rate",
    "prompt_tokens": "its cells have no prompt tokens",
    "engine": 'its cells have no engine; give --engine NAME, or write a fixed name as {"value": "NAME"}',
    "status": "its cells read as ok",
    "timeout_flag": "no cell reads as a timeout by it",
    "deadline_s": "its cells have no ceiling",
    "workers": "its cells have no worker count",
}
"""What a field that no record of a file has leaves its cells without (else: without that field)."""


def file_warnings(
    path: Path,
    cells: Sequence[Cell],
    mapping: FieldMapping,
    scopes: Sequence[Scope] = (),
    *,
    fallbacks: Iterable[str] = (),
) -> list[str]:
    """What one file's cells say about the mapping: each path no record of the file matches (once,
    naming it; fields in the mapping's ``optional`` and those ``fallbacks`` gave a value to are
    left alone), elapsed times far past the cells' own ceilings."""
    return _file_warnings(path, CellBatch.from_cells(cells), mapping, scopes, {}, fallbacks=fallbacks)


def _file_warnings(
    path: Path,
    cells: CellBatch,
    mapping: FieldMapping,
    scopes: Sequence[Scope],
    present: Mapping[str, bool],
    *,
    fallbacks: Iterable[str] = (),
) -> list[str]:
    """`file_warnings`, ``present`` saying for some specs whether any record has them (the rest
    are looked up in ``scopes``)."""
    if not cells:
        return []
    quiet = {*mapping.optional, *fallbacks}
    warnings = []
    for name, spec in mapping.mapped_fields():
        if name in quiet:
            continue
        found = present.get(spec) if isinstance(spec, str) and spec in present else None
        if found is None:
            found = any(text_of(spec, scope) is not MISSING for scope in scopes)
        if found:
            continue
        consequence = _CONSEQUENCES.get(name, f"its cells have no {name}")
        warnings.append(
            f"{path}: no record has {name} ({shown(spec)!r}): check the mapping's path ({consequence})"
        )
    if cells.constant("deadline_s") == Every(None):
        return warnings
    long = [
        (cell_id, elapsed, deadline)
        for cell_id, elapsed, deadline in zip(
            cells.column("cell_id"), cells.elapsed_s(), cells.column("deadline_s"), strict=True
        )
        if deadline and elapsed > CEILING_MULTIPLE * deadline
    ]
    if long:
        cell_id, elapsed, deadline = max(long, key=lambda c: c[1] / (c[2] or 1.0))
        warnings.append(
            f"{path}: {len(long)} of {len(cells)} cells ran more than {CEILING_MULTIPLE:g}x their own "
            f"ceiling (e.g. {cell_id}: {elapsed:,.0f} s against {deadline:,.0f} s); "
            f"is elapsed_unit ({mapping.elapsed_unit!r}) right?"
        )
    return warnings


MAX_INPUT_BYTES = 512 * MIB
"""The cap on one backfill input file (JSON, JSON Lines, CSV, an Inspect log): read whole, a file
takes several times its size in memory once parsed."""


def backfill_files(
    paths: Iterable[str | os.PathLike[str]],
    mapping: Layout,
    *,
    eval_name: str | None,
    engine: str | None = None,
) -> BackfillResult:
    """Every record of every file as a cell; records (and files) that do not fit become errors.

    Only a regular file under `MAX_INPUT_BYTES` is read: a FIFO, a device or a directory is
    refused by name before any byte is read."""
    result = BackfillResult()
    batches = []
    for raw_path in paths:
        path = Path(raw_path)
        try:
            data = read_input(path, what="backfill input", max_bytes=MAX_INPUT_BYTES)
            mtime_ns = path.stat().st_mtime_ns
            if isinstance(mapping, FieldMapping):
                with collector_paused():  # a file's columns and rows make no reference cycles
                    batches.append(
                        _mapped_file(
                            result, path, data, mtime_ns, mapping, eval_name=eval_name, engine=engine
                        )
                    )
            else:
                found = inspect_cells(path, data, eval_name=eval_name, engine=engine)
                result.records += found.samples
                batches.append(CellBatch.from_cells(found.cells))
                result.errors += [RecordError(str(path), line, message) for line, message in found.errors]
        except InputError as exc:
            message = str(exc).removeprefix(f"backfill input {path}: ").removeprefix(f"{path}: ")
            result.errors.append(RecordError(str(path), None, message))
        except OSError as exc:
            result.errors.append(RecordError(str(path), None, f"cannot read: {exc.strerror or exc}"))
    result.batch = CellBatch.joined([result.batch, *batches])
    return result


def _mapped_file(
    result: BackfillResult,
    path: Path,
    data: bytes,
    mtime_ns: int,
    mapping: FieldMapping,
    *,
    eval_name: str | None,
    engine: str | None,
) -> CellBatch:
    """One file's records through ``mapping``: its errors and warnings into ``result``, its cells
    returned. The records are read a field at a time (`columns`); those that read other than
    plainly there, one at a time (`cell_from_record`), for their cell or their precise error."""
    if data.startswith(b"PK\x03\x04"):
        raise InputError(
            f"{path}: a zip file (an Inspect AI .eval log?): read Inspect logs with --mapping inspect"
        )
    items, dicts, records, record_at = _file_records(path, data, mapping)
    if isinstance(records, CsvRows):  # its first row of the header's width, as csv.DictReader gives it
        first = record_at(0)[0] if len(records) else None
    else:
        first = next((record for _, record in items if not isinstance(record, InputError)), None)
    _check_layout(path, first, mapping)
    statuses = mapping_statuses(mapping)
    resolved = path.resolve()
    positions = [position for (position, _), is_dict in zip(items, dicts, strict=True) if is_dict]
    read_in_columns = read_columns(
        records,
        mapping,
        uids=record_uids(resolved, positions),
        eval_name=eval_name,
        engine=engine,
        statuses=statuses,
        file_mtime_ns=mtime_ns,
    )
    redo = set(read_in_columns.redo)

    def one_record(record: Any, document: Any, position: int | None) -> Cell | None:
        try:
            return cell_from_record(
                record,
                mapping,
                uid=record_uid(resolved, position),
                eval_name=eval_name,
                engine=engine,
                file_mtime_ns=mtime_ns,
                file_records=len(items),
                statuses=statuses,
                document=document,
            )
        except ValueError as exc:  # pydantic's ValidationError is a ValueError too
            result.errors.append(RecordError(str(path), position, str(exc).splitlines()[0]))
            return None

    result.records += len(items)
    redone: list[tuple[int, Cell]] = []  # (the cell's place among the file's cells, the cell)
    k = 0  # the next dict record's index
    placed = 0  # cells so far
    every_record_read = not redo and len(records) == len(items)
    for (position, record), is_dict in () if every_record_read else zip(items, dicts, strict=True):
        if isinstance(record, InputError):
            result.errors.append(RecordError(str(path), position, str(record)))
        elif not is_dict:
            one_record(record, None, position)  # refused: not an object
        else:
            if k in redo:
                cell = one_record(*record_at(k), position)
                if cell is not None:
                    redone.append((placed, cell))
                    placed += 1
            else:
                placed += 1
            k += 1
    cells = _with_redone(read_in_columns.batch, redone)
    fallbacks = [name for name, given in (("eval_name", eval_name), ("engine", engine)) if given]
    present = read_in_columns.present
    result.warnings += _file_warnings(path, cells, mapping, _Scopes(records), present, fallbacks=fallbacks)
    return cells


def _file_records(
    path: Path, data: bytes, mapping: FieldMapping
) -> tuple[list[tuple[int | None, Any]], list[bool], Records, Callable[[int], tuple[Any, Any]]]:
    """A file's items (each position and its record, or the `InputError` it gave), which of them
    are records to read (objects), those records for the column path, and the ``k``-th of them
    with its document for the record path. A CSV whose every line is UTF-8 is read as rows."""
    table = _csv_table(data) if path.suffix.lower() == ".csv" and mapping.records is None else None
    if table is not None:
        header, items = table
        rows = [row for _, row in items if not isinstance(row, InputError)]
        csv_rows = CsvRows(header, rows)
        return (
            items,
            [not isinstance(row, InputError) for _, row in items],
            csv_rows,
            lambda k: (csv_rows.record(k), None),
        )
    read = list(read_records(path, data, root=mapping.records))
    kept = [(record, document) for _, record, document in read if isinstance(record, dict)]
    return (
        [(position, record) for position, record, _ in read],
        [isinstance(record, dict) for _, record, _ in read],
        DictRecords([r for r, _ in kept], [d for _, d in kept]),
        kept.__getitem__,
    )


class _Scopes(Sequence[Scope]):
    """A file's records as scopes, made only if a warning's check must look through them."""

    def __init__(self, records: Records) -> None:
        self._records = records
        self._made: Sequence[Scope] | None = None

    def _scopes(self) -> Sequence[Scope]:
        if self._made is None:
            self._made = self._records.scopes()
        return self._made

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, i: Any) -> Any:
        return self._scopes()[i]

    def __iter__(self) -> Iterator[Scope]:
        return iter(self._scopes())


def _with_redone(batch: CellBatch, redone: list[tuple[int, Cell]]) -> CellBatch:
    """``batch`` with the cells read one at a time put in their places (each its index among all)."""
    if not redone:
        return batch
    joined = CellBatch.joined([batch, CellBatch.from_cells([cell for _, cell in redone])])
    places = {place for place, _ in redone}
    order: list[int] = []
    fast, slow = 0, len(batch)
    for place in range(len(joined)):
        if place in places:
            order.append(slow)
            slow += 1
        else:
            order.append(fast)
            fast += 1
    return joined.take(order)


def record_uids(resolved_path: Path, positions: Sequence[int | None]) -> list[str]:
    """`record_uid` of each position, in order."""
    prefix = f"{resolved_path}|"
    sha256 = hashlib.sha256
    uids = [sha256(f"{prefix}{position}".encode()).hexdigest()[:16] for position in positions]
    zero = "0" * 16
    return [uid if uid != zero else "0" * 15 + "1" for uid in uids] if zero in uids else uids


def _check_layout(path: Path, first: Any, mapping: FieldMapping) -> None:
    """A file a built-in mapping cannot read, said as what it is: lm-eval's logged samples (which
    hold no tokens or times), or an Inspect AI log read without a records root. ``first`` is the
    file's first record that parsed."""
    if mapping.name in BUILTIN_MAPPINGS and is_lm_eval_sample(first):
        raise InputError(f"{path}: {LM_EVAL_SAMPLES}")
    if mapping.records is None and isinstance(first, dict) and {"eval", "samples", "version"} <= first.keys():
        raise InputError(
            f"{path}: an Inspect AI log: read it with --mapping inspect (or give your mapping a "
            'records root: "records": "samples")'
        )
