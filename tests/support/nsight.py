"""Synthetic Nsight Systems SQLite exports with GPU metrics, built from the documented DDL.

No public export with a GPU_METRICS table exists (formats.md §1.8), so tests and the benchmark
build them: the three layouts (GENERIC_EVENTS JSON up to 2023.3, GPU_METRICS without and with
rawTimestamp), TARGET_INFO_* tables as in the real exports, and per-metric values drawn from
a seeded generator around the levels the article's Appendix B reports for a GB10 in decode.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
from tests.support.data_files import RECEIVER_DATA

SESSION_START_UNIX_NS = 1_789_625_760_000_000_000  # 2026-09-17 07:16 UTC, the article's first capture
PW_GPU_ID = 0
TYPE_ID = 0x1000100000000 | PW_GPU_ID  # <hw><vm><source><tag><gpu>: low byte = PerfWorks GPU id

# (name, level, spread): integer percentages around Appendix B's single-stream capture.
GB10_METRICS: tuple[tuple[str, float, float], ...] = (
    ("GR Active [Throughput %]", 99.9, 0.3),
    ("SMs Active [Throughput %]", 90.1, 2.0),
    ("SM Issue [Throughput %]", 3.1, 1.3),
    ("Tensor Active [Throughput %]", 9.8, 2.0),
    ("Compute Warps in Flight [Throughput %]", 16.9, 1.5),
    ("Async Compute in Flight [Throughput %]", 0.0, 0.0),
    ("Sync Compute in Flight [Throughput %]", 0.0, 0.0),
    ("GR Active [Workloads]", 1.0, 0.0),
    ("Async Copy Engine Active 0 [Cycles Active]", 0.0, 0.0),
    ("Sync Copy Engine Active [Throughput %]", 0.0, 0.0),
    ("Pixel Warps in Flight [Throughput %]", 0.0, 0.0),
    ("Vertex/Tess/Geometry Warps in Flight [Throughput %]", 0.0, 0.0),
    ("Unallocated Warps in Active SMs [Throughput %]", 72.0, 3.0),
    ("Compute Warps in Flight [Avg Warps per Cycle]", 8.0, 1.0),
    ("Unallocated Warps in Active SMs [Avg Warps per Cycle]", 36.0, 2.0),
    ("PCIe RX Throughput [Throughput %]", 0.0, 0.0),
    ("PCIe TX Throughput [Throughput %]", 0.0, 0.0),
    ("GPC Clock Frequency [MHz]", 2_418_000_000.0, 0.0),  # Hz-scale raw values, as observed
    ("SYS Clock Frequency [MHz]", 1_800.0, 0.0),
)
OLD_NAMES = {"SMs Active [Throughput %]": "SM Active"}
# SM Issue as exact integer shares, so the capture's figures are Appendix B's 07:16 row:
# mean 3.1 (3.08), p50 2, p95 5.
SM_ISSUE_SHARES = {2: 0.55, 3: 0.05, 4: 0.25, 5: 0.11, 7: 0.04}

META = [
    ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
    ("EXPORT_PRODUCT_VERSION", "2026.1.3.425"),
    ("EXPORT_SCHEMA_VERSION", "3.24.18"),
]
GPU_DDL = """
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
    isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
    smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
"""


def sample_values(seconds: float, hz: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps (session ns) and a (metrics x samples) value matrix."""
    n = int(seconds * hz)
    step = 1_000_000_000 // hz
    timestamps = np.arange(n, dtype=np.int64) * step + 1_000_000  # first sample 1 ms into the session
    rng = np.random.default_rng(seed)
    values = np.empty((len(GB10_METRICS), n), dtype=np.float64)
    for i, (name, level, spread) in enumerate(GB10_METRICS):
        if name == "SM Issue [Throughput %]":
            counts = [round(share * n) for share in SM_ISSUE_SHARES.values()]
            counts[0] += n - sum(counts)
            values[i] = rng.permutation(np.repeat(list(SM_ISSUE_SHARES), counts))
            continue
        row = rng.normal(level, spread, n) if spread else np.full(n, level)
        values[i] = row if level > 1e6 else np.clip(np.rint(row), 0, 100 if level <= 100 else None)
    return timestamps, values


def _common(conn: sqlite3.Connection, gpu_name: str) -> None:
    conn.executescript(GPU_DDL)
    conn.execute(
        "INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, pwGpuId, uuid, chipName, cuDevice) "
        "VALUES (0, 0, ?, '000f:01:00.0', ?, 'fa2a1d7d-0000-4000-8000-0000000000b1', 'GB20B', 0)",
        (gpu_name, PW_GPU_ID),
    )
    conn.execute(
        "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '2026-09-17T07:16:00', '2026-09-17T09:16:00')",
        (SESSION_START_UNIX_NS,),
    )
    conn.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", META)


def build_capture(
    path: Path,
    *,
    layout: str = "raw",
    seconds: float = 1.0,
    hz: int = 1000,
    seed: int = 0,
    gpu_name: str = "NVIDIA GB10",
    real_values: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Write a capture; ``layout`` is "raw" (2025+), "plain" (2023.4-2024) or "generic" (<= 2023.3).

    Returns the timestamps and values written, so tests can compute expected figures independently.
    """
    timestamps, values = sample_values(seconds, hz, seed)
    with sqlite3.connect(path) as conn:
        _common(conn, gpu_name)
        if layout == "generic":
            conn.executescript(
                "CREATE TABLE GENERIC_EVENTS (rawTimestamp INTEGER NOT NULL, timestamp INTEGER, "
                "typeId INTEGER NOT NULL, data TEXT NOT NULL);"
                "CREATE TABLE GENERIC_EVENT_TYPES (typeId INTEGER NOT NULL PRIMARY KEY, "
                "sourceId INTEGER NOT NULL, data TEXT NOT NULL);"
            )
            conn.execute("INSERT INTO GENERIC_EVENT_TYPES VALUES (?, 1, '{}')", (TYPE_ID,))
            names = [OLD_NAMES.get(n, n.split(" [")[0]) for n, _, _ in GB10_METRICS]
            rows = (
                (int(ts) + 7, int(ts), TYPE_ID, json.dumps(dict(zip(names, col.tolist(), strict=True))))
                for ts, col in zip(timestamps, values.T, strict=True)
            )
            conn.executemany("INSERT INTO GENERIC_EVENTS VALUES (?,?,?,?)", rows)
            return timestamps, values
        conn.execute(
            "CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, "
            "typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL)"
        )
        conn.executemany(
            "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, 1, 'GPU', ?, ?)",
            [(TYPE_ID, i, name) for i, (name, _, _) in enumerate(GB10_METRICS)],
        )
        ids = np.repeat(np.arange(len(GB10_METRICS)), len(timestamps)).tolist()
        ts = np.tile(timestamps, len(GB10_METRICS)).tolist()
        flat = values.reshape(-1)
        vals = flat.tolist() if real_values else flat.astype(np.int64).tolist()
        if layout == "raw":
            conn.execute(
                "CREATE TABLE GPU_METRICS (rawTimestamp INTEGER NOT NULL, timestamp INTEGER NOT NULL, "
                "typeId INTEGER NOT NULL, metricId INTEGER NOT NULL, value INTEGER NOT NULL)"
            )
            conn.executemany(
                "INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?, ?)",
                zip(ts, ts, [TYPE_ID] * len(ts), ids, vals, strict=True),
            )
        elif layout == "plain":
            conn.execute(
                "CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER NOT NULL, "
                "metricId INTEGER NOT NULL, value INTEGER NOT NULL)"
            )
            conn.executemany(
                "INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?)",
                zip(ts, [TYPE_ID] * len(ts), ids, vals, strict=True),
            )
        else:
            raise ValueError(f"unknown layout {layout!r}")
    conn.close()
    return timestamps, values


MS = 1_000_000


SM_ISSUE_ID, GPC_CLOCK_ID = 2, 17  # their metricIds


def capture_with(path: Path, sql: str) -> Path:
    build_capture(path, layout="raw", seconds=0.004, hz=1000)  # 19 metrics at 1, 2, 3 and 4 ms
    with sqlite3.connect(path) as conn:
        conn.executescript(sql)
    conn.close()
    return path


REAL_2026 = RECEIVER_DATA / "nsys-2026.1.3-no-gpu-metrics.sqlite"


SM_ISSUE = "SM Issue [Throughput %]"


def small_capture(tmp_path: Path, layout: str, **kw: object) -> tuple[Path, np.ndarray, np.ndarray]:
    path = tmp_path / f"{layout}.sqlite"
    ts, values = build_capture(path, layout=layout, seconds=1, hz=1000, **kw)  # type: ignore[arg-type]
    return path, ts, values


def metric_index(name: str) -> int:
    return [n for n, _, _ in GB10_METRICS].index(name)


# Columns without NOT NULL, as another tool (or a damaged export) may leave them.
LOOSE = {
    "plain": (
        "CREATE TABLE G (timestamp INTEGER, typeId INTEGER, metricId INTEGER, value INTEGER);"
        "INSERT INTO G SELECT * FROM GPU_METRICS; DROP TABLE GPU_METRICS;"
        "ALTER TABLE G RENAME TO GPU_METRICS;"
        "CREATE TABLE T (typeId INTEGER, sourceId INTEGER, typeName TEXT, metricId INTEGER, metricName TEXT);"
        "INSERT INTO T SELECT * FROM TARGET_INFO_GPU_METRICS; DROP TABLE TARGET_INFO_GPU_METRICS;"
        "ALTER TABLE T RENAME TO TARGET_INFO_GPU_METRICS;"
    ),
    "generic": (
        "CREATE TABLE G (rawTimestamp INTEGER, timestamp INTEGER, typeId INTEGER, data TEXT);"
        "INSERT INTO G SELECT * FROM GENERIC_EVENTS; DROP TABLE GENERIC_EVENTS;"
        "ALTER TABLE G RENAME TO GENERIC_EVENTS;"
    ),
}


def damaged(captures: dict[str, Path], tmp_path: Path, layout: str, sql: str) -> Path:
    path = tmp_path / f"damaged-{layout}.sqlite"
    shutil.copy(captures[layout], path)
    with sqlite3.connect(path) as conn:
        conn.executescript(sql)
    conn.close()
    return path


WITHOUT_ROWID = (
    "CREATE TABLE G (id INTEGER PRIMARY KEY, timestamp, typeId, metricId, value) WITHOUT ROWID;"
    "INSERT INTO G SELECT rowid, * FROM GPU_METRICS; DROP TABLE GPU_METRICS;"
    "ALTER TABLE G RENAME TO GPU_METRICS;"
)
