"""`spark-otel sim` as a user runs it: a real process, real ports, Ctrl-C to stop."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import httpx
import pytest
from tests.support.otlp import OtlpSink

from spark_otel.cli import main


def test_sim_serves_until_interrupted_and_prints_urls() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spark_otel",
            "sim",
            "--engine",
            "qwen=0:dense",
            "--engine",
            "nem=moe",
            "--speed",
            "100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        urls = {}
        for line in proc.stdout:
            found = re.match(r"\s+(\S+)\s+(dense|moe)\s+(\S+)\s+(http://127\.0\.0\.1:\d+)/v1$", line)
            if found:
                urls[found.group(1)] = found.group(4)
            if len(urls) == 2:
                break
        assert set(urls) == {"qwen", "nem"}
        info = httpx.get(urls["nem"] + "/sim/info", timeout=10).json()
        assert info == {**info, "engine": "nem", "profile": "moe", "speed": 100.0}
        body = {"model": "qwen", "prompt": "x", "max_tokens": 5, "min_tokens": 5}
        response = httpx.post(urls["qwen"] + "/v1/completions", json=body, timeout=10).json()
        assert response["usage"]["completion_tokens"] == 5
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
        assert proc.stderr is not None
        assert "Ctrl-C to stop." in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_duration_stops_the_server_by_itself() -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "spark_otel", "sim", "--engine", "q=0:dense", "--duration", "0.2"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 0
    assert "http://127.0.0.1:" in result.stdout
    assert "Ctrl-C" not in result.stderr
    assert "Stopping after 0.2 s." in result.stderr
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "qwen=notaport:dense"], "port 'notaport' is not a number"),
        (["--engine", "qwen=0:sparse"], "unknown engine profile 'sparse'"),
        (["--engine", "a=0:dense", "--engine", "a=0:moe"], "unique"),
        (["--engine", "a=0:dense", "--contention", "-2"], "contention"),
        (
            ["--engine", "a=0:dense", "--duration", "-5"],
            "--duration must be a finite number >= 0 and <= 31,536,000, got -5",
        ),
        (["--engine", "a=0:dense", "--duration", "nan"], "--duration must be"),
    ],
)
def test_bad_options_are_one_line_errors_with_exit_2(argv: list[str], message: str, capsys) -> None:
    assert main(["sim", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spark-otel: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_a_busy_port_is_an_error_naming_the_engine(capsys) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["sim", "--engine", f"qwen={port}:dense"]) == 2
    assert f"engine 'qwen': cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_sim_sends_vllms_server_span_per_request_to_an_otlp_endpoint(otlp_sink: OtlpSink) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from spark_otel import _semconv as sc

    url = f"http://127.0.0.1:{otlp_sink.server.server_address[1]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_otel", "sim", "--engine", "qwen=0:dense", "--speed", "100",
         "--otlp-traces-endpoint", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base = next(
            m.group(1) for line in proc.stdout if (m := re.search(r"(http://127\.0\.0\.1:\d+)/v1$", line))
        )
        trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        body = {"model": "qwen", "prompt": "x", "max_tokens": 5, "min_tokens": 5}
        headers = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
        assert httpx.post(base + "/v1/completions", json=body, headers=headers, timeout=10).status_code == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    spans = []
    for raw in otlp_sink.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(raw)
        spans += [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
    (span,) = spans
    assert span.name == sc.VLLM_SERVER_SPAN_NAME
    assert (span.trace_id.hex(), span.parent_span_id.hex()) == (trace_id, parent_id)
    attrs = {a.key: a.value for a in span.attributes}
    assert attrs[sc.VLLM_USAGE_COMPLETION_TOKENS].int_value == 5
    assert attrs[sc.VLLM_LATENCY_E2E].double_value > 0


def test_sim_refuses_an_otlp_endpoint_that_is_not_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["sim", "--engine", "q=0:dense", "--otlp-traces-endpoint", "localhost:4317", "--duration", "0"])
        == 2
    )
    assert "--otlp-traces-endpoint 'localhost:4317': expected an http(s) URL" in capsys.readouterr().err


def test_clock_of_prints_the_running_boxs_clock_for_a_runner_to_follow(
    capsys: pytest.CaptureFixture[str], restore_clock: None
) -> None:
    """What a launcher exports as SPARK_OTEL_CLOCK: the box's speed, and its model time at a real
    instant, which a runner started later reads as the box's time then."""
    from spark_otel import _clock
    from spark_otel.sim import run_box

    with run_box({"qwen": "dense"}, speed=40.0) as box:
        assert main(["sim", "--clock-of", box.url("qwen")]) == 0
        printed = capsys.readouterr().out
        box_now = box.now_unix_s()
    assert float(printed.strip().split("@")[0]) == 40.0
    follower = _clock.Clock.parse(printed)
    assert follower.epoch_now() / 1e9 == pytest.approx(box_now, abs=40 * 0.5)


def test_clock_of_a_url_that_is_no_box_is_one_line_error(
    capsys: pytest.CaptureFixture[str], free_port: int
) -> None:
    assert main(["sim", "--clock-of", f"http://127.0.0.1:{free_port}"]) == 2
    err = capsys.readouterr().err
    url = f"http://127.0.0.1:{free_port}"
    assert err.startswith(
        f"spark-otel: error: --clock-of '{url}': {url}/sim/info: cannot read the simulated box's clock"
    )
    assert err.count("\n") == 1
