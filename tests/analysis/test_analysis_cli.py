"""The concurrency, neighbour-cost and advise commands over a real store file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.analysis.article import (
    C_EVAL,
    D_EVAL,
    NEMOTRON_CURVE,
    QWEN_CURVE,
    appendix_c_cells,
    appendix_d_cells,
    appendix_d_loads,
)

from spark_otel.cli import main
from spark_otel.store import Store


@pytest.fixture
def article_store(tmp_path: Path) -> str:
    path = tmp_path / "article.sqlite"
    probes, others = appendix_d_loads()
    with Store(path) as store:
        store.write_cells(appendix_c_cells() + appendix_d_cells() + others)
        store.write_windows(probes)
        # The probe command stores its whole report; the advisor reads the "curve" in it.
        store.put_document("probe", "qwen probe", {"curve": QWEN_CURVE.model_dump(mode="json")})
        store.put_document("probe", "nemotron probe", {"curve": NEMOTRON_CURVE.model_dump(mode="json")})
    return str(path)


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


def test_neighbour_cost_prints_the_act_4_table(article_store, capsys) -> None:
    assert main(["neighbour-cost", "--store", article_store, "--eval", D_EVAL]) == 0
    out = capsys.readouterr().out
    assert "median 11.51 tok/s, p10 10.51, p90 11.70" in out
    assert "5.25" in out
    assert "54% !" in out  # past the default 20% threshold
    assert "10.97" in out
    assert "F #11 correctness run1" in out  # a timeout, listed
    assert "baseline 0" not in out  # baseline cells only with --all-cells


def test_neighbour_cost_json_and_threshold(article_store, capsys) -> None:
    assert (
        main(["neighbour-cost", "--store", article_store, "--eval", D_EVAL, "--json", "--threshold", "0.6"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["threshold"] == 0.6
    assert data["baseline"]["n"] == 113


def test_advise_prints_rules_with_their_evidence(article_store, capsys) -> None:
    assert main(["advise", "--store", article_store]) == 0
    out = capsys.readouterr().out
    assert "nemotron lane at most 8 streams" in out
    assert "Do not batch nemotron while" in out
    assert "qwen-thinking-review generation-heavy" in out


def test_advise_json_uses_the_given_ceiling(article_store, capsys) -> None:
    assert main(["advise", "--store", article_store, "--ceiling", "3600", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["ceiling_s"] == 3600
    assert any(r["kind"] == "cross-engine" for r in data["rules"])


def test_unknown_eval_is_one_line_naming_the_eval(article_store, capsys) -> None:
    assert main(["neighbour-cost", "--store", article_store, "--eval", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("spark-otel: error: ")
    assert "no cells recorded for eval 'nope'" in err
    assert C_EVAL in err  # names the evals that do exist
    assert len(err.strip().splitlines()) == 1


def test_empty_store_is_a_clear_error(tmp_path: Path, capsys) -> None:
    empty = str(tmp_path / "empty.sqlite")
    for argv in (["concurrency"], ["advise"]):
        assert main([*argv, "--store", empty]) == 1
        err = capsys.readouterr().err
        assert "no cells recorded" in err
        assert "empty.sqlite" in err


def test_bad_threshold_is_a_usage_error(article_store, capsys) -> None:
    assert main(["neighbour-cost", "--store", article_store, "--eval", D_EVAL, "--threshold", "5"]) == 2
    assert "--threshold 5.0 must be a fraction" in capsys.readouterr().err
    assert main(["advise", "--store", article_store, "--ceiling", "-1"]) == 2
    assert "ceiling_s" in capsys.readouterr().err
