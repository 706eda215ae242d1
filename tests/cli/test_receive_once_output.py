"""`spark-otel receive --once` as a user reads it: the whole engines table (an engine up, one down
between two that are up, one without a KV-cache gauge) and the GPU table under it, the whole
``--json`` document, the exit code and the exact error lines; the GPU read from the first
engine's address when ``--gpu sim`` names none; each refusal in its exact words; the service
name the metrics are exported under; the per-scrape timeout given.

Real engines' /metrics are stood in for by small real HTTP servers on 127.0.0.1 serving fixed
expositions, so every figure is known: the tables' cells are these numbers as written below."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.gpu_fakes import SIM_GPU, SIM_GPU_JSON
from tests.support.metrics_server import MetricsServer
from tests.support.otlp import OtlpSink
from tests.support.printed import unpadded

from spark_otel import _clock
from spark_otel.cli import main

# A vLLM engine with every gauge the table shows: 1,234,567 tokens generated, 89,012 prompt
# tokens, 3 running, 2 waiting, its KV cache a quarter full.
VLLM = (
    "# TYPE vllm:generation_tokens_total counter\n"
    'vllm:generation_tokens_total{model_name="q"} 1234567\n'
    "# TYPE vllm:prompt_tokens_total counter\n"
    'vllm:prompt_tokens_total{model_name="q"} 89012\n'
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="q"} 3\n'
    "# TYPE vllm:num_requests_waiting gauge\n"
    'vllm:num_requests_waiting{model_name="q"} 2\n'
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    'vllm:kv_cache_usage_perc{model_name="q"} 0.25\n'
)
# A llama.cpp engine, which (like current builds) has no KV-cache gauge.
LLAMA = (
    "# TYPE llamacpp:tokens_predicted_total counter\n"
    "llamacpp:tokens_predicted_total 4321\n"
    "# TYPE llamacpp:prompt_tokens_total counter\n"
    "llamacpp:prompt_tokens_total 765\n"
    "# TYPE llamacpp:requests_processing gauge\n"
    "llamacpp:requests_processing 1\n"
    "# TYPE llamacpp:requests_deferred gauge\n"
    "llamacpp:requests_deferred 4\n"
)

# SIM_GPU as the GPU table shows it: 96 %, 37.2 W, 1,234.5 J, 2,418 MHz, no memory clock,
# 80 GiB of 128 GiB = 81,920 of 131,072 MiB.
GPU_TABLE = """\
                         GPU (utilization is the resident-kernel flag, not load)
┏━━━━━┳━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┓
┃ gpu ┃ name      ┃ util % ┃ power W ┃ energy J ┃ SM MHz ┃ mem MHz ┃ memory used MiB ┃ memory total MiB ┃
┡━━━━━╇━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━┩
│   0 │ simulated │     96 │    37.2 │  1,234.5 │  2,418 │       - │          81,920 │          131,072 │
└─────┴───────────┴────────┴─────────┴──────────┴────────┴─────────┴─────────────────┴──────────────────┘
"""


def _engines_table(qwen: str, gone: str, llama: str) -> str:
    """The engines table for these three addresses (each 22 characters: a five-digit port), at
    108 columns: the numbers' headers wrap at their spaces to fit."""
    assert {len(qwen), len(gone), len(llama)} == {22}, (qwen, gone, llama)
    return f"""\
                                                  engines
┏━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━┓
┃        ┃          ┃                        ┃       ┃ generation ┃ prompt ┃ requests ┃ requests ┃      KV ┃
┃ engine ┃ kind     ┃ url                    ┃ state ┃        tok ┃    tok ┃  running ┃  waiting ┃ cache % ┃
┡━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━┩
│ qwen   │ vllm     │ {qwen} │ up    │  1,234,567 │ 89,012 │        3 │        2 │    25.0 │
│ gone   │ -        │ {gone} │ down  │            │        │          │          │         │
│ llama  │ llamacpp │ {llama} │ up    │      4,321 │    765 │        1 │        4 │       - │
└────────┴──────────┴────────────────────────┴───────┴────────────┴────────┴──────────┴──────────┴─────────┘
"""


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[MetricsServer, MetricsServer]]:
    """The vLLM engine (which also serves the simulated GPU) and the llama.cpp one, for the
    module (each takes half a second to shut down); what they serve never changes."""
    with MetricsServer() as qwen, MetricsServer() as llama:
        qwen.set_text(VLLM)
        qwen.json_body = SIM_GPU
        llama.set_text(LLAMA)
        yield qwen, llama


@pytest.fixture(autouse=True)
def _narrow_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """108 columns: the engines table fits only with its numbers' headers wrapped."""
    monkeypatch.setenv("COLUMNS", "108")


def _refused(port: int) -> str:
    return (
        f"http://127.0.0.1:{port}/metrics: cannot read engine metrics: "
        "ConnectError: [Errno 111] Connection refused"
    )


def _three_engines(qwen: MetricsServer, gone: str, llama: MetricsServer, tmp_path: Path) -> list[str]:
    """The down engine between the two that are up; ``--gpu sim`` without ``--sim-url``: the
    GPU is read from the first engine's address."""
    return [
        "receive",
        "--engine", f"qwen={qwen.url}",
        "--engine", f"gone={gone}",
        "--engine", f"llama={llama.url}",
        "--gpu", "sim",
        "--once",
        "--store", str(tmp_path / "s.sqlite"),
    ]  # fmt: skip


def test_once_prints_every_engine_in_order_and_the_gpu_then_exits_1_naming_the_one_down(
    engines: tuple[MetricsServer, MetricsServer],
    free_port: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    qwen, llama = engines
    gone = f"http://127.0.0.1:{free_port}"
    assert main(_three_engines(qwen, gone, llama, tmp_path)) == 1
    captured = capsys.readouterr()
    assert unpadded(captured.out) == _engines_table(qwen.url, gone, llama.url) + GPU_TABLE
    assert captured.err == (
        f"spark-otel: warning: engine gone: {_refused(free_port)}\n"
        f"spark-otel: error: gone: {_refused(free_port)}\n"
    )


def test_once_json_is_each_engines_snapshot_or_error_the_gpu_and_the_errors(
    engines: tuple[MetricsServer, MetricsServer],
    free_port: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    qwen, llama = engines
    gone = f"http://127.0.0.1:{free_port}"
    before = _clock.wall_ns()
    assert main([*_three_engines(qwen, gone, llama, tmp_path), "--json"]) == 1
    after = _clock.wall_ns()
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    scraped = {name: document["engines"][name]["unix_ns"] for name in ("qwen", "llama")}
    assert all(before <= ns <= after for ns in scraped.values()), (before, scraped, after)
    unset: dict[str, Any] = {
        "model_name": None,
        "time_to_first_token_sum": None,
        "time_to_first_token_count": None,
        "inter_token_latency_sum": None,
        "inter_token_latency_count": None,
        "e2e_request_latency_sum": None,
        "e2e_request_latency_count": None,
        "counters_created_unix_s": None,
    }
    assert document == {
        "engines": {
            "qwen": {
                "url": qwen.url,
                "kind": "vllm",
                "unix_ns": scraped["qwen"],
                "generation_tokens": 1234567.0,
                "prompt_tokens": 89012.0,
                "requests_running": 3.0,
                "requests_waiting": 2.0,
                "kv_cache_usage": 0.25,
                "model_names": ["q"],
                **unset,
            },
            "gone": {"error": _refused(free_port)},
            "llama": {
                "url": llama.url,
                "kind": "llamacpp",
                "unix_ns": scraped["llama"],
                "generation_tokens": 4321.0,
                "prompt_tokens": 765.0,
                "requests_running": 1.0,
                "requests_waiting": 4.0,
                "kv_cache_usage": None,
                "model_names": [],
                **unset,
            },
        },
        "gpu": [SIM_GPU_JSON],
        "errors": {"gone": _refused(free_port)},
    }
    assert captured.err == (
        f"spark-otel: warning: engine gone: {_refused(free_port)}\n"
        f"spark-otel: error: gone: {_refused(free_port)}\n"
    )


def test_once_with_only_a_gpu_prints_only_the_gpu_table_and_exits_0(
    engines: tuple[MetricsServer, MetricsServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qwen, _ = engines
    argv = ["receive", "--gpu", "sim", "--sim-url", qwen.url, "--once", "--store", str(tmp_path / "s.sqlite")]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert (unpadded(out), err) == (GPU_TABLE, "")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([], "nothing to receive: give --engine NAME=URL (repeatable) and/or --gpu SOURCE"),
        # The bounds are checked first, in this order, before the engines are looked at.
        (["--interval", "0"], "--interval must be a finite number > 0 and <= 86,400, got 0"),
        (["--timeout", "3601"], "--timeout must be a finite number > 0 and <= 3,600, got 3601"),
        (["--duration", "-1"], "--duration must be a finite number >= 0 and <= 31,536,000, got -1"),
        # No engine to read the simulated GPU from, and none named.
        (
            ["--gpu", "sim"],
            "the simulated GPU source (sim) needs --sim-url URL (a simulated engine's base URL)",
        ),
    ],
)
def test_receive_refuses_in_exact_words_with_exit_2(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["receive", *options, "--once", "--store", str(tmp_path / "s.sqlite")]) == 2
    assert capsys.readouterr() == ("", f"spark-otel: error: {message}\n")


def test_once_exports_under_the_receivers_service_name(
    engines: tuple[MetricsServer, MetricsServer],
    otlp_sink: OtlpSink,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    qwen, _ = engines
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{otlp_sink.server.server_address[1]}"
    )
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    argv = ["receive", "--engine", f"qwen={qwen.url}", "--once", "--store", str(tmp_path / "s.sqlite")]
    assert main(argv) == 0
    capsys.readouterr()
    services = set()
    for body in otlp_sink.bodies:  # the flush at exit sends the one scrape
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for rm in request.resource_metrics:
            attributes = {a.key: a.value.string_value for a in rm.resource.attributes}
            services.add(attributes["service.name"])
    assert services == {"spark-otel-receiver"}


@pytest.fixture
def silent_url() -> Iterator[str]:
    """An engine that takes the connection and never answers (its listen backlog holds it)."""
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_once_gives_a_silent_engine_up_at_the_timeout_given(
    silent_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--timeout 0.3`` reaches the scrape: the default 5 s would hold the command for 5 s."""
    started = _clock.real_monotonic_ns()
    argv = ["receive", "--engine", f"mute={silent_url}", "--timeout", "0.3", "--once"]
    assert main([*argv, "--store", str(tmp_path / "s.sqlite")]) == 1
    real_s = (_clock.real_monotonic_ns() - started) / _clock.NS_PER_S
    assert real_s < 3, real_s
    message = f"{silent_url}/metrics: cannot read engine metrics: ReadTimeout: timed out"
    assert capsys.readouterr().err == (
        f"spark-otel: warning: engine mute: {message}\nspark-otel: error: mute: {message}\n"
    )
