"""`spark-otel gpu-sample`: no GPU, a fake nvidia-smi, the simulated /sim/gpu, a failed read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tests.support.gpu_fakes import SIM_GPU, SMI_CSV, fake_pynvml, fake_smi
from tests.support.metrics_server import MetricsServer

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.store import Store


def test_gpu_sample_cli_without_gpu_exits_1_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["gpu-sample", "--once", "--store", str(tmp_path / "s.sqlite")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("spark-otel: error: no NVIDIA GPU found:")
    assert err.count("\n") == 1


def test_gpu_sample_cli_once_with_fake_smi_prints_the_table_and_stores(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    monkeypatch.setenv("PATH", str(fake_smi(tmp_path, SMI_CSV)) + os.pathsep + os.environ["PATH"])
    store_path = tmp_path / "s.sqlite"
    assert main(["gpu-sample", "--once", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out
    assert "312.4" in out
    with Store(store_path) as store:
        assert sorted(s.value for s in store.samples(sc.GPU_UTILIZATION)) == [0.95, 0.96]


def test_gpu_sample_cli_once_stores_in_the_default_store_as_its_help_says(
    metrics_server: MetricsServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    metrics_server.json_body = SIM_GPU
    store_path = tmp_path / "default.sqlite"
    monkeypatch.setenv("SPARK_OTEL_STORE", str(store_path))  # the default store, no --store
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert main(["gpu-sample", "--source", "sim", "--sim-url", metrics_server.url, "--once"]) == 0
    assert "37.2" in capsys.readouterr().out
    with Store(store_path) as store:
        [power] = store.samples(sc.GPU_POWER)
    assert power.value == 37.2
    assert power.unix_ns == SIM_GPU["unix_ns"]
    help_text = " ".join(_help("gpu-sample", capsys).split())
    assert "--once read once, store it, print a table, and exit" in help_text


def test_gpu_sample_cli_once_reports_a_source_that_cannot_open(
    metrics_server: MetricsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Opening the source reads /sim/gpu once to check it; here that read fails. A read that fails
    # after the source opened: test_gpu_sample_output.py.
    metrics_server.json_body = SIM_GPU
    metrics_server.status = 500
    code = main(
        [
            "gpu-sample",
            "--source",
            "sim",
            "--sim-url",
            metrics_server.url,
            "--once",
            "--store",
            str(tmp_path / "s.sqlite"),
        ]
    )
    assert code == 1
    assert capsys.readouterr().err.startswith("spark-otel: error: ")
    assert not (tmp_path / "s.sqlite").exists()


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out
