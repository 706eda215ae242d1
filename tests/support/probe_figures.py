"""A probe level with every figure the tables show, and a probe report of such levels."""

from __future__ import annotations

from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.records.rate_curve import CurvePoint, RateCurve

S = 1_000_000_000


T0 = 1_790_000_000 * S


def level_with_figures(
    streams: int, *, repeat: int = 0, power_w: float | None = 200.0, **kw: object
) -> ProbeLevel:
    fields: dict[str, object] = {
        "streams": streams,
        "repeat": repeat,
        "start_unix_ns": T0,
        "end_unix_ns": T0 + 10 * S,
        "wall_s": 10.0,
        "tokens_expected": 100,
        "probe_tokens": 100 * streams,
        "per_stream_median": 10.25,
        "per_stream_p10": 9.5,
        "per_stream_p90": 11.125,
        "probe_aggregate_rate": 10.0 * streams,
        "engine_aggregate_rate": 12.5 * streams,
        "engine_probe_ratio": 1.25,
        "ttft_s_median": 0.125,
        "power_w": power_w,
        "client_cpu_us_per_token": 7.25,
    }
    fields.update(kw)
    return ProbeLevel.model_validate(fields)


def report_of_levels(
    levels: list[ProbeLevel], *, repeats: int = 1, time_scale: float = 1.0, gpu: str | None = "nvml"
) -> ProbeReport:
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=T0, engine_url="http://127.0.0.1:8011", engine="qwen", model="q",
            time_scale=time_scale, gpu_source=gpu,
        ),
        settings=ProbeSettings(streams=sorted({lv.streams for lv in levels}), repeats=repeats),
        levels=levels,
        curve=RateCurve(
            engine="qwen", points=[CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0, n=1)]
        ),
    )  # fmt: skip
