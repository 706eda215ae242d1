"""`spark-otel sim` as the user reads it: the whole banner (engines, profiles, models, URLs, the
speed) and the stop line, in-process with ``--duration 0`` (fast, and mutation testing sees it);
the options passed through to the box (seed, contention), read back from /sim/info of a real
process stopped by Ctrl-C; ``--speed`` refusals word for word; and where
``--otlp-traces-endpoint`` sends the engines' spans, with which service name (a local sink that
keeps each request's path, which tests/receivers' OtlpSink does not)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import IO

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from tests.support.otlp import OtlpSink

from spark_otel import ConfigError
from spark_otel.cli import build_parser, main
from spark_otel.cli.sim import _server_tracing

QWEN = "qwen3.8-27b"
NEMOTRON = "nemotron-3.5-30b-a3b"


def _ports(out: str) -> list[str]:
    """The port of each engine URL in the banner, in order (port 0 picks a free one)."""
    return re.findall(r":(\d+)/v1$", out, re.MULTILINE)


@pytest.mark.parametrize(
    ("options", "host", "speed_words"),
    [
        ([], "127.0.0.1", "1x real time"),
        (["--speed", "100", "--host", "localhost"], "localhost", "100x real time"),
        (["--speed", "inf"], "127.0.0.1", "as fast as possible"),
    ],
)
def test_the_banner_names_each_engine_its_profile_model_and_url(
    options: list[str], host: str, speed_words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sim", "--engine", "q=0:dense", "--engine", "m=0:moe", *options, "--duration", "0"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    q_port, m_port = _ports(out)
    assert out == (
        f"spark-otel sim: 2 engine(s) on one simulated box, {speed_words}\n"
        f"  q            dense  {QWEN}              http://{host}:{q_port}/v1\n"
        f"  m            moe    {NEMOTRON}     http://{host}:{m_port}/v1\n"
    )
    assert q_port != m_port
    assert err == "Stopping after 0 s.\n"


def _lines_within(stream: IO[str], n: int, *, timeout_s: float) -> str:
    """The first ``n`` lines of ``stream``, failing after ``timeout_s`` rather than waiting for ever
    on lines never flushed."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(stream.readline() for _ in range(n)), daemon=True)
    reader.start()
    reader.join(timeout_s)
    assert not reader.is_alive(), f"{len(lines)} of {n} lines within {timeout_s} s: not flushed"
    return "".join(lines)


def test_a_process_passes_seed_and_contention_to_the_box_and_ctrl_c_stops_it() -> None:
    """Its stdout is a pipe, block-buffered as under a script that waits for the URLs: each banner
    line must be flushed as printed, or the reader waits for ever."""
    block_buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_otel", "sim", "--engine", "qwen=0:dense", "--engine", "nem=0:moe",
         "--speed", "100", "--seed", "7", "--contention", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=block_buffered,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = _lines_within(proc.stdout, 3, timeout_s=20)
        qwen_port, nem_port = _ports(banner)
        info = httpx.get(f"http://127.0.0.1:{qwen_port}/sim/info", timeout=10).json()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert banner + out == (
        "spark-otel sim: 2 engine(s) on one simulated box, 100x real time\n"
        f"  qwen         dense  {QWEN}              http://127.0.0.1:{qwen_port}/v1\n"
        f"  nem          moe    {NEMOTRON}     http://127.0.0.1:{nem_port}/v1\n"
    )
    assert err == "Ctrl-C to stop.\n"
    assert {k: info[k] for k in ("speed", "seed", "contention", "engines")} == {
        "speed": 100.0,
        "seed": 7,
        "contention": 0.5,
        "engines": {"qwen": "dense", "nem": "moe"},
    }


@pytest.mark.parametrize(
    ("speed", "why"),
    [
        ("fast", "not a number: 'fast'"),
        ("0", "must be positive (or inf), got '0'"),
        ("-3", "must be positive (or inf), got '-3'"),
        ("nan", "must be positive (or inf), got 'nan'"),
    ],
)
def test_a_speed_that_is_not_a_positive_number_is_refused_by_the_parser(
    speed: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sim", "--speed", speed])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"spark-otel sim: error: argument --speed: {why}"


def test_a_speed_below_one_slows_the_box_down() -> None:
    assert build_parser().parse_args(["sim", "--speed", "0.5"]).speed == 0.5


@pytest.fixture
def path_sink() -> Iterator[OtlpSink]:
    sink = OtlpSink()
    yield sink
    sink.server.shutdown()
    sink.server.server_close()


def _one_span_through(provider: TracerProvider | None, sink: OtlpSink) -> list[tuple[str, str]]:
    """End one span into ``provider``, shut it down (which exports), and return each request's
    (path, service.name)."""
    assert provider is not None
    provider.get_tracer("test").start_span("llm_request").end()
    provider.shutdown()
    out = []
    for path, body in sink.posts:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for rs in request.resource_spans:
            names = [a.value.string_value for a in rs.resource.attributes if a.key == "service.name"]
            out.append((path, *names))
    return out


@pytest.mark.parametrize(
    ("suffix", "path"),
    [("", "/v1/traces"), ("/", "/v1/traces"), ("/collector/spans", "/collector/spans")],
)
def test_spans_go_to_v1_traces_of_a_bare_endpoint_and_to_a_given_path_as_is(
    suffix: str, path: str, path_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    provider = _server_tracing(path_sink.url + suffix)
    assert _one_span_through(provider, path_sink) == [(path, "spark-otel-sim")]


def test_spans_carry_otel_service_name_when_it_is_set(
    path_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "lab-box")
    provider = _server_tracing(path_sink.url)
    assert _one_span_through(provider, path_sink) == [("/v1/traces", "lab-box")]


def test_an_https_endpoint_is_taken() -> None:
    provider = _server_tracing("https://127.0.0.1:4318")
    assert isinstance(provider, TracerProvider)
    provider.shutdown()  # no span: nothing is sent


@pytest.mark.parametrize("endpoint", ["ftp://127.0.0.1:4318", "http:///v1/traces"])
def test_an_endpoint_without_http_or_a_host_is_refused_naming_it(endpoint: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _server_tracing(endpoint)
    assert str(refused.value) == (
        f"--otlp-traces-endpoint {endpoint!r}: expected an http(s) URL such as http://127.0.0.1:4318"
    )


def test_a_box_with_an_otlp_endpoint_starts_and_stops_cleanly(
    path_sink: OtlpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tracer provider is shut down with the box (no request: no span sent)."""
    argv = ["sim", "--engine", "q=0:dense", "--otlp-traces-endpoint", path_sink.url, "--duration", "0"]
    assert main(argv) == 0
    assert capsys.readouterr().err == "Stopping after 0 s.\n"
    assert path_sink.posts == []
