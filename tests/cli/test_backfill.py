"""`spark-otel backfill`: records to cells in the store or over OTLP, bad rows and files, the summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.backfill_records import CSV, SERIAL, utc_ns
from tests.support.otlp import OtlpSink

from spark_otel.cli import main
from spark_otel.receivers.backfill import backfill_files, load_mapping
from spark_otel.store import Store


def test_backfill_cli_writes_cells_reports_bad_rows_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    code = main(
        [
            "backfill",
            str(SERIAL),
            str(CSV),
            "--mapping",
            "generic-csv",
            "--eval",
            "x",
            "--store",
            str(store_path),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    # the serial records have no cell_id column: each is reported, with its line
    assert f"spark-otel: error: {SERIAL}:1: no cell id at 'cell_id'" in captured.err
    assert f"spark-otel: error: {CSV}:6: " in captured.err
    with Store(store_path) as store:
        assert len(store.cells(eval_name="x")) == 4
    assert main(["backfill", str(SERIAL), "--mapping", "spark-bench", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "13" in out
    with Store(store_path) as store:
        assert len(store.cells(eval_name="golden-review-serial")) == 13


def test_backfill_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backfill", str(SERIAL), "--mapping", "nope"]) == 2
    assert "spark-otel: error: --mapping 'nope'" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"
    assert (
        main(["backfill", str(missing), "--mapping", "spark-bench", "--store", str(tmp_path / "s.sqlite")])
        == 1
    )
    assert f"spark-otel: error: {missing}: no such file" in capsys.readouterr().err


def test_backfill_cli_otlp_sends_cell_spans_with_historical_times(
    otlp_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    port = otlp_sink.server.server_address[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    assert main(["backfill", str(SERIAL), "--mapping", "spark-bench", "--otlp", "--no-store"]) == 0
    capsys.readouterr()
    spans = []
    for body in otlp_sink.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans += [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(spans) == 13
    first = min(spans, key=lambda s: s.start_time_unix_nano)
    assert first.start_time_unix_nano == utc_ns("2026-09-17T06:39:00")
    assert first.end_time_unix_nano - first.start_time_unix_nano == 740 * 1_000_000_000
    attrs = {a.key: a.value for a in first.attributes}
    assert attrs["spark_otel.span.kind"].string_value == "cell"
    assert attrs["spark_otel.cell.completion_tokens"].int_value == 7056
    expected_uid = backfill_files([SERIAL], load_mapping("spark-bench"), eval_name=None).cells[0].uid
    assert first.span_id.hex() == expected_uid


def test_backfill_cli_summary_median_is_the_true_median_and_timeouts_are_not_rated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import statistics

    # Appendix C's rated 1-worker cells (elapsed s, tokens), plus a cut-off cell that kept
    # partial tokens and a failed one: listed, never rated.
    serial = [(510, 5885), (736, 8595), (958, 11034), (1253, 14520), (751, 8594), (698, 8115)]
    rows = [f"s{i},q,2026-09-19T0{i}:00:00Z,{e},{t},ok" for i, (e, t) in enumerate(serial)]
    rows += ["cut,q,2026-09-19T07:00:00Z,1800,900,timeout", "err,q,2026-09-19T08:00:00Z,60,6000,error"]
    path = tmp_path / "serial.csv"
    path.write_text("cell_id,engine,start,elapsed_s,completion_tokens,status\n" + "\n".join(rows) + "\n")
    store_path = tmp_path / "s.sqlite"
    assert (
        main(["backfill", str(path), "--mapping", "generic-csv", "--eval", "c", "--store", str(store_path)])
        == 0
    )
    out = capsys.readouterr().out
    median = statistics.median(t / e for e, t in serial)
    assert f"{median:.2f}" == "11.56"  # the article's 11.565, from whole-second elapsed times
    row = next(line for line in out.splitlines() if f"{median:.2f}" in line)
    cells = [field.strip() for field in row.strip().strip("│|").replace("│", "|").split("|")]
    assert cells == ["8", "8", "0", "1", "6", "11.56"]
    with Store(store_path) as store:
        assert len(store.cells(eval_name="c")) == 8  # all kept, the cut-off and failed ones too


def test_backfill_json_prints_the_cells_the_errors_and_the_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    store_path = tmp_path / "s.sqlite"
    argv = [
        "backfill",
        str(SERIAL),
        str(CSV),
        "--mapping",
        "generic-csv",
        "--eval",
        "x",
        "--store",
        str(store_path),
    ]
    assert main([*argv, "--dry-run", "--json"]) == 1
    captured = capsys.readouterr()
    would = json.loads(captured.out)  # stdout is the JSON alone
    assert not store_path.exists()  # a dry run writes nothing
    assert would["dry_run"] is True
    assert would["store"] is None
    expected = backfill_files([SERIAL, CSV], load_mapping("generic-csv"), eval_name="x")
    assert [c["uid"] for c in would["cells"]] == [c.uid for c in expected.cells]
    assert [(e["file"], e["line"], e["message"]) for e in would["errors"]] == [
        (e.file, e.line, e.message) for e in expected.errors
    ]
    counts = would["counts"]
    assert counts["records"] == expected.records
    assert counts["cells"] == len(expected.cells)
    assert counts["rejected"] == len(expected.errors)
    from spark_otel.receivers.backfill import error_lines

    # Still said on stderr, as people read them (a repeated error once, with a count); JSON has each.
    assert captured.err.splitlines() == [
        f"spark-otel: error: {line}" for line in error_lines(expected.errors)
    ]

    assert main([*argv, "--json"]) == 1
    wrote = json.loads(capsys.readouterr().out)
    assert wrote["dry_run"] is False
    assert wrote["store"] == str(store_path)
    with Store(store_path) as store:
        stored = store.cells(eval_name="x")
    assert sorted(c["uid"] for c in wrote["cells"]) == sorted(c.uid for c in stored)
    assert wrote["counts"] == would["counts"]
    for cell in wrote["cells"]:  # as `spark-otel cells --json` prints a cell
        assert "decode_rate" in cell
        assert "elapsed_s" in cell


def test_a_repeated_error_prints_once_with_a_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text('{"elapsed_s": 10}\n' * 500)  # 500 records, none with a cell id
    assert main(["backfill", str(path), "--mapping", "spark-bench", "--eval", "e", "--dry-run"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"spark-otel: error: {path}:1: no cell id at 'cell_id || {{pr}} {{angle}} run{{run}}'",
        f"spark-otel: error: {path}:2: no cell id at 'cell_id || {{pr}} {{angle}} run{{run}}'",
        f"spark-otel: error: {path}:3: no cell id at 'cell_id || {{pr}} {{angle}} run{{run}}'",
        "spark-otel: error: ... and 497 more with the same error",
    ]
