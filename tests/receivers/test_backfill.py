"""Backfill: eval records to cells with historical times; Appendix D figures; bad rows; spans."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.backfill_records import BACKFILL, CSV, SERIAL, utc_ns

from spark_otel import ConfigError
from spark_otel.model import CellStatus
from spark_otel.receivers.backfill import (
    FieldMapping,
    FixedIdGenerator,
    backfill_files,
    export_cells_as_spans,
    load_mapping,
)
from spark_otel.store import Store
from spark_otel.store.exporters import StoreSpanExporter

OPENAI = BACKFILL / "requests-openai-usage.jsonl"

# Appendix D: tok/s per cell as published (elapsed there is rounded to whole seconds).
APPENDIX_D_RATES = {
    "B #454 tests run2": 9.53,
    "B #454 tests run3": 8.39,
    "B #454 quality run3": 9.01,
    "B #454 security run3": 5.25,
    "F #11 correctness run3": 10.97,
    "F #11 tests run1": 10.14,
    "F #11 tests run2": 10.14,
    "F #11 tests run3": 10.01,
    "F #11 quality run1": 10.47,
    "F #11 quality run2": 10.92,
}


def test_appendix_d_records_reproduce_the_published_rates_and_keep_timeouts() -> None:
    result = backfill_files([SERIAL], load_mapping("spark-bench"), eval_name=None)
    assert result.errors == []
    cells = {c.cell_id: c for c in result.cells}
    assert len(cells) == 13
    for cell_id, rate in APPENDIX_D_RATES.items():
        assert cells[cell_id].decode_rate == pytest.approx(rate, abs=0.03)
    timeouts = [c for c in result.cells if c.status is CellStatus.DEADLINE]
    assert sorted(c.cell_id for c in timeouts) == [
        "B #454 security run2",
        "F #11 correctness run1",
        "F #11 correctness run2",
    ]
    assert all(c.decode_rate is None and c.completion_tokens is None and c.deadline_hit for c in timeouts)
    run2 = cells["B #454 tests run2"]
    assert run2.start_unix_ns == utc_ns("2026-09-17T06:39:00")
    assert run2.elapsed_s == 740
    assert (run2.eval_name, run2.engine, run2.workers, run2.deadline_s) == (
        "golden-review-serial",
        "qwen",
        1,
        1800,
    )
    assert run2.source == "backfill"
    assert run2.attributes["spark_otel.backfill.pr"] == "B #454"


def test_start_from_mtime_minus_elapsed_as_in_appendix_d(tmp_path: Path) -> None:
    end = utc_ns("2026-09-17T08:24:03")
    record = {
        "pr": "B #454",
        "angle": "security",
        "run": 3,
        "elapsed_s": 1083,
        "usage": {"completion_tokens": 5690},
    }
    path = tmp_path / "B-454-security-run3.json"
    path.write_text(json.dumps(record))
    os.utime(path, ns=(end, end))
    [cell] = backfill_files([path], load_mapping("spark-bench"), eval_name="serial", engine="qwen").cells
    assert cell.end_unix_ns == end
    assert cell.start_unix_ns == end - 1083 * 1_000_000_000
    assert cell.cell_id == "B #454 security run3"
    assert cell.engine == "qwen"
    assert cell.decode_rate == pytest.approx(5.25, abs=0.01)


def test_bad_csv_rows_are_reported_with_file_and_line_and_the_rest_load(tmp_path: Path) -> None:
    result = backfill_files([CSV], load_mapping("generic-csv"), eval_name="cells-q38")
    errors = {e.line: str(e) for e in result.errors}
    assert sorted(errors) == [6, 7, 8, 9]
    assert errors[6] == f"{CSV}:6: completion tokens (completion_tokens) is 'lots', not a number"
    assert "status 'exploded' at 'status' is not one this mapping knows" in errors[7]
    assert "more fields than the header has" in errors[9]
    # no start column value, in a file of 8 rows: the file's mtime is when the last row was
    # written, not this row's end, so the row is refused rather than placed there
    assert errors[8].startswith(f"{CSV}:8: cannot place the cell in time")
    assert "only for a file holding one record (this one holds 8)" in errors[8]
    cells = {c.cell_id: c for c in result.cells}
    assert len(cells) == 4
    assert cells["C #23 correctness"].decode_rate == pytest.approx(11.44, abs=0.01)  # Appendix C
    assert cells["C #294 correctness"].start_unix_ns == 1789786000 * 1_000_000_000
    assert cells["E #84 correctness"].status is CellStatus.DEADLINE
    assert cells["B #266 correctness"].completion_tokens is None
    assert cells["B #266 correctness"].prompt_tokens == 5449
    assert "F #18 correctness" not in cells


def test_openai_usage_logs_with_a_truncated_line_and_a_record_without_end() -> None:
    result = backfill_files([OPENAI], load_mapping("openai-usage"), eval_name="cards")
    assert [e.line for e in result.errors] == [3, 4]
    assert "cannot place the cell in time" in result.errors[0].message
    assert "not valid JSON" in result.errors[1].message
    first, second = result.cells
    assert first.engine == "nemotron-3.5-30b-a3b"
    assert first.elapsed_s == pytest.approx(10.1)
    assert first.decode_rate == pytest.approx(178 / 10.1)
    assert second.start_unix_ns == utc_ns("2026-09-17T07:00:11")
    assert second.elapsed_s == pytest.approx(17.8)


def test_rerunning_gives_the_same_uids_so_the_store_replaces(tmp_path: Path) -> None:
    a = backfill_files([SERIAL], load_mapping("spark-bench"), eval_name=None).cells
    b = backfill_files([SERIAL], load_mapping("spark-bench"), eval_name=None).cells
    assert [c.uid for c in a] == [c.uid for c in b]
    assert len({c.uid for c in a}) == 13
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells(a)
        store.write_cells(b)
        assert len(store.cells()) == 13


def test_a_custom_mapping_file_and_bad_mappings(tmp_path: Path) -> None:
    mapping = {
        "name": "my-runner",
        "cell_id": "{task.name}#{task.seed}",
        "completion_tokens": "result.tokens.out",
        "elapsed": "timing.ms",
        "elapsed_unit": "ms",
        "end": "timing.finished",
        "status": "outcome",
        "status_values": {"wall_clock_exceeded": "deadline"},
    }
    mapping_path = tmp_path / "mapping.json"
    mapping_path.write_text(json.dumps(mapping))
    records = tmp_path / "runs.json"
    records.write_text(
        json.dumps(
            [
                {
                    "task": {"name": "a", "seed": 1},
                    "result": {"tokens": {"out": 900}},
                    "timing": {"ms": 90000, "finished": "2026-09-19T10:00:00+02:00"},
                    "outcome": "ok",
                },
                {
                    "task": {"name": "b", "seed": 1},
                    "timing": {"ms": 1800000, "finished": "2026-09-19T10:30:00Z"},
                    "outcome": "wall_clock_exceeded",
                },
                ["not", "an", "object"],
            ]
        )
    )
    result = backfill_files([records], load_mapping(str(mapping_path)), eval_name="e")
    assert [str(e) for e in result.errors] == [f"{records}:3: a record must be an object, got list"]
    a, b = result.cells
    assert a.cell_id == "a#1"
    assert a.end_unix_ns == utc_ns("2026-09-19T08:00:00")
    assert a.decode_rate == pytest.approx(10.0)
    assert b.status is CellStatus.DEADLINE
    assert b.decode_rate is None
    (tmp_path / "bad.json").write_text(json.dumps({"name": "x", "cell_id": "id", "tokens": "usage"}))
    with pytest.raises(ConfigError, match=r"bad.json: not a valid field mapping: tokens: Extra inputs"):
        load_mapping(str(tmp_path / "bad.json"))
    with pytest.raises(ConfigError, match="neither a built-in mapping"):
        load_mapping("no-such-mapping")


def test_cells_as_spans_round_trip_through_the_store_exporter(tmp_path: Path) -> None:
    cells = backfill_files([SERIAL], load_mapping("spark-bench"), eval_name=None).cells
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=FixedIdGenerator())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert export_cells_as_spans(cells, provider) == 13
    spans = exporter.get_finished_spans()
    assert [s.start_time for s in spans] == [c.start_unix_ns for c in cells]
    assert [s.end_time for s in spans] == [c.end_unix_ns for c in cells]
    with Store(tmp_path / "s.sqlite") as store:
        StoreSpanExporter(store).export(spans)
        stored = {c.uid: c for c in store.cells()}
    for cell in cells:
        back = stored[cell.uid]  # the span id is the cell's uid
        assert back.model_dump(exclude={"trace_id"}) == cell.model_dump(exclude={"trace_id"})


def test_field_mapping_rejects_unknown_elapsed_units() -> None:
    with pytest.raises(ValueError, match="elapsed_unit"):
        FieldMapping(name="x", cell_id="id", elapsed_unit="minutes")


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_mtime_places_only_the_single_record_of_a_file_never_a_file_of_many(tmp_path: Path) -> None:
    end = utc_ns("2026-09-17T08:24:03")
    record = {"cell_id": "c", "eval": "ev", "usage": {"completion_tokens": 1000}, "elapsed_s": 100}
    many = _jsonl(tmp_path / "many.jsonl", [{**record, "cell_id": f"c{i}"} for i in range(1, 4)])
    one_line = _jsonl(tmp_path / "one.jsonl", [record])
    one_array = tmp_path / "array.json"
    one_array.write_text(json.dumps([record]))
    for path in (many, one_line, one_array):
        os.utime(path, ns=(end, end))
    result = backfill_files([many, one_line, one_array], load_mapping("spark-bench"), eval_name=None)
    # three records of one file would all sit on the one interval ending at its mtime
    assert [(e.file, e.line) for e in result.errors] == [(str(many), 1), (str(many), 2), (str(many), 3)]
    assert all("this one holds 3" in e.message for e in result.errors)
    assert [(c.start_unix_ns, c.end_unix_ns) for c in result.cells] == [(end - 100 * 10**9, end)] * 2
    # a file of many records whose records carry their own start still loads every one
    timed = _jsonl(
        tmp_path / "timed.jsonl",
        [{**record, "cell_id": f"t{i}", "started_at": f"2026-09-17T0{i}:00:00Z"} for i in range(1, 4)],
    )
    loaded = backfill_files([timed], load_mapping("spark-bench"), eval_name=None)
    assert loaded.errors == []
    assert sorted(c.start_unix_ns for c in loaded.cells) == [
        utc_ns(f"2026-09-17T0{i}:00:00") for i in (1, 2, 3)
    ]


def test_unix_times_in_s_ms_us_and_ns_land_on_the_same_moment(tmp_path: Path) -> None:
    moment_s = 1_726_560_000  # 2024-09-17 08:00:00 UTC
    starts = [moment_s, moment_s * 10**3, moment_s * 10**6, moment_s * 10**9, "2024-09-17T08:00:00Z"]
    path = tmp_path / "units.csv"
    rows = [f"u{i},q,{start},100,1000" for i, start in enumerate(starts)]
    path.write_text("cell_id,engine,start,elapsed_s,completion_tokens\n" + "\n".join(rows) + "\n")
    result = backfill_files([path], load_mapping("generic-csv"), eval_name="ev")
    assert result.errors == []
    assert {c.start_unix_ns for c in result.cells} == {moment_s * 10**9}


@pytest.mark.parametrize(
    ("start", "year"),
    [
        ("1726560000000000000000", None),  # beyond ns: no unit makes sense of it
        ("9999999999", "2286"),  # seconds, but far in the future
        ("99999999999999", "5138"),  # 1e14 - 1 read as ms
        ("4102444800000000", "2100"),  # µs: 2100-01-01
        ("1999-12-31T23:59:59Z", "1999"),
        ("946684799000", "1999"),  # ms just before 2000
    ],
)
def test_times_outside_2000_to_2100_are_refused_naming_file_and_line(
    tmp_path: Path, start: str, year: str | None
) -> None:
    path = tmp_path / "odd.csv"
    path.write_text(
        "cell_id,engine,start,elapsed_s,completion_tokens\n"
        "good,q,2026-09-17T08:00:00Z,100,1000\n"
        f"odd,q,{start},100,1000\n"
    )
    result = backfill_files([path], load_mapping("generic-csv"), eval_name="ev")
    [error] = result.errors
    assert (error.file, error.line) == (str(path), 3)
    assert error.message.startswith(f"start (start) {start!r} reads as the year ")
    assert "outside 2000-2100" in error.message
    if year is not None:
        assert f"the year {year}," in error.message
    assert [c.cell_id for c in result.cells] == ["good"]


def test_a_single_record_file_with_an_implausible_mtime_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cell.json"
    path.write_text(
        json.dumps({"cell_id": "c", "eval": "ev", "elapsed_s": 10, "usage": {"completion_tokens": 5}})
    )
    os.utime(path, ns=(10**9, 10**9))  # as in a Nix store or an archive without times: 1970
    result = backfill_files([path], load_mapping("spark-bench"), eval_name=None)
    [error] = result.errors
    assert error.message.startswith("the file's mtime reads as the year 1970, outside 2000-2100")
    assert result.cells == []


def test_fail_and_failed_mean_the_same_and_a_mapping_can_say_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "status.csv"
    words = ["fail", "failed", "FAILURE", "error", "pass", "ok"]
    rows = [f"{w},q,2026-09-17T0{i}:00:00Z,100,1000,{w}" for i, w in enumerate(words)]
    path.write_text("cell_id,engine,start,elapsed_s,completion_tokens,status\n" + "\n".join(rows) + "\n")
    result = backfill_files([path], load_mapping("generic-csv"), eval_name="ev")
    statuses = {c.cell_id: c.status for c in result.cells}
    assert statuses == {
        "fail": CellStatus.ERROR,
        "failed": CellStatus.ERROR,
        "FAILURE": CellStatus.ERROR,
        "error": CellStatus.ERROR,
        "pass": CellStatus.OK,
        "ok": CellStatus.OK,
    }
    verdicts = load_mapping("generic-csv").model_copy(update={"status_values": {"fail": CellStatus.OK}})
    overridden = {c.cell_id: c.status for c in backfill_files([path], verdicts, eval_name="ev").cells}
    assert overridden["fail"] is CellStatus.OK
    assert overridden["failed"] is CellStatus.ERROR


def test_backfilled_deadline_and_error_cells_end_their_spans_as_live_cells_do(tmp_path: Path) -> None:
    from opentelemetry.trace import StatusCode

    from spark_otel import _semconv as sc

    rows = [
        "ok,q,2026-09-19T06:00:00Z,100,1000,ok",
        "cut,q,2026-09-19T07:00:00Z,1800,900,timeout",
        "err,q,2026-09-19T08:00:00Z,60,6000,error",
    ]
    path = tmp_path / "cells.csv"
    path.write_text("cell_id,engine,start,elapsed_s,completion_tokens,status\n" + "\n".join(rows) + "\n")
    cells = backfill_files([path], load_mapping("generic-csv"), eval_name="c").cells
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=FixedIdGenerator())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    export_cells_as_spans(cells, provider)
    spans = {s.attributes[sc.CELL_ID]: s for s in exporter.get_finished_spans()}
    assert spans["ok"].status.status_code is StatusCode.UNSET
    assert sc.ERROR_TYPE not in spans["ok"].attributes
    assert spans["cut"].status.status_code is StatusCode.ERROR
    assert spans["cut"].status.description == "cell hit its deadline"
    assert spans["cut"].attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_DEADLINE
    assert spans["err"].status.status_code is StatusCode.ERROR
    assert spans["err"].attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_OTHER
    # The store path and the span path still give the same cells.
    with Store(tmp_path / "s.sqlite") as store:
        StoreSpanExporter(store).export(list(spans.values()))
        stored = {c.uid: c for c in store.cells()}
    for cell in cells:
        assert stored[cell.uid].model_dump(exclude={"trace_id"}) == cell.model_dump(exclude={"trace_id"})


def test_repeated_errors_print_once_with_a_count() -> None:
    from spark_otel.receivers.backfill import RecordError, error_lines

    same = [RecordError("a.jsonl", line, "no cell id at 'cell_id'") for line in range(1, 1001)]
    other = [RecordError("b.csv", 4, "ends before it starts (-1.000 s)")]
    assert error_lines(same + other) == [
        "a.jsonl:1: no cell id at 'cell_id'",
        "a.jsonl:2: no cell id at 'cell_id'",
        "a.jsonl:3: no cell id at 'cell_id'",
        "... and 997 more with the same error",
        "b.csv:4: ends before it starts (-1.000 s)",
    ]
    # Each distinct message is its own problem, but the places shown stay bounded.
    distinct = [RecordError("c.csv", n, f"completion tokens is 'x{n}', not a number") for n in range(50)]
    lines = error_lines(distinct, most=20)
    assert lines[:20] == [str(e) for e in distinct[:20]]
    assert lines[20:] == ["... and 30 more errors (--json lists every one)"]
    assert error_lines([]) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cell_id": "{unclosed"}, "cell_id: template '{unclosed' has an unclosed '{'"),
        ({"cell_id": "a}"}, "cell_id: template 'a}' closes a '}' it never opened"),
        ({"cell_id": "{}"}, "cell_id: template '{}' has an empty '{}'"),
        ({"cell_id": "{a{b}}"}, "cell_id: template '{a{b}}' opens a '{' inside another"),
        ({"cell_id": "id || "}, "cell_id: 'id || ' has an empty alternative around '||'"),
        (
            {"cell_id": "id", "completion_tokens": "usage..n"},
            "completion_tokens: 'usage..n' is not a dotted path",
        ),
        ({"cell_id": "id", "elapsed": "a || b"}, "elapsed: 'a || b' is not a dotted path (templates"),
        ({"cell_id": "id", "attributes": {"x": "{y}"}}, "attributes.x: '{y}' is not a dotted path"),
    ],
)
def test_a_mapping_whose_paths_do_not_parse_is_refused_naming_the_field(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"name": "m", **fields}), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_mapping(str(path))
    assert str(caught.value).startswith(f"{path}: not a valid field mapping: {message}")


def test_templates_and_alternatives_that_parse_are_accepted() -> None:
    mapping = FieldMapping(name="ok", cell_id="{task}-{sample.0.id} || id", completion_tokens="usage.n")
    assert mapping.cell_id == "{task}-{sample.0.id} || id"


def test_a_short_csv_row_is_refused_naming_its_line_and_the_rest_load(tmp_path: Path) -> None:
    path = tmp_path / "cells.csv"
    path.write_text(
        "cell_id,engine,start,elapsed_s,prompt_tokens,completion_tokens,status\n"
        "a,qwen,2026-09-17T10:00:00Z,100,50,1000,ok\n"
        "b,qwen,2026-09-17T10:02:00Z,100\n"
        "c,qwen,2026-09-17T10:04:00Z,100,50,1000,ok\n"
    )
    result = backfill_files([path], load_mapping("generic-csv"), eval_name="ev")
    assert sorted(c.cell_id for c in result.cells) == ["a", "c"]
    assert [(e.line, e.message) for e in result.errors] == [(3, "3 fewer fields than the header has")]


def test_a_token_field_no_record_has_and_elapsed_far_past_the_ceiling_are_warned(tmp_path: Path) -> None:
    records = [
        {"id": f"c{i}", "elapsed_s": elapsed, "deadline_s": 1800, "start": f"2026-09-17T10:{i:02d}:00Z",
         "usage": {"output_tokens": 900}}
        for i, elapsed in enumerate((100_000.0, 1_500.0, 120_000.0))
    ]  # fmt: skip
    path = _jsonl(tmp_path / "runs.jsonl", records)
    mapping = FieldMapping(
        name="typo",
        cell_id="id",
        completion_tokens="usage.completion_tokens",  # the records say output_tokens
        elapsed="elapsed_s",
        start="start",
        deadline_s="deadline_s",
    )
    result = backfill_files([path], mapping, eval_name="ev")
    assert len(result.cells) == 3
    assert result.errors == []
    assert result.warnings == [
        f"{path}: no record has completion_tokens ('usage.completion_tokens'): check the mapping's path "
        "(its cells have no decode rate)",
        f"{path}: 2 of 3 cells ran more than 10x their own ceiling (e.g. c2: 120,000 s against 1,800 s); "
        "is elapsed_unit ('s') right?",
    ]
    right = mapping.model_copy(update={"completion_tokens": "usage.output_tokens", "elapsed_unit": "ms"})
    assert backfill_files([path], right, eval_name="ev").warnings == []


def test_backfill_prints_the_warnings_and_still_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spark_otel.cli import main

    path = _jsonl(
        tmp_path / "runs.jsonl",
        [
            {
                "eval": "ev",
                "pr": 1,
                "angle": "a",
                "run": 1,
                "elapsed_s": 100.0,
                "started_at": "2026-09-17T10:00:00Z",
            }
        ],
    )
    code = main(["backfill", str(path), "--mapping", "spark-bench", "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert code == 0
    assert f"spark-otel: warning: {path}: no record has completion_tokens" in err


def test_a_mapping_may_name_the_time_budget_and_what_a_record_lacks_stays_empty(tmp_path: Path) -> None:
    mapping = FieldMapping(
        name="with-budget", cell_id="id", elapsed="ms", elapsed_unit="ms", end="end", completion_tokens="out",
        first_token="ttft_ms", decode="decode_ms", queue_wait="queued_ms",
    )  # fmt: skip
    end = "2026-09-19T10:00:00Z"
    records = tmp_path / "runs.jsonl"
    lines = [
        {
            "id": "a",
            "ms": 100_000,
            "end": end,
            "out": 900,
            "ttft_ms": 12_500,
            "decode_ms": 80_000,
            "queued_ms": 4_000,
        },
        {"id": "b", "ms": 50_000, "end": end, "out": 400},
        {"id": "c", "ms": 50_000, "end": end, "ttft_ms": -1},
        {"id": "d", "ms": 50_000, "end": end, "ttft_ms": 30_000, "decode_ms": 30_000},
    ]
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = backfill_files([records], mapping, eval_name="e")
    a, b = result.cells
    assert (a.first_token_s, a.decode_s, a.unsplit_s, a.other_s, a.admission_s) == (
        12.5,
        80.0,
        None,
        None,
        4.0,
    )
    assert (b.first_token_s, b.decode_s, b.admission_s, b.has_budget) == (None, None, None, False)
    assert [str(e) for e in result.errors] == [
        f"{records}:3: time to first token (ttft_ms) is -1; expected a finite, non-negative number",
        f"{records}:4: time to first token and decode time (60 s) are more than the cell's elapsed time "
        "(50 s); is elapsed_unit ('ms') right for them?",
    ]
