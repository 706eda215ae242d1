"""Opening an export and reading its metadata tables: layout, versions, session start, GPUs, metric names.

Each reader checks the columns it needs (``PRAGMA table_info``), so a file that is not an Nsight
export, or one from a release with other columns, fails with the table and column named.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..._exceptions import InputError, NoGpuMetricsError
from ..._files import check_regular
from ..._validate import EARLIEST_NS, LATEST_NS, year_of
from .capture import NsightLayout
from .problems import left_out, not_integer, shown

__all__ = [
    "open_export",
    "read_gpus",
    "read_layout",
    "read_meta",
    "read_metric_names",
    "read_session_start",
]


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _check_whole(path: Path) -> None:
    """A file shorter than its SQLite header's page count says is cut short. SQLite itself reads
    the missing bytes as zeros, so the rows in them would read as NULLs, not as an error."""
    with path.open("rb") as f:
        header = f.read(100)
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return  # not an SQLite file: sqlite3 says so
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count is valid only when the change counter matches version-valid-for (file format §1.3.7).
    if pages and header[24:28] == header[92:96]:
        size, need = path.stat().st_size, pages * page_size
        if size < need:
            raise InputError(
                f"{path}: cut short: its SQLite header counts {pages:,} pages of {page_size:,} bytes "
                f"({need:,} bytes), the file holds {size:,}; is the file complete?"
            )


def open_export(path: Path) -> tuple[sqlite3.Connection, set[str]]:
    """The export opened read-only; a path that is not a regular file (a directory, a FIFO, a
    device) is refused by name before SQLite opens it, and the file is never read whole."""
    check_regular(path, what="Nsight export")
    _check_whole(path)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-65536")
        conn.execute("PRAGMA mmap_size=268435456")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not an Nsight Systems SQLite export ({exc})") from exc
    if "TARGET_INFO_SESSION_START_TIME" not in tables and "META_DATA_EXPORT" not in tables:
        conn.close()
        raise InputError(
            f"{path}: an SQLite file but not an Nsight Systems export (no TARGET_INFO_SESSION_START_TIME "
            "or META_DATA_EXPORT table); export one with `nsys export --type sqlite REPORT.nsys-rep`"
        )
    return conn, tables


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _require_columns(conn: sqlite3.Connection, path: Path, table: str, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in _columns(conn, table)]
    if missing:
        raise InputError(f"{path}: {table} lacks column(s) {', '.join(missing)}; is this an Nsight export?")


def read_layout(conn: sqlite3.Connection, path: Path, tables: set[str], versions: str) -> NsightLayout:
    if "GPU_METRICS" in tables:
        columns = _columns(conn, "GPU_METRICS")
        missing = {"timestamp", "typeId", "metricId", "value"} - columns
        if missing:
            raise InputError(f"{path}: GPU_METRICS lacks column(s) {', '.join(sorted(missing))}")
        if "TARGET_INFO_GPU_METRICS" not in tables:
            raise InputError(
                f"{path}: GPU_METRICS without TARGET_INFO_GPU_METRICS; the metrics cannot be named"
            )
        return NsightLayout.RAW if "rawTimestamp" in columns else NsightLayout.PLAIN
    if "GENERIC_EVENTS" in tables and {"timestamp", "typeId", "data"} <= _columns(conn, "GENERIC_EVENTS"):
        return NsightLayout.GENERIC
    raise NoGpuMetricsError(
        f"{path}: this Nsight Systems export{versions} holds no GPU metrics (no GPU_METRICS table): "
        "it was captured without them. Capture with `nsys profile --gpu-metrics-devices=0 "
        "--gpu-metrics-frequency=10000 ...` (needs profiling permission on the GPU) and export again"
    )


def read_meta(conn: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    if "META_DATA_EXPORT" not in tables or not {"name", "value"} <= _columns(conn, "META_DATA_EXPORT"):
        return {}
    rows = conn.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()
    return {name: value for name, value in rows if isinstance(name, str) and isinstance(value, str)}


def read_session_start(conn: sqlite3.Connection, path: Path, tables: set[str]) -> int:
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        _require_columns(conn, path, "TARGET_INFO_SESSION_START_TIME", ("utcEpochNs",))
        row = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        if row and row[0] is not None:
            where = f"{path}: TARGET_INFO_SESSION_START_TIME.utcEpochNs"
            value = row[0]
            if not isinstance(value, int):
                raise InputError(
                    f"{where} is {shown(value)}, not a whole number of nanoseconds; "
                    "the samples cannot be placed in time"
                )
            if not EARLIEST_NS <= value < LATEST_NS:
                raise InputError(
                    f"{where} {value} reads as the year {year_of(value)}, outside 2000-2100; "
                    "the samples cannot be placed in time"
                )
            return value
    raise InputError(
        f"{path}: no TARGET_INFO_SESSION_START_TIME.utcEpochNs; the samples cannot be placed in time"
    )


def read_gpus(
    conn: sqlite3.Connection, path: Path, tables: set[str], skipped: list[str]
) -> dict[int, tuple[str, str | None]]:
    """PerfWorks GPU id (and device id as a fallback) -> (gpu id attribute, name)."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    columns = _columns(conn, "TARGET_INFO_GPU")
    pick = [c for c in ("id", "pwGpuId", "uuid", "name") if c in columns]
    if not pick:
        return {}
    out: dict[int, tuple[str, str | None]] = {}
    by_pw: dict[int, tuple[str, str | None]] = {}
    bad: list[tuple[Any, str]] = []
    rows = conn.execute(f"SELECT rowid, {', '.join(pick)} FROM TARGET_INFO_GPU").fetchall()
    for rowid, *values in rows:
        record = dict(zip(pick, values, strict=True))
        problem = next(
            (
                p
                for c in ("id", "pwGpuId")
                if record.get(c) is not None
                for p in [not_integer(c, record[c])]
                if p
            ),
            None,
        )
        if problem:
            bad.append((rowid, problem))
            continue
        name = record.get("name")
        ident = (str(record.get("uuid") or record.get("id")), name if isinstance(name, str) else None)
        if record.get("id") is not None:
            out[record["id"]] = ident
        if record.get("pwGpuId") is not None:
            by_pw[record["pwGpuId"]] = ident
    if bad:
        skipped.append(left_out(path, "TARGET_INFO_GPU", *bad[0], bad=len(bad), total=len(rows)))
    out.update(by_pw)  # pwGpuId first, then id
    return out


def read_metric_names(conn: sqlite3.Connection, path: Path, skipped: list[str]) -> dict[tuple[int, int], str]:
    """(typeId, metricId) -> metric name; a row that cannot name a metric is reported, and the
    samples of that metric read as ``metric N``."""
    _require_columns(conn, path, "TARGET_INFO_GPU_METRICS", ("typeId", "metricId", "metricName"))
    rows = conn.execute("SELECT rowid, typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS").fetchall()
    names: dict[tuple[int, int], str] = {}
    bad: list[tuple[Any, str]] = []
    for rowid, type_id, metric_id, name in rows:
        problem = not_integer("typeId", type_id) or not_integer("metricId", metric_id)
        if problem is None and (not isinstance(name, str) or not name.strip()):
            problem = f"metricName is {shown(name)}, not a name"
        if problem:
            bad.append((rowid, problem))
        else:
            names[(type_id, metric_id)] = name
    if bad:
        skipped.append(left_out(path, "TARGET_INFO_GPU_METRICS", *bad[0], bad=len(bad), total=len(rows)))
    return names
