"""The probe against the simulated engine over real HTTP: pinned tokens, counter deltas, ground truth."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from spark_otel._exceptions import EngineError
from spark_otel.model import Cell
from spark_otel.probe import ProbeIncomplete, ProbeSettings, run_probe
from spark_otel.records.probe_report import load_probe_report
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
        # pure decode rate; never above it. A client starved of CPU (a loaded test machine) reads
        # lower still, and then the probe must say so rather than report the engine as slower.
        assert level.per_stream_median == pytest.approx(truth, rel=0.06) or level.client_cpu_over_budget, (
            f"{level.streams} streams read {level.per_stream_median:.2f} tok/s against {truth:.2f}, unflagged"
        )
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

    import spark_otel.probe.prober
    from spark_otel.receivers.otlp_json import read_otlp_json
    from spark_otel.telemetry import Telemetry

    # The telemetry in force exports over OTLP; here its spans land in memory instead of a collector.
    telemetry = Telemetry(tracer_provider, meter_provider, store=None, otlp=True)
    monkeypatch.setattr(spark_otel.probe.prober, "current_telemetry", lambda: telemetry)
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


class _PlainEngine:
    """A vLLM-like engine on 127.0.0.1 that, like a real vLLM, answers no ``/sim/info`` by default.

    ``/v1/completions`` streams ``max_tokens`` SSE events ``step_s`` apart, then the usage chunk;
    ``/metrics`` counts generated tokens and running requests in vLLM's names; ``/sim/gpu`` reads
    ``busy_w`` while any answer streams and ``idle_w`` otherwise, with the energy integrated.
    With ``sim_info`` it answers ``/sim/info`` with it; without ``gpu`` it has no ``/sim/gpu``.
    It misbehaves on request: completions after the first ``fail_after`` answer HTTP 503; the
    ``stall``-th completion (1-based) trickles SSE comments and never ends; a finished request
    stays counted as running for ``linger_s`` (a real engine's gauge lags its requests too).
    """

    def __init__(
        self,
        *,
        step_s: float = 0.0,
        fail_after: int | None = None,
        stall: int | None = None,
        linger_s: float = 0.0,
        busy_w: float = 300.0,
        idle_w: float = 100.0,
        sim_info: dict[str, object] | None = None,
        gpu: bool = True,
    ) -> None:
        import socket

        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.step_s, self.fail_after, self.stall, self.linger_s = step_s, fail_after, stall, linger_s
        self.busy_w, self.idle_w, self.sim_info = busy_w, idle_w, sim_info
        self.completions = self.generated = self.running = self.streaming = 0
        self.energy_j, self._since = 0.0, time.time_ns()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        app = Starlette(
            routes=[
                Route("/v1/completions", self._complete, methods=["POST"]),
                Route("/v1/models", self._models),
                Route("/metrics", self._metrics),
                *([Route("/sim/gpu", self._gpu)] if gpu else []),
                *([Route("/sim/info", self._info)] if sim_info is not None else []),
            ]
        )
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]})

    def __enter__(self) -> _PlainEngine:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "test engine did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()

    def _power(self) -> float:
        return self.busy_w if self.streaming else self.idle_w

    def _account(self) -> None:
        now = time.time_ns()
        self.energy_j += self._power() * (now - self._since) / 1e9
        self._since = now

    def _release(self) -> None:
        self.running -= 1

    async def _models(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"object": "list", "data": [{"id": "plain-model", "object": "model"}]})

    async def _metrics(self, request):
        from starlette.responses import PlainTextResponse

        return PlainTextResponse(
            "# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{model_name="plain-model"}} {self.generated}\n'
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="plain-model"}} {self.running}\n'
        )

    async def _info(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse(self.sim_info)

    async def _gpu(self, request):
        from starlette.responses import JSONResponse

        self._account()
        return JSONResponse({"power_w": self._power(), "energy_j": self.energy_j, "unix_ns": time.time_ns()})

    async def _complete(self, request):
        import asyncio
        import json

        from starlette.responses import JSONResponse, StreamingResponse

        body = await request.json()
        self.completions += 1
        number = self.completions
        if self.fail_after is not None and number > self.fail_after:
            return JSONResponse({"error": {"message": "engine is draining"}}, status_code=503)
        tokens = int(body["max_tokens"])

        async def events():
            self.running += 1
            self._account()
            self.streaming += 1
            try:
                if number == self.stall:
                    while True:
                        yield b": still thinking\n\n"
                        await asyncio.sleep(0.05)
                for _ in range(tokens):
                    self.generated += 1
                    yield b'data: {"choices":[{"index":0,"text":"x"}]}\n\n'
                    if self.step_s:
                        await asyncio.sleep(self.step_s)
                usage = {"prompt_tokens": 40, "completion_tokens": tokens, "total_tokens": 40 + tokens}
                yield b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"
            finally:
                self._account()
                self.streaming -= 1
                asyncio.get_running_loop().call_later(self.linger_s, self._release)

        return StreamingResponse(events(), media_type="text/event-stream")


def _cell(engine: str) -> Cell:
    now = time.time_ns()
    return Cell(
        uid=f"c-{engine}", eval_name="golden", cell_id="1", engine=engine,
        start_unix_ns=now - 60 * 10**9, end_unix_ns=now - 10**9, completion_tokens=600,
    )  # fmt: skip


def test_probe_of_an_engine_without_sim_info_is_labelled_by_its_address_and_warns_on_no_match(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    store.write_cells([_cell("qwen")])
    with _PlainEngine() as engine:
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
    with _PlainEngine(fail_after=1) as engine, pytest.raises(ProbeIncomplete) as caught:
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
    with _PlainEngine(stall=2) as engine:
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
    with _PlainEngine(step_s=0.01, linger_s=1.0) as engine:
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
    with _PlainEngine(sim_info={"engine": "qwen"}, gpu=False) as engine, caplog.at_level("INFO"):
        report = run_probe(engine.url, ProbeSettings(streams=[1], tokens=16, warmup=False), store=store)
    [level] = report.levels
    assert level.probe_tokens == 16
    assert level.power_w is None
    assert report.metadata.gpu_source is None
    assert "no GPU power source" in caplog.text
