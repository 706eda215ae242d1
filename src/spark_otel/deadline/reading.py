"""Reading a stream's chunks: the openai SDK's chunk objects and raw server-sent events alike."""

from __future__ import annotations

import json
from typing import Any

from ..wire.chunks import error_of, usage_of
from ..wire.sse import DONE, SseEvent
from .run import StreamRun

__all__ = ["server_error", "take_events", "take_sdk_chunk"]


def take_sdk_chunk(run: StreamRun, chunk: Any) -> bool:
    """An openai SDK chunk (ChatCompletionChunk or Completion)."""
    content = reasoning = finish = None
    choices = getattr(chunk, "choices", None) or ()
    if choices:
        choice = choices[0]
        finish = getattr(choice, "finish_reason", None)
        if run.plan.chat:
            delta = getattr(choice, "delta", None)
            if delta is not None:
                content = delta.content
                # vLLM's reasoning deltas are extra fields; a missing attribute costs an exception.
                extra = getattr(delta, "model_extra", None)
                if extra:
                    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        else:
            content = getattr(choice, "text", None)
    return run.take(
        content, reasoning, finish, usage_of(getattr(chunk, "usage", None)), getattr(chunk, "model", None)
    )


def take_event(run: StreamRun, data: dict[str, Any]) -> bool:
    """A raw SSE event's JSON, as vLLM and other OpenAI-compatible servers send it."""
    content = reasoning = finish = None
    choices = data.get("choices") or ()
    if choices and isinstance(choices[0], dict):
        choice = choices[0]
        finish = choice.get("finish_reason")
        if run.plan.chat:
            delta = choice.get("delta") or {}
            content = delta.get("content")
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        else:
            content = choice.get("text")
    return run.take(content, reasoning, finish, usage_of(data.get("usage")), data.get("model"))


def server_error(data: dict[str, Any]) -> str | None:
    """The message of a failure the server reported mid-stream (see `error_of`)."""
    error = error_of(data)
    if error is None:
        return None
    if isinstance(error, dict):
        return f"server error mid-stream: {error.get('message') or error}"
    return f"server error mid-stream: {error}"


def take_events(run: StreamRun, events: list[SseEvent]) -> bool:
    """The events of one read (`SseDecoder.feed`); False when the stream is over or should stop."""
    for sse in events:
        data = sse.data
        if data.strip() == DONE:
            return False
        try:
            event = json.loads(data)
        except ValueError:
            run.fail(f"malformed server-sent event: {data[:80]!r}")
            return False
        if not isinstance(event, dict):
            continue
        message = server_error(event)
        if message is not None:
            run.fail(message)
            return False
        if not take_event(run, event):
            return False
    return True
