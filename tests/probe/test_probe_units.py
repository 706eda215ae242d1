"""The probe's pure parts: usage parsing, level figures, the versioned report, engine URLs and labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_otel import ConfigError, InputError
from spark_otel._urls import engine_base_url
from spark_otel.analysis.probe_levels import (
    LevelMeasurement,
    StreamTiming,
    curve_of,
    level_warnings,
    summarize_level,
)
from spark_otel.probe import default_engine_label
from spark_otel.probe.streams import probe_prompt, usage_from_tail
from spark_otel.receivers.prometheus import metrics_url
from spark_otel.receivers.receiver import split_engine_spec
from spark_otel.records.probe_report import ProbeMetadata, ProbeReport, ProbeSettings, load_probe_report
from spark_otel.wire.sse import SseDecoder

S = 1_000_000_000


def _measure(
    streams: list[StreamTiming],
    *,
    n: int | None = None,
    before: float = 1000,
    after: float | None = None,
    cpu_s: float = 0.0,
    time_scale: float = 1.0,
) -> LevelMeasurement:
    produced = sum(s.completion_tokens or 0 for s in streams)
    return LevelMeasurement(
        streams=n or len(streams), repeat=0, tokens=512, streaming=True, results=streams,
        engine_generation_tokens=(after if after is not None else before + produced) - before,
        requests_running_before=0.0, requests_running_after=0.0,
        quiescent=True, start_unix_ns=0, end_unix_ns=S, cpu_s=cpu_s, time_scale=time_scale,
    )  # fmt: skip


def test_usage_is_read_from_the_final_usage_chunk_even_when_split_across_chunks() -> None:
    tail = (
        b'data: {"choices":[{"text":"x"}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":512,"total_tokens":562}}\n\n'
        b"data: [DONE]\n\n"
    )
    decoder = SseDecoder()
    split = [e.data for e in decoder.feed(tail[:40])] + [e.data for e in decoder.feed(tail[40:])]
    assert usage_from_tail(split)["completion_tokens"] == 512
    assert usage_from_tail([b'{"choices":[{"text":"x"}],"usage":null}', b"[DONE]"]) is None
    assert usage_from_tail([b"[DONE]"]) is None


def test_level_figures_follow_appendix_a_definitions() -> None:
    # Four streams of 512 tokens: two take 50 s, one 40 s, one 64 s; started together at t=0.
    walls = [50, 50, 40, 64]
    streams = [StreamTiming(start_ns=0, first_ns=S // 4, end_ns=w * S, completion_tokens=512) for w in walls]
    level = summarize_level(_measure(streams, after=1000 + 4 * 512 + 640))  # another tenant added 640
    assert level.stream_rates == sorted(512 / w for w in walls)
    assert level.per_stream_median == pytest.approx(512 / 50)
    assert level.wall_s == pytest.approx(64)
    assert level.probe_aggregate_rate == pytest.approx(2048 / 64)
    assert level.engine_aggregate_rate == pytest.approx((2048 + 640) / 64)
    assert level.engine_probe_ratio == pytest.approx((2048 + 640) / 2048)
    assert level.ttft_s_median == pytest.approx(0.25)
    assert level.token_mismatches == 0
    assert level.errors == 0


def test_level_figures_read_in_model_time_under_a_time_scale() -> None:
    streams = [StreamTiming(start_ns=0, end_ns=S // 2, completion_tokens=512)]  # half a real second
    level = summarize_level(_measure(streams, time_scale=100.0))
    assert level.wall_s == pytest.approx(50.0)
    assert level.per_stream_median == pytest.approx(512 / 50)


def test_level_reports_mismatched_tokens_errors_and_client_cpu_past_budget() -> None:
    streams = [
        StreamTiming(start_ns=0, end_ns=10 * S, completion_tokens=512),
        StreamTiming(start_ns=0, end_ns=10 * S, completion_tokens=300),
        StreamTiming(start_ns=0, error="HTTP 500: boom"),
    ]
    level = summarize_level(_measure(streams, cpu_s=5.0))  # half a core over the 10 s level
    assert level.token_mismatches == 1
    assert level.mismatched_counts == [300]
    assert level.errors == 1
    assert level.error_messages == ["HTTP 500: boom"]
    assert level.client_cpu_us_per_token == pytest.approx(5e6 / 812)
    assert level.client_cpu_core_fraction == pytest.approx(0.5)
    assert level.client_cpu_over_budget
    warnings = " | ".join(level_warnings(level))
    assert "did not produce exactly 512 tokens (got [300])" in warnings
    assert "1 of 3 streams failed: HTTP 500: boom" in warnings
    assert "past its CPU budget" in warnings


def test_client_budget_counts_one_decode_step_of_all_streams() -> None:
    # 32 streams at 10 tok/s: an inter-token interval is 100 ms; 400 us/token x 32 = 12.8 ms = 13%.
    streams = [StreamTiming(start_ns=0, end_ns=int(51.2 * S), completion_tokens=512) for _ in range(32)]
    level = summarize_level(_measure(streams, cpu_s=32 * 512 * 400e-6))
    assert level.client_cpu_step_fraction == pytest.approx(0.128)
    assert level.client_cpu_core_fraction == pytest.approx(6.5536 / 51.2)
    assert level.client_cpu_over_budget
    calm = summarize_level(_measure(streams, cpu_s=32 * 512 * 100e-6))
    assert calm.client_cpu_step_fraction == pytest.approx(0.032)
    assert not calm.client_cpu_over_budget


def test_probe_report_round_trips_through_json_and_refuses_other_versions(tmp_path: Path) -> None:
    levels = [
        summarize_level(
            _measure(
                [StreamTiming(start_ns=0, end_ns=int(512 / r * S), completion_tokens=512) for _ in range(n)]
            )
        )
        for n, r in ((1, 11.1), (8, 10.06))
    ]
    report = ProbeReport(
        metadata=ProbeMetadata(created_unix_ns=1, engine_url="http://127.0.0.1:1", engine="qwen", model="m"),
        settings=ProbeSettings(streams=[1, 8]),
        levels=levels,
        curve=curve_of("qwen", levels),
    )
    assert [p.per_stream_rate for p in report.curve.points] == pytest.approx([11.1, 10.06])
    assert report.curve.points[1].aggregate_rate == pytest.approx(8 * 10.06)
    path = report.save_file(tmp_path / "probe.json")
    assert ProbeReport.load_file(path) == report
    body = json.loads(path.read_text())
    body["metadata"]["version"] = 2
    with pytest.raises(InputError, match="probe report version 2"):
        load_probe_report(body)
    body["metadata"]["version"] = 1
    body["levels"][0]["streams"] = "many"
    with pytest.raises(InputError, match=r"levels\.0\.streams"):
        load_probe_report(body)


def test_probe_prompt_has_the_requested_length() -> None:
    assert len(probe_prompt(200)) == 200
    assert len(probe_prompt(5)) == 5


def test_mean_power_uses_the_energy_counter_on_the_right_clock() -> None:
    from spark_otel.analysis.probe_levels import mean_power

    # 100 model seconds at 100x is one real second: a real GPU's 300 J over it is 300 W ...
    one_real_second = mean_power(
        (0, 280.0, 1000.0), (100 * S, 320.0, 1300.0), [], real_time=True, time_scale=100.0
    )
    assert one_real_second == pytest.approx(300.0)
    # ... while the simulated box keeps its energy in model time: 3,700 J over 100 s is 37 W.
    assert mean_power((0, 36.0, 0.0), (100 * S, 38.0, 3700.0), [], real_time=False) == pytest.approx(37.0)
    # Without an energy counter (nvidia-smi), the mean of every power reading of the window.
    assert mean_power((0, 34.0, None), (10 * S, 40.0, None), [36.0, 38.0], real_time=True) == pytest.approx(
        37.0
    )
    assert mean_power(None, (S, 1.0, 1.0), [], real_time=True) is None


def test_probe_engine_takes_a_bare_url_or_name_equals_url() -> None:
    def parse(spec: str) -> tuple[str | None, str]:
        return split_engine_spec(spec, name_optional=True)

    assert parse("qwen=http://127.0.0.1:8011") == ("qwen", "http://127.0.0.1:8011")
    assert parse("http://127.0.0.1:8011") == (None, "http://127.0.0.1:8011")
    # An '=' inside the URL (a query) is not a name.
    assert parse("http://h:1/?a=b") == (None, "http://h:1/?a=b")
    assert split_engine_spec("qwen=http://h:1/?a=b") == ("qwen", "http://h:1/?a=b")
    for bad in ("qwen=", "=http://h:1", "127.0.0.1:8011", "qwen=h:1"):
        with pytest.raises(ConfigError, match="expected URL or NAME=URL"):
            parse(bad)
    with pytest.raises(ConfigError, match="expected NAME=URL"):
        split_engine_spec("http://127.0.0.1:8011")  # receive needs the name


def test_every_engine_url_form_reaches_the_same_base() -> None:
    for url in ("http://h:1", "http://h:1/", "http://h:1/v1", " http://h:1/v1/ "):
        assert engine_base_url(url) == "http://h:1", url
        assert metrics_url(url) == "http://h:1/metrics", url


def test_an_engine_without_a_name_is_labelled_by_host_and_port_not_its_model() -> None:
    assert default_engine_label("http://127.0.0.1:8011") == "127.0.0.1:8011"
    assert default_engine_label("https://box.lan:8443/v1") == "box.lan:8443"


def test_a_probe_with_no_rated_level_says_so_instead_of_a_validation_error() -> None:
    zero = summarize_level(_measure([StreamTiming(start_ns=0, end_ns=S, completion_tokens=0)]))
    with pytest.raises(InputError, match=r"no level measured a positive per-stream rate \(levels: 1\)"):
        curve_of("qwen", [zero])
    with pytest.raises(InputError, match=r"levels: none"):
        curve_of("qwen", [])
