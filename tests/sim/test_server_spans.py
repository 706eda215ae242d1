"""The simulated engine's server spans, joined to the client's through the injected traceparent
into one store, as vLLM's would be: each request's split recovered exactly, and a cell's wait
for first tokens split into the engine's queue and prefill by ``cells --budget``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.sim import run_box
from spark_otel.store import Store
from spark_otel.store.exporters import StoreSpanExporter

SPEED = 20.0


@pytest.fixture
def traced_store(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "store.sqlite"
    spark_otel.uninstrument()
    spark_otel.shutdown()


def test_server_spans_join_each_request_and_split_the_cells_wait_for_first_tokens(
    traced_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_store = Store(traced_store)
    engine_tracing = TracerProvider()
    engine_tracing.add_span_processor(SimpleSpanProcessor(StoreSpanExporter(engine_store)))
    prompt = " ".join(f"w{k}" for k in range(6000))  # a long prefill, as a review cell's
    with run_box({"qwen": "dense"}, speed=SPEED, seed=0, tracer_provider=engine_tracing) as box:
        telemetry = spark_otel.configure(store=traced_store, set_global=False)
        spark_otel.instrument(
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
            inject_traceparent=True,
        )
        client = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none")
        with spark_otel.cell(
            "review", "B#1", engine="qwen", tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        ):  # fmt: skip
            for _ in range(2):
                stream = client.completions.create(
                    model=box.model_id("qwen"), prompt=prompt, max_tokens=40, stream=True,
                    extra_body={"ignore_eos": True},
                )  # fmt: skip
                assert sum(1 for c in stream if c.choices and c.choices[0].text) == 40
        timings = box.timings("qwen")
        telemetry.shutdown()
    engine_tracing.shutdown()
    engine_store.close()

    with Store(traced_store, read_only=True) as store:
        (cell,) = store.cells()
        requests = store.requests(cell_uid=cell.uid)
        joined = store.server_timings(r.uid for r in requests)
    assert len(requests) == 2
    assert set(joined) == {r.uid for r in requests}  # each request answered by one server span
    for request, truth in zip(requests, timings, strict=True):
        server = joined[request.uid]
        assert server.trace_id == request.trace_id
        assert server.time_to_first_token_s == pytest.approx(truth.ttft_s, abs=1e-9)
        assert server.e2e_s == pytest.approx(truth.e2e_s, abs=1e-9)
        assert server.completion_tokens == 40
        assert server.queue_s is not None
        assert server.prefill_s is not None
        assert server.queue_s + server.prefill_s == pytest.approx(truth.ttft_s, abs=1e-9)
        # The client waited for its first chunk the engine's time to first token, and the network.
        assert request.time_to_first_chunk_s == pytest.approx(truth.ttft_s, rel=0.25, abs=0.2)

    assert main(["cells", "--store", str(traced_store), "--budget", "--json"]) == 0
    (budget,) = json.loads(capsys.readouterr().out)["cells"]
    assert budget["joined"] == budget["requests"] == 2
    assert budget["sources"]["queue"] == budget["sources"]["prefill"] == "engine server spans"
    assert "first_token" not in budget["seconds"]
    assert budget["seconds"]["queue"] + budget["seconds"]["prefill"] == pytest.approx(
        cell.first_token_s, abs=1e-9
    )
    queue = sum(joined[r.uid].queue_s or 0.0 for r in requests)
    prefill = sum(joined[r.uid].prefill_s or 0.0 for r in requests)
    assert budget["seconds"]["prefill"] / cell.first_token_s == pytest.approx(
        prefill / (queue + prefill), abs=1e-9
    )
    assert sum(budget["seconds"].values()) == pytest.approx(
        cell.elapsed_s, abs=1e-3 * SPEED
    )  # 1 ms of clock error
    assert budget["seconds"]["decode"] > budget["seconds"]["other"]


def test_a_request_without_traceparent_gets_a_root_server_span_that_joins_nothing(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    with run_box({"qwen": "dense"}, speed=SPEED, seed=0, tracer_provider=tracing) as box:
        client = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none")
        client.completions.create(model=box.model_id("qwen"), prompt="hi", max_tokens=3)
    (span,) = exporter.get_finished_spans()
    assert span.name == sc.VLLM_SERVER_SPAN_NAME
    assert span.parent is None
    assert (span.attributes or {})[sc.VLLM_USAGE_COMPLETION_TOKENS] == 3
    with Store(tmp_path / "s.sqlite") as store:
        assert StoreSpanExporter(store).export([span]).name == "SUCCESS"
        assert store.server_timings() == {}


def test_the_engines_phase_histograms_sum_to_its_own_request_times() -> None:
    """vLLM's per-request queue, prefill, decode and inference histograms, as the receiver reads
    them over a cell's lifetime: their sums equal the engine's stamps."""
    import httpx2
    from prometheus_client.parser import text_string_to_metric_families

    with run_box({"qwen": "dense"}, speed=SPEED, seed=0) as box:
        client = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none")
        for n in (5, 9):
            client.completions.create(
                model=box.model_id("qwen"), prompt="w " * 3000, max_tokens=n, extra_body={"ignore_eos": True}
            )
        timings = box.timings("qwen")
        text = httpx2.get(box.url("qwen") + "/metrics").text
    sums = {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.endswith("_seconds_sum")
    }
    ttft = sum(t.ttft_s or 0.0 for t in timings)
    decode = sum((t.last_token_ns - (t.first_token_ns or t.last_token_ns)) / 1e9 for t in timings)
    assert sums["vllm:request_queue_time_seconds_sum"] + sums["vllm:request_prefill_time_seconds_sum"] == (
        pytest.approx(ttft, abs=1e-6)
    )
    assert sums["vllm:request_decode_time_seconds_sum"] == pytest.approx(decode, abs=1e-6)
    assert sums["vllm:request_inference_time_seconds_sum"] == pytest.approx(
        sums["vllm:request_prefill_time_seconds_sum"] + decode, abs=1e-6
    )
