"""Reading record files (`backfill_files`): each file- and line-level problem as the exact
`RecordError` (file, line, whole message), the records around it still loaded, and the summary
a person reads (`error_lines`, the per-file warnings).

A backfill of a long eval's records is run once, by someone who was not there: an error must
name the file and line and say what is wrong in full, and a bad line must never cost the lines
after it (in JSON Lines or CSV: a blank line, a cut-off multi-byte character, a BOM, a line the
csv module gives up on). The per-file warnings are per file: one file's cells never hide
another's mistake.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_otel.receivers.backfill import (
    BackfillResult,
    FieldMapping,
    RecordError,
    backfill_files,
    error_lines,
)
from spark_otel.receivers.backfill import records as records_module
from spark_otel.receivers.backfill.records import record_uid

MAPPING = FieldMapping(name="m", cell_id="id", completion_tokens="n", elapsed="el", start="start")
CSV_HEADER = "id,n,el,start\n"


def _row(cell_id: str, **fields: object) -> dict[str, object]:
    return {"id": cell_id, "n": 100, "el": 10, "start": "2026-09-17T10:00:00Z", **fields}


def _line(cell_id: str, **fields: object) -> bytes:
    return json.dumps(_row(cell_id, **fields)).encode() + b"\n"


def _csv_line(cell_id: str) -> bytes:
    return f"{cell_id},100,10,2026-09-17T10:00:00Z\n".encode()


def _backfill(path: Path, data: bytes, mapping: FieldMapping = MAPPING) -> BackfillResult:
    path.write_bytes(data)
    return backfill_files([path], mapping, eval_name="ev")


def _ids(result: BackfillResult) -> list[str]:
    return [c.cell_id for c in result.cells]


# -- JSON Lines ------------------------------------------------------------------------------------
def test_json_lines_keep_loading_past_a_blank_line_a_bad_byte_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    data = (
        b"\xef\xbb\xbf"  # a BOM opens line 1 only
        + _line("a")
        + b"\n"
        + b'{"id": "b\xffc"}\n'
        + _line("d")
        + b"{\n"
        + b"[" * 100_000
        + b"\n"
        + _line("e")
    )
    result = _backfill(path, data)
    assert _ids(result) == ["a", "d", "e"]
    assert result.errors == [
        RecordError(str(path), 3, "not UTF-8 text: byte 0xff at column 10"),
        RecordError(str(path), 5, "not valid JSON: Expecting property name enclosed in double quotes: "
                    "line 2 column 1 (char 2)"),
        RecordError(str(path), 6, "not valid JSON: nested too deeply to read"),
    ]  # fmt: skip
    assert result.records == 6


def test_ndjson_is_json_lines_too(tmp_path: Path) -> None:
    result = _backfill(tmp_path / "runs.NDJSON", _line("a") + _line("b"))
    assert (_ids(result), result.errors) == (["a", "b"], [])


# -- whole JSON files -------------------------------------------------------------------------------
def test_a_json_file_with_a_bom_loads(tmp_path: Path) -> None:
    result = _backfill(tmp_path / "runs.json", b"\xef\xbb\xbf" + json.dumps([_row("a"), _row("b")]).encode())
    assert (_ids(result), result.errors) == (["a", "b"], [])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not valid JSON (Expecting value: line 1 column 1 (char 0)); use .jsonl for JSON Lines"),
        (b"[" * 100_000, "not valid JSON (nested too deeply to read); use .jsonl for JSON Lines"),
        (
            b'[{"id": "\xff"}]',
            "not UTF-8 text: 'utf-8' codec can't decode byte 0xff in position 9: invalid start byte",
        ),
    ],
)
def test_a_json_file_that_cannot_be_read_is_one_error_for_the_file(
    tmp_path: Path, data: bytes, message: str
) -> None:
    path = tmp_path / "runs.json"
    result = _backfill(path, data)
    assert (result.cells, result.errors) == ([], [RecordError(str(path), None, message)])
    assert str(result.errors[0]) == f"{path}: {message}"


def test_a_missing_file_and_a_directory_are_errors_naming_them_and_the_other_files_load(
    tmp_path: Path,
) -> None:
    missing, folder, good = tmp_path / "gone.jsonl", tmp_path / "folder", tmp_path / "good.jsonl"
    folder.mkdir()
    good.write_bytes(_line("a"))
    result = backfill_files([missing, folder, good], MAPPING, eval_name="ev")
    assert _ids(result) == ["a"]
    assert result.errors == [
        RecordError(str(missing), None, "no such file"),
        RecordError(str(folder), None, "is a directory, not a regular file; nothing was read"),
    ]


# -- CSV ---------------------------------------------------------------------------------------------
def test_csv_rows_keep_loading_past_a_bad_byte_and_a_bad_last_line_is_still_reported(tmp_path: Path) -> None:
    path = tmp_path / "cells.csv"
    data = (
        b"\xef\xbb\xbf"
        + CSV_HEADER.encode()
        + _csv_line("a")
        + b"b\xff,100,10,2026-09-17T10:00:00Z\n"
        + b'"two\nlines",100,10,2026-09-17T10:00:00Z\r\n'  # a quoted field keeps its line break
        + b"\xffend\n"
    )
    result = _backfill(path, data)
    assert _ids(result) == ["a", "two\nlines"]
    assert result.errors == [
        RecordError(str(path), 3, "not UTF-8 text: byte 0xff at column 2"),
        RecordError(str(path), 6, "not UTF-8 text: byte 0xff at column 1"),
    ]


def test_a_csv_the_csv_module_gives_up_on_keeps_the_rows_before(tmp_path: Path) -> None:
    path = tmp_path / "cells.csv"
    data = CSV_HEADER.encode() + _csv_line("a") + b"\xff\n" + b"x" * 140_000 + b"\n" + _csv_line("b")
    result = _backfill(path, data)
    assert _ids(result) == ["a"]
    assert result.errors == [
        RecordError(str(path), 3, "not UTF-8 text: byte 0xff at column 1"),
        RecordError(str(path), 4, "not readable as CSV: field larger than field limit (131072)"),
    ]


# -- several files -----------------------------------------------------------------------------------
def test_each_file_has_its_own_uids_and_its_own_warnings(tmp_path: Path) -> None:
    with_tokens, without, without_too = (tmp_path / f"{name}.jsonl" for name in ("a", "b", "c"))
    with_tokens.write_bytes(_line("a1"))
    without.write_bytes(_line("b1", n=None) + _line("b2", n=None))
    without_too.write_bytes(_line("c1", n=None))
    result = backfill_files([with_tokens, without, without_too], MAPPING, eval_name="ev")
    assert [c.uid for c in result.cells] == [
        record_uid(with_tokens.resolve(), 1),
        record_uid(without.resolve(), 1),
        record_uid(without.resolve(), 2),
        record_uid(without_too.resolve(), 1),
    ]
    tail = "no record has completion_tokens ('n'): check the mapping's path (its cells have no decode rate)"
    assert result.warnings == [f"{without}: {tail}", f"{without_too}: {tail}"]


def test_the_ceiling_warning_counts_cells_past_ten_times_and_names_the_worst_by_ratio(tmp_path: Path) -> None:
    mapping = MAPPING.model_copy(update={"deadline_s": "ceiling"})
    path = tmp_path / "runs.jsonl"
    data = (
        _line("long", el=20_000, ceiling=1000)  # 20x, the longest
        + _line("worst", el=5_000, ceiling=100)  # 50x
        + _line("at-ten", el=1_000, ceiling=100)  # exactly 10x: not past it
    )
    result = _backfill(path, data, mapping)
    assert result.warnings == [
        f"{path}: 2 of 3 cells ran more than 10x their own ceiling (e.g. worst: 5,000 s against 100 s); "
        "is elapsed_unit ('s') right?"
    ]


def test_a_digest_of_zeros_still_gives_a_usable_span_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """Span id 0 is invalid in OTel. A SHA-256 opening with 64 zero bits is never seen in practice
    (1 in 2**64), so the digest is faked here: the one fault no real file can produce."""

    class ZeroDigest:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def hexdigest(self) -> str:
            return "0" * 64

    monkeypatch.setattr(records_module, "hashlib", SimpleNamespace(sha256=ZeroDigest))
    assert record_uid(Path("/records/a.jsonl"), 1) == "0000000000000001"


# -- the summary a person reads -----------------------------------------------------------------------
def test_error_lines_bounds_places_to_20_and_counts_the_rest_of_each_message() -> None:
    distinct = [RecordError("c.csv", n, f"message {n}") for n in range(50)]
    assert error_lines(distinct) == [
        *(str(e) for e in distinct[:20]),
        "... and 30 more errors (--json lists every one)",
    ]
    three = [RecordError("a.jsonl", n, "no cell id at 'id'") for n in (1, 2, 3)]
    assert error_lines(three) == [str(e) for e in three]
    four = [*three, RecordError("a.jsonl", 4, "no cell id at 'id'")]
    assert error_lines(four) == [*(str(e) for e in three), "... and 1 more with the same error"]
