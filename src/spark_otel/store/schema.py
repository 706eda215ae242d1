"""The store's tables, each declared once: its columns, how a record's field becomes a column
and back, and its indexes. The DDL, every INSERT and every row-to-record read are derived from
these declarations, so a field added to a record is added here and nowhere else in the store.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel

from .. import _semconv as sc
from ..model import Cell, CellStatus, LoadWindow, MetricSample, Request, ServerTiming
from ..records.cell_batch import CellBatch, Every

__all__ = [
    "CELLS",
    "CELL_BUDGET_COLUMNS",
    "DOCUMENTS",
    "GPU_ID_SQL",
    "LOAD_WINDOWS",
    "META",
    "METRIC_SAMPLES",
    "REQUESTS",
    "SERVER_TIMINGS",
    "TABLES",
    "Column",
    "Index",
    "Table",
    "cell_batch_rows",
]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _loads(text: str) -> Any:
    """JSON text as its value; the empty object and list (most rows' attributes) without the parser."""
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return json.loads(text)


class _CollectorPauses:
    """The cyclic garbage collector off while rows become records, as it was after: building
    100,000 records of plain values makes no cycles, yet sets off collections that scan every
    record made so far (a third of the read's time). Reads in several threads at once: the last
    one out restores the collector as the first one in found it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pauses = 0
        self._was_enabled = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._pauses == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._pauses += 1
        try:
            yield
        finally:
            with self._lock:
                self._pauses -= 1
                if self._pauses == 0 and self._was_enabled:
                    gc.enable()


collector_paused = _CollectorPauses()


@dataclass(frozen=True)
class Column:
    """One column: named as the record's field, with the conversions a SQLite value needs."""

    name: str
    sql_type: str
    nullable: bool = False
    primary_key: bool = False
    encode: Callable[[Any], Any] | None = None
    """Record value to SQLite value (None: stored as it is)."""
    decode: Callable[[Any], Any] | None = None
    """SQLite value to record value (None: read as it is)."""
    derived: bool = False
    """Written from the record's property of that name, for queries of the store alone (sqlite3,
    a notebook); never read back: the record derives it from its fields."""

    @property
    def ddl(self) -> str:
        if self.primary_key:
            return f"{self.name} {self.sql_type} PRIMARY KEY"
        return f"{self.name} {self.sql_type}" + ("" if self.nullable else " NOT NULL")


def _text(name: str, *, nullable: bool = False, key: bool = False) -> Column:
    return Column(name, "TEXT", nullable=nullable, primary_key=key)


def _integer(name: str, *, nullable: bool = False) -> Column:
    return Column(name, "INTEGER", nullable=nullable)


def _real(name: str, *, nullable: bool = False) -> Column:
    return Column(name, "REAL", nullable=nullable)


def _flag(name: str, *, derived: bool = False) -> Column:
    return Column(name, "INTEGER", encode=int, decode=bool, derived=derived)


def _json(name: str) -> Column:
    return Column(name, "TEXT", encode=_dumps, decode=_loads)


def _enum(name: str) -> Column:
    return Column(name, "TEXT", encode=lambda value: value.value)


@dataclass(frozen=True)
class Index:
    """One index: its columns or expressions, and for a partial index the rows it holds."""

    name: str
    on: tuple[str, ...]
    where: str | None = None

    def statement(self, table: str) -> str:
        where = "" if self.where is None else f" WHERE {self.where}"
        return f"CREATE INDEX IF NOT EXISTS {self.name} ON {table} ({', '.join(self.on)}){where}"


GPU_ID_SQL = f"json_extract(attributes, '$.\"{sc.GPU_ID}\"')"
"""A sample's GPU id in SQL, written as the GPU readings' indexes are (SQLite uses an expression
index only for a query that spells the expression alike)."""


def gpu_readings_index(metric: str) -> Index:
    """The readings of one GPU metric by GPU and time: each GPU's nearest reading to an instant,
    and the GPUs read, in a few index seeks (`store.energy_inputs`)."""
    name = f"metric_samples_{metric.rsplit('.', 1)[-1]}_by_gpu"
    return Index(name, (GPU_ID_SQL, "unix_ns"), f"name = '{metric}'")


@dataclass(frozen=True)
class Table:
    """One table: its columns in order, its indexes, and the record type its rows are."""

    name: str
    columns: tuple[Column, ...]
    indexes: tuple[Index, ...] = ()
    record_type: type[BaseModel] | None = None

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def create_sql(self) -> str:
        """The CREATE TABLE statement as SQLite keeps it in ``sqlite_master`` for a table created
        from this declaration: a table whose kept text is this one has exactly these columns."""
        return f"CREATE TABLE {self.name} ({', '.join(c.ddl for c in self.columns)})"

    @cached_property
    def statements(self) -> tuple[str, ...]:
        """The table's DDL as single statements (creating what is missing), to run one by one
        inside a transaction."""
        statements = [self.create_sql.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)]
        statements += [index.statement(self.name) for index in self.indexes]
        return tuple(statements)

    @cached_property
    def insert_sql(self) -> str:
        """Keyed rows replace the row with the same key, so re-ingesting never duplicates."""
        verb = "INSERT OR REPLACE" if any(c.primary_key for c in self.columns) else "INSERT"
        names = ", ".join(self.column_names)
        return f"{verb} INTO {self.name} ({names}) VALUES ({', '.join('?' * len(self.columns))})"

    @cached_property
    def _encoders(self) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
        return tuple((c.name, c.encode) for c in self.columns)

    @cached_property
    def read_names(self) -> tuple[str, ...]:
        """The columns a record is read from, in the order `fields` takes a row's values: all
        but the derived ones, which the record derives."""
        return tuple(c.name for c in self.columns if not c.derived)

    @cached_property
    def select_sql(self) -> str:
        """``SELECT`` of the `read_names` from this table, for a read to add its clauses to."""
        return f"SELECT {', '.join(self.read_names)} FROM {self.name}"

    @cached_property
    def _decoders(self) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
        """The read columns that need decoding, with their decoders."""
        return tuple((c.name, c.decode) for c in self.columns if not c.derived and c.decode is not None)

    def row(self, record: Any) -> tuple[Any, ...]:
        """A record's values in column order, encoded for SQLite."""
        values = []
        for name, encode in self._encoders:
            value = getattr(record, name)
            values.append(value if encode is None or value is None else encode(value))
        return tuple(values)

    def fields(self, row: Sequence[Any]) -> dict[str, Any]:
        """A row (its values in `read_names` order) as the record's fields, decoded."""
        values = dict(zip(self.read_names, row, strict=True))
        for name, decode in self._decoders:
            value = values[name]
            if value is not None:
                values[name] = decode(value)
        return values

    def records(self, rows: Iterable[Sequence[Any]]) -> list[Any]:
        """Rows (their values in `read_names` order) as the table's record type (a `Cell`, a
        `Request`, ...), validated as any record is; ``rows`` may be a cursor, read as they are built."""
        assert self.record_type is not None, f"table {self.name} holds no record type"
        validate, fields = self.record_type.model_validate, self.fields
        with collector_paused():
            return [validate(fields(row)) for row in rows]


CELL_BUDGET_COLUMNS = tuple(
    _real(name, nullable=True) for name in ("first_token_s", "decode_s", "unsplit_s", "other_s")
)
"""The cell's time budget (schema 2), which migration step 1 adds to a schema-1 store."""

META = Table("meta", (_text("key", key=True), _text("value")))

CELLS = Table(
    "cells",
    (
        _text("uid", key=True),
        _text("eval_name"),
        _text("cell_id"),
        _text("engine", nullable=True),
        _integer("start_unix_ns"),
        _integer("end_unix_ns"),
        _integer("prompt_tokens", nullable=True),
        _integer("completion_tokens", nullable=True),
        _enum("status"),
        _real("deadline_s", nullable=True),
        _flag("deadline_hit", derived=True),
        _integer("workers", nullable=True),
        _integer("salvaged_findings"),
        _flag("degraded", derived=True),
        _text("source"),
        _text("trace_id", nullable=True),
        _json("attributes"),
        # Schema 2: the time budget, last, where ALTER TABLE ADD COLUMN puts them in a migrated store.
        *CELL_BUDGET_COLUMNS,
    ),
    indexes=(
        Index("cells_eval_start", ("eval_name", "start_unix_ns")),
        Index("cells_start", ("start_unix_ns",)),
        # Schema 3: the cells a cell's energy is read beside are the few that end after it starts.
        Index("cells_end", ("end_unix_ns",)),
    ),
    record_type=Cell,
)

REQUESTS = Table(
    "requests",
    (
        _text("uid", key=True),
        _text("trace_id", nullable=True),
        _text("cell_uid", nullable=True),
        _text("eval_name", nullable=True),
        _text("engine", nullable=True),
        _text("operation"),
        _text("request_model", nullable=True),
        _text("response_model", nullable=True),
        _text("server_address", nullable=True),
        _integer("server_port", nullable=True),
        _integer("start_unix_ns"),
        _integer("end_unix_ns"),
        _flag("streaming"),
        _real("time_to_first_chunk_s", nullable=True),
        _integer("input_tokens", nullable=True),
        _integer("output_tokens", nullable=True),
        _json("finish_reasons"),
        _text("error_type", nullable=True),
    ),
    indexes=(Index("requests_start", ("start_unix_ns",)), Index("requests_cell", ("cell_uid",))),
    record_type=Request,
)

LOAD_WINDOWS = Table(
    "load_windows",
    (
        _text("uid", key=True),
        _text("name"),
        _text("kind"),
        _text("engine", nullable=True),
        _integer("start_unix_ns"),
        _integer("end_unix_ns"),
        _integer("streams", nullable=True),
        _json("attributes"),
    ),
    indexes=(Index("load_windows_start", ("start_unix_ns",)),),
    record_type=LoadWindow,
)

METRIC_SAMPLES = Table(
    "metric_samples",
    (_text("name"), _integer("unix_ns"), _real("value"), _text("unit"), _json("attributes"), _text("source")),
    indexes=(
        Index("metric_samples_name_time", ("name", "unix_ns")),
        # Schema 3, for the cells' energy.
        gpu_readings_index(sc.GPU_ENERGY),
        gpu_readings_index(sc.GPU_POWER),
    ),
    record_type=MetricSample,
)

SERVER_TIMINGS = Table(
    "server_timings",
    (
        _text("request_uid", key=True),
        _text("trace_id"),
        _text("span_uid"),
        _text("engine", nullable=True),
        _integer("arrival_unix_ns"),
        _real("queue_s", nullable=True),
        _real("prefill_s", nullable=True),
        _real("decode_s", nullable=True),
        _real("time_to_first_token_s", nullable=True),
        _real("e2e_s", nullable=True),
        _integer("prompt_tokens", nullable=True),
        _integer("completion_tokens", nullable=True),
    ),
    indexes=(Index("server_timings_arrival", ("arrival_unix_ns",)),),
    record_type=ServerTiming,
)
"""Schema 2: the engine's split of each request, joined to `REQUESTS` by the request's uid."""

DOCUMENTS = Table(
    "documents",
    (_text("uid", key=True), _text("kind"), _text("name"), _integer("created_unix_ns"), _json("body")),
    indexes=(Index("documents_kind", ("kind", "created_unix_ns")),),
)


def cell_batch_rows(batch: CellBatch) -> tuple[str, Iterator[tuple[Any, ...]]]:
    """The INSERT and its rows that write ``batch``'s cells as `CELLS.row` of each would: each
    column encoded a column at a time (a status's value, the attributes' JSON text once per
    distinct dict), the derived flags from the status. A column every cell has the same None,
    whole number or text in is written in the statement itself, not bound on each row (binding
    is most of the cost of a row: about 0.2 µs a value)."""
    values, bound = [], []
    for name in CELLS.column_names:
        encoded = _batch_column(batch, name)
        literal = _literal(encoded)
        if literal is None:
            values.append("?")
            bound.append(encoded)
        else:
            values.append(literal)
    verb, _, _ = CELLS.insert_sql.partition(" VALUES ")
    sql = f"{verb} VALUES ({', '.join(values)})"
    n = len(batch)
    return sql, zip(*(c if isinstance(c, list) else [c.value] * n for c in bound), strict=True)


def _batch_column(batch: CellBatch, name: str) -> list[Any] | Every:
    """Column ``name`` of ``batch``'s rows, encoded as `CELLS` encodes it."""
    if name == "deadline_hit":
        return _mapped(batch, "status", lambda status: int(status is CellStatus.DEADLINE))
    if name == "degraded":
        salvaged = batch.constant("salvaged_findings")
        if salvaged is not None and not salvaged.value:
            return Every(0)
        return (
            Every(0)
            if not batch.size
            else [
                int(status is CellStatus.DEADLINE and found > 0)
                for status, found in batch.values(("status", "salvaged_findings"))
            ]
        )
    if name == "status":
        return _mapped(batch, "status", lambda status: status.value)
    if name == "attributes":
        return _mapped(batch, "attributes", _dumps, by_identity=True)
    constant = batch.constant(name)
    return constant if constant is not None else batch.column(name)


def _mapped(
    batch: CellBatch, name: str, encode: Callable[[Any], Any], *, by_identity: bool = False
) -> list[Any] | Every:
    """``encode`` of each value of ``name``, once per distinct value (per distinct object with
    ``by_identity``: dicts)."""
    constant = batch.constant(name)
    if constant is not None:
        return Every(encode(constant.value))
    values = batch.column(name)
    if by_identity:
        table = {id(v): v for v in values}
        encoded = {key: encode(v) for key, v in table.items()}
        return [encoded[id(v)] for v in values]
    table = {v: encode(v) for v in set(values)}
    return [table[v] for v in values]


def _literal(column: list[Any] | Every) -> str | None:
    """SQL for ``column`` where every row has the same None, whole number or text; else None."""
    if isinstance(column, list):
        if not column or column.count(None) != len(column):
            return None
        return "NULL"
    value = column.value
    if value is None:
        return "NULL"
    if type(value) is int and -(2**63) <= value < 2**63:
        return str(value)
    if type(value) is str and "\x00" not in value:
        return "'" + value.replace("'", "''") + "'"
    return None


TABLES = (META, CELLS, REQUESTS, LOAD_WINDOWS, METRIC_SAMPLES, SERVER_TIMINGS, DOCUMENTS)
