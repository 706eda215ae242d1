"""Fuzzing the eval-record reader (`backfill_files`): random bytes, the real samples cut at every
offset, random mutations of their records, bytes flipped in them.

`backfill_files` never raises: every record (or file) that does not fit becomes a `RecordError`
naming the file (and, for JSON Lines and CSV, the line), and the records around it still load.
Each cell it does return is one a report can place: it starts and ends in 2000-2100, in that
order, with whole token counts below 2**53 and a finite deadline.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.support.backfill_checks import backfill
from tests.support.backfill_records import BACKFILL, SERIAL
from tests.support.fuzzing import FUZZ, HOSTILE_NUMBERS, JSON_VALUES

from spark_otel._validate import EARLIEST_NS, LATEST_NS
from spark_otel.model import Cell
from spark_otel.receivers.backfill import BackfillResult, FieldMapping, load_mapping
from spark_otel.receivers.backfill.records import record_uid

SAMPLES = {
    "serial-arm-2026-09-17.jsonl": "spark-bench",
    "cells-with-bad-rows.csv": "generic-csv",
    "requests-openai-usage.jsonl": "openai-usage",
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-backfill")


def line_ends(data: bytes) -> Iterator[tuple[int, int]]:
    """(line number, offset just past the line's last byte, before its newline) per line."""
    offset = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        offset += len(line)
        yield number, offset
        offset += 1


def by_uid(result: BackfillResult) -> dict[str, Cell]:
    return {cell.uid: cell for cell in result.cells}


# -- truncation at every offset ---------------------------------------------------------------------
@pytest.mark.parametrize(("name", "mapping_name"), SAMPLES.items())
def test_a_sample_cut_at_every_offset_keeps_every_whole_line_before_the_cut(
    workdir: Path, name: str, mapping_name: str
) -> None:
    data = (BACKFILL / name).read_bytes()
    mapping = load_mapping(mapping_name)
    path = workdir / name
    path.write_bytes(data)
    full = backfill(path, mapping)
    full_cells = by_uid(full)
    full_error_lines = {e.line for e in full.errors}
    resolved = path.resolve()
    ends = list(line_ends(data))
    failures: list[str] = []
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        result = backfill(path, mapping)
        cells = by_uid(result)
        whole = [number for number, end in ends if end <= cut]
        cut_line = len(whole) + 1
        for number in whole:
            uid = record_uid(resolved, number)
            if uid in full_cells and cells.get(uid) != full_cells[uid]:
                failures.append(f"cut at {cut}: line {number}'s cell lost or changed")
        for error in result.errors:
            if error.line is None or (error.line not in full_error_lines and error.line < cut_line):
                failures.append(f"cut at {cut}: an error before the cut line {cut_line}: {error}")
    assert not failures, "\n".join(failures[:10])


# -- random bytes -------------------------------------------------------------------------------------
SUFFIXES = st.sampled_from([".jsonl", ".ndjson", ".csv", ".json", ".txt", ".JSONL"])
MAPPINGS = st.sampled_from(["spark-bench", "generic-csv", "openai-usage"])


@FUZZ
@given(data=st.binary(max_size=3000), suffix=SUFFIXES, mapping_name=MAPPINGS)
@example(data=b"\xff\xfe{}\n", suffix=".jsonl", mapping_name="spark-bench")
def test_random_bytes_are_records_or_errors_naming_the_file(
    workdir: Path, data: bytes, suffix: str, mapping_name: str
) -> None:
    path = workdir / f"random{suffix}"
    path.write_bytes(data)
    result = backfill(path, load_mapping(mapping_name))
    assert result.records >= len(result.cells)


# Regressions too large for an @example (hypothesis would print them whole).
@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_json_nested_past_the_recursion_limit_is_an_error_at_its_line(workdir: Path, suffix: str) -> None:
    path = workdir / f"deep{suffix}"
    good = json.dumps(SERIAL_RECORDS[0])
    path.write_text(f"{good}\n{'[' * 100_000}\n" if suffix == ".jsonl" else "[" * 100_000, encoding="utf-8")
    result = backfill(path, load_mapping("spark-bench"))
    [error] = result.errors
    assert "nested too deeply" in error.message
    assert error.line == (2 if suffix == ".jsonl" else None)
    assert len(result.cells) == (1 if suffix == ".jsonl" else 0)


@pytest.mark.parametrize("bad_row", ["x" * 140_000, '"' + "x" * 140_000])
def test_a_csv_field_past_the_csv_modules_limit_is_an_error_at_its_line(workdir: Path, bad_row: str) -> None:
    path = workdir / "huge-field.csv"
    rows = csv_text(CSV_ROWS[:1]) + bad_row + "\n"
    path.write_text(rows, encoding="utf-8", newline="")
    result = backfill(path, load_mapping("generic-csv"))
    assert [c.cell_id for c in result.cells] == [CSV_ROWS[0][0]]
    [error] = result.errors
    assert error.line == 3
    assert "field larger than" in error.message


# -- random mutations of valid records ----------------------------------------------------------------
SERIAL_LINES = SERIAL.read_text(encoding="utf-8").splitlines()
SERIAL_RECORDS = [json.loads(line) for line in SERIAL_LINES]
FIELDS = sorted({key for record in SERIAL_RECORDS for key in record} | {"usage.completion_tokens", "cell_id"})


def set_path(record: dict[str, object], dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    target = record
    for part in parents:
        child = target.get(part)
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[leaf] = value


@st.composite
def mutated_serial(draw: st.DrawFn) -> tuple[int, str]:
    """(line number, the new line) for one record of the Appendix D sample, mutated."""
    index = draw(st.integers(0, len(SERIAL_RECORDS) - 1))
    record = json.loads(SERIAL_LINES[index])
    op = draw(st.sampled_from(["set", "set", "set", "delete", "replace"]))
    if op == "replace":
        return index + 1, json.dumps(draw(JSON_VALUES))
    for _ in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(FIELDS))
        if op == "delete":
            record.pop(field.split(".")[0], None)
        else:
            set_path(record, field, draw(JSON_VALUES))
    return index + 1, json.dumps(record)


@FUZZ
@given(mutation=mutated_serial())
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "elapsed_s": 10**400})))  # OverflowError
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "started_at": 10**400})))
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "usage": {"completion_tokens": 10**400}})))
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "elapsed_s": 1e308})))  # inf ns
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "elapsed_s": 1e20})))  # ends in the year ~3e12
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "usage": {"completion_tokens": 1e300}})))
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "deadline_s": 10**400})))
@example(mutation=(1, json.dumps({**SERIAL_RECORDS[0], "workers": 2**64})))
def test_a_mutated_record_is_a_cell_or_an_error_at_its_line_and_the_others_still_load(
    workdir: Path, mutation: tuple[int, str]
) -> None:
    line, text = mutation
    path = workdir / "mutated.jsonl"
    mapping = load_mapping("spark-bench")
    path.write_text("\n".join(SERIAL_LINES) + "\n", encoding="utf-8")
    before = by_uid(backfill(path, mapping))
    lines = list(SERIAL_LINES)
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = backfill(path, mapping)

    mutated_uid = record_uid(path.resolve(), line)
    after = by_uid(result)
    assert {u: c for u, c in after.items() if u != mutated_uid} == {
        u: c for u, c in before.items() if u != mutated_uid
    }
    assert [e.line for e in result.errors] in ([], [line])
    assert (mutated_uid in after) != bool(result.errors)


@FUZZ
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, 3113),
            st.sampled_from(["flip", "insert", "delete"]),
            st.binary(min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=4,
    )
)
@example(edits=[(3100, "insert", b"\xe2\x82")])  # a multi-byte character cut short, in the last line
def test_bytes_edited_in_a_sample_keep_the_records_on_the_lines_before(
    workdir: Path, edits: list[tuple[int, str, bytes]]
) -> None:
    data = bytearray(SERIAL.read_bytes())
    path = workdir / "edited.jsonl"
    mapping = load_mapping("spark-bench")
    path.write_bytes(bytes(data))
    before = by_uid(backfill(path, mapping))
    first = min(position for position, _, _ in edits)
    for position, op, payload in sorted(edits, reverse=True):
        if op == "flip":
            data[position : position + len(payload)] = bytes(
                b ^ p for b, p in zip(data[position : position + len(payload)], payload, strict=False)
            )
        elif op == "insert":
            data[position:position] = payload
        else:
            del data[position : position + len(payload)]
    path.write_bytes(bytes(data))
    after = by_uid(backfill(path, mapping))
    untouched_lines = SERIAL.read_bytes()[:first].count(b"\n")  # lines wholly before the first edit
    resolved = path.resolve()
    for number in range(1, untouched_lines + 1):
        uid = record_uid(resolved, number)
        assert after.get(uid) == before[uid], f"line {number}, before the first edit at {first}"


GENERIC_CSV_HEADER = [
    "cell_id",
    "engine",
    "start",
    "elapsed_s",
    "prompt_tokens",
    "completion_tokens",
    "status",
]
CSV_ROWS = [
    ["C #23 correctness", "qwen", "2026-09-19T01:00:00Z", "751", "14117", "8594", "ok"],
    ["C #294 correctness", "qwen", "1789786000", "698", "7006", "8115", "completed"],
    ["E #84 correctness", "qwen", "2026-09-19T03:00:00Z", "1800", "", "", "timeout"],
]


def csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(GENERIC_CSV_HEADER)
    writer.writerows(rows)
    return out.getvalue()


@FUZZ
@given(
    row=st.integers(0, len(CSV_ROWS) - 1),
    column=st.integers(0, len(GENERIC_CSV_HEADER) - 1),
    value=st.text(max_size=40) | st.sampled_from(["1e400", "1" * 400, "nan", "-1", "9" * 30, '"', ",", "\n"]),
)
def test_a_csv_field_set_to_anything_spoils_at_most_its_own_row(
    workdir: Path, row: int, column: int, value: str
) -> None:
    path = workdir / "mutated.csv"
    mapping = load_mapping("generic-csv")
    path.write_text(csv_text(CSV_ROWS), encoding="utf-8", newline="")
    before = {c.cell_id: c.model_dump(exclude={"uid"}) for c in backfill(path, mapping).cells}
    rows = [list(r) for r in CSV_ROWS]
    rows[row][column] = value
    path.write_text(csv_text(rows), encoding="utf-8", newline="")
    result = backfill(path, mapping)
    after = {c.cell_id: c.model_dump(exclude={"uid"}) for c in result.cells}
    others = {CSV_ROWS[i][0] for i in range(len(CSV_ROWS)) if i != row} - {value}
    assert {k: v for k, v in after.items() if k in others} == {k: v for k, v in before.items() if k in others}
    assert len(result.errors) <= 1


@settings(FUZZ, max_examples=FUZZ.max_examples // 2)
@given(
    start=st.integers(EARLIEST_NS - 10**18, LATEST_NS + 10**18),
    elapsed=HOSTILE_NUMBERS | JSON_VALUES,
    unit=st.sampled_from(["s", "ms", "ns"]),
)
@example(start=EARLIEST_NS, elapsed=1e20, unit="s")  # ends in the year ~3e12, and was kept
@example(start=EARLIEST_NS, elapsed=1e300, unit="ms")  # OverflowError: inf nanoseconds
def test_start_plus_any_elapsed_is_placed_in_2000_2100_or_refused(
    workdir: Path, start: int, elapsed: object, unit: str
) -> None:
    mapping = FieldMapping(name="t", cell_id="id", start="start", elapsed="elapsed", elapsed_unit=unit)
    path = workdir / "elapsed.jsonl"
    path.write_text(json.dumps({"id": "c", "start": start, "elapsed": elapsed}) + "\n", encoding="utf-8")
    result = backfill(path, mapping)
    assert len(result.cells) + len(result.errors) == 1
    assert all(e.line == 1 for e in result.errors)
