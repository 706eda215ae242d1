"""`spark-otel advise` over a real store file, and `report` giving the same rules for it."""

from __future__ import annotations

import html
import json
from pathlib import Path

from spark_otel.cli import main
from spark_otel.store import Store
from spark_otel.views.rules import advice_json


def test_advise_prints_rules_with_their_evidence(article_store, capsys) -> None:
    assert main(["advise", "--store", article_store]) == 0
    out = capsys.readouterr().out
    assert "nemotron lane at most 8 streams" in out
    assert "nemotron yields while" in out
    assert "qwen-thinking-review generation-heavy" in out


def test_advise_json_uses_the_given_ceiling(article_store, capsys) -> None:
    assert main(["advise", "--store", article_store, "--ceiling", "3600", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["ceiling_s"] == 3600
    assert any(r["kind"] == "cross-engine" for r in data["rules"])


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
    assert advice_json(content.advice) == advised  # the facts, each rule's words beside them
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
    assert "no cells on engine 'nope' (engines: nemotron, qwen); it holds " in err
    assert main(["advise", "--store", article_store, "--engine", "nemotron", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["engine"] for c in data["classes"]} == {"nemotron"}
    # The cross-engine rule names nemotron as the load's engine, so it stays.
    assert [r["engine"] for r in data["rules"] if r["kind"] == "cross-engine"] == ["nemotron"]
