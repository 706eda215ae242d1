"""The probe against the simulated engine over real HTTP: pinned tokens, counter deltas, ground truth."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx2
import pytest
from tests.support.boxes import PROBE_BOX_SPEED
from tests.support.cells import recent_cell
from tests.support.plain_engine import PlainEngine

from spark_otel import EngineError
from spark_otel.probe import ProbeIncomplete, ProbeSettings, run_probe
from spark_otel.records.probe_report import load_probe_report
from spark_otel.store import Store


def test_probe_alone_pins_tokens_matches_the_engine_counter_and_the_simulated_curve(
    probe_box, store: Store
) -> None:
    report = run_probe(
        probe_box.url("qwen"), ProbeSettings(streams=[1, 4], tokens=256, name="alone"), store=store
    )

    assert report.metadata.model == "qwen3.8-27b"
    assert report.metadata.engine == "qwen"
    assert report.metadata.time_scale == PROBE_BOX_SPEED
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
        truth = probe_box.predicted_rate("qwen", level.streams)
        # Each stream's own wall includes its time to first token, so it reads a little under the
        # pure decode rate; never above it. A client starved of CPU (a loaded test machine) reads
        # lower still, and then the probe must say so rather than report the engine as slower.
        assert level.per_stream_median == pytest.approx(truth, rel=0.06) or level.client_cpu_over_budget, (
            f"{level.streams} streams read {level.per_stream_median:.2f} tok/s against {truth:.2f}, unflagged"
        )
        assert level.per_stream_median <= truth * 1.01
        assert level.ttft_s_median is not None
        assert 25 < level.power_w < 45  # the simulated box's nearly flat power curve, model time
    assert report.curve.points[1].aggregate_rate == pytest.approx(
        4 * probe_box.predicted_rate("qwen", 4), rel=0.08
    )

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


def test_probe_beside_another_tenant_reads_an_engine_aggregate_above_its_own(probe_box, store: Store) -> None:
    started = threading.Event()
    tenant = threading.Thread(target=_background_stream, args=(probe_box.url("qwen"), started))
    tenant.start()
    try:
        assert started.wait(10)
        report = run_probe(
            probe_box.url("qwen"), ProbeSettings(streams=[1], tokens=128, warmup=False), store=store
        )
    finally:
        tenant.join(60)
    [level] = report.levels
    assert level.requests_running_before == 1
    assert level.token_mismatches == 0
    # One probe stream beside one tenant stream: the engine decoded about twice the probe's tokens.
    assert level.engine_probe_ratio == pytest.approx(2.0, rel=0.15)
    assert level.engine_probe_ratio > 1.5
    assert level.per_stream_median == pytest.approx(probe_box.predicted_rate("qwen", 2), rel=0.06)


def test_probe_plain_mode_has_no_time_to_first_token_and_still_pins_tokens(probe_box) -> None:
    # Nemotron decodes fast, so a long answer keeps the fixed HTTP round trip small beside it.
    report = run_probe(
        probe_box.url("nemotron"), ProbeSettings(streams=[2], tokens=1024, mode="plain", gpu="none")
    )
    [level] = report.levels
    assert level.ttft_s_median is None
    assert level.power_w is None
    assert level.probe_tokens == 2048
    assert level.engine_generation_tokens == 2048
    assert level.per_stream_median == pytest.approx(probe_box.predicted_rate("nemotron", 2), rel=0.08)


def test_probe_levels_reach_an_otlp_export_as_load_windows(
    probe_box,
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

    import spark_otel.probe.prober
    from spark_otel.receivers.otlp_json import read_otlp_json
    from spark_otel.telemetry import Telemetry

    # The telemetry in force exports over OTLP; here its spans land in memory instead of a collector.
    telemetry = Telemetry(tracer_provider, meter_provider, store=None, otlp=True)
    monkeypatch.setattr(spark_otel.probe.prober, "current_telemetry", lambda: telemetry)
    run_probe(
        probe_box.url("qwen"), ProbeSettings(streams=[1, 2], tokens=64, warmup=False, gpu="none"), store=store
    )

    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(MessageToDict(encode_spans(span_exporter.get_finished_spans()))) + "\n")
    exported = read_otlp_json([path]).windows
    stored = store.windows(kind="probe")
    key = [(w.name, w.kind, w.engine, w.streams, w.start_unix_ns, w.end_unix_ns) for w in stored]
    assert [(w.name, w.kind, w.engine, w.streams, w.start_unix_ns, w.end_unix_ns) for w in exported] == key
    assert len(key) == 2


def test_probe_of_an_engine_without_sim_info_is_labelled_by_its_address_and_warns_on_no_match(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    store.write_cells([recent_cell("qwen")])
    with PlainEngine() as engine:
        report = run_probe(engine.url, ProbeSettings(streams=[1], tokens=32, gpu="none"), store=store)
    host_port = engine.url.removeprefix("http://")
    # Never the model id: the eval's cells name the engine, and a model id reads as another engine.
    assert report.metadata.model == "plain-model"
    assert report.metadata.engine == host_port
    assert [w.engine for w in store.windows(kind="probe")] == [host_port]
    [warning] = [w for w in report.warnings if "matches no engine" in w]
    assert f"engine label {host_port!r} matches no engine of the recorded cells (qwen)" in warning
    assert "--engine NAME=URL" in warning
    assert warning in caplog.text


def test_probe_failing_partway_raises_with_the_partial_report(store: Store) -> None:
    with PlainEngine(fail_after=1) as engine, pytest.raises(ProbeIncomplete) as caught:
        run_probe(engine.url, ProbeSettings(streams=[1, 4], tokens=16, warmup=False, gpu="none"), store=store)
    assert isinstance(caught.value, EngineError)  # the CLI's exit 1
    assert [lv.streams for lv in caught.value.report.levels] == [1]
    [doc] = store.documents("probe")
    assert load_probe_report(doc["body"]) == caught.value.report


def test_a_level_whose_stream_stalls_keeps_the_streams_that_finished(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spark_otel.probe.prober

    monkeypatch.setattr(spark_otel.probe.prober, "_LEVEL_GRACE_WALL_S", 0.5)
    # The second stream of the level trickles comments and never ends; the first finishes at once.
    with PlainEngine(stall=2) as engine:
        report = run_probe(
            engine.url,
            ProbeSettings(streams=[2], tokens=64, warmup=False, gpu="none", request_timeout_s=1.0),
            store=store,
        )
    [level] = report.levels
    assert level.probe_tokens == 64  # the finished stream is kept
    assert level.errors == 1
    assert level.error_messages == ["timed out"]
    assert len(level.stream_rates) == 1
    assert any("1 of 2 streams did not finish within 1.0 s" in w for w in report.warnings)
    assert len(store.windows(kind="probe")) == 1


def test_probe_power_covers_the_streams_not_the_wait_for_the_engine_to_settle(store: Store) -> None:
    # 300 W while the answer streams (about 0.6 s), 100 W after; the engine's running count lags
    # the finished request by 1 s, and the probe waits for it before its counter read.
    with PlainEngine(step_s=0.01, linger_s=1.0) as engine:
        report = run_probe(
            engine.url, ProbeSettings(streams=[1], tokens=60, warmup=False, gpu="sim"), store=store
        )
    [level] = report.levels
    assert level.quiescent
    assert level.requests_running_after == 0
    assert level.power_w is not None
    # Read after the settle wait, the mean would be about (0.6 x 300 + 1 x 100) / 1.6 = 175 W.
    assert level.power_w > 250


def test_probe_with_gpu_auto_leaves_power_out_when_the_sim_info_engine_has_no_gpu_readout(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # /sim/info answers, so auto picks the simulated box's /sim/gpu, which is not there (HTTP 404).
    with PlainEngine(sim_info={"engine": "qwen"}, gpu=False) as engine, caplog.at_level("INFO"):
        report = run_probe(engine.url, ProbeSettings(streams=[1], tokens=16, warmup=False), store=store)
    [level] = report.levels
    assert level.probe_tokens == 16
    assert level.power_w is None
    assert report.metadata.gpu_source is None
    assert "no GPU power source" in caplog.text
