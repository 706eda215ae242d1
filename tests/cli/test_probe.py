"""`spark-otel probe`: against the simulated box and a plain vLLM-like engine, its table (named as
the HTML report names the figures, model time labelled), --json and --out, bad options, its help."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.boxes import PROBE_BOX_SPEED
from tests.support.cells import recent_cell
from tests.support.plain_engine import PlainEngine
from tests.support.printed import row_starting, rows_of

from spark_otel.cli import main
from spark_otel.records.probe_report import ProbeReport, load_probe_report
from spark_otel.store import Store


def test_probe_cli_prints_the_table_and_writes_json_plot_and_store(
    probe_box, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")  # every header on one line, to read them by name
    store_path, json_path, png = tmp_path / "s.sqlite", tmp_path / "probe.json", tmp_path / "probe.png"
    code = main([
        "probe", "--engine", probe_box.url("qwen"), "--streams", "1,2", "--tokens", "128", "--repeats", "2",
        "--store", str(store_path), "--out", str(json_path), "--plot", str(png),
    ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    # The simulated box runs on a model clock: the title and the durations say so.
    assert f"qwen (qwen3.8-27b), 128 tokens per stream (model time, {PROBE_BOX_SPEED:g}x)" in out
    header = next(line for line in out.splitlines() if "per-stream tok/s" in line)
    for name in ("wall model s", "engine/probe", "TTFT model s", "streams off pin", "client CPU µs/tok"):
        assert name in header
    assert "ratio" not in header
    assert "exact" not in header
    second = row_starting(out, "2 #2")  # the second round of two streams
    report = ProbeReport.load_file(json_path)
    level = report.levels[-1]
    assert second[1] == f"{level.wall_s:,.1f}"
    assert second[6] == f"{level.engine_probe_ratio:,.2f}"
    assert second[-1] == str(level.token_mismatches + level.errors)
    # Energy: the level's mean power times its wall over the probe's tokens.
    assert level.power_w is not None
    assert second[8] == f"{level.power_w * level.wall_s / level.probe_tokens:,.3f}"
    assert "energy (power x wall, over the probe's own tokens): 2 streams: " in out
    # Each term explained once, in a note under the table.
    assert out.count("engine/probe: the engine's own generation counter over the probe's tokens") == 1
    assert out.count("streams off pin: ") == 1
    assert [(lv.streams, lv.repeat) for lv in report.levels] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert [p.streams for p in report.curve.points] == [1, 2]
    assert png.read_bytes().startswith(b"\x89PNG")
    with Store(store_path) as store:
        assert len(store.windows(kind="probe")) == 4
        assert len(store.documents("probe")) == 1


def test_probe_of_a_model_the_engine_does_not_serve_fails_with_the_engines_answer(
    probe_box, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "probe",
            "--engine",
            probe_box.url("qwen"),
            "--streams",
            "1",
            "--tokens",
            "8",
            "--model",
            "nope",
            "--no-store",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "warm-up request failed: HTTP 404" in err


def test_probe_cli_takes_name_equals_url_and_then_matches_the_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    with Store(store_path) as store:
        store.write_cells([recent_cell("qwen")])
    with PlainEngine() as engine:
        code = main([
            "probe", "--engine", f"qwen={engine.url}", "--streams", "1", "--tokens", "32", "--gpu", "none",
            "--store", str(store_path),
        ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "qwen (plain-model)" in out
    assert "matches no engine" not in out
    with Store(store_path) as store:
        assert [w.engine for w in store.windows(kind="probe")] == ["qwen"]
        [doc] = store.documents("probe")
    assert doc["body"]["metadata"]["engine"] == "qwen"
    assert doc["body"]["curve"]["engine"] == "qwen"


def test_probe_failing_partway_keeps_prints_and_stores_the_levels_it_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path, json_path = tmp_path / "s.sqlite", tmp_path / "probe.json"
    # The warm-up and level 1 are answered; every stream of level 2 gets HTTP 503.
    with PlainEngine(fail_after=2) as engine:
        code = main([
            "probe", "--engine", f"qwen={engine.url}", "--streams", "1,2", "--tokens", "32", "--gpu", "none",
            "--store", str(store_path), "-o", str(json_path), "--name", "cut",
        ])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1
    assert "every stream at level 2 failed: HTTP 503" in captured.err
    assert "qwen (plain-model)" in captured.out  # the partial table, printed before the error
    assert "warning: the probe stopped before finishing" in captured.out
    saved = ProbeReport.load_file(json_path)
    assert [lv.streams for lv in saved.levels] == [1]
    assert saved.levels[0].probe_tokens == 32
    assert [p.streams for p in saved.curve.points] == [1]
    assert any("level 2: 2 of 2 streams failed: HTTP 503" in w for w in saved.warnings)
    with Store(store_path) as store:
        assert [w.name for w in store.windows(kind="probe")] == ["probe 1 streams"]
        [doc] = store.documents("probe")
    assert doc["name"] == "cut"
    assert load_probe_report(doc["body"]) == saved


def test_probe_json_prints_the_report_on_stdout_and_out_writes_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path = tmp_path / "probe.json"
    with PlainEngine() as engine:
        code = main([
            "probe", "--engine", f"qwen={engine.url}", "--streams", "1,2", "--tokens", "16", "--gpu", "none",
            "--no-store", "--json", "--out", str(json_path),
        ])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    report = ProbeReport.model_validate_json(captured.out)  # stdout is the report and nothing else
    assert [lv.streams for lv in report.levels] == [1, 2]
    assert json_path.read_text() == captured.out  # the file as --out always wrote it
    assert ProbeReport.load_file(json_path) == report
    assert f"wrote {json_path}" in captured.err


def test_probe_table_in_real_time_says_nothing_of_model_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PlainEngine() as engine:
        code = main([
            "probe", "--engine", f"qwen={engine.url}", "--streams", "1", "--tokens", "16", "--gpu", "none",
            "--no-store",
        ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "model" not in out.replace("plain-model", "")
    assert "wall s" in out
    assert [row[0] for row in rows_of(out)] == ["1"]


def test_probe_cli_on_an_unreachable_engine_exits_1_with_one_line(
    free_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "probe",
            "--engine",
            f"http://127.0.0.1:{free_port}",
            "--streams",
            "1",
            "--store",
            str(tmp_path / "s.sqlite"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"spark-otel: error: http://127.0.0.1:{free_port}: cannot reach the engine")
    assert err.count("\n") == 1


def test_probe_cli_rejects_bad_levels(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["probe", "--engine", "http://127.0.0.1:1", "--streams", "1,x"])
    assert exc.value.code == 2
    assert "not a comma-separated list of integers" in capsys.readouterr().err


def test_probe_cli_refuses_two_different_engine_names(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "--engine", "qwen=http://127.0.0.1:1", "--engine-name", "nemotron", "--no-store"])
    assert code == 2
    assert "--engine names the engine 'qwen' but --engine-name says 'nemotron'" in capsys.readouterr().err


def test_probe_cli_help_says_what_each_choice_means(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["probe", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "--engine [NAME=]URL" in text
    assert "must match the engine label of the eval's cells" in text
    assert "stream: SSE, gives time to first token" in text
    assert "no parse cost" in text
    assert "where mean power per level comes from" in text
