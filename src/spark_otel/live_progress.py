"""A running cell's progress: how long it has run, its tokens so far, and its live decode rate.

A governed runner publishes this for each of its in-flight cells about once a second (with its
lease renewal), so every runner and `spark-otel lanes` see how fast each cell decodes now, not
only when it ends. The rate comes from the cell's streamed chunks over the last `WINDOW_S` real
seconds: a `RateWindow` keeps the chunk count seen at each publish, so each rate costs O(1),
whatever the stream's speed. Engines stream about one token per chunk (vLLM, SGLang, llama.cpp),
so chunks per second is the decode rate; a cell that never streamed has no rate (None), never an
invented one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from ._clock import NS_PER_S

__all__ = ["MIN_SPAN_S", "WINDOW_S", "ChunkStamps", "LiveProgress", "RateWindow"]

WINDOW_S = 5.0
"""The live rate's window, real seconds: five publishes, long enough to smooth an engine's
batched sends and a loaded runner's bursty reads, short enough to show a neighbour's arrival
within seconds."""
MIN_SPAN_S = 0.5
"""A rate over less than this (real seconds since the cell's first chunk) is too noisy to say."""


class ChunkStamps(Protocol):
    """What a stream being read says so far (the openai proxy's state, the raw SSE scanner):
    its first chunk's stamp (real monotonic ns; 0 before one) and how many chunks arrived."""

    first_ns: int
    chunks: int


@dataclass(frozen=True, slots=True)
class LiveProgress:
    """One in-flight cell now, in the cell's own (model) seconds."""

    elapsed_s: float
    """Since the cell was admitted."""
    tokens: int | None
    """Completion tokens so far: those its finished requests reported, plus one per chunk of the
    streams still running; None when nothing has come back yet."""
    rate: float | None
    """Tokens per second over the last `WINDOW_S` real seconds, from the last publish at or before
    the window's start (since its first chunk, if later);
    None when the cell never streamed, or streamed for less than `MIN_SPAN_S`."""


class RateWindow:
    """The chunk counts a cell had at its recent publishes; one per cell, fed once a publish."""

    __slots__ = ("_samples",)

    def __init__(self) -> None:
        self._samples: deque[tuple[int, int]] = deque()

    def rate(self, now_ns: int, chunks: int, first_chunk_ns: int, *, scale: float = 1.0) -> float | None:
        """Chunks per second (``scale``: clock seconds per real second) over the window ending at
        ``now_ns``, given the cell's ``chunks`` so far and its first chunk's stamp (0: none yet)."""
        if not first_chunk_ns:
            return None
        samples = self._samples
        if not samples:
            samples.append((first_chunk_ns, 1))  # the first chunk: what the rate counts from
        since = now_ns - int(WINDOW_S * NS_PER_S)
        while len(samples) > 1 and samples[1][0] <= since:
            samples.popleft()  # the oldest kept is the last one at or before the window's start
        then_ns, then_chunks = samples[0]
        samples.append((now_ns, chunks))
        span_s = (now_ns - then_ns) / NS_PER_S
        if span_s < MIN_SPAN_S:
            return None
        return max(0, chunks - then_chunks) / (span_s * scale)
