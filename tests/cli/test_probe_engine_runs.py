"""`spark-otel probe` against a scripted vLLM-like engine on 127.0.0.1 (tests/support/scripted_engine.py,
which records every request): each option reaches the run (the settings the report carries, the
requests the engine saw), the load windows go over OTLP under the probe's own service name while
``--no-store`` keeps every store file closed, and on a terminal the bar counts levels of
streams x repeats (a probe cut short after one of six levels stops at 17 %)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.otlp import OtlpSink
from tests.support.printed import stderr_on_a_terminal
from tests.support.scripted_engine import Answer, ScriptedEngine, default_answer

from spark_otel.cli import main

# The engine lists two models: --model must pick the second, not fall back to the first.
TWO_MODELS = {
    "object": "list",
    "data": [{"id": "first-model", "object": "model"}, {"id": "second-model", "object": "model"}],
}


def _gpu(hit: int) -> dict[str, Any]:
    """A simulated GPU readout, which ``--gpu none`` must never ask for."""
    return {"power_w": 150.0, "energy_j": 10.0 * hit, "unix_ns": 1_790_000_000_000_000_000}


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    with ScriptedEngine(models=TWO_MODELS, gpu=_gpu) as scripted:
        yield scripted


def test_every_option_reaches_the_run_and_the_report_says_so(
    engine: ScriptedEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unnamed URL with --engine-name: the label is the name given, not the URL's host:port."""
    code = main([
        "probe", "--engine", engine.url, "--engine-name", "qwen", "--streams", "1,2", "--tokens", "3",
        "--model", "second-model", "--prompt-chars", "7", "--no-warmup", "--mode", "plain",
        "--gpu", "none", "--time-scale", "4", "--timeout", "60", "--name", "run1", "--no-store", "--json",
    ])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["settings"] == {
        "streams": [1, 2],
        "tokens": 3,
        "model": "second-model",
        "prompt_chars": 7,
        "repeats": 1,
        "warmup": False,
        "mode": "plain",
        "name": "run1",
        "engine": "qwen",
        "gpu": "none",
        "time_scale": 4.0,
        "request_timeout_s": 60.0,
    }
    metadata = report["metadata"]
    assert (metadata["engine"], metadata["model"], metadata["time_scale"], metadata["gpu_source"]) == (
        "qwen",
        "second-model",
        4.0,
        None,
    )
    assert [(level["streams"], level["probe_tokens"]) for level in report["levels"]] == [(1, 3), (2, 6)]
    # No warm-up: one request at level 1 and two at level 2, each a plain 7-character prompt.
    pinned = {
        "model": "second-model",
        "prompt": "Write a",
        "max_tokens": 3,
        "min_tokens": 3,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": False,
    }
    assert engine.bodies == [pinned, pinned, pinned]
    assert engine.hits["/sim/gpu"] == 0


@pytest.fixture
def endpoint(otlp_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> OtlpSink:
    """The sink as the OTLP endpoint, no service named by the environment, and a default store
    path that only a store opened by mistake would create."""
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{otlp_sink.server.server_address[1]}"
    )
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "default.sqlite"))
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    return otlp_sink


def _sent_spans(sink: OtlpSink) -> list[tuple[str, str, dict[str, Any]]]:
    """(service name, span name, attributes) of every span the sink received."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    spans = []
    for body in sink.bodies_to("/v1/traces"):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for rs in request.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attributes = {a.key: a.value.string_value or a.value.int_value for a in span.attributes}
                    spans.append((service, span.name, attributes))
    return spans


def test_over_otlp_each_level_is_a_load_window_span_of_spark_otel_probe_and_no_store_opens(
    engine: ScriptedEngine, endpoint: OtlpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["probe", "--engine", f"qwen={engine.url}", "--streams", "1", "--tokens", "2", "--no-warmup"]
    assert main([*argv, "--gpu", "none", "--name", "otlp-run", "--no-store"]) == 0
    capsys.readouterr()
    assert _sent_spans(endpoint) == [
        (
            "spark-otel-probe",
            "probe 1 streams",
            {
                "spark_otel.span.kind": "load_window",
                "spark_otel.load.name": "probe 1 streams",
                "spark_otel.load.kind": "probe",
                "spark_otel.load.streams": 1,
                "spark_otel.engine": "qwen",
                "spark_otel.probe.run": "otlp-run",
                "spark_otel.probe.repeat": 0,
                "spark_otel.probe.tokens": 2,
                "spark_otel.probe.mode": "stream",
            },
        )
    ]
    assert list(tmp_path.iterdir()) == []  # neither the probe nor its telemetry opened a store


def _last_frame(drawn: str) -> list[str]:
    """The words of the bar's last frame, before rich shows the cursor again (colours and the bar's
    own glyphs left out)."""
    frames = re.split(r"\r\x1b\[2K", drawn.partition("\x1b[?25h")[0])
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", frames[-1])
    return last.translate(str.maketrans("", "", "━╺╸")).split()


def test_on_a_terminal_the_bar_counts_levels_times_repeats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three levels twice each is six steps; the second round of level 1 fails every stream, so
    the bar stops after one: 1 of 6 is 17 %."""

    def first_only(number: int, body: dict[str, Any]) -> Answer:
        if number == 1:
            return default_answer(number, body)
        return Answer(status=503, body=b'{"error": {"message": "draining"}}')

    with ScriptedEngine(answer=first_only) as scripted, stderr_on_a_terminal() as terminal:
        argv = ["probe", "--engine", f"qwen={scripted.url}", "--streams", "1,2,4", "--repeats", "2"]
        assert main([*argv, "--tokens", "3", "--no-warmup", "--gpu", "none", "--no-store"]) == 1
    capsys.readouterr()
    assert _last_frame(terminal.getvalue()) == ["probing", scripted.url, "17%", "-:--:--"]
