"""`spark-otel instruments` over real store files: the simulated box end to end, receiver bins,
eval runs, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.article import QWEN_CURVE, appendix_c_cells
from tests.support.printed import row_starting, rows_of

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.model import MetricSample
from spark_otel.store import Store

S = 1_000_000_000


def verdicts(data: dict[str, Any]) -> dict[str, str]:
    return {v["instrument"]: v["verdict"] for v in data["instruments"]}


def test_the_simulated_box_reads_like_the_article(sim_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = Path(sim_store).read_bytes()
    assert main(["instruments", "--store", sim_store, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["interval_source"] == "probe"
    assert [i["label"] for i in data["intervals"]] == [
        "qwen 1 stream",
        "qwen 2 streams",
        "qwen 4 streams",
        "qwen 8 streams",
    ]
    assert data["throughput_max"] / data["throughput_min"] > 5
    # By construction (spark_otel.sim.box): utilization pinned near 96% whenever the box works,
    # power on Appendix A's nearly flat curve, the SM clock and memory constant; the engine's
    # counter, running requests and KV cache move with the load the probe put on it.
    assert verdicts(data) == {
        "GPU 0 utilization": "not load",
        "GPU 0 power": "not load",
        "GPU 0 energy counter": "not load",
        "GPU 0 SM clock": "not load",
        "GPU 0 memory used": "not load",
        "qwen generation counter": "tracks load",
        "qwen requests running": "tracks load",
        "qwen KV-cache usage": "tracks load",
        # The probe never loaded the other engine: nothing to pair its gauges with.
        "nemotron generation counter": "not enough load range",
        "nemotron requests running": "not enough load range",
        "nemotron KV-cache usage": "not enough load range",
    }
    by_name = {v["instrument"]: v for v in data["instruments"]}
    util = by_name["GPU 0 utilization"]
    assert 95 <= util["gauge_min"] <= util["gauge_max"] <= 97
    assert "pinned at" in util["evidence"]
    power = by_name["GPU 0 power"]
    assert 33 < power["gauge_min"] < power["gauge_max"] < 40
    assert power["elasticity"] < 0.1
    counter = by_name["qwen generation counter"]
    assert counter["elasticity"] == pytest.approx(1.0, abs=0.15)
    assert counter["rank_correlation"] == 1.0
    assert by_name["qwen requests running"]["gauge_max"] == 8
    idle = by_name["nemotron generation counter"]
    assert "no interval measured nemotron's throughput" in idle["evidence"]
    assert idle["measure"] == "spark-otel probe --engine nemotron=URL --streams 1,2,4,8,16"
    assert Path(sim_store).read_bytes() == before  # read only


def test_the_simulated_box_as_tables(sim_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["instruments", "--store", sim_store, "--readings"]) == 0
    out, readings = capsys.readouterr().out.split("each gauge per interval")
    assert "4 probe intervals, " in out
    assert "(model time, 20x): does each gauge move with load?" in out
    util = row_starting(out, "GPU 0 utilization")
    assert util[1:3] == ["not load", "4"]
    assert util[4].endswith("%")
    assert row_starting(out, "GPU 0 power")[4].endswith(" W")
    assert row_starting(out, "qwen generation counter")[1] == "tracks load"
    assert "  GPU 0 power: not load: 4 intervals, " in out
    assert "elasticity: least-squares slope of the gauge on throughput" in out
    assert "note: no Nsight captures" in out
    per_interval = [row for row in rows_of(readings) if row[0] == "qwen requests running"]
    assert [row[1] for row in per_interval] == [
        "qwen 1 stream",
        "qwen 2 streams",
        "qwen 4 streams",
        "qwen 8 streams",
    ]
    assert [row[3] for row in per_interval] == [
        "1.00 requests",
        "2.00 requests",
        "4.00 requests",
        "8.00 requests",
    ]


def _write_scrapes(path: Path) -> None:
    """Ten minutes of receiver scrapes every 5 s: qwen's load steps up every two minutes from 10 to
    160 tok/s; power barely moves, running requests follow the load."""
    t0 = 1_700_000_000 * S
    rates = [10.0, 20.0, 40.0, 80.0, 160.0]
    samples, total = [], 0.0
    for k in range(121):
        t = t0 + k * 5 * S
        rate = rates[min(k // 24, 4)]
        samples += [
            MetricSample(
                name=sc.ENGINE_GENERATION_TOKENS, unix_ns=t, value=total, attributes={sc.ENGINE: "qwen"}
            ),
            MetricSample(
                name=sc.ENGINE_REQUESTS_RUNNING, unix_ns=t, value=rate / 10, attributes={sc.ENGINE: "qwen"}
            ),
            MetricSample(name=sc.GPU_POWER, unix_ns=t, value=35 + rate / 100, attributes={sc.GPU_ID: "0"}),
            MetricSample(name=sc.GPU_UTILIZATION, unix_ns=t, value=0.96, attributes={sc.GPU_ID: "0"}),
        ]
        total += rate * 5
    with Store(path) as store:
        store.write_samples(samples)


def test_receiver_bins_pair_gauges_with_the_engines_counter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scrapes.sqlite"
    _write_scrapes(path)
    assert main(["instruments", "--store", str(path), "--json", "--bin", "60"]) == 0  # auto: the scrapes
    data = json.loads(capsys.readouterr().out)
    assert data["interval_source"] == "receiver"
    assert len(data["intervals"]) == 10
    assert verdicts(data) == {
        "GPU 0 utilization": "not load",
        "GPU 0 power": "not load",
        "GPU 0 memory used": "unsupported",  # nvidia-smi on unified memory: never reported
        "qwen requests running": "tracks load",
    }
    assert any(
        "spark_otel.engine.generation_tokens is these intervals' throughput" in n for n in data["notes"]
    )


def test_eval_runs_pair_the_cells_own_rates_with_the_boxs_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cells.sqlite"
    with Store(path) as store:
        store.write_cells(appendix_c_cells())
        store.put_document("probe", "curve only", {"curve": QWEN_CURVE.model_dump(mode="json")})
    assert main(["instruments", "--store", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["interval_source"] == "evals"
    # One run at one worker and one at eight: two intervals, not enough to grade a gauge on.
    [cells] = data["instruments"]
    assert cells["instrument"] == "qwen cells' decode rate"
    assert cells["verdict"] == "not enough load range"
    assert cells["n_intervals"] == 2
    assert any("probe document 'curve only'" in note and "skipped" in note for note in data["notes"])


def test_a_missing_store_is_one_line_and_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nope.sqlite"
    assert main(["instruments", "--store", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("spark-otel: error: ")
    assert str(path) in err
    assert err.count("\n") == 1
    assert not path.exists()


def test_an_empty_store_says_what_to_measure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.sqlite"
    Store(path).close()
    assert main(["instruments", "--store", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"spark-otel: error: {path}: no load to pair the gauges with (no probe levels, engine counter "
        "scrapes or eval cells); measure: spark-otel probe --engine NAME=URL --streams 1,2,4,8,16\n"
    )
    assert main(["instruments", "--store", str(path), "--intervals", "receiver"]) == 1
    assert "(no engine counter scrapes)" in capsys.readouterr().err


def test_load_without_any_gauge_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "counter.sqlite"
    with Store(path) as store:
        store.write_samples(
            MetricSample(name=sc.ENGINE_GENERATION_TOKENS, unix_ns=k * 10 * S, value=k * 100.0, attributes={})
            for k in range(10)
        )
    assert main(["instruments", "--store", str(path)]) == 1
    err = capsys.readouterr().err
    assert "receiver intervals but no gauge readings to grade" in err
    assert err.count("\n") == 1


def test_a_bad_bin_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["instruments", "--store", str(tmp_path / "never.sqlite"), "--bin", "0"]) == 2
    assert (
        capsys.readouterr().err
        == "spark-otel: error: --bin must be a finite number > 0 and <= 86,400, got 0\n"
    )
