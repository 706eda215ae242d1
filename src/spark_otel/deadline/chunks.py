"""Reading a stream's chunks: the openai SDK's chunk objects and raw server-sent events alike."""

from __future__ import annotations

import codecs
import json
from typing import Any

from ..instrumentation._sse import error_of
from .run import StreamRun

__all__ = ["SseReader", "server_error", "take_events", "take_sdk_chunk", "usage_of"]


def usage_of(usage: Any) -> tuple[int | None, int] | None:
    if usage is None:
        return None
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    else:
        prompt, completion = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
    if not isinstance(completion, int):
        return None
    return (prompt if isinstance(prompt, int) else None), completion


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


class SseReader:
    """An incremental server-sent-events reader: bytes in, each event's ``data`` out.

    It reads the bytes itself (rather than httpx's ``aiter_lines``) so that closing one
    generator closes the whole read, with nothing left for the garbage collector to finalize.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._data: list[str] = []

    def feed(self, raw: bytes) -> list[str]:
        text = self._partial + self._decoder.decode(raw)
        lines = text.split("\n")
        self._partial = lines.pop()
        events: list[str] = []
        for raw_line in lines:
            line = raw_line.removesuffix("\r")
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
        return events


def take_events(run: StreamRun, sse: SseReader, raw: bytes) -> bool:
    """The events in one read; False when the stream is over or should stop."""
    for data in sse.feed(raw):
        if data.strip() == "[DONE]":
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
