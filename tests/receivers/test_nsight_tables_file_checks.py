"""Opening an export: a file cut short, a stale header, and which tables make an Nsight export.

The corrupt-file test only matches the file name, and SQLite refuses a cut file on its own (as
malformed), so nothing pinned the header check: these give its message word for word, for 4 KiB
and 64 KiB pages (the header writes 65,536 as 1), for a page count past 2**24, and show the
count is not trusted where the header marks it stale (a file written by SQLite before 3.7.0).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.support.nsight import damaged

from spark_otel import InputError
from spark_otel.receivers.nsight import read_capture


def cut_short_message(path: Path, pages: int, page_size: int) -> str:
    return (
        f"{path}: cut short: its SQLite header counts {pages:,} pages of {page_size:,} bytes "
        f"({pages * page_size:,} bytes), the file holds {path.stat().st_size:,}; is the file complete?"
    )


def read_error(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        read_capture(path)
    return str(caught.value)


def test_a_file_cut_in_half_is_named_cut_short(captures: dict[str, Path], tmp_path: Path) -> None:
    whole = captures["plain"].read_bytes()
    pages = len(whole) // 4096  # the builder writes SQLite's default 4 KiB pages
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(whole[: len(whole) // 2])
    assert read_error(cut) == cut_short_message(cut, pages, 4096)


def test_64_kib_pages_written_as_1_in_the_header_are_counted_as_65536(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = tmp_path / "big-pages.sqlite"
    shutil.copy(captures["plain"], path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA page_size=65536")
        conn.execute("VACUUM")
    conn.close()
    whole = path.read_bytes()
    assert whole[16:18] == b"\x00\x01"  # the file format's spelling of 65,536
    path.write_bytes(whole[:-1000])  # short of its last page by 1,000 bytes
    assert read_error(path) == cut_short_message(path, len(whole) // 65536, 65536)


def test_a_page_count_past_2_to_the_24_is_read_from_all_four_bytes(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    header = bytearray(captures["plain"].read_bytes())
    header[28:32] = (2**24 + 1).to_bytes(4, "big")
    path = tmp_path / "huge.sqlite"
    path.write_bytes(bytes(header))
    assert read_error(path) == cut_short_message(path, 16_777_217, 4096)


def test_a_page_count_the_header_marks_stale_is_not_trusted(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    """Bytes 92-95 (version-valid-for) differ from the change counter (24-27): SQLite sizes the
    database by the file instead, so a count one page too many is no reason to refuse it."""
    data = bytearray(captures["plain"].read_bytes())
    pages = len(data) // 4096
    data[28:32] = (pages + 1).to_bytes(4, "big")
    data[92:96] = (int.from_bytes(data[24:28], "big") - 1).to_bytes(4, "big")
    path = tmp_path / "stale.sqlite"
    path.write_bytes(bytes(data))
    capture = read_capture(path)
    assert capture.skipped == []
    assert capture.summary.metric("SM Issue").samples == 50


def test_a_file_cut_inside_its_100_byte_header_is_left_to_sqlite(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = tmp_path / "header-only.sqlite"
    path.write_bytes(captures["plain"].read_bytes()[:99])
    assert read_error(path) == (
        f"{path}: not an Nsight Systems SQLite export (database disk image is malformed)"
    )


def test_an_sqlite_file_with_neither_nsight_table_is_refused_with_how_to_export(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE GPU_METRICS (timestamp, typeId, metricId, value)")
    conn.close()
    assert read_error(path) == (
        f"{path}: an SQLite file but not an Nsight Systems export (no TARGET_INFO_SESSION_START_TIME "
        "or META_DATA_EXPORT table); export one with `nsys export --type sqlite REPORT.nsys-rep`"
    )


def test_an_export_without_meta_data_is_still_an_export(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", "DROP TABLE META_DATA_EXPORT")
    summary = read_capture(path).summary
    assert (summary.product_version, summary.schema_version) == (None, None)
    assert summary.metric("SM Issue").samples == 50


def test_an_export_without_a_session_start_table_says_the_start_is_missing(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(captures, tmp_path, "plain", "DROP TABLE TARGET_INFO_SESSION_START_TIME")
    assert read_error(path) == (
        f"{path}: no TARGET_INFO_SESSION_START_TIME.utcEpochNs; the samples cannot be placed in time"
    )
