"""The concurrency probe's result: a versioned document, kept apart from the code that measures.

`ProbeReport` is what ``spark-otel probe --json`` prints (and ``--out FILE`` writes), what the
probe stores as a ``probe`` document (so ``advise`` and ``neighbour-cost`` see it) and what
``spark-otel report`` reads back.
Bump `PROBE_REPORT_VERSION` on any breaking change; `load_probe_report` refuses other versions
with a clear error instead of misreading them.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._exceptions import InputError
from .._files import MIB, read_input, write_output
from .._version import __version__
from ..records.rate_curve import RateCurve

__all__ = [
    "MAX_LEVELS",
    "MAX_PROMPT_CHARS",
    "MAX_REPEATS",
    "MAX_REQUEST_TIMEOUT_S",
    "MAX_STREAMS",
    "MAX_TOKENS",
    "PROBE_REPORT_MAX_BYTES",
    "PROBE_REPORT_VERSION",
    "ProbeLevel",
    "ProbeMetadata",
    "ProbeReport",
    "ProbeSettings",
    "load_probe_report",
]

PROBE_REPORT_VERSION: Literal[1] = 1
PROBE_REPORT_MAX_BYTES = 64 * MIB
"""The largest probe report file read: the default sweep writes kilobytes (each level lists one
rate per stream); past this it is not a probe report."""
MAX_STREAMS = 4_096
"""Streams in one level, even with ``--allow-large``: each is an open connection."""
MAX_LEVELS = 64
"""Levels in one sweep."""
MAX_TOKENS = 1_048_576
"""Output tokens pinned per stream."""
MAX_PROMPT_CHARS = 16_777_216
"""Prompt characters per request (a 16 MiB body)."""
MAX_REPEATS = 1_000
"""Rounds per level."""
MAX_REQUEST_TIMEOUT_S = 86_400.0
"""The per-request ceiling, model seconds: a day."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProbeSettings(_Model):
    """What the probe was asked to do; every field doubles as CLI help."""

    streams: list[int] = Field(
        default=[1, 2, 4, 8, 16, 32], max_length=MAX_LEVELS, description="concurrency levels, in order"
    )
    tokens: int = Field(default=512, gt=0, le=MAX_TOKENS, description="output tokens pinned per stream")
    model: str | None = Field(default=None, description="model id; default: the engine's first model")
    prompt_chars: int = Field(
        default=200, gt=0, le=MAX_PROMPT_CHARS, description="prompt length in characters"
    )
    repeats: int = Field(default=1, gt=0, le=MAX_REPEATS, description="rounds per level")
    warmup: bool = Field(default=True, description="send one untimed request before the sweep")
    mode: Literal["stream", "plain"] = Field(
        default="stream",
        description="stream: SSE, gives time to first token; plain: one JSON body, no parse cost",
    )
    name: str | None = Field(default=None, description="run name, used for the stored document")
    engine: str | None = Field(
        default=None,
        description="engine label the load windows carry; must match the cells' engine label. "
        "Default: /sim/info's name, else the URL's host:port",
    )
    gpu: Literal["auto", "sim", "nvml", "smi", "none"] = Field(
        default="auto", description="power source: auto (the simulated box, NVML, nvidia-smi, else none)"
    )
    time_scale: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="model-time scale; default: /sim/info"
    )
    request_timeout_s: float = Field(
        default=900.0, gt=0, le=MAX_REQUEST_TIMEOUT_S, description="per-request ceiling, model seconds"
    )

    @field_validator("streams")
    @classmethod
    def _levels_in_range(cls, levels: list[int]) -> list[int]:
        bad = [n for n in levels if n > MAX_STREAMS]  # below 1: `run_probe` names it as --streams
        if bad:
            raise ValueError(f"a level of {bad[0]:,} streams; at most {MAX_STREAMS:,} streams a level")
        return levels


class ProbeLevel(_Model):
    """One round of N concurrent streams. Rates are tokens per model-time second."""

    streams: int
    repeat: int = 0
    start_unix_ns: int
    end_unix_ns: int
    wall_s: float = Field(description="the probe's own window: first send to last byte")
    tokens_expected: int
    probe_tokens: int = Field(description="sum of usage.completion_tokens over the level's streams")
    token_mismatches: int = Field(default=0, description="streams whose usage differs from the pin")
    sse_events: int | None = Field(
        default=None,
        description="SSE data events streamed (chunks are not tokens: stream intervals, speculation)",
    )
    mismatched_counts: list[int] = Field(default_factory=list)
    errors: int = 0
    error_messages: list[str] = Field(default_factory=list)
    stream_rates: list[float] = Field(default_factory=list, description="each stream's tokens over its wall")
    per_stream_median: float | None = None
    per_stream_p10: float | None = None
    per_stream_p90: float | None = None
    probe_aggregate_rate: float | None = None
    engine_generation_tokens: float | None = Field(default=None, description="counter delta, quiescent reads")
    engine_aggregate_rate: float | None = None
    engine_probe_ratio: float | None = Field(default=None, description="above 1: another tenant decoded too")
    requests_running_before: float | None = None
    requests_running_after: float | None = None
    quiescent: bool = Field(default=True, description="running requests settled before the after-read")
    ttft_s_median: float | None = None
    power_w: float | None = None
    client_cpu_s: float = 0.0
    client_cpu_us_per_token: float | None = None
    client_cpu_core_fraction: float | None = Field(default=None, description="client CPU s per real s")
    client_cpu_step_fraction: float | None = Field(
        default=None, description="N x CPU per token over one inter-token interval (real time)"
    )
    client_cpu_over_budget: bool = False


class ProbeMetadata(_Model):
    version: Literal[1] = PROBE_REPORT_VERSION
    tool: str = "spark-otel"
    tool_version: str = __version__
    python: str = Field(default_factory=lambda: sys.version.split()[0])
    platform: str = Field(default_factory=platform.platform)
    created_unix_ns: int
    engine_url: str
    engine: str
    model: str
    time_scale: float = 1.0
    gpu_source: str | None = None


class ProbeReport(_Model):
    """A whole probe run: metadata, settings, every level, and the curve analyses consume."""

    metadata: ProbeMetadata
    settings: ProbeSettings
    levels: list[ProbeLevel]
    curve: RateCurve
    warnings: list[str] = Field(default_factory=list)

    def save_file(self, path: str | Path) -> Path:
        """Written whole or not at all (`write_output`): a full disk keeps the file that was there."""
        return write_output(path, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load_file(cls, path: str | Path) -> ProbeReport:
        """A saved report: a regular file of at most `PROBE_REPORT_MAX_BYTES`, else `InputError`."""
        data = read_input(path, what="probe report", max_bytes=PROBE_REPORT_MAX_BYTES)
        try:
            body = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise InputError(f"probe report {path}: not JSON: {exc}") from None
        return load_probe_report(body, where=str(path))


def load_probe_report(body: object, *, where: str = "probe document") -> ProbeReport:
    """Validate a stored or saved probe report, naming the version problem when there is one."""
    if isinstance(body, dict):
        version = (body.get("metadata") or {}).get("version")
        if version != PROBE_REPORT_VERSION:
            raise InputError(
                f"{where}: probe report version {version!r}; this spark-otel reads version "
                f"{PROBE_REPORT_VERSION}"
            )
    try:
        return ProbeReport.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{where}: not a probe report: {loc}: {first['msg']}") from exc
