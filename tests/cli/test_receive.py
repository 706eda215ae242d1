"""`spark-otel receive`: over OTLP, once against the live simulated box, for a duration, failing to start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.support.gpu_fakes import SIM_GPU
from tests.support.metrics_pages import counting_text
from tests.support.metrics_server import MetricsServer
from tests.support.otlp import OtlpSink

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.receivers.gpu import SimGpuSource
from spark_otel.store import Store


def test_receive_cli_exports_engine_metrics_over_otlp(
    metrics_server: MetricsServer, otlp_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    metrics_server.text_fn = counting_text
    port = otlp_sink.server.server_address[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("SPARK_OTEL_STORE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # the store is off with OTLP on; prove nothing lands in ~
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert (
        main(["receive", "--engine", f"qwen={metrics_server.url}", "--interval", "0.2", "--duration", "1.5"])
        == 0
    )
    names: dict[str, list] = {}
    for body in otlp_sink.bodies:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                assert sm.scope.name == "spark_otel.receivers"
                for metric in sm.metrics:
                    names.setdefault(metric.name, []).append(metric)
    assert sc.ENGINE_GENERATION_TOKENS in names
    assert sc.ENGINE_UP in names
    point = names[sc.ENGINE_GENERATION_TOKENS][-1].sum.data_points[0]
    attrs = {a.key: a.value.string_value for a in point.attributes}
    assert attrs == {sc.ENGINE: "qwen", sc.ENGINE_KIND: "vllm"}
    assert point.as_double >= 100
    assert not (tmp_path / "data").exists()


def test_receive_cli_once_with_a_down_engine_exits_1_without_promising_a_retry(
    free_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"http://127.0.0.1:{free_port}"
    with caplog.at_level("WARNING", logger="spark_otel.receivers.receiver"):
        code = main(["receive", "--engine", f"gone={dead}", "--once", "--store", str(tmp_path / "s.sqlite")])
    assert code == 1
    assert "spark-otel: error: gone: " in capsys.readouterr().err
    assert caplog.records
    assert not any("retry" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("case", "code"), [("the store cannot open", 1), ("two engines share a name", 2)])
def test_receive_cli_closes_the_gpu_source_when_it_cannot_start(
    case: str, code: int, metrics_server: MetricsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics_server.json_body = SIM_GPU
    closed: list[SimGpuSource] = []
    original = SimGpuSource.close

    def close(self: SimGpuSource) -> None:
        closed.append(self)
        original(self)

    monkeypatch.setattr(SimGpuSource, "close", close)
    url = metrics_server.url
    engines = ["--engine", f"a={url}"] + (
        ["--engine", f"a={url}"] if case == "two engines share a name" else []
    )
    store = tmp_path if case == "the store cannot open" else tmp_path / "s.sqlite"  # a directory cannot
    args = ["receive", *engines, "--gpu", "sim", "--sim-url", url, "--once", "--store", str(store)]
    assert main(args) == code
    assert len(closed) == 1


def test_receive_once_cli_prints_both_engines(
    live_box: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "receive",
            "--engine",
            f"qwen={live_box.url('qwen')}",
            "--engine",
            f"nemotron={live_box.url('nemotron')}",
            "--gpu",
            "sim",
            "--once",
            "--store",
            str(tmp_path / "s.sqlite"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "qwen" in out
    assert "nemotron" in out
    assert "simulated" in out
    with Store(tmp_path / "s.sqlite") as store:
        engines = {s.attributes[sc.ENGINE] for s in store.samples(sc.ENGINE_UP)}
    assert engines == {"qwen", "nemotron"}


def test_receive_once_cli_with_a_dead_engine_exits_1(
    live_box: Any, tmp_path: Path, free_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "receive",
            "--engine",
            f"qwen={live_box.url('qwen')}",
            "--engine",
            f"gone=http://127.0.0.1:{free_port}",
            "--once",
            "--timeout",
            "2",
            "--store",
            str(tmp_path / "s.sqlite"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert "down" in captured.out
    assert (
        f"spark-otel: error: gone: http://127.0.0.1:{free_port}/metrics: cannot read engine metrics"
        in captured.err
    )


def test_receive_cli_runs_for_a_duration_and_stores_samples(live_box: Any, tmp_path: Path) -> None:
    store_path = tmp_path / "s.sqlite"
    code = main(
        [
            "receive",
            "--engine",
            f"qwen={live_box.url('qwen')}",
            "--interval",
            "10",
            "--duration",
            "100",
            "--store",
            str(store_path),
        ]
    )
    assert code == 0
    with Store(store_path) as store:  # the box's 100x clock: a scrape every 0.1 real s for 1 real s
        assert 5 <= len(store.samples(sc.ENGINE_UP)) <= 11


def test_receive_under_a_model_clock_scrapes_exports_and_stops_in_model_time(
    metrics_server: MetricsServer, otlp_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """At 100x (the scale this module's simulated box holds, one process has one model clock),
    ``--interval 100 --duration 300`` is three scrapes over three real seconds, and the OTLP
    export follows the scrapes (every real second), not every 100 real seconds."""
    from spark_otel import _clock

    metrics_server.text_fn = counting_text
    monkeypatch.setenv("SPARK_OTEL_TIME_SCALE", "100")
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{otlp_sink.server.server_address[1]}"
    )
    store_path = tmp_path / "s.sqlite"
    started = _clock.real_monotonic_ns()
    code = main(
        [
            "receive",
            "--engine",
            f"qwen={metrics_server.url}",
            "--interval",
            "100",
            "--duration",
            "300",
            "--store",
            str(store_path),
        ]
    )
    real_s = (_clock.real_monotonic_ns() - started) / _clock.NS_PER_S
    assert code == 0
    assert 2.5 < real_s < 15
    with Store(store_path) as store:
        assert len(store.samples(sc.ENGINE_UP)) in (3, 4)
    assert len(otlp_sink.bodies) >= 3  # two periodic exports at least, then the flush at exit
