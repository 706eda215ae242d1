"""Engine latency histograms: ``_sum``/``_count`` parsing and the mean over a scrape interval."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from tests.support.metric_points import metric_points
from tests.support.metrics_pages import fixture_text
from tests.support.metrics_server import MetricsServer

from spark_otel import EngineError
from spark_otel import _semconv as sc
from spark_otel.receivers import counter_delta, parse_metrics
from spark_otel.receivers.receiver import Receiver, engine_samples

VLLM = "metrics-0.10.x-ngc25.09.txt"
SGLANG = "metrics-docs-example.txt"
LLAMACPP = "metrics-b9041.txt"
LATENCY_METRICS = (sc.ENGINE_TIME_TO_FIRST_TOKEN, sc.ENGINE_INTER_TOKEN_LATENCY, sc.ENGINE_E2E_LATENCY)


def _histogram(name: str, series: dict[str, tuple[float, float]]) -> list[str]:
    """Exposition lines of histogram ``name``: per ``engine`` label, (sum, count) and one +Inf bucket."""
    lines = [f"# TYPE {name} histogram"]
    for engine, (total, count) in series.items():
        labels = f'engine="{engine}",model_name="m"'
        lines += [
            f'{name}_bucket{{{labels},le="+Inf"}} {count}',
            f"{name}_count{{{labels}}} {count}",
            f"{name}_sum{{{labels}}} {total}",
        ]
    return lines


def _vllm_text(
    *,
    ttft: dict[str, tuple[float, float]],
    itl: dict[str, tuple[float, float]] | None = None,
    tpot: dict[str, tuple[float, float]] | None = None,
    e2e: dict[str, tuple[float, float]] | None = None,
    generated: float = 100.0,
) -> str:
    lines = [
        "# TYPE vllm:generation_tokens_total counter",
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}',
    ]
    lines += _histogram("vllm:time_to_first_token_seconds", ttft)
    if itl is not None:
        lines += _histogram("vllm:inter_token_latency_seconds", itl)
    if tpot is not None:
        lines += _histogram("vllm:time_per_output_token_seconds", tpot)
    if e2e is not None:
        lines += _histogram("vllm:e2e_request_latency_seconds", e2e)
    return "\n".join(lines) + "\n"


def test_real_vllm_fixture_sums_and_counts_with_the_older_itl_name() -> None:
    snap = parse_metrics(fixture_text(VLLM), url="u", unix_ns=0)
    assert snap.time_to_first_token_sum == pytest.approx(0.24629998207092285)
    assert snap.time_to_first_token_count == 6.0
    # this 0.10 build exposes only vllm:time_per_output_token_seconds
    assert snap.inter_token_latency_sum == pytest.approx(41.111971570000605)
    assert snap.inter_token_latency_count == 1733.0
    assert snap.e2e_request_latency_sum == pytest.approx(41.35763955116272)
    assert snap.e2e_request_latency_count == 6.0


def test_real_sglang_fixture_sums_and_counts_and_llamacpp_has_none() -> None:
    snap = parse_metrics(fixture_text(SGLANG), url="u", unix_ns=0)
    assert snap.kind == "sglang"
    assert snap.time_to_first_token_sum == pytest.approx(2.3518979474117756e06)
    assert snap.time_to_first_token_count == 11008.0
    assert snap.inter_token_latency_sum == pytest.approx(866964.5791549598)
    assert snap.inter_token_latency_count == 7.400757e06
    assert snap.e2e_request_latency_sum == pytest.approx(3.116093850019932e06)
    assert snap.e2e_request_latency_count == 11228.0
    llama = parse_metrics(fixture_text(LLAMACPP), url="u", unix_ns=0)
    assert llama.kind == "llamacpp"
    for field in ("time_to_first_token", "inter_token_latency", "e2e_request_latency"):
        assert getattr(llama, f"{field}_sum") is None
        assert getattr(llama, f"{field}_count") is None
    delta = counter_delta(llama, llama.model_copy(update={"unix_ns": 10**9}))
    assert delta.mean_time_to_first_token_s is None
    assert delta.mean_e2e_request_latency_s is None


def test_new_itl_name_wins_over_the_old_and_data_parallel_engines_are_summed() -> None:
    text = _vllm_text(
        ttft={"0": (1.0, 4), "1": (2.0, 6)},
        itl={"0": (3.0, 100), "1": (1.0, 50)},
        tpot={"0": (99.0, 7)},
    )
    snap = parse_metrics(text, url="u", unix_ns=0, model_name="m")
    assert snap.time_to_first_token_sum == 3.0
    assert snap.time_to_first_token_count == 10
    assert (snap.inter_token_latency_sum, snap.inter_token_latency_count) == (4.0, 150)
    assert snap.e2e_request_latency_sum is None


def test_histogram_named_like_a_concept_but_typed_otherwise_is_ignored() -> None:
    text = (
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{engine="0"} 1\n'
        "# TYPE vllm:time_to_first_token_seconds_sum gauge\n"
        'vllm:time_to_first_token_seconds_sum{engine="0"} 5\n'
        "# TYPE vllm:time_to_first_token_seconds_count gauge\n"
        'vllm:time_to_first_token_seconds_count{engine="0"} 2\n'
    )
    snap = parse_metrics(text, url="u", unix_ns=0)
    assert snap.time_to_first_token_sum is None
    assert snap.time_to_first_token_count is None


def test_two_scrape_delta_is_the_mean_of_the_requests_finished_in_between() -> None:
    before = parse_metrics(
        _vllm_text(
            ttft={"0": (0.5, 2), "1": (0.25, 1)},
            itl={"0": (1.0, 40)},
            e2e={"0": (4.0, 2), "1": (3.0, 1)},
        ),
        url="u",
        unix_ns=1_000_000_000,
    )
    after = parse_metrics(
        _vllm_text(
            ttft={"0": (1.1, 4), "1": (0.95, 3)},
            itl={"0": (2.5, 70)},
            e2e={"0": (9.0, 4), "1": (7.0, 2)},
            generated=150.0,
        ),
        url="u",
        unix_ns=3_000_000_000,
    )
    delta = counter_delta(before, after)
    # ttft: (1.1 + 0.95 - 0.5 - 0.25) / (4 + 3 - 2 - 1) = 1.3 / 4
    assert delta.mean_time_to_first_token_s == pytest.approx(0.325)
    # itl: (2.5 - 1.0) / (70 - 40)
    assert delta.mean_inter_token_latency_s == pytest.approx(0.05)
    # e2e: (16 - 7) / (6 - 3)
    assert delta.mean_e2e_request_latency_s == pytest.approx(3.0)
    assert not delta.reset
    # order of the arguments does not matter, as for the token counters
    assert counter_delta(after, before).mean_e2e_request_latency_s == pytest.approx(3.0)


def test_no_mean_when_nothing_finished_or_after_a_reset() -> None:
    before = parse_metrics(_vllm_text(ttft={"0": (2.0, 4)}, e2e={"0": (8.0, 4)}), url="u", unix_ns=0)
    idle = parse_metrics(
        _vllm_text(ttft={"0": (2.0, 4)}, e2e={"0": (8.0, 4)}, generated=100.0), url="u", unix_ns=10**9
    )
    quiet = counter_delta(before, idle)
    assert quiet.mean_time_to_first_token_s is None
    assert quiet.mean_e2e_request_latency_s is None
    assert not quiet.reset
    # the engine restarted: fewer observations than before, so no mean over this window
    restarted = parse_metrics(
        _vllm_text(ttft={"0": (0.3, 1)}, e2e={"0": (1.0, 1)}, generated=120.0), url="u", unix_ns=10**9
    )
    after_reset = counter_delta(before, restarted)
    assert after_reset.mean_time_to_first_token_s is None
    assert after_reset.mean_e2e_request_latency_s is None
    assert after_reset.reset
    # a moved _created time is a reset even when the counts happen to grow
    grew = parse_metrics(
        _vllm_text(ttft={"0": (9.0, 8)}, e2e={"0": (20.0, 8)}, generated=200.0), url="u", unix_ns=10**9
    )
    moved = counter_delta(
        before.model_copy(update={"counters_created_unix_s": 1.0}),
        grew.model_copy(update={"counters_created_unix_s": 50.0}),
    )
    assert moved.mean_time_to_first_token_s is None
    assert moved.reset
    assert counter_delta(before, grew).mean_time_to_first_token_s == pytest.approx(7.0 / 4)


def test_receiver_exports_the_means_as_gauges_and_store_samples_and_none_while_down(
    metrics_server: MetricsServer, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    def text(hits: int) -> str:
        # each scrape: 2 more requests, 0.4 s more TTFT, 3 s more e2e; 20 tokens at 0.05 s
        return _vllm_text(
            ttft={"0": (0.4 * hits, 2 * hits)},
            itl={"0": (1.0 * hits, 20 * hits)},
            e2e={"0": (3.0 * hits, 2 * hits)},
            generated=100.0 * hits,
        )

    metrics_server.text_fn = text
    receiver = Receiver({"qwen": metrics_server.url}, meter_provider=meter_provider, timeout_s=5)
    try:
        receiver.scrape_once()
        for name in LATENCY_METRICS:  # one scrape: no interval yet
            assert metric_points(metric_reader, name) == [], name
        receiver.scrape_once()
        got = {name: metric_points(metric_reader, name) for name in LATENCY_METRICS}
        assert got[sc.ENGINE_TIME_TO_FIRST_TOKEN][0].value == pytest.approx(0.2)
        assert got[sc.ENGINE_INTER_TOKEN_LATENCY][0].value == pytest.approx(0.05)
        assert got[sc.ENGINE_E2E_LATENCY][0].value == pytest.approx(1.5)
        for points in got.values():
            assert len(points) == 1
            assert points[0].attributes == {sc.ENGINE: "qwen", sc.ENGINE_KIND: "vllm"}
        snapshot, delta = receiver.latest("qwen"), receiver.rate("qwen")
        assert snapshot is not None
        samples = {s.name: s for s in engine_samples("qwen", snapshot, delta)}
        assert samples[sc.ENGINE_E2E_LATENCY].value == pytest.approx(1.5)
        assert samples[sc.ENGINE_E2E_LATENCY].unit == "s"
        assert samples[sc.ENGINE_TIME_TO_FIRST_TOKEN].attributes[sc.ENGINE] == "qwen"
        metrics_server.status = 500
        assert isinstance(receiver.scrape_once()["qwen"], EngineError)
        for name in LATENCY_METRICS:
            assert metric_points(metric_reader, name) == [], name
    finally:
        receiver.stop()


def test_receiver_reports_no_mean_for_an_interval_where_nothing_finished(
    metrics_server: MetricsServer, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    metrics_server.set_text(_vllm_text(ttft={"0": (1.0, 2)}, e2e={"0": (4.0, 2)}))
    receiver = Receiver({"qwen": metrics_server.url}, meter_provider=meter_provider, timeout_s=5)
    try:
        receiver.scrape_once()
        receiver.scrape_once()
        assert metric_points(metric_reader, sc.ENGINE_TIME_TO_FIRST_TOKEN) == []
        assert metric_points(metric_reader, sc.ENGINE_E2E_LATENCY) == []
        snapshot = receiver.latest("qwen")
        assert snapshot is not None
        names = {s.name for s in engine_samples("qwen", snapshot, receiver.rate("qwen"))}
        assert sc.ENGINE_E2E_LATENCY not in names
        assert sc.ENGINE_GENERATION_TOKEN_RATE in names
    finally:
        receiver.stop()
