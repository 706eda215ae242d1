"""Backfill a field at a time (issue 38): `backfill_files` reads a file's records as columns and
leaves to `cell_from_record` only the records it does not take as they come; the cells, errors
(file, line and message), warnings and record counts must be exactly those of reading every
record on its own (`tests/support/backfill_reference.py`, the path as it was), and a store written
from the batch (`Store.write_cell_batch`) must hold the same rows, typed alike, as one written
from the `Cell` records (`Store.write_cells`).

Generated files mix what plainly reads with what must be refused precisely: numbers with commas,
blanks, signs, NaN and past 2**53, times in every unit and outside 2000-2100, ISO 8601 with and
without zones, unknown statuses, ragged and blank CSV rows, quoted fields across lines, repeated
header names, JSON values of every type, and mappings with templates, sums, literals and
durations.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.support.backfill_reference import backfill_one_by_one
from tests.support.cells import cell

from spark_otel.model import Cell, CellStatus
from spark_otel.receivers.backfill import FieldMapping, backfill_files, load_mapping
from spark_otel.records.cell_batch import CellBatch
from spark_otel.store import Store

T0 = 1_758_243_600 * 10**9
SETTINGS = settings(
    max_examples=int(os.environ.get("SPARK_OTEL_FUZZ_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

NUMBERS = st.sampled_from(
    [
        "12",
        " 12 ",
        "1,200",
        "1_000",
        "12.5",
        "-3",
        "-0",
        "nan",
        "inf",
        "1e999",
        "abc",
        "",
        "  ",
        "0",
        "9007199254740992",
        "9007199254740991",
        "2.0",
        "١٢",
        "1e3",
        "0x10",
    ]
) | st.integers(0, 5000).map(str)
SECONDS = st.integers(946_684_790, 4_102_444_810)
TIMES = st.one_of(
    st.sampled_from(
        [
            "2025-09-19T01:00:02.619Z",
            "2025-09-19 01:00:02",
            "2025-09-19T01:00:02+02:00",
            "1999-12-31T23:59:59Z",
            "2100-01-01T00:00:00Z",
            "2099-12-31T23:59:59.999999Z",
            "not a time",
            "",
            "-5",
            "123",
            "nan",
            "1e999",
            "2025-13-01T00:00:00Z",
            " 2025-09-19T01:00:02Z ",
        ]
    ),
    SECONDS.map(str),
    st.tuples(SECONDS, st.sampled_from([1, 1_000, 1_000_000, 1_000_000_000])).map(lambda p: str(p[0] * p[1])),
    st.tuples(SECONDS, st.floats(0, 1)).map(lambda p: repr(p[0] + p[1])),
)
STATUSES = st.sampled_from(["ok", "OK", " Timeout ", "error", "length", "weird", "", "done", "FAIL"])
FLAGS = st.sampled_from(["", "true", "1", "no", "yes", " T ", "0"])
IDS = st.sampled_from(["", " ", "c1", "c2", "pr1 a run1"]) | st.text(min_size=1, max_size=6)
COLUMNS = {
    "cell_id": IDS,
    "engine": st.sampled_from(["", "qwen", "llama", " "]),
    "start": TIMES,
    "end": TIMES,
    "elapsed_s": NUMBERS | st.sampled_from(["3e9", "31.5", "1e-3"]),
    "prompt_tokens": NUMBERS,
    "completion_tokens": NUMBERS,
    "status": STATUSES,
    "timeout": FLAGS,
    "deadline_s": NUMBERS,
    "workers": NUMBERS,
}


@st.composite
def csv_files(draw: st.DrawFn) -> str:
    """A CSV in generic-csv's columns: some of them, in any order, a name repeated now and then,
    rows that are mostly plain, some ragged, blank lines, quoted fields."""
    names = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=11, unique=True))
    names = draw(st.permutations(names))
    if draw(st.booleans()) and len(names) > 2:
        names = [*names, names[0]]  # a repeated header name: the later column wins
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(names)
    plain = draw(st.booleans())  # most files: every value one that reads
    for _ in range(draw(st.integers(0, 25))):
        shape = draw(st.sampled_from(["row"] * 12 + ["short", "long", "blank", "newline"]))
        row = [_plain(name, draw) if plain else draw(COLUMNS[name]) for name in names]
        if shape == "short" and row:
            row = row[:-1]
        elif shape == "long":
            row = [*row, "extra"]
        elif shape == "blank":
            out.write("\n")
            continue
        elif shape == "newline" and row:
            row[0] = row[0] + "\nmore"
        writer.writerow(row)
    return out.getvalue()


def _plain(name: str, draw: st.DrawFn) -> str:
    """A value of column ``name`` that reads."""
    if name in ("start", "end"):
        return draw(st.sampled_from(["2025-09-19T01:00:02.619Z", "1758243602", "1758243602500"]))
    if name == "status":
        return draw(st.sampled_from(["ok", "timeout", "error", "length"]))
    if name == "timeout":
        return draw(FLAGS)
    if name in ("cell_id", "engine"):
        return draw(st.sampled_from(["c1", "c2", "qwen"]))
    return str(draw(st.integers(0, 400)))


def _assert_same(path: Path, mapping: FieldMapping, eval_name: str | None, engine: str | None = None) -> None:
    result = backfill_files([path], mapping, eval_name=eval_name, engine=engine)
    reference = backfill_one_by_one(path, mapping, eval_name=eval_name, engine=engine)
    assert result.errors == reference.errors
    assert result.warnings == reference.warnings
    assert result.records == reference.records
    assert result.cells == reference.cells
    assert [c.model_dump() for c in result.cells] == [c.model_dump() for c in reference.cells]


@SETTINGS
@given(text=csv_files(), eval_name=st.sampled_from(["ev", None]), engine=st.sampled_from([None, "eng"]))
@example(text="cell_id,start,elapsed_s\nc1,2025-09-19T01:00:02Z,3\n", eval_name="ev", engine=None)
@example(  # an end made past 2100, a start made before 2000
    text="cell_id,start,elapsed_s\nc1,2099-12-31T23:59:59Z,5\nc2,2025-01-01T00:00:00Z,5\n",
    eval_name="ev",
    engine=None,
)
@example(
    text="cell_id,end,elapsed_s\nc1,2000-01-01T00:00:01Z,5\nc2,2000-01-01T00:00:09Z,5\n",
    eval_name="ev",
    engine=None,
)
@example(
    text="cell_id,start,end\nc1,1758243602,1758243601\nc2,1758243602,1758243602\n",
    eval_name="ev",
    engine=None,
)
@example(  # a status the mapping does not know is refused, a true timeout flag beside it or not
    text="cell_id,start,elapsed_s,status,timeout\nc1,1758243602,3,weird,true\nc2,1758243602,3,ok,true\n",
    eval_name="ev",
    engine=None,
)
@example(text="cell_id,elapsed_s\nc1,3\n", eval_name="ev", engine=None)  # one record: placed by the mtime
@example(text="cell_id,elapsed_s\nc1,3\nc2,4\n", eval_name="ev", engine=None)  # two: not
@example(
    text='cell_id,start,elapsed_s\n"c\n1",1758243602,3\n\nc2,1758243602,4\n', eval_name="ev", engine=None
)
def test_a_csv_reads_as_every_record_read_on_its_own(
    tmp_path: Path, text: str, eval_name: str | None, engine: str | None
) -> None:
    path = tmp_path / "cells.csv"
    path.write_text(text, encoding="utf-8", newline="")
    _assert_same(path, load_mapping("generic-csv"), eval_name, engine)  # type: ignore[arg-type]


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3000),
    st.sampled_from([2**53, 2**63, 10**400, 1.5, -0.0, float("nan"), float("inf"), 1e300]),
    NUMBERS,
    TIMES,
    STATUSES,
    st.sampled_from([{}, [], {"a": 1}, [1, 2]]),
)
SPARK_BENCH_KEYS = [
    "cell_id",
    "eval",
    "engine",
    "pr",
    "angle",
    "run",
    "elapsed_s",
    "started_at",
    "finished_at_unix_s",
    "status",
    "timeout",
    "deadline_s",
    "workers",
]
DURATIONS = FieldMapping.model_validate(
    {
        "name": "durations",
        "cell_id": "{pr}-{run} || id",
        "eval_name": {"document": "task"},
        "engine": {"value": "qwen"},
        "prompt_tokens": {"sum": "usage.*.input_tokens"},
        "completion_tokens": "usage.out",
        "elapsed": "took",
        "elapsed_unit": "ms",
        "first_token": "ttft",
        "decode": "decode",
        "queue_wait": "wait",
        "start": "t0",
        "end": "t1",
        "status": "status",
        "status_values": {"cut": "deadline"},
        "deadline_s": 30.0,
        "workers": "w",
        "attributes": {"x.pr": "pr", "error.type": "kind"},
        "optional": ["end"],
    }
)


@st.composite
def jsonl_records(draw: st.DrawFn, keys: list[str]) -> list[dict[str, Any]]:
    records = []
    for _ in range(draw(st.integers(0, 15))):
        chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
        records.append({key: draw(SCALARS) for key in chosen})
    return records


@SETTINGS
@given(records=jsonl_records([*SPARK_BENCH_KEYS, "usage"]), eval_name=st.sampled_from(["ev", None]))
def test_json_lines_read_as_every_record_read_on_its_own(
    tmp_path: Path, records: list[dict[str, Any]], eval_name: str | None
) -> None:
    for record in records:
        if "usage" in record:
            record["usage"] = {"completion_tokens": record["usage"], "prompt_tokens": 3}
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n[1]\n")
    _assert_same(path, load_mapping("spark-bench"), eval_name)  # type: ignore[arg-type]


@SETTINGS
@given(
    records=jsonl_records(
        ["pr", "run", "id", "took", "ttft", "decode", "wait", "t0", "t1", "status", "w", "kind", "usage"]
    )
)
def test_a_mapping_of_every_form_reads_as_every_record_read_on_its_own(
    tmp_path: Path, records: list[dict[str, Any]]
) -> None:
    for record in records:
        if "usage" in record:
            record["usage"] = {"a": {"input_tokens": record["usage"]}, "b": {"input_tokens": 2}, "out": 5}
    path = tmp_path / "samples.json"
    path.write_text(json.dumps({"task": "t", "samples": records}))
    mapping = DURATIONS.model_copy(update={"records": "samples"})
    _assert_same(path, mapping, None)


def test_a_plain_file_is_read_without_a_record_read_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The column path decides every plain record itself: `cell_from_record` is never called."""
    from spark_otel.receivers.backfill import records as records_module

    path = tmp_path / "cells.csv"
    rows = [
        f"c{i},qwen,2025-09-19T01:00:{i:02d}Z,{i}.5,10,{i * 7},{s},4"
        for i, s in enumerate(["ok", "timeout", "error", "length"] * 5)
    ]
    path.write_text(
        "cell_id,engine,start,elapsed_s,prompt_tokens,completion_tokens,status,workers\n"
        + "\n".join(rows)
        + "\n"
    )
    reference = backfill_one_by_one(path, load_mapping("generic-csv"), eval_name="ev")  # type: ignore[arg-type]

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a plain record was read on its own")

    monkeypatch.setattr(records_module, "cell_from_record", refused)
    result = backfill_files([path], load_mapping("generic-csv"), eval_name="ev")
    assert result.cells == reference.cells
    assert len(result.cells) == 20
    assert [c.status for c in result.cells[:4]] == [
        CellStatus.OK,
        CellStatus.DEADLINE,
        CellStatus.ERROR,
        CellStatus.LENGTH_CAP,
    ]


def _rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        names = [row[1] for row in conn.execute("PRAGMA table_info(cells)")]
        typed = ", ".join(f"{n}, typeof({n})" for n in names)
        return conn.execute(f"SELECT {typed} FROM cells ORDER BY uid").fetchall()
    finally:
        conn.close()


@SETTINGS
@given(text=csv_files())
def test_a_store_written_from_the_batch_holds_the_rows_written_from_cells(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cells.csv"
    path.write_text(text, encoding="utf-8", newline="")
    result = backfill_files([path], load_mapping("generic-csv"), eval_name="ev")
    for old in tmp_path.glob("*.sqlite*"):
        old.unlink()
    with Store(tmp_path / "cells.sqlite") as by_cells, Store(tmp_path / "batch.sqlite") as by_batch:
        by_cells.write_cells(result.cells)
        assert by_batch.write_cell_batch(result.batch) == len(result.cells)
    assert _rows(tmp_path / "batch.sqlite") == _rows(tmp_path / "cells.sqlite")


VARIED = [
    cell("a", 1.0, 2.0, 10, t0_ns=T0, status=CellStatus.DEADLINE, salvaged_findings=2, trace_id="t" * 32),
    cell(
        "b", 1.5, 4.0, None, t0_ns=T0, engine=None, deadline_s=30.0, workers=4, attributes={"q'uote": "it's"}
    ),
    cell(
        "c", 2.0, 2.0, 0, t0_ns=T0, status=CellStatus.ERROR, source="live", first_token_s=0.0, decode_s=1e-9
    ),
    cell(
        "d", 3.0, 9.0, 2**53 - 1, t0_ns=T0, prompt_tokens=7, unsplit_s=1.0, other_s=2.5, attributes={"n": 1.5}
    ),
]


@pytest.mark.parametrize(
    "cells", [VARIED, VARIED[:1], [VARIED[1]] * 3, []], ids=["varied", "one", "alike", "none"]
)
def test_a_batch_of_any_cells_is_written_as_the_cells_are(tmp_path: Path, cells: list[Cell]) -> None:
    """Every column bound, or written in the statement where all cells share it (a quote in the
    text included); a stored cell of a uid the batch replaces goes, as with `write_cells`."""
    batch = CellBatch.from_cells(cells)
    assert batch.cells() == cells
    for path in ("by_cells", "by_batch"):
        with Store(tmp_path / f"{path}.sqlite") as store:
            store.write_cells([cell("gone", 0.0, 1.0, 1, t0_ns=T0), cell("a", 0.0, 1.0, 1, t0_ns=T0)])
    with Store(tmp_path / "by_cells.sqlite") as by_cells, Store(tmp_path / "by_batch.sqlite") as by_batch:
        by_cells.write_cells(cells, replacing=["gone"])
        assert by_batch.write_cell_batch(batch, replacing=["gone"]) == len(cells)
        assert by_batch.cells() == by_cells.cells()
    assert _rows(tmp_path / "by_batch.sqlite") == _rows(tmp_path / "by_cells.sqlite")


def test_batches_join_take_and_keep_their_cells_in_order() -> None:
    one, two = CellBatch.from_cells(VARIED[:2]), CellBatch.from_cells(VARIED[2:])
    joined = CellBatch.joined([one, CellBatch.empty(), two])
    assert joined.cells() == VARIED
    assert joined.take([3, 0]).cells() == [VARIED[3], VARIED[0]]
    assert joined.compress([False, True, True, False]).cells() == VARIED[1:3]
    assert joined.elapsed_s() == [c.elapsed_s for c in VARIED]
    assert joined.decode_rates() == [c.decode_rate for c in VARIED]
    assert CellBatch.empty().cells() == []


def test_the_commands_json_and_summary_of_a_batch_are_those_of_its_cells(tmp_path: Path) -> None:
    """`backfill --json`'s cells and its counts, made from the batch, as they were made from each
    `Cell` (`model_dump(mode="json")` with its elapsed time and rate; `ceiling_hit` and
    `rated_decode_rate` summarised)."""
    from spark_otel.analysis.rates import ceiling_hit, rated_decode_rate
    from spark_otel.analysis.stats import summarize
    from spark_otel.cli.backfill import _cells_json, _summary

    odd = cell("e", 1.0, 3.0, 9, t0_ns=T0, attributes={"nan": float("nan"), "big": 2**70, "t": True})
    for cells in (VARIED, [*VARIED, odd]):
        batch = CellBatch.from_cells(cells)
        expected = [
            c.model_dump(mode="json") | {"elapsed_s": c.elapsed_s, "decode_rate": c.decode_rate}
            for c in cells
        ]
        assert json.dumps(_cells_json(batch)) == json.dumps(expected)
        timeouts, rates = _summary(batch)
        assert timeouts == sum(1 for c in cells if ceiling_hit(c)) == 1
        assert rates == summarize(rated_decode_rate(c) for c in cells)
    assert _cells_json(CellBatch.empty()) == []
