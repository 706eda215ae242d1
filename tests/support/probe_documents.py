"""Probe levels at given rates, 100 s apart from `T0`, and the stored probe document that holds them."""

from __future__ import annotations

from typing import Any

from spark_otel.analysis.probe_levels import curve_of
from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings

S = 1_000_000_000


T0 = 1_700_000_000 * S


def probe_level(
    streams: int, k: int, rate: float | None, *, repeat: int = 0, wall_s: float = 10.0
) -> ProbeLevel:
    return ProbeLevel(
        streams=streams,
        repeat=repeat,
        start_unix_ns=T0 + k * 100 * S,
        end_unix_ns=T0 + k * 100 * S + int(wall_s * S),
        wall_s=wall_s,
        tokens_expected=512,
        probe_tokens=512 * streams,
        probe_aggregate_rate=rate,
        per_stream_median=None if rate is None else rate / streams,
        stream_rates=[] if rate is None else [rate / streams] * streams,
    )


def probe_document(name: str, levels: list[ProbeLevel], **metadata: Any) -> dict[str, Any]:
    report = ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=T0, engine_url="http://127.0.0.1:8011", engine="qwen", model="m", **metadata
        ),
        settings=ProbeSettings(),
        levels=levels,
        curve=curve_of("qwen", levels),
    )
    return {"name": name, "body": report.model_dump(mode="json")}
