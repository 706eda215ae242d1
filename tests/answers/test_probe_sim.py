"""The probe against the simulated engine over real HTTP: pinned tokens, counter deltas, ground truth."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from spark_otel.cli import main
from spark_otel.probe import ProbeSettings, run_probe
from spark_otel.probe_results import ProbeReport, load_probe_report
from spark_otel.sim import run_box
from spark_otel.store import Store

SPEED = 25.0  # slow enough that a loaded 2-core machine keeps up with the streams


@pytest.fixture
def box() -> Iterator[object]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED, seed=0) as b:
        yield b


def test_probe_alone_pins_tokens_matches_the_engine_counter_and_the_simulated_curve(
    box, store: Store
) -> None:
    report = run_probe(box.url("qwen"), ProbeSettings(streams=[1, 4], tokens=256, name="alone"), store=store)

    assert report.metadata.model == "qwen3.8-27b"
    assert report.metadata.engine == "qwen"
    assert report.metadata.time_scale == SPEED
    for level in report.levels:
        assert level.errors == 0
        assert level.token_mismatches == 0
        assert level.probe_tokens == 256 * level.streams
        # One event per token, plus the usage chunk and [DONE] per stream (the sim's stream interval is 1).
        assert level.sse_events == (256 + 2) * level.streams
        # Alone on the engine, the generation counter moved by exactly the probe's tokens.
        assert level.engine_generation_tokens == level.probe_tokens
        assert level.engine_probe_ratio == pytest.approx(1.0)
        assert level.quiescent
        truth = box.predicted_rate("qwen", level.streams)
        # Each stream's own wall includes its time to first token, so it reads a little under the
        # pure decode rate; never above it.
        assert level.per_stream_median == pytest.approx(truth, rel=0.06)
        assert level.per_stream_median <= truth * 1.01
        assert level.ttft_s_median is not None
        assert 25 < level.power_w < 45  # the simulated box's nearly flat power curve, model time
    assert report.curve.points[1].aggregate_rate == pytest.approx(4 * box.predicted_rate("qwen", 4), rel=0.08)

    windows = store.windows(kind="probe")
    assert [(w.name, w.engine, w.streams) for w in windows] == [
        ("probe 1 streams", "qwen", 1),
        ("probe 4 streams", "qwen", 4),
    ]
    assert [(w.start_unix_ns, w.end_unix_ns) for w in windows] == [
        (lv.start_unix_ns, lv.end_unix_ns) for lv in report.levels
    ]
    [doc] = store.documents("probe")
    assert doc["name"] == "alone"
    assert load_probe_report(doc["body"]) == report


def _background_stream(url: str, started: threading.Event) -> None:
    body = {
        "model": "qwen3.8-27b",
        "prompt": "x",
        "max_tokens": 900,
        "min_tokens": 900,
        "ignore_eos": True,
        "stream": True,
    }
    with (
        httpx2.Client(timeout=60) as client,
        client.stream("POST", url + "/v1/completions", json=body) as response,
    ):
        for _ in response.iter_raw():
            started.set()


def test_probe_beside_another_tenant_reads_an_engine_aggregate_above_its_own(box, store: Store) -> None:
    started = threading.Event()
    tenant = threading.Thread(target=_background_stream, args=(box.url("qwen"), started))
    tenant.start()
    try:
        assert started.wait(10)
        report = run_probe(box.url("qwen"), ProbeSettings(streams=[1], tokens=128, warmup=False), store=store)
    finally:
        tenant.join(60)
    [level] = report.levels
    assert level.requests_running_before == 1
    assert level.token_mismatches == 0
    # One probe stream beside one tenant stream: the engine decoded about twice the probe's tokens.
    assert level.engine_probe_ratio == pytest.approx(2.0, rel=0.15)
    assert level.engine_probe_ratio > 1.5
    assert level.per_stream_median == pytest.approx(box.predicted_rate("qwen", 2), rel=0.06)


def test_probe_plain_mode_has_no_time_to_first_token_and_still_pins_tokens(box) -> None:
    # Nemotron decodes fast, so a long answer keeps the fixed HTTP round trip small beside it.
    report = run_probe(box.url("nemotron"), ProbeSettings(streams=[2], tokens=1024, mode="plain", gpu="none"))
    [level] = report.levels
    assert level.ttft_s_median is None
    assert level.power_w is None
    assert level.probe_tokens == 2048
    assert level.engine_generation_tokens == 2048
    assert level.per_stream_median == pytest.approx(box.predicted_rate("nemotron", 2), rel=0.08)


def test_probe_cli_prints_the_table_and_writes_json_plot_and_store(
    box, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path, json_path, png = tmp_path / "s.sqlite", tmp_path / "probe.json", tmp_path / "probe.png"
    code = main([
        "probe", "--engine", box.url("qwen"), "--streams", "1,2", "--tokens", "128", "--repeats", "2",
        "--store", str(store_path), "--json", str(json_path), "--plot", str(png),
    ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "per-stream" in out
    assert "2 #2" in out  # the second round of two streams
    report = ProbeReport.load_file(json_path)
    assert [(lv.streams, lv.repeat) for lv in report.levels] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert [p.streams for p in report.curve.points] == [1, 2]
    assert png.read_bytes().startswith(b"\x89PNG")
    with Store(store_path) as store:
        assert len(store.windows(kind="probe")) == 4
        assert len(store.documents("probe")) == 1


def test_probe_of_a_model_the_engine_does_not_serve_fails_with_the_engines_answer(
    box, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "probe",
            "--engine",
            box.url("qwen"),
            "--streams",
            "1",
            "--tokens",
            "8",
            "--model",
            "nope",
            "--no-store",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "warm-up request failed: HTTP 404" in err


def test_probe_levels_reach_an_otlp_export_as_load_windows(
    box,
    store: Store,
    tmp_path: Path,
    span_exporter,
    tracer_provider,
    meter_provider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    import spark_otel.probe
    from spark_otel.otlp_json import read_otlp_json
    from spark_otel.telemetry import Telemetry

    # The telemetry in force exports over OTLP; here its spans land in memory instead of a collector.
    telemetry = Telemetry(tracer_provider, meter_provider, store=None, otlp=True)
    monkeypatch.setattr(spark_otel.probe, "current_telemetry", lambda: telemetry)
    run_probe(
        box.url("qwen"), ProbeSettings(streams=[1, 2], tokens=64, warmup=False, gpu="none"), store=store
    )

    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(MessageToDict(encode_spans(span_exporter.get_finished_spans()))) + "\n")
    exported = read_otlp_json([path]).windows
    stored = store.windows(kind="probe")
    key = [(w.name, w.kind, w.engine, w.streams, w.start_unix_ns, w.end_unix_ns) for w in stored]
    assert [(w.name, w.kind, w.engine, w.streams, w.start_unix_ns, w.end_unix_ns) for w in exported] == key
    assert len(key) == 2
