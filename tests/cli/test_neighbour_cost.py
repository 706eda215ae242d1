"""`spark-otel neighbour-cost` over a real store file (two tests also run `advise` and `concurrency`)."""

from __future__ import annotations

import json

import pytest
from tests.analysis.article import C_EVAL, D_EVAL
from tests.cli.tables import row_starting

from spark_otel.cli import main


def test_neighbour_cost_prints_the_act_4_table(article_store, capsys) -> None:
    assert main(["neighbour-cost", "--store", article_store, "--eval", D_EVAL]) == 0
    out = capsys.readouterr().out
    assert "median 11.51 tok/s, p10 10.51, p90 11.70" in out
    assert "5.25" in out
    cards = row_starting(out, "nemotron-cards eval, 4 workers on nemotron")
    assert cards[-3:] == ["5.25", "-", "54 !"]  # median tok/s, range, cost % past the default 20% threshold
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


def test_unknown_eval_is_one_line_naming_the_eval(article_store, capsys) -> None:
    assert main(["neighbour-cost", "--store", article_store, "--eval", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("spark-otel: error: ")
    assert "no cells recorded for eval 'nope'" in err
    assert C_EVAL in err  # names the evals that do exist
    assert len(err.strip().splitlines()) == 1


def test_bad_threshold_is_a_usage_error(article_store, capsys) -> None:
    assert main(["neighbour-cost", "--store", article_store, "--eval", D_EVAL, "--threshold", "5"]) == 2
    assert "--threshold 5.0 must be a fraction" in capsys.readouterr().err
    assert main(["advise", "--store", article_store, "--ceiling", "-1"]) == 2
    assert "ceiling_s" in capsys.readouterr().err


def test_neighbour_cost_prices_each_worker_count_of_a_mixed_eval(article_store, capsys) -> None:
    # The Appendix C eval ran at 1 and 8 workers: one table per count, never one mixed baseline.
    assert main(["neighbour-cost", "--store", article_store, "--eval", C_EVAL, "--json"]) == 0
    reports = json.loads(capsys.readouterr().out)
    assert [(r["workers"], r["n_cells"]) for r in reports] == [(1, 8), (8, 8)]
    assert reports[0]["baseline"]["median"] == pytest.approx(11.565, abs=1e-6)
    assert reports[1]["baseline"]["median"] == pytest.approx(9.20, abs=1e-6)
    assert main(["neighbour-cost", "--store", article_store, "--eval", C_EVAL, "--workers", "8"]) == 0
    out = capsys.readouterr().out
    assert f"{C_EVAL} at 8 workers on qwen: baseline over 7 cells" in out  # one timed out
    assert "median 9.20 tok/s" in out


def test_a_negative_merge_gap_is_a_usage_error(article_store, capsys) -> None:
    for argv in (["neighbour-cost", "--eval", D_EVAL], ["concurrency"]):
        assert main([*argv, "--store", article_store, "--merge-gap", "-5"]) == 2
        err = capsys.readouterr().err
        assert err == "spark-otel: error: merge gap -5.0 s must not be negative\n"
