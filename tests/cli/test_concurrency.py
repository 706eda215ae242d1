"""`spark-otel concurrency` over a real store file (one test also runs `advise` on an empty store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.article import C_EVAL
from tests.support.energy_samples import energy_store

from spark_otel.cli import main
from spark_otel.store import Store


def test_concurrency_prints_levels_runs_and_the_wall_speedup(article_store, capsys) -> None:
    assert main(["concurrency", "--store", article_store, "--eval", C_EVAL]) == 0
    out = capsys.readouterr().out
    assert "8,507" in out
    assert "1,801" in out
    assert "4.7x" in out
    assert "11.57" in out  # the serial median as the article prints it
    assert "9.20" in out


def test_concurrency_json_round_trips(article_store, capsys) -> None:
    assert main(["concurrency", "--store", article_store, "--eval", C_EVAL, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (engine,) = data["engines"]
    assert engine["speedups"][0]["speedup"] == pytest.approx(8507 / 1801)


def test_empty_store_is_a_clear_error(tmp_path: Path, capsys) -> None:
    empty = str(tmp_path / "empty.sqlite")
    Store(empty).close()  # a store that exists and holds no cell
    for argv in (["concurrency"], ["advise"]):
        assert main([*argv, "--store", empty]) == 1
        err = capsys.readouterr().err
        assert "no cells; nothing is recorded there" in err
        assert "empty.sqlite" in err


def test_concurrency_splits_runs_at_idle_gaps_unless_told_otherwise(tmp_path: Path, capsys) -> None:
    from tests.support.article import S

    from spark_otel.model import Cell

    def c(uid: str, start: int, workers: int) -> Cell:
        end = start + (100 if workers == 1 else 120)
        return Cell(
            uid=uid,
            eval_name="rev",
            cell_id=uid[1:],
            engine="q",
            start_unix_ns=start * S,
            end_unix_ns=end * S,
            completion_tokens=1000,
            workers=workers,
        )

    day = 86_400
    cells = [c(f"a{k}", 100 * k, 1) for k in range(3)] + [c(f"b{k}", day + 100 * k, 1) for k in range(3)]
    cells += [c(f"p{k}", 2 * day, 8) for k in range(8)]
    path = str(tmp_path / "runs.sqlite")
    with Store(path) as store:
        store.write_cells(cells)
    assert main(["concurrency", "--store", path, "--json"]) == 0
    (engine,) = json.loads(capsys.readouterr().out)["engines"]
    assert [r["n_cells"] for r in engine["runs"]] == [3, 3, 8]
    assert engine["speedups"][0]["speedup"] == pytest.approx(100 / 15)
    assert main(["concurrency", "--store", path, "--merge-gap", str(day), "--json"]) == 0
    (engine,) = json.loads(capsys.readouterr().out)["engines"]
    assert [r["n_cells"] for r in engine["runs"]] == [6, 8]
    assert main(["concurrency", "--store", path]) == 0
    out = capsys.readouterr().out
    assert "6.7x" in out  # printed beside the 8-worker run only
    assert out.count("6.7x") == 1


def test_concurrency_explains_each_term_once_however_many_engines(article_store, capsys) -> None:
    assert main(["concurrency", "--store", article_store]) == 0
    out = capsys.readouterr().out
    assert out.count("in flight (time-weighted)") == 0
    assert out.count("cells in flight: time-weighted mean number") == 1
    assert out.count("ceiling hits: ") == 1
    assert out.count("┃ cells in flight ┃") == 2  # nemotron and qwen: one level table each


def test_concurrency_shows_joules_per_token_and_per_cell(tmp_path: Path, capsys) -> None:
    from tests.support.printed import row_starting

    path = tmp_path / "e.sqlite"
    energy_store(path)
    assert main(["concurrency", "--store", str(path)]) == 0
    out = capsys.readouterr().out.split("energy on the box", 1)[1]
    assert out.startswith(" (GPU 0, energy counter): 2,400 J while cells ran, 800 J idle between them")
    # serial: 1,600 J over 800 tokens; the pair: 800 J over 800 tokens, 400 J a cell.
    assert row_starting(out, "serial")[1:6] == ["1", "2 of 3", "800", "1,600", "2.000"]
    assert row_starting(out, "pair")[1:7] == ["2", "2 of 2", "800", "800", "1.000", "400 [400 to 400]"]
    assert "energy: 1 of 5 cells ran outside the GPU readings" in out
    assert "`spark-otel receive --engine NAME=URL --gpu auto --interval 1`" in out
    assert main(["concurrency", "--store", str(path), "--eval", "pair", "--json", "--cells"]) == 0
    energy = json.loads(capsys.readouterr().out)["energy"]
    assert [(e["eval_name"], e["j_per_token"]) for e in energy["evals"]] == [("pair", 1.0)]
    assert {c["uid"]: c["share_j"] for c in energy["cells"]} == {"p1": 400.0, "p2": 400.0}


def test_concurrency_without_gpu_readings_says_how_to_measure_energy(article_store, capsys) -> None:
    assert main(["concurrency", "--store", article_store, "--eval", C_EVAL]) == 0
    out = capsys.readouterr().out
    assert "energy: no GPU readings in the store for these 16 cells; measure with " in out
    assert main(["concurrency", "--store", article_store, "--eval", C_EVAL, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["energy"] is None
