"""Stream a completion against a deadline and keep what arrives.

A finder seed that runs past its ceiling returns nothing from a plain call. Streamed against
its own deadline, it returns the text so far and every complete finding in it:

    result = spark_otel.stream_with_deadline(
        client, model="qwen3.8-27b", messages=[...], max_tokens=32768, deadline_s=1800
    )
    result.status            # complete | deadline | length_cap | error
    result.findings          # the complete findings, even from a cut-off answer

    results   DeadlineResult and its parts
    arguments the arguments, checked before any request
    run       one stream's accumulation, request-span notes and the sync watchdog
    reading   reading SDK chunks and raw server-sent events
    drivers   the sync and async drivers: openai clients and raw httpx2/httpx
    salvage   extracting complete findings from a cut-off answer
"""

from __future__ import annotations

from .drivers import astream_with_deadline, stream_with_deadline
from .results import DeadlineResult, DeadlineStatus, Timings, TokenUsage

__all__ = [
    "DeadlineResult",
    "DeadlineStatus",
    "Timings",
    "TokenUsage",
    "astream_with_deadline",
    "stream_with_deadline",
]
