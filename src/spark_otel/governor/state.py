"""Admission state shared by every runner process on the box: one SQLite file, no daemon.

Three tables: ``slots`` (cells admitted and running), ``waiting`` (cells queued, in ticket
order: FIFO), ``present`` (when each eval's last cell on an engine ended, for the rules that
hold while an eval runs). Each row carries its process's pid, host and a lease; a live process
renews its leases about every second (`Lease`), and every transaction first drops the rows of
processes that are gone: a pid on this host that no longer exists at once, any other row when
its lease lapses (a few seconds). A runner killed with SIGKILL so frees its slots by the next
admission anywhere on the box.

A fourth, ``lapses``, keeps each lease that lapsed while its cell ran (the process was stopped
or starved past it): the runner notices at its next transaction, records it, and puts its slot
back if another runner's transaction had dropped it, so the lane counts the cell until it ends.
A file that disappears or is replaced under a runner (another inode at the path) is warned once;
the runner moves to the file now at the path and registers its running cells there.

Each slot's row also carries the deadline-slack law's verdict its cell was admitted on (adaptive
governing: `AdmittedOn`), written in the transaction that admits it, and its cell's live
progress (elapsed, tokens so far, live decode rate: `spark_otel.live_progress`), which the
runner publishes with every lease renewal; both go with the slot, and a reader treats progress
older than the lease as none.

`read_lanes` is the reader (`spark-otel lanes`): it opens the file read-only and changes
nothing, not even the rows of processes that are gone (it leaves them out instead). Both refuse,
by name, a file that is not a governor state file (another program's SQLite file, a store, a
directory, a corrupt file) instead of adding their tables to it.

Every decision is one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock, which works across
processes on a local filesystem), so two runners never take the same slot. Times are real Unix
nanoseconds (`_clock.real_wall_ns`): the state is shared by processes whose model clocks may
differ.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import socket
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import _clock
from .. import _semconv as sc
from .._clock import NS_PER_S
from .._exceptions import InputError
from .._guard import warn_once
from .._sqlite import LOCK_NOTICE_MS, busy, use_wal
from ..live_progress import WINDOW_S, LiveProgress
from ..model import AttributeValue
from ..records.rules_file import RulesFile
from .decision import InFlight, admitted_in_order, holding_rule
from .slack import Protected, SlackVerdict

__all__ = [
    "LAPSES_SHOWN_S",
    "LEASE_S",
    "AdmittedOn",
    "Decision",
    "LaneView",
    "Lapse",
    "Lease",
    "Released",
    "SharedState",
    "default_state_path",
    "read_lanes",
]

_logger = logging.getLogger(__name__)

LEASE_S = 4.0
"""A row outlives its process by at most this long where the process cannot be asked directly."""
_RENEW_S = 1.0
_BUSY_TIMEOUT_MS = 2_000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS slots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, admitted_ns INTEGER NOT NULL, waited_s REAL NOT NULL, ceiling_bound INTEGER,
    live_ns INTEGER, live_elapsed_s REAL, live_tokens INTEGER, live_rate REAL
);
CREATE TABLE IF NOT EXISTS waiting (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, since_ns INTEGER NOT NULL, rule TEXT, ceiling_bound INTEGER
);
CREATE TABLE IF NOT EXISTS present (
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    last_end_ns INTEGER NOT NULL, ceiling_bound INTEGER, PRIMARY KEY (engine, eval_name)
);
CREATE TABLE IF NOT EXISTS lapses (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, slot INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_id TEXT,
    noticed_ns INTEGER NOT NULL, lapsed_s REAL NOT NULL, taken INTEGER NOT NULL
);
"""
_COLUMNS = {
    "slots": {"id", "host", "pid", "lease_until_ns", "engine", "eval_name", "cell_class", "has_deadline"},
    "waiting": {"ticket", "host", "pid", "lease_until_ns", "engine", "eval_name", "since_ns", "rule"},
    "present": {"engine", "eval_name", "cell_class", "has_deadline", "last_end_ns"},
}
"""What a governor state file holds (the columns a reader uses); ``lapses`` is optional (a file
written before it existed gets it from its next writer)."""
_OWN_TABLES = {*_COLUMNS, "lapses", "sqlite_sequence"}
_ADDED = (
    ("slots", "ceiling_bound", "INTEGER"),
    ("waiting", "ceiling_bound", "INTEGER"),
    ("present", "ceiling_bound", "INTEGER"),
    ("slots", "live_ns", "INTEGER"),
    ("slots", "live_elapsed_s", "REAL"),
    ("slots", "live_tokens", "INTEGER"),
    ("slots", "live_rate", "REAL"),
    ("slots", "deadline_s", "REAL"),
    ("slots", "max_tokens", "INTEGER"),
    ("present", "deadline_s", "REAL"),
    ("present", "done_n", "INTEGER"),
    ("present", "done_tokens_max", "INTEGER"),
    ("present", "last_rate", "REAL"),
    ("present", "done_elapsed_max", "REAL"),
    ("present", "best_rate", "REAL"),
    ("present", "max_tokens", "INTEGER"),
    ("slots", "slowdown_budget", "REAL"),
    ("slots", "adaptive_reason", "TEXT"),
    ("slots", "adaptive_protected", "TEXT"),
    ("slots", "adaptive_margin", "REAL"),
    ("slots", "adaptive_rate", "REAL"),
    ("slots", "adaptive_finish_s", "REAL"),
)
"""Columns added since the first state files, oldest first (the state file's versions): a writer
adds them to an older file (NULL in the rows already there, which `_cell` reads as version 1's
meaning, and a reader as no live progress published); a reader does without. Columns, not
tables: a runner of an older spark-otel on the same box still takes the file for a state file
(it refuses unknown tables by name) and keeps its slots in it."""
LAPSES_SHOWN_S = 3600.0
"""`spark-otel lanes` shows the leases that lapsed within this many seconds."""
_LAPSES_KEPT_S = 86_400.0


def default_state_path() -> Path:
    """Beside the embedded store: ``$SPARK_OTEL_STORE``'s directory, else spark-otel's data directory."""
    from ..store import default_store_path

    return default_store_path().parent / "governor.sqlite"


@dataclass(frozen=True, slots=True)
class Decision:
    """One admission attempt: ``slot`` when admitted, else the ticket and the rule holding it."""

    slot: int | None
    ticket: int | None
    rule: str | None
    verdict: SlackVerdict | None = None
    """The deadline-slack law's verdict, where it judged (adaptive governing, the rules admitting)."""


@dataclass(frozen=True, slots=True)
class BoxNow:
    """What the deadline-slack law reads of the box at one admission attempt."""

    protected: list[Protected]
    widths: dict[str, int]
    """Cells in flight per engine."""
    rates: list[tuple[str, float]]
    """Each in-flight cell's (engine, live rate), where it published one within the lease."""
    admitted: list[tuple[str, int, float | None]] = field(default_factory=list)
    """Each in-flight cell's (engine, admission stamp in real ns, live rate or None): for the
    throughput knee (`knee`), which reads only the cells admitted since its last step."""


Judge = Callable[[InFlight, BoxNow], SlackVerdict]


@dataclass(frozen=True, slots=True)
class AdmittedOn:
    """The deadline-slack law's verdict a cell in flight was admitted on, as its slot keeps it
    (the cell span's ``spark_otel.cell.adaptive.*`` attributes, readable while the cell runs)."""

    reason: str
    """The `SlackReason` value: "slack" or "nothing to protect"."""
    protected: str | None
    """The protected cell that decided (its id, or "next cell of EVAL"); None: nothing protected."""
    margin: float | None
    """That cell's projected (ceiling - finish) / ceiling after the admission; None: no ceiling."""
    rate_used: float | None
    """That cell's rate projected after the admission, model tok/s."""
    finish_s: float | None
    """That cell's projected elapsed at its end, model s."""

    @classmethod
    def of(cls, verdict: SlackVerdict) -> AdmittedOn:
        p = verdict.projection
        return cls(
            reason=verdict.reason.value,
            protected=verdict.protected.name if verdict.protected is not None else None,
            margin=p.margin if p is not None and math.isfinite(p.margin) else None,
            rate_used=p.rate_used if p is not None else None,
            finish_s=p.finish_s if p is not None and math.isfinite(p.finish_s) else None,
        )


@dataclass(frozen=True, slots=True)
class LaneView:
    """One engine's lane as `spark-otel lanes` shows it."""

    engine: str
    in_use: list[InFlight]
    waiting: list[tuple[InFlight, str | None, float]]
    """Each waiting cell, the rule holding it back, and how long it has waited (real s)."""
    present: list[InFlight]
    lapses: list[Lapse] = field(default_factory=list)
    """The leases that lapsed while their cells ran here, within `LAPSES_SHOWN_S`, oldest first."""
    lapsed_in_use: int = 0
    """Of ``in_use``, the cells whose lease lapsed while they ran (their slot put back)."""
    in_use_ids: list[str | None] = field(default_factory=list, compare=False)
    """The cell id of each of ``in_use``, in order."""
    waiting_ids: list[str | None] = field(default_factory=list, compare=False)
    """The cell id of each of ``waiting``, in order."""
    in_use_live: list[LiveProgress | None] = field(default_factory=list, compare=False)
    """What each of ``in_use`` last published, in order: None when it has published nothing
    within `LEASE_S` (just admitted, an older runner, a state file of an older version)."""
    in_use_admitted_on: list[AdmittedOn | None] = field(default_factory=list, compare=False)
    """The law's verdict each of ``in_use`` was admitted on, in order: None where the law did
    not judge it (static rules only, ungoverned, an older runner or state file)."""


@dataclass(frozen=True, slots=True)
class Lapse:
    """A lease that lapsed while its cell ran: the process was stopped or starved past it."""

    engine: str
    eval_name: str
    cell_id: str | None
    lapsed_s: float
    """Real seconds past its lease when the runner noticed."""
    taken: bool
    """Its slot had been dropped meanwhile, so another cell could be admitted in its place."""
    noticed_ns: int

    def span_attributes(self) -> dict[str, AttributeValue]:
        return {
            sc.CELL_LEASE_LAPSED: True,
            sc.CELL_LEASE_LAPSED_S: round(self.lapsed_s, 3),
            sc.CELL_SLOT_TAKEN: self.taken,
        }


@dataclass(frozen=True, slots=True)
class Released:
    """What the end of a cell's slot found: None, or how its lease lapsed while it ran."""

    lapse: Lapse | None


@dataclass(slots=True)
class _Held:
    """A slot this process holds: its row now (it changes when the slot is put back), and what
    the row says, to put it back."""

    row: int
    cell: InFlight
    cell_id: str | None
    admitted_ns: int
    waited_s: float
    lapse: Lapse | None = None
    admitted_on: SlackVerdict | None = None


def _host() -> str:
    return socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _cell(row: sqlite3.Row) -> InFlight:
    keys = row.keys()
    bound = row["ceiling_bound"] if "ceiling_bound" in keys else None
    return InFlight(
        row["engine"],
        row["eval_name"],
        row["cell_class"],
        bool(row["has_deadline"]),
        None if bound is None else bool(bound),
        row["deadline_s"] if "deadline_s" in keys else None,
        row["max_tokens"] if "max_tokens" in keys else None,
        row["slowdown_budget"] if "slowdown_budget" in keys else None,
    )


def box_now(conn: sqlite3.Connection, candidate: InFlight, now: int, gap_ns: int) -> BoxNow:
    """The facts the deadline-slack law needs: each ceiling-bound cell in flight (its progress as
    last published within the lease, its expected length; until its stream shows a rate, the rate
    its eval's last cell ended at, while it publishes), and the next cell of each ceiling-bound
    eval between two of its cells (within ``gap_ns`` of its last end; never the candidate's own
    eval on its engine: the candidate is that next cell); for each, how long the candidate and
    the other cells in flight are expected to run yet (`_drain_s`) and its eval's best rate."""
    slots = list(conn.execute("SELECT * FROM slots"))
    history = {(r["engine"], r["eval_name"]): r for r in conn.execute("SELECT * FROM present")}
    widths: dict[str, int] = {}
    rates: list[tuple[str, float]] = []
    admitted: list[tuple[str, int, float | None]] = []
    protected: list[Protected] = []
    recent_ns = now - int(WINDOW_S * NS_PER_S)
    lives = {row["id"]: _live(row, now) for row in slots}
    left = {row["id"]: _left_s(row, lives[row["id"]], history) for row in slots}
    candidate_s = _duration(history.get((candidate.engine, candidate.eval_name)), candidate.max_tokens)
    for row in slots:
        cell = _cell(row)
        widths[cell.engine] = widths.get(cell.engine, 0) + 1
        live = lives[row["id"]]
        if live is not None and live.rate is not None:
            rates.append((cell.engine, live.rate))
        admitted.append((cell.engine, row["admitted_ns"], live.rate if live is not None else None))
        ceiling = cell.deadline_s if cell.bound else None
        if ceiling is None and cell.slowdown_budget is None:
            continue
        since = max(recent_ns, row["admitted_ns"])
        unseen = sum(1 for other in slots if other["id"] != row["id"] and other["admitted_ns"] > since)
        past = history.get((cell.engine, cell.eval_name))
        rate = live.rate if live is not None else None
        if live is not None and rate is None:  # publishing, no rate yet: its eval's last cell's
            rate = _last_rate(past)
        protected.append(
            Protected(
                row["cell_id"],
                cell.engine,
                cell.eval_name,
                ceiling,
                live.elapsed_s if live is not None else 0.0,
                live.tokens if live is not None else None,
                rate,
                _expected(past, cell.max_tokens),
                unseen,
                max([candidate_s, *(s for i, s in left.items() if i != row["id"])]),
                _best_rate(past),
                cell.slowdown_budget,
            )
        )
    running = {(c.engine, c.eval_name) for c in map(_cell, slots)}
    drain_s = max([candidate_s, *left.values()])
    for key, row in history.items():
        mine = key == (candidate.engine, candidate.eval_name)
        if key in running or mine or row["last_end_ns"] < now - gap_ns:
            continue
        cell = _cell_between(row)
        if not cell.bound or cell.deadline_s is None:
            continue
        protected.append(
            Protected(
                None,
                cell.engine,
                cell.eval_name,
                cell.deadline_s,
                0.0,
                0,
                _last_rate(row),
                _expected(row, _column(row, "max_tokens")),
                0,
                drain_s,
                _best_rate(row),
            )
        )
    return BoxNow(protected, widths, rates, admitted)


def _column(row: sqlite3.Row | None, name: str) -> Any:
    """``row[name]``; None for no row, or a state file of a version without the column."""
    if row is None or name not in row.keys():  # noqa: SIM118  (`in` a Row looks at its values)
        return None
    return row[name]


def _duration(present: sqlite3.Row | None, max_tokens: int | None = None) -> float:
    """How long a cell of the eval runs, model s: its declared ``max_tokens`` at the rate its eval's
    last cell ended at, where both are known (a bound, as `_expected`'s; the longest completed
    cell alone understates an eval whose short cells ended first); else the eval's longest
    completed cell on the engine; inf when none ended (unknown)."""
    longest = _column(present, "done_elapsed_max")
    history_s = float(longest) if longest is not None else math.inf
    rate = _last_rate(present) or _best_rate(present)
    if max_tokens is not None and rate:
        return max(max_tokens / rate, history_s) if longest is not None else max_tokens / rate
    return history_s


def _left_s(
    row: sqlite3.Row, live: LiveProgress | None, history: Mapping[tuple[str, str], sqlite3.Row]
) -> float:
    """How long an in-flight cell is expected to run yet, model s: its `_duration` less its
    elapsed (the whole of it while it publishes nothing); inf when that is unknown, or it has
    outrun it (a neighbour that may never end). A declared ``max_tokens`` is counted from the
    tokens it has left at its live rate."""
    past = history.get((row["engine"], row["eval_name"]))
    elapsed = live.elapsed_s if live is not None else 0.0
    max_tokens: int | None = _column(row, "max_tokens")
    if max_tokens is not None and live is not None and live.rate and live.tokens is not None:
        return max(max_tokens - live.tokens, 0) / live.rate
    longest = _duration(past, max_tokens)
    return longest - elapsed if longest > elapsed else math.inf


def _best_rate(present: sqlite3.Row | None) -> float | None:
    rate: float | None = _column(present, "best_rate")
    return rate


def _cell_between(row: sqlite3.Row) -> InFlight:
    keys = row.keys()
    bound = row["ceiling_bound"] if "ceiling_bound" in keys else None
    return InFlight(
        row["engine"], row["eval_name"], row["cell_class"], bool(row["has_deadline"]),
        None if bound is None else bool(bound), row["deadline_s"] if "deadline_s" in keys else None,
    )  # fmt: skip


def _last_rate(present: sqlite3.Row | None) -> float | None:
    """The live rate the eval's last cell on the engine ended at, if it streamed."""
    if present is None or "last_rate" not in present.keys():  # noqa: SIM118  (`in` a Row looks at its values)
        return None
    rate: float | None = present["last_rate"]
    return rate


def _expected(present: sqlite3.Row | None, max_tokens: int | None) -> float | None:
    """The declared cap (a bound), else the eval's longest completed cell on the engine, else
    unknown."""
    if max_tokens is not None:
        return float(max_tokens)
    if _column(present, "done_n") and _column(present, "done_tokens_max") is not None:
        return float(present["done_tokens_max"])  # type: ignore[index]
    return None


def _live(row: sqlite3.Row, now: int) -> LiveProgress | None:
    """What the slot's runner last published, when it did within the lease (else stale: None)."""
    if "live_ns" not in row.keys():  # noqa: SIM118  (`in` a Row looks at its values)
        return None  # a state file of an older version: nothing published
    sampled = row["live_ns"]
    if sampled is None or sampled < now - int(LEASE_S * NS_PER_S) or row["live_elapsed_s"] is None:
        return None
    return LiveProgress(row["live_elapsed_s"], row["live_tokens"], row["live_rate"])


def _admitted_on(row: sqlite3.Row) -> AdmittedOn | None:
    """The law's verdict the slot's cell was admitted on; None where it did not judge it, or the
    file predates the columns."""
    if "adaptive_reason" not in row.keys() or row["adaptive_reason"] is None:  # noqa: SIM118
        return None
    return AdmittedOn(
        row["adaptive_reason"],
        row["adaptive_protected"],
        row["adaptive_margin"],
        row["adaptive_rate"],
        row["adaptive_finish_s"],
    )


def _add_columns(conn: sqlite3.Connection) -> None:
    """The columns an older state file lacks (`_ADDED`)."""
    for table, column, kind in _ADDED:
        if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
            try:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            except sqlite3.OperationalError as exc:  # another runner added it a moment ago
                if "duplicate column" not in str(exc):
                    raise


def _problem(path: Path, exc: BaseException) -> InputError:
    """A failure of the state file as one line naming it and the problem."""
    text = str(exc)
    if isinstance(exc, OSError):
        text = exc.strerror or text
    if "not a database" in text:
        what = f"not a SQLite file, or a corrupt one ({text})"
    elif "locked" in text or "busy" in text:
        what = f"locked by another process past {_BUSY_TIMEOUT_MS / 1000:g} s ({text})"
    else:
        what = text
    return InputError(f"{path}: governor state file: {what}")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _check_shape(conn: sqlite3.Connection, path: Path, *, new_ok: bool) -> None:
    """Nothing, when the file is a governor state file (or, where ``new_ok``, one a writer may
    complete: none of its tables, or some); else `InputError` naming the file and what it holds."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    wrong = sorted(tables - _OWN_TABLES)
    if not wrong and not new_ok:
        wrong = [f"no {t} table" for t in _COLUMNS if t not in tables]
    for table in sorted(_COLUMNS.keys() & tables):
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if missing := sorted(_COLUMNS[table] - have):
            wrong.append(f"{table} without {', '.join(missing)}")
    if wrong:
        held = ", ".join(wrong[:6]) + (", ..." if len(wrong) > 6 else "") if tables else "no tables"
        raise InputError(
            f"{path}: not a governor state file (it holds {held}; a state file holds slots, waiting "
            "and present): another program's SQLite file, or a spark-otel store? Name the state file "
            "(--state, $SPARK_OTEL_GOVERNOR_STATE); nothing was changed"
        )


class SharedState:
    """The state file, for a runner that takes part. One instance per process and path; its
    connection is used under a lock (threads of one runner share it) and opened again after a
    fork, or when the file at the path is no longer the one it opened."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._pid = os.getpid()
        self.host = _host()
        self._held: dict[int, _Held] = {}
        """The slots this process holds, by the row each was first given (`Decision.slot`)."""
        self._lease_until_ns: int | None = None
        """The lease this process last wrote for its slots."""

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            if _identity(self.path) == self._identity:
                return self._conn
            self._moved()
        if self._pid != os.getpid():
            self._held, self._lease_until_ns = {}, None  # a forked child holds none of its parent's slots
        if self.path.is_dir():
            raise InputError(f"{self.path}: governor state file: a directory, not a file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)  # fmt: skip
        try:
            conn.row_factory = sqlite3.Row
            _check_shape(conn, self.path, new_ok=True)
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            _add_columns(conn)
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid, self._identity = conn, os.getpid(), _identity(self.path)
        return conn

    def _moved(self) -> None:
        """The file at the path is not the one this process opened (deleted, or replaced): say so
        once, and move to the file there now; the next transaction registers the cells this
        process runs in it."""
        warn_once(
            f"governor state {self.path} moved",
            f"governor state {self.path} was deleted or replaced while this runner used it: runners "
            "that open the path now do not see the slots held through the old file. This runner "
            f"moves to the file at the path and registers its {len(self._held)} running cell(s) "
            "there; a cell admitted meanwhile beside them is not undone",
        )
        assert self._conn is not None
        self._conn.close()
        self._conn = None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
            except (sqlite3.Error, OSError) as exc:
                raise _problem(self.path, exc) from exc
            try:
                self._keep_held(conn)
                yield conn
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _problem(self.path, exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _problem(self.path, exc) from exc

    def _keep_held(self, conn: sqlite3.Connection) -> None:
        """At the start of every transaction: note a lease that lapsed while this process held
        slots (it was stopped or starved past it), drop the rows of processes that are gone, and
        put back any slot of this process's that is missing (dropped as lapsed, or a new file),
        so every admission counts the cells still running."""
        now = _clock.real_wall_ns()
        lapsed_s = None
        if self._held and self._lease_until_ns is not None and now > self._lease_until_ns:
            lapsed_s = (now - self._lease_until_ns) / NS_PER_S
        mine = self._own_rows(conn) if self._held else set()
        self._drop_the_gone(conn, now)
        if not self._held:
            return
        if lapsed_s is not None:
            for slot, held in self._held.items():
                taken = held.row not in mine
                conn.execute(
                    "INSERT INTO lapses (host, pid, slot, engine, eval_name, cell_id, noticed_ns, lapsed_s,"
                    " taken) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (self.host, os.getpid(), slot, held.cell.engine, held.cell.eval_name, held.cell_id, now,
                     lapsed_s, int(taken)),
                )  # fmt: skip
                before = held.lapse
                held.lapse = Lapse(
                    held.cell.engine,
                    held.cell.eval_name,
                    held.cell_id,
                    max(lapsed_s, before.lapsed_s if before is not None else 0.0),
                    taken or (before is not None and before.taken),
                    now,
                )
        present = self._own_rows(conn)
        for held in self._held.values():
            if held.row not in present:
                held.row = self._insert(
                    conn,
                    "slots",
                    held.cell,
                    held.cell_id,
                    admitted_ns=held.admitted_ns,
                    waited_s=held.waited_s,
                    admitted_on=held.admitted_on,
                )
        if lapsed_s is not None:
            self._renew(conn)

    def _own_rows(self, conn: sqlite3.Connection) -> set[int]:
        return {
            r[0]
            for r in conn.execute("SELECT id FROM slots WHERE host = ? AND pid = ?", (self.host, os.getpid()))
        }

    def _drop_the_gone(self, conn: sqlite3.Connection, now: int) -> None:
        conn.execute("DELETE FROM lapses WHERE noticed_ns < ?", (now - int(_LAPSES_KEPT_S * NS_PER_S),))
        for table in ("slots", "waiting"):
            conn.execute(f"DELETE FROM {table} WHERE lease_until_ns < ?", (now,))
            pids = {
                r[0] for r in conn.execute(f"SELECT DISTINCT pid FROM {table} WHERE host = ?", (self.host,))
            }
            gone = [p for p in pids if not _pid_alive(p)]
            if gone:
                marks = ",".join("?" * len(gone))
                conn.execute(f"DELETE FROM {table} WHERE host = ? AND pid IN ({marks})", (self.host, *gone))

    def _lease(self) -> int:
        return _clock.real_wall_ns() + int(LEASE_S * NS_PER_S)

    def attempt(
        self,
        cell: InFlight,
        cell_id: str | None,
        rules: RulesFile,
        *,
        ticket: int | None,
        waited_s: float,
        judge: Judge | None = None,
    ) -> Decision:
        """Admit ``cell`` if the rules and the queue allow it now, and ``judge`` (the
        deadline-slack law, adaptive governing) too; else queue it (or keep its ``ticket``) and
        say which rule, or what projection, holds it."""
        with self._transaction() as conn:
            now = _clock.real_wall_ns()
            flying = [_cell(r) for r in conn.execute("SELECT * FROM slots")]
            gap_ns = int(rules.eval_gap_s * NS_PER_S)
            present = [
                _cell(r)
                for r in conn.execute("SELECT * FROM present WHERE last_end_ns >= ?", (now - gap_ns,))
            ]
            if (
                ticket is not None
                and conn.execute("SELECT 1 FROM waiting WHERE ticket = ?", (ticket,)).fetchone() is None
            ):
                ticket = None  # dropped as gone (the process stalled past its lease): queue again
            if ticket is None:
                ticket = self._insert(conn, "waiting", cell, cell_id, since_ns=now)
            queue = list(
                conn.execute("SELECT * FROM waiting WHERE engine = ? ORDER BY ticket", (cell.engine,))
            )
            mine = next(i for i, r in enumerate(queue) if r["ticket"] == ticket)
            verdicts = admitted_in_order(
                [_cell(r) for r in queue[: mine + 1]], flying, rules, present=present
            )
            verdict = judge(cell, box_now(conn, cell, now, gap_ns)) if verdicts[-1] and judge else None
            if verdict is not None and not verdict.admit:
                rule = verdict.describe()
                conn.execute("UPDATE waiting SET rule = ? WHERE ticket = ?", (rule, ticket))
                return Decision(None, ticket, rule, verdict)
            if verdicts[-1]:
                conn.execute("DELETE FROM waiting WHERE ticket = ?", (ticket,))
                slot = self._insert(
                    conn, "slots", cell, cell_id, admitted_ns=now, waited_s=waited_s, admitted_on=verdict
                )
                lease = self._lease()
            else:
                held = holding_rule(cell, flying, rules, present=present)
                rule = held.describe() if held is not None else "an earlier cell in the queue for this lane"
                conn.execute("UPDATE waiting SET rule = ? WHERE ticket = ?", (rule, ticket))
                return Decision(None, ticket, rule)
        with self._lock:  # held once it is committed: a slot that never was is never put back
            if not self._held:
                self._lease_until_ns = lease
            self._held[slot] = _Held(slot, cell, cell_id, now, waited_s, admitted_on=verdict)
        return Decision(slot, None, None, verdict)

    def _insert(
        self,
        conn: sqlite3.Connection,
        table: str,
        cell: InFlight,
        cell_id: str | None,
        *,
        admitted_on: SlackVerdict | None = None,
        **more: float,
    ) -> int:
        """A row of ``table`` for ``cell``, held by this process under a fresh lease (a slot with
        the law's verdict it was admitted on, where it judged)."""
        values: dict[str, object] = {
            "host": self.host,
            "pid": os.getpid(),
            "lease_until_ns": self._lease(),
            "engine": cell.engine,
            "eval_name": cell.eval_name,
            "cell_class": cell.cell_class,
            "has_deadline": int(cell.has_deadline),
            "ceiling_bound": None if cell.ceiling_bound is None else int(cell.ceiling_bound),
            "cell_id": cell_id,
            **more,
        }
        if table == "slots":
            values.update(
                deadline_s=cell.deadline_s, max_tokens=cell.max_tokens, slowdown_budget=cell.slowdown_budget
            )
            if admitted_on is not None:
                on = AdmittedOn.of(admitted_on)
                values.update(
                    adaptive_reason=on.reason,
                    adaptive_protected=on.protected,
                    adaptive_margin=on.margin,
                    adaptive_rate=on.rate_used,
                    adaptive_finish_s=on.finish_s,
                )
        sql = f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})"
        row = conn.execute(sql, tuple(values.values())).lastrowid
        assert row is not None
        return row

    def release(self, slot: int, cell: InFlight, end: LiveProgress | None = None) -> Released:
        """The cell ended: free its slot, note when its eval last ran on its engine (and, from
        ``end``, its progress at the end: the eval's longest cell and last rate, which the
        deadline-slack law projects its next cells from), and say whether its lease lapsed
        while it ran."""
        held: _Held | None = None
        try:
            with self._transaction() as conn:
                held = self._forget(slot)  # under the lock: no transaction puts it back now
                tokens = end.tokens if end is not None and end.tokens else None
                conn.execute("DELETE FROM slots WHERE id = ?", (held.row if held is not None else slot,))
                conn.execute(
                    "INSERT INTO present (engine, eval_name, cell_class, has_deadline, last_end_ns,"
                    " ceiling_bound, deadline_s, done_n, done_tokens_max, last_rate, done_elapsed_max,"
                    " best_rate, max_tokens)"
                    f" VALUES ({', '.join('?' * 13)}) ON CONFLICT (engine, eval_name) DO UPDATE"
                    " SET last_end_ns = excluded.last_end_ns, has_deadline = excluded.has_deadline,"
                    " cell_class = excluded.cell_class, ceiling_bound = excluded.ceiling_bound,"
                    " deadline_s = excluded.deadline_s,"
                    " done_n = COALESCE(present.done_n, 0) + excluded.done_n,"
                    " done_tokens_max = MAX(COALESCE(present.done_tokens_max, 0),"
                    " COALESCE(excluded.done_tokens_max, 0)),"
                    " last_rate = COALESCE(excluded.last_rate, present.last_rate),"
                    " done_elapsed_max = MAX(COALESCE(present.done_elapsed_max, 0),"
                    " COALESCE(excluded.done_elapsed_max, 0)),"
                    " best_rate = MAX(COALESCE(present.best_rate, 0), COALESCE(excluded.best_rate, 0)),"
                    " max_tokens = excluded.max_tokens",
                    (
                        cell.engine,
                        cell.eval_name,
                        cell.cell_class,
                        int(cell.has_deadline),
                        _clock.real_wall_ns(),
                        None if cell.ceiling_bound is None else int(cell.ceiling_bound),
                        cell.deadline_s,
                        int(tokens is not None),
                        tokens,
                        end.rate if end is not None else None,
                        end.elapsed_s if end is not None else None,
                        end.rate if end is not None else None,
                        cell.max_tokens,
                    ),
                )
        finally:
            if held is None:
                with self._lock:
                    held = self._forget(slot)
        return Released(held.lapse if held is not None else None)

    def _forget(self, slot: int) -> _Held | None:
        held = self._held.pop(slot, None)
        if not self._held:
            self._lease_until_ns = None
        return held

    def withdraw(self, ticket: int) -> None:
        """A waiting cell gave up (cancelled, interrupted): leave the queue."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM waiting WHERE ticket = ?", (ticket,))

    def renew(self, live: Mapping[int, LiveProgress] | None = None) -> None:
        """Extend this process's leases, and publish each in-flight cell's progress in ``live``
        (by `Decision.slot`) on its slot's row: one UPDATE per cell, in the same transaction, so
        the figures live exactly as long as the slot (a killed runner's go with its lease)."""
        now = _clock.real_wall_ns()
        with self._transaction() as conn:
            self._renew(conn)
            for slot, progress in (live or {}).items():
                held = self._held.get(slot)
                if held is None:
                    continue  # released meanwhile
                conn.execute(
                    "UPDATE slots SET live_ns = ?, live_elapsed_s = ?, live_tokens = ?, live_rate = ?"
                    " WHERE id = ?",
                    (now, progress.elapsed_s, progress.tokens, progress.rate, held.row),
                )

    def _renew(self, conn: sqlite3.Connection) -> None:
        lease = self._lease()
        for table in ("slots", "waiting"):
            conn.execute(
                f"UPDATE {table} SET lease_until_ns = ? WHERE host = ? AND pid = ?",
                (lease, self.host, os.getpid()),
            )
        if self._held:
            self._lease_until_ns = lease

    def lanes(self, rules: RulesFile | None = None) -> list[LaneView]:
        """Every lane with a cell in use, waiting or present, as a runner taking part sees it."""
        with self._transaction() as conn:
            return _lane_views(conn, rules, _clock.real_wall_ns(), self.host, lambda _row: True)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


def _lane_views(
    conn: sqlite3.Connection,
    rules: RulesFile | None,
    now: int,
    host: str,
    live: Callable[[sqlite3.Row], bool],
) -> list[LaneView]:
    """Every lane with a cell in use, waiting or present (rows ``live`` keeps), and its lapses."""
    gap_ns = int((rules.eval_gap_s if rules else 2.0) * NS_PER_S)
    slots = [r for r in conn.execute("SELECT * FROM slots ORDER BY id") if live(r)]
    waiting = [r for r in conn.execute("SELECT * FROM waiting ORDER BY ticket") if live(r)]
    present = list(conn.execute("SELECT * FROM present WHERE last_end_ns >= ?", (now - gap_ns,)))
    lapses: list[sqlite3.Row] = []
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lapses'").fetchone():
        since = now - int(LAPSES_SHOWN_S * NS_PER_S)
        lapses = list(conn.execute("SELECT * FROM lapses WHERE noticed_ns >= ? ORDER BY id", (since,)))
    lapsed_rows = {(r["host"], r["pid"], r["engine"], r["eval_name"], r["cell_id"]) for r in lapses}
    engines = sorted({r["engine"] for r in (*slots, *waiting, *present, *lapses)})
    return [
        LaneView(
            engine=e,
            in_use=[_cell(r) for r in slots if r["engine"] == e],
            in_use_ids=[r["cell_id"] for r in slots if r["engine"] == e],
            in_use_live=[_live(r, now) for r in slots if r["engine"] == e],
            in_use_admitted_on=[_admitted_on(r) for r in slots if r["engine"] == e],
            waiting=[
                (_cell(r), r["rule"], (now - r["since_ns"]) / NS_PER_S) for r in waiting if r["engine"] == e
            ],
            waiting_ids=[r["cell_id"] for r in waiting if r["engine"] == e],
            present=[_cell(r) for r in present if r["engine"] == e],
            lapses=[
                Lapse(
                    r["engine"],
                    r["eval_name"],
                    r["cell_id"],
                    r["lapsed_s"],
                    bool(r["taken"]),
                    r["noticed_ns"],
                )
                for r in lapses
                if r["engine"] == e
            ],
            lapsed_in_use=sum(
                1
                for r in slots
                if r["engine"] == e
                and (r["host"], r["pid"], r["engine"], r["eval_name"], r["cell_id"]) in lapsed_rows
            ),
        )
        for e in engines
    ]


def read_lanes(path: str | Path, rules: RulesFile | None = None) -> list[LaneView]:
    """The lanes in the state file at ``path``, read without taking part: the file is opened
    read-only (SQLite ``mode=ro``) and nothing in it changes; the rows of processes that are gone
    are left out, not dropped. `InputError` naming the file when it is missing, a directory, not
    a SQLite file, locked past the busy timeout, or not a governor state file. A wait on another
    process's lock (one in exclusive locking mode, or a file not in WAL mode mid-write) is said
    within `LOCK_NOTICE_MS`, naming the file, as the store's readers say it."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: governor state file: a directory, not a file")
    if not path.is_file():
        raise InputError(f"{path}: no governor state here: no governed runner has started on this box yet")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: not a governor state file: an empty file (0 bytes); nothing was changed")
    host = _host()
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
        )  # fmt: skip
    except sqlite3.Error as exc:
        raise _problem(path, exc) from exc
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={LOCK_NOTICE_MS}")
        conn.execute("BEGIN")
        try:  # the first read takes the read lock; the transaction's others then never wait
            _check_shape(conn, path, new_ok=False)
        except sqlite3.OperationalError as exc:
            if not busy(exc):
                raise
            _logger.warning(
                "%s: governor state file: another process holds a lock on it; waiting for it (up to %g s)",
                path,
                _BUSY_TIMEOUT_MS / 1000,
            )
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS - LOCK_NOTICE_MS}")
            _check_shape(conn, path, new_ok=False)
        now = _clock.real_wall_ns()

        def live(row: sqlite3.Row) -> bool:
            if row["lease_until_ns"] < now:
                return False
            return row["host"] != host or _pid_alive(row["pid"])

        return _lane_views(conn, rules, now, host, live)
    except sqlite3.Error as exc:
        raise _problem(path, exc) from exc
    finally:
        conn.close()


class Lease:
    """Renews a process's leases about every second while it holds a slot or a ticket, and with
    each renewal publishes what ``progress`` says of its in-flight cells: one daemon thread per
    state, started on first hold and stopped when nothing is held."""

    def __init__(
        self,
        state: SharedState,
        on_error: Callable[[BaseException], None],
        progress: Callable[[], Mapping[int, LiveProgress]] | None = None,
    ) -> None:
        self._state = weakref.ref(state)
        self._on_error = on_error
        self._progress: Callable[[], Callable[[], Mapping[int, LiveProgress]] | None] = lambda: progress
        if inspect.ismethod(progress):  # a governor's own method: held weakly, as the state is
            self._progress = weakref.WeakMethod(progress)
        self._held = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def hold(self) -> None:
        with self._cond:
            self._held += 1
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._run, name="spark-otel-governor-lease", daemon=True
                )
                self._thread.start()

    def drop(self) -> None:
        with self._cond:
            self._held = max(0, self._held - 1)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._held == 0:
                    self._thread = None
                    return
                self._cond.wait(_RENEW_S)
                if self._held == 0:
                    self._thread = None
                    return
            state = self._state()
            if state is None:
                return
            progress = self._progress()
            try:
                if progress is None:
                    state.renew()
                else:
                    state.renew(progress())
            except Exception as exc:
                self._on_error(exc)
