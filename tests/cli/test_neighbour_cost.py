"""`spark-otel neighbour-cost` over a real store file (two tests also run `advise` and `concurrency`)."""

from __future__ import annotations

import json

import pytest
from tests.support.article import C_EVAL, D_EVAL
from tests.support.printed import row_starting

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
    assert "no cells of eval 'nope'; it holds " in err
    assert C_EVAL in err  # names the evals that do exist
    assert len(err.strip().splitlines()) == 1


def test_bad_threshold_is_a_usage_error(article_store, capsys) -> None:
    assert main(["neighbour-cost", "--store", article_store, "--eval", D_EVAL, "--threshold", "5"]) == 2
    assert "--threshold must be a finite number >= 0 and <= 1, got 5" in capsys.readouterr().err
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
        assert err == (
            "spark-otel: error: --merge-gap must be a finite number >= 0 and <= 31,536,000, got -5\n"
        )


def test_plot_draws_the_eval_timeline_one_file_per_worker_count(article_store, capsys, tmp_path) -> None:
    single = tmp_path / "serial.png"
    assert main(["neighbour-cost", "--store", article_store, "--eval", D_EVAL, "--plot", str(single)]) == 0
    assert single.read_bytes().startswith(b"\x89PNG")
    assert f"wrote {single}" in capsys.readouterr().err
    mixed = tmp_path / "thinking.png"
    assert main(["neighbour-cost", "--store", article_store, "--eval", C_EVAL, "--plot", str(mixed)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "serial.png",
        "thinking-1-workers.png",
        "thinking-8-workers.png",
    ]
    assert (
        main(
            [
                "neighbour-cost",
                "--store",
                article_store,
                "--eval",
                D_EVAL,
                "--plot",
                str(tmp_path / "no" / "x.png"),
            ]
        )
        == 2  # refused before the store is read
    )
    assert "--plot " in capsys.readouterr().err


def test_an_eval_without_a_baseline_says_why_instead_of_an_empty_table(tmp_path, capsys) -> None:
    from spark_otel.model import Cell, LoadWindow
    from spark_otel.store import Store

    s = 1_000_000_000
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.write_cells(
            Cell(
                uid=f"c{i}",
                eval_name="busy",
                cell_id=f"c{i}",
                engine="qwen",
                workers=1,
                start_unix_ns=(100 + i * 10) * s,
                end_unix_ns=(110 + i * 10) * s,
                completion_tokens=50,
            )
            for i in range(3)
        )
        store.write_windows(
            [
                LoadWindow(
                    uid="w",
                    name="a job",
                    kind="load",
                    engine="qwen",
                    start_unix_ns=90 * s,
                    end_unix_ns=200 * s,
                )
            ]
        )
    assert main(["neighbour-cost", "--store", str(path), "--eval", "busy"]) == 0
    out = capsys.readouterr().out
    assert (
        "busy on qwen: no baseline: every one of the 3 cells of busy ran beside other load, so nothing "
        "says what it decodes alone; run a few of its cells with the box otherwise idle\n"
    ) in out
    assert "load elsewhere on the box" not in out
    assert "busy: cells (0 timeouts and 0 failed, kept out of rates)" in out


def test_the_json_is_the_row_analysiss_report(article_store, capsys) -> None:
    # The command prices over columns and writes its JSON from them; the row path, over the cells
    # every analysis of a store reads, gives the same document.
    from spark_otel.analysis.neighbour import neighbour_cost, neighbour_costs
    from spark_otel.report.inputs import cells_from_store
    from spark_otel.store import Store

    with Store(article_store, read_only=True) as store:
        cells, windows = cells_from_store(store), store.windows()
    for name, workers in [(D_EVAL, None), (C_EVAL, None), (C_EVAL, 8)]:
        argv = ["neighbour-cost", "--store", article_store, "--eval", name, "--json", "--min-overlap", "0.5"]
        assert main(argv + (["--workers", str(workers)] if workers else [])) == 0
        printed = json.loads(capsys.readouterr().out)
        if workers:
            reports = [neighbour_cost(name, cells, windows, workers=workers, min_overlap_fraction=0.5)]
        else:
            reports = neighbour_costs(
                cells, windows, eval_names=[name], min_cells=1, min_overlap_fraction=0.5
            )
        dumped = [r.model_dump(mode="json") | {"threshold": 0.2} for r in reports]
        assert printed == (dumped[0] if len(dumped) == 1 else dumped)
