"""The report's Instruments section and energy, from a store the simulated box filled: a probe at
1 to 8 streams with the receiver scraping the engines and the box's GPU meanwhile."""

from __future__ import annotations

from pathlib import Path

from spark_otel.report import build_report, inputs_from_store, write_report
from spark_otel.store import Store


def test_the_report_grades_the_simulated_boxs_gauges_and_plots_each(sim_store: str, tmp_path: Path) -> None:
    with Store(sim_store, read_only=True) as store:
        inputs = inputs_from_store(store)
    content = build_report(inputs)
    assert content.instruments is not None
    verdicts = {v.instrument: v.verdict for v in content.instruments.instruments}
    assert verdicts["GPU 0 utilization"] == "not load"
    assert verdicts["GPU 0 power"] == "not load"
    assert verdicts["qwen generation counter"] == "tracks load"
    assert verdicts["qwen requests running"] == "tracks load"
    page = write_report(content, tmp_path).read_text("utf-8")
    assert "<h2>Instruments: which gauge measures load</h2>" in page
    assert "4 probe intervals, " in page
    plotted = sorted(p.name for p in tmp_path.glob("instrument-*.png"))
    # One plot per gauge read in two intervals or more: the GPU's five and qwen's three.
    assert len(plotted) == 8
    assert "instrument-1-gpu-0-utilization.png" in plotted
    assert 'data-file="instrument-1-gpu-0-utilization.png"' in page
    # The probe's own power gives its levels' joules per token.
    assert "energy (power x wall, over the probe&#x27;s own tokens): 8 streams: " in page


def test_a_store_without_gauges_says_what_would_record_them(tmp_path: Path) -> None:
    from tests.support.article import appendix_c_cells

    path = tmp_path / "cells.sqlite"
    with Store(path) as store:
        store.write_cells(appendix_c_cells())
    with Store(path, read_only=True) as store:
        content = build_report(inputs_from_store(store))
    assert content.energy is None
    # The eval runs are the load and the cells' own rates the only gauge: the page says what
    # would record the GPU's and the engines'.
    assert content.instruments is not None
    assert [v.instrument for v in content.instruments.instruments] == ["qwen cells' decode rate"]
    page = write_report(content, tmp_path / "out").read_text("utf-8")
    assert "no GPU samples: record them beside the load with `spark-otel gpu-sample`" in page.replace(
        "&#x27;", "'"
    )
    assert "energy: no GPU readings in the store for these 16 cells; measure with" in page
