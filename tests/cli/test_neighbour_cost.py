"""The concurrency, neighbour-cost and advise commands over a real store file."""

from __future__ import annotations

import html
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


def test_concurrency_splits_runs_at_idle_gaps_unless_told_otherwise(tmp_path: Path, capsys) -> None:
    from tests.analysis.article import S

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


def test_advise_and_report_give_the_same_rules_for_one_store(article_store, tmp_path: Path, capsys) -> None:
    from spark_otel import _semconv as sc
    from spark_otel.analysis import AdvisorConfig
    from spark_otel.model import MetricSample
    from spark_otel.report import build_report, inputs_from_store

    # A pinned utilization gauge: the rule to read token counts must reach the report too.
    with Store(article_store) as store:
        store.write_samples(
            [
                MetricSample(name=sc.GPU_UTILIZATION, value=96.0 + 0.1 * (k % 3), unix_ns=(k + 1) * 10**9)
                for k in range(20)
            ]
        )
    assert (
        main(["advise", "--store", article_store, "--ceiling", "3600", "--threshold", "0.3", "--json"]) == 0
    )
    advised = json.loads(capsys.readouterr().out)
    with Store(article_store) as store:
        inputs = inputs_from_store(store)
    content = build_report(inputs, config=AdvisorConfig(ceiling_s=3600, threshold=0.3))
    assert content.advice is not None
    assert content.advice.model_dump(mode="json") == advised
    kinds = [r["kind"] for r in advised["rules"]]
    assert "gauge" in kinds
    assert kinds.count("cross-engine") == 1  # the nemotron run, once

    out = tmp_path / "r"
    assert (
        main(
            ["report", "--store", article_store, "--ceiling", "3600", "--threshold", "0.3", "--out", str(out)]
        )
        == 0
    )
    text = (out / "report.html").read_text()
    assert "Under a 3,600 s per-cell ceiling" in text
    for rule in advised["rules"]:
        assert html.escape(rule["rule"]) in text


def test_advise_for_an_engine_without_cells_names_the_engines_there_are(article_store, capsys) -> None:
    assert main(["advise", "--store", article_store, "--engine", "nope"]) == 1
    err = capsys.readouterr().err
    assert "no cells recorded on engine 'nope' (engines: nemotron, qwen)" in err
    assert main(["advise", "--store", article_store, "--engine", "nemotron", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["engine"] for c in data["classes"]} == {"nemotron"}
    # The cross-engine rule names nemotron as the load's engine, so it stays.
    assert [r["engine"] for r in data["rules"] if r["kind"] == "cross-engine"] == ["nemotron"]


def test_a_negative_merge_gap_is_a_usage_error(article_store, capsys) -> None:
    for argv in (["neighbour-cost", "--eval", D_EVAL], ["concurrency"]):
        assert main([*argv, "--store", article_store, "--merge-gap", "-5"]) == 2
        err = capsys.readouterr().err
        assert err == "spark-otel: error: merge gap -5.0 s must not be negative\n"
