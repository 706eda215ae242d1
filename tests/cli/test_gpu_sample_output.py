"""`spark-otel gpu-sample` as the user reads it: the whole ``--once`` table with the line for what
the GPU cannot report, the whole ``--once --json`` readout, the sampling loop's two stderr lines,
a read that fails after the source opened (exit 1, the reason), and the service name its metrics
carry over OTLP. NVML is the project's stand-in module (no GPU can be produced on demand); the
simulated readout is served over real HTTP."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.support.gpu_fakes import SIM_GPU, SIM_GPU_JSON, fake_pynvml
from tests.support.metrics_server import MetricsServer
from tests.support.otlp import OtlpSink
from tests.support.printed import unpadded

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.receivers.gpu import GpuReading, SimGpuSource

NO_GPM = "GPU 0 GPM: this nvidia-ml-py has no GPM calls"  # the stand-in has none
NVML_TABLE = """\
                          GPU (utilization is the resident-kernel flag, not load)
┏━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┓
┃ gpu ┃ name        ┃ util % ┃ power W ┃ energy J ┃ SM MHz ┃ mem MHz ┃ memory used MiB ┃ memory total MiB ┃
┡━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━┩
│   0 │ NVIDIA GB10 │     96 │    37.2 │  5,000.0 │  2,418 │   4,266 │               - │                - │
└─────┴─────────────┴────────┴─────────┴──────────┴────────┴─────────┴─────────────────┴──────────────────┘
"""


@pytest.fixture
def sim_gpu(metrics_server: MetricsServer) -> str:
    """The URL of a real HTTP server answering /sim/gpu with `SIM_GPU`."""
    metrics_server.json_body = SIM_GPU
    return metrics_server.url


def test_once_prints_the_nvml_reading_as_a_table_then_what_the_gpu_cannot_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stand-in reads 96 %, 37,250 mW, 5,000,000 mJ, 2,418 / 4,266 MHz and no memory."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    assert main(["gpu-sample", "--once", "--store", str(tmp_path / "s.sqlite")]) == 0  # --source auto
    out, err = capsys.readouterr()
    assert unpadded(out) == NVML_TABLE + f"unsupported: {NO_GPM}\n"
    assert err == ""


def test_once_json_prints_the_whole_reading(
    sim_gpu: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["gpu-sample", "--source", "sim", "--sim-url", sim_gpu, "--once", "--json"]
    assert main([*argv, "--store", str(tmp_path / "s.sqlite")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [SIM_GPU_JSON]
    assert out.endswith("}\n]\n")
    assert err == ""


def test_the_sampling_loop_says_its_source_interval_and_what_is_left_out_on_stderr(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    argv = ["gpu-sample", "--interval", "2.5", "--duration", "0", "--store", str(tmp_path / "s.sqlite")]
    assert main(argv) == 0
    assert capsys.readouterr() == (
        "",
        "spark-otel: sampling the GPU via nvml every 2.5 s; Ctrl-C stops\n"
        f"spark-otel: unsupported: {NO_GPM}; left out, never recorded as 0\n",
    )


def test_once_with_a_read_that_fails_after_the_source_opened_exits_1_with_the_reason(
    sim_gpu: str, metrics_server: MetricsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opening the source reads /sim/gpu once (200); the reading `--once` takes then gets a 500."""
    reads: list[None] = []
    original = SimGpuSource.read

    def answer_500_after_the_first_read(self: SimGpuSource) -> list[GpuReading]:
        if reads:
            metrics_server.status = 500
        reads.append(None)
        return original(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SimGpuSource, "read", answer_500_after_the_first_read)
        code = main(
            ["gpu-sample", "--source", "sim", "--sim-url", sim_gpu, "--once", "--store", str(tmp_path / "s")]
        )
    reason = f"{sim_gpu}/sim/gpu: answered HTTP 500 (is this a spark-otel sim?)"
    assert (code, len(reads)) == (1, 2)
    assert capsys.readouterr() == (
        "",
        f"spark-otel: warning: GPU read failed: {reason}\nspark-otel: error: {reason}\n",
    )


def test_once_exports_the_reading_over_otlp_as_the_gpu_sample_service(
    sim_gpu: str, otlp_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{otlp_sink.server.server_address[1]}"
    )
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    argv = ["gpu-sample", "--source", "sim", "--sim-url", sim_gpu, "--once", "--json"]
    assert main([*argv, "--store", str(tmp_path / "s.sqlite")]) == 0
    services, power = set(), []
    for body in otlp_sink.bodies:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for rm in request.resource_metrics:
            services |= {a.value.string_value for a in rm.resource.attributes if a.key == "service.name"}
            power += [
                p.as_double
                for sm in rm.scope_metrics
                for m in sm.metrics
                if m.name == sc.GPU_POWER
                for p in m.gauge.data_points
            ]
    assert (services, power) == ({"spark-otel-gpu-sample"}, [37.2])
