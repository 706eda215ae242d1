"""Proxies for the openai SDK's `Stream` / `AsyncStream` that finalize the span exactly once.

The proxy hands back the SDK's own chunks, exceptions and close behaviour; it only watches.
The span ends on exhaustion, on an error (cancellation and KeyboardInterrupt included: they
are recorded, then re-raised), on ``close()``/``aclose()``/``__exit__``, and, for a stream
dropped after a ``break``, when the proxy is garbage collected. A cut-off stream keeps the
tokens and time seen so far and an ``error.type`` saying how it ended.

Per chunk: one clock read, a counter, set-once guards and a reference to the usage object.
"""

from __future__ import annotations

from array import array
from types import TracebackType
from typing import Any

import wrapt

from .. import _semconv as sc
from .._clock import real_monotonic_ns
from .._guard import report_failure
from ._request import RequestTelemetry, error_type_of

__all__ = ["AsyncStreamProxy", "StreamState", "SyncStreamProxy"]


class StreamState:
    """Everything one stream accumulates; shared by the sync and async proxies."""

    __slots__ = (
        "chat",
        "chunks",
        "first_ns",
        "intervals",
        "last_ns",
        "reasons",
        "request",
        "response_id",
        "response_model",
        "texts",
        "usage",
    )

    def __init__(self, request: RequestTelemetry) -> None:
        self.request = request
        self.chat = request.operation == sc.OPERATION_CHAT
        self.first_ns = 0
        self.last_ns = 0
        self.chunks = 0
        self.intervals: array[int] = array("q")
        self.response_id: Any = None
        self.response_model: Any = None
        self.usage: Any = None
        self.reasons: dict[int, str] = {}
        self.texts: dict[int, list[str]] | None = {} if request.rt.capture_content else None
        request.watch(self)

    def on_chunk(self, chunk: Any) -> None:
        now = real_monotonic_ns()
        if self.first_ns:
            self.intervals.append(now - self.last_ns)
        else:
            self.first_ns = now
            self.response_id = chunk.id
            self.response_model = chunk.model
        self.last_ns = now
        self.chunks += 1
        usage = chunk.usage
        if usage is not None:
            self.usage = usage
        texts = self.texts
        for choice in chunk.choices:
            reason = choice.finish_reason
            if reason is not None:
                self.reasons[choice.index] = reason
            if texts is not None:
                text = choice.delta.content if self.chat else choice.text
                if text:
                    texts.setdefault(choice.index, []).append(text)

    def finish(self, error_type: str | None) -> None:
        """Finalize the request with what the stream delivered; idempotent."""
        usage = self.usage
        self.request.finish(
            error_type=error_type,
            response_id=self.response_id,
            response_model=self.response_model,
            reasons=self.reasons,
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            first_ns=self.first_ns,
            intervals=self.intervals,
            chunks=self.chunks,
            texts=self.texts,
        )

    def fail(self, exc: BaseException) -> None:
        self.finish(sc.ERROR_TYPE_STREAM_CLOSED if isinstance(exc, GeneratorExit) else error_type_of(exc))


def _exit_error_type(exc: BaseException | None) -> str:
    return sc.ERROR_TYPE_STREAM_CLOSED if exc is None else error_type_of(exc)


class SyncStreamProxy(wrapt.ObjectProxy):  # type: ignore[type-arg]  # subscripted only in wrapt 2, and >=1.16 is allowed
    """Behaves as the wrapped `openai.Stream`; finalizes its request once."""

    def __init__(self, stream: Any, state: StreamState) -> None:
        super().__init__(stream)
        self._self_state = state

    def __iter__(self) -> SyncStreamProxy:
        return self

    def __next__(self) -> Any:
        state = self._self_state
        try:
            chunk = self.__wrapped__.__next__()
        except StopIteration:
            state.finish(None)
            raise
        except BaseException as exc:
            state.fail(exc)
            raise
        try:
            state.on_chunk(chunk)
        except Exception as exc:
            report_failure("stream chunk bookkeeping", exc)
        return chunk

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_state.finish(sc.ERROR_TYPE_STREAM_CLOSED)

    def __enter__(self) -> SyncStreamProxy:
        self.__wrapped__.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_state.finish(_exit_error_type(exc))

    def __del__(self) -> None:
        self._self_state.finish(sc.ERROR_TYPE_STREAM_ABANDONED)


class AsyncStreamProxy(wrapt.ObjectProxy):  # type: ignore[type-arg]  # subscripted only in wrapt 2, and >=1.16 is allowed
    """Behaves as the wrapped `openai.AsyncStream`; finalizes its request once."""

    def __init__(self, stream: Any, state: StreamState) -> None:
        super().__init__(stream)
        self._self_state = state

    def __aiter__(self) -> AsyncStreamProxy:
        return self

    async def __anext__(self) -> Any:
        state = self._self_state
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            state.finish(None)
            raise
        except BaseException as exc:
            state.fail(exc)
            raise
        try:
            state.on_chunk(chunk)
        except Exception as exc:
            report_failure("stream chunk bookkeeping", exc)
        return chunk

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_state.finish(sc.ERROR_TYPE_STREAM_CLOSED)

    async def aclose(self) -> None:
        try:
            await self.__wrapped__.aclose()
        finally:
            self._self_state.finish(sc.ERROR_TYPE_STREAM_CLOSED)

    async def __aenter__(self) -> AsyncStreamProxy:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_state.finish(_exit_error_type(exc))

    def __del__(self) -> None:
        self._self_state.finish(sc.ERROR_TYPE_STREAM_ABANDONED)
