"""The OpenAI-compatible wire format every reader shares: server-sent events and chunk fields.

sse     the one incremental SSE decoder (frozen `SseEvent`s, partial lines kept, a size cap)
chunks  a chunk's error and usage, from SDK objects and decoded JSON alike
"""

from __future__ import annotations

from .chunks import error_event_type, error_of, usage_of
from .sse import DONE, SseDecoder, SseError, SseEvent

__all__ = ["DONE", "SseDecoder", "SseError", "SseEvent", "error_event_type", "error_of", "usage_of"]
