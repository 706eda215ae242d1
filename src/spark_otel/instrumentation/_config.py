"""What `instrument()` was asked to do, decided once: arguments first, then environment.

Reading settings per request costs time on the hot path (openllmetry#2547 lost 4x throughput
to a per-request lookup), so every switch is resolved here, at `instrument()`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from .._exceptions import ConfigError
from .._semconv import PROVIDER_VLLM

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "CHUNK_METRICS_ENV",
    "INCLUDE_USAGE_ENV",
    "TRACEPARENT_ENV",
    "InstrumentationConfig",
]

_logger = logging.getLogger(__name__)

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
INCLUDE_USAGE_ENV = "SPARK_OTEL_INCLUDE_USAGE"
TRACEPARENT_ENV = "SPARK_OTEL_TRACEPARENT"
CHUNK_METRICS_ENV = "SPARK_OTEL_CHUNK_METRICS"

# Newer util-genai releases accept capture modes instead of a boolean; any mode that puts
# content on spans counts as on.
_TRUE = frozenset({"1", "true", "yes", "on", "span_only", "span_and_event"})
_FALSE = frozenset({"", "0", "false", "no", "off", "no_content", "event_only"})


def _env_flag(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value not in _FALSE:
        _logger.warning("%s=%r is not a boolean; treating it as %s", name, raw, str(default).lower())
        return default
    return False


def _flag(name: str, value: bool | None, env: str, default: bool = False) -> bool:
    if value is None:
        return _env_flag(env, default)
    if not isinstance(value, bool):
        raise ConfigError(f"instrument({name}={value!r}): expected True, False or None")
    return value


@dataclass(frozen=True, slots=True)
class InstrumentationConfig:
    """Switches of one `instrument()` call; see docs/instrumentation.md."""

    capture_content: bool = False
    """Record prompts and completions as ``gen_ai.input.messages`` / ``gen_ai.output.messages``."""
    include_usage: bool = False
    """Add ``stream_options.include_usage=True`` to streaming openai calls that do not set it."""
    inject_traceparent: bool = False
    """Send a W3C ``traceparent`` header so the engine's own spans join the trace."""
    provider_name: str = PROVIDER_VLLM
    chunk_metrics: bool = True
    """Record ``gen_ai.client.operation.time_per_output_chunk`` once per chunk after the first.

    On by default (semconv-complete). On providers spark-otel builds a stream's intervals are
    one bulk record; on the user's own providers each is an SDK record (about 9 µs here), which
    off saves. Every other span attribute and metric stays.
    """

    @classmethod
    def resolve(
        cls,
        *,
        capture_content: bool | None,
        include_usage: bool | None,
        inject_traceparent: bool | None,
        provider_name: str,
        chunk_metrics: bool | None = None,
    ) -> InstrumentationConfig:
        """Arguments win over the environment; a bad argument raises `ConfigError`."""
        if not isinstance(provider_name, str) or not provider_name.strip():
            raise ConfigError(f"instrument(provider_name={provider_name!r}): expected a non-empty string")
        return cls(
            capture_content=_flag("capture_content", capture_content, CAPTURE_CONTENT_ENV),
            include_usage=_flag("include_usage", include_usage, INCLUDE_USAGE_ENV),
            inject_traceparent=_flag("inject_traceparent", inject_traceparent, TRACEPARENT_ENV),
            provider_name=provider_name.strip(),
            chunk_metrics=_flag("chunk_metrics", chunk_metrics, CHUNK_METRICS_ENV, default=True),
        )
