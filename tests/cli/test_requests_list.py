"""`spark-otel requests` lists requests as `spark-otel cells` lists cells: one line per request on
an 80-column terminal (lower-priority columns left out and named), every column with --wide, the
requests no cell holds marked; and a store with nothing to answer from says what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.snapshots import Snapshot

from spark_otel.cli import main
from spark_otel.model import Cell, Request
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_790_000_000 * S


def _request(uid: str, at_s: int, **fields: object) -> Request:
    values: dict[str, object] = {
        "uid": uid,
        "operation": "chat",
        "request_model": "qwen3-27b",
        "response_model": "qwen3-27b",
        "server_address": "127.0.0.1",
        "server_port": 8000,
        "start_unix_ns": T0 + at_s * S,
        "end_unix_ns": T0 + (at_s + 20) * S,
        "streaming": True,
        "time_to_first_chunk_s": 0.25,
        "input_tokens": 900,
        "output_tokens": 400,
        "finish_reasons": ["stop"],
    }
    return Request(**(values | fields))  # type: ignore[arg-type]


@pytest.fixture
def mixed(tmp_path: Path) -> str:
    """A cell holding two requests (engine qwen at :8000), and three requests no cell holds."""
    path = tmp_path / "r.sqlite"
    with Store(path) as store:
        store.write_cells(
            [
                Cell(
                    uid="c1",
                    eval_name="golden",
                    cell_id="B#7",
                    engine="qwen",
                    start_unix_ns=T0,
                    end_unix_ns=T0 + 60 * S,
                    workers=1,
                )
            ]
        )
        store.write_requests(
            [
                _request("a1", 0, cell_uid="c1", eval_name="golden", engine="qwen"),
                _request("a2", 30, cell_uid="c1", eval_name="golden", engine="qwen"),
                _request("b1", 100, eval_name="lm-eval"),
                _request("b2", 130, eval_name="lm-eval", finish_reasons=["length"]),
                _request("b3", 160, eval_name="lm-eval", error_type="APITimeoutError", output_tokens=None),
            ]
        )
    return str(path)


def test_at_80_columns_each_request_is_one_line(
    mixed: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["requests", "--store", mixed]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert len([line for line in out.splitlines() if line.startswith("│")]) == 5
    snapshot(out)


def test_wide_shows_every_column(
    mixed: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["requests", "--store", mixed, "--wide"]) == 0
    out = capsys.readouterr().out
    assert "left out" not in out
    snapshot(out)


def test_json_and_filters(mixed: str, capsys: pytest.CaptureFixture[str]) -> None:
    def listed(*argv: str) -> list[dict[str, object]]:
        assert main(["requests", "--store", mixed, "--json", *argv]) == 0
        return list(json.loads(capsys.readouterr().out))

    every = listed()
    assert [r["uid"] for r in every] == ["b3", "b2", "b1", "a2", "a1"]  # newest first
    assert [r["status"] for r in every] == ["deadline", "length_cap", "ok", "ok", "ok"]
    assert [r["cell_id"] for r in every] == [None, None, None, "B#7", "B#7"]
    assert [r["stands_in_for_cell"] for r in every] == [True, True, True, False, False]
    assert {r["counted_engine"] for r in every} == {"qwen"}  # named by the cell's requests at :8000
    assert [r["uid"] for r in listed("--outside-cells")] == ["b3", "b2", "b1"]
    assert [r["uid"] for r in listed("--eval", "golden")] == ["a2", "a1"]
    assert [r["uid"] for r in listed("--engine", "qwen", "-n", "2")] == ["b3", "b2"]
    assert listed("--engine", "nope") == []


def test_commands_on_an_empty_store_say_nothing_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.sqlite"
    Store(path).close()
    expected = (
        f"spark-otel: error: {path}: no cells; nothing is recorded there: instrument an eval "
        "(spark_otel.instrument(), with spark_otel.cell() per cell) or run `spark-otel backfill` first\n"
    )
    for argv in (["concurrency"], ["advise"], ["timeouts"]):
        assert main([*argv, "--store", str(path)]) == 1, argv
        assert capsys.readouterr().err == expected, argv


def test_cells_on_a_store_of_requests_only_points_at_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bare.sqlite"
    with Store(path) as store:
        store.write_requests([_request("b1", 0), _request("b2", 30)])
    assert main(["cells", "--store", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "no cells here, but the store holds 2 requests outside any cell: `spark-otel requests` lists them, "
        "and the answers count each as a cell of its own"
    ) in out


def test_a_request_inside_a_recorded_load_window_is_that_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from spark_otel.model import LoadWindow

    path = tmp_path / "load.sqlite"
    with Store(path) as store:
        store.write_requests([_request("x1", 0, engine="qwen"), _request("x2", 100, engine="qwen")])
        store.write_windows(
            [
                LoadWindow(
                    uid="w", name="1 more qwen stream", kind="load", engine="qwen",
                    start_unix_ns=T0 - S, end_unix_ns=T0 + 30 * S, streams=1,
                )
            ]
        )  # fmt: skip
    assert main(["requests", "--store", str(path), "--json"]) == 0
    listed = {r["uid"]: r["stands_in_for_cell"] for r in json.loads(capsys.readouterr().out)}
    assert listed == {"x1": False, "x2": True}
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["requests", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    cells = {
        line.split("│")[2].strip(): line.split("│")[3].strip() for line in out.splitlines() if "│ x" in line
    }
    assert cells == {"x1": "load", "x2": "none"}
    assert "1 ran inside a recorded load or probe window on their engine (cell: load)" in " ".join(
        out.split()
    )
    assert main(["concurrency", "--store", str(path), "--json", "--cells"]) == 0
    (engine,) = json.loads(capsys.readouterr().out)["engines"]
    assert [c["uid"] for c in engine["cells"]] == ["x2"]
