"""`spark-otel report`: from a store, from backfilled records and from an OTLP JSON export; its errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.support.report_records import T0, S, report_records

from spark_otel.cli import main
from spark_otel.store import Store


def test_report_cli_on_an_empty_store_exits_1_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Store(tmp_path / "empty.sqlite").close()
    code = main(["report", "--store", str(tmp_path / "empty.sqlite"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("spark-otel: error: ")
    assert "no cells, load windows or probe runs" in err
    assert err.count("\n") == 1


def test_report_cli_on_a_missing_store_or_two_inputs_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--store", str(tmp_path / "none.sqlite")]) == 1
    assert "none.sqlite: no such store file" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()
    assert main(["report", "--store", "x", "--otlp-json", "y"]) == 2
    assert "choose one input" in capsys.readouterr().err


def test_report_cli_writes_the_page_for_one_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cells, windows = report_records()
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells(cells)
        store.write_windows(windows)
    out = tmp_path / "r"
    assert (
        main(["report", "--store", str(tmp_path / "s.sqlite"), "--eval", "serial-review", "--out", str(out)])
        == 0
    )
    assert "wrote" in capsys.readouterr().out
    text = (out / "report.html").read_text()
    assert "spark-otel report: serial-review" in text
    assert (out / "neighbour-serial-review.png").read_bytes().startswith(b"\x89PNG")


def _record(
    eval_name: str, engine: str, i: int, start_s: float, elapsed_s: float, tokens: int | None, workers: int
) -> dict:
    started = (T0 + int(start_s * S)) / S
    record = {"eval": eval_name, "engine": engine, "cell_id": f"{eval_name}-{i}", "started_at": started,
              "elapsed_s": elapsed_s, "workers": workers, "deadline_s": 1800, "status": "ok"}  # fmt: skip
    if tokens is None:
        record |= {"status": "timeout", "timeout": True}
    else:
        record["usage"] = {"completion_tokens": tokens, "prompt_tokens": 4000}
    return record


def test_report_cli_from_backfilled_records_reads_the_eval_as_the_store_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    records = [_record("serial", "qwen", i, i * 1000.0, 1000.0, 11_500, 1) for i in range(6)]
    records += [_record("serial", "qwen", 6 + i, 6000.0 + i * 1000.0, 1000.0, 5_250, 1) for i in range(3)]
    records.append(_record("serial", "qwen", 9, 9000.0, 1800.0, None, 1))
    records += [_record("cards", "nemotron", i, 6000.0 + i * 900, 880.0, 300, 4) for i in range(4)]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n{broken\n")
    out = tmp_path / "r"

    code = main(["report", "--records", str(path), "--mapping", "spark-bench", "--out", str(out)])

    captured = capsys.readouterr()
    assert code == 0
    assert "warning: skipped" in captured.err  # the broken line, named, and the rest still loads
    text = (out / "report.html").read_text()
    assert "Baseline over 6 cells overlapping no other load: median 11.50 tok/s" in text
    assert "54%" in text
    assert (out / "neighbour-serial.png").exists()


def test_report_cli_from_backfilled_records_needs_a_mapping_and_readable_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("{broken\n")
    assert main(["report", "--records", str(path)]) == 2
    assert "--records needs --mapping" in capsys.readouterr().err
    assert (
        main(["report", "--records", str(path), "--mapping", "spark-bench", "--out", str(tmp_path / "o")])
        == 1
    )
    assert "no record could be read as a cell" in capsys.readouterr().err


def test_report_cli_from_an_otlp_json_export(
    tmp_path: Path, span_exporter, tracer_provider, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from spark_otel.cells import cell

    for i in range(4):
        with cell("exported", f"c{i}", engine="qwen", workers=1, tracer_provider=tracer_provider) as state:
            state.add_tokens(prompt=100, completion=50)
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(MessageToDict(encode_spans(span_exporter.get_finished_spans()))) + "\n")
    out = tmp_path / "r"
    assert main(["report", "--otlp-json", str(path), "--out", str(out)]) == 0
    text = (out / "report.html").read_text()
    assert f"From {path}: 4 cells" in text
    cells = re.sub(r"<td[^>]*>", "<td>", text)  # whatever class aligns a cell
    assert "<td>exported</td><td>1</td><td>4</td><td>4</td>" in cells  # outcomes: 4 cells, 4 ok


def test_report_cli_names_how_many_more_records_were_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    records = [_record("serial", "qwen", i, i * 1000.0, 1000.0, 11_500, 1) for i in range(4)]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n" + "{broken\n" * 8)
    assert (
        main(["report", "--records", str(path), "--mapping", "spark-bench", "--out", str(tmp_path / "r")])
        == 0
    )
    err = capsys.readouterr().err
    # Eight times the same error: its first three places, then a count.
    assert err.count("warning: skipped") == 4
    assert err.count("not valid JSON") == 3
    assert "warning: skipped ... and 5 more with the same error" in err
