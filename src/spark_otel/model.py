"""The shared data model: a cell, a request, a load window, a metric sample.

Every receiver produces these, every analysis consumes them and the store keeps them. Times
are integer nanoseconds since the Unix epoch (``*_unix_ns``), so live spans, backfilled
records, Nsight captures and engine scrapes line up on one clock. Rates are derived, not
stored, so they cannot disagree with the counts they come from.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from . import _semconv as sc
from ._clock import NS_PER_S

__all__ = ["Cell", "CellStatus", "LoadWindow", "MetricSample", "Request", "ServerTiming"]

AttributeValue = str | int | float | bool


class CellStatus(StrEnum):
    """How a cell ended. ``deadline`` covers the per-cell wall-clock ceiling (a timeout)."""

    OK = "ok"
    ERROR = "error"
    DEADLINE = "deadline"
    LENGTH_CAP = "length_cap"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Cell(_Record):
    """One eval cell: one prompt, one model answer, under a wall-clock ceiling."""

    uid: str = Field(description="Unique key in the store: the cell span's id, or a hash of its record")
    eval_name: str
    cell_id: str
    engine: str | None = None
    start_unix_ns: int
    end_unix_ns: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: CellStatus = CellStatus.OK
    deadline_s: float | None = None
    workers: int | None = None
    salvaged_findings: int = 0
    source: str = "live"
    trace_id: str | None = None
    first_token_s: float | None = Field(
        default=None, description="of elapsed, s waiting for first tokens (engine queue, prefill, network)"
    )
    decode_s: float | None = Field(default=None, description="of elapsed, s streaming tokens after the first")
    unsplit_s: float | None = Field(
        default=None, description="of elapsed, s inside non-streamed requests (the client cannot split them)"
    )
    other_s: float | None = Field(
        default=None, description="of elapsed, s in no request: the runner's own work"
    )
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)

    @property
    def elapsed_s(self) -> float:
        return (self.end_unix_ns - self.start_unix_ns) / NS_PER_S

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented spelling
    @property
    def deadline_hit(self) -> bool:
        """Cut off at its wall-clock ceiling: what status ``deadline`` means."""
        return self.status is CellStatus.DEADLINE

    @computed_field  # type: ignore[prop-decorator]
    @property
    def degraded(self) -> bool:
        """Cut off at its ceiling but kept findings: degraded, not lost."""
        return self.status is CellStatus.DEADLINE and self.salvaged_findings > 0

    @property
    def admission_s(self) -> float | None:
        """Seconds the queue governor held the cell before it started (outside elapsed); None for
        a cell that ran ungoverned."""
        value = self.attributes.get(sc.CELL_QUEUE_WAIT_S)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def scoring_s(self) -> float | None:
        """Of elapsed, seconds the runner spent grading the answer and on its bookkeeping after (an
        Inspect sample's scorers and log writing); None for a cell that marked no grading."""
        value = self.attributes.get(sc.CELL_BUDGET_SCORING_S)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def has_budget(self) -> bool:
        """Whether the cell's elapsed time is split (a live cell; a backfilled one where its
        records say)."""
        return any(v is not None for v in (self.first_token_s, self.decode_s, self.unsplit_s, self.other_s))

    @property
    def decode_rate(self) -> float | None:
        """Completion tokens per second of the cell's wall clock; None where it has no tokens.

        A cell cut off at its ceiling with nothing recorded has no rate: the article keeps such
        timeouts out of rates but lists them.
        """
        if not self.completion_tokens or self.end_unix_ns <= self.start_unix_ns:
            return None
        return self.completion_tokens / self.elapsed_s

    @property
    def has_rate(self) -> bool:
        return self.decode_rate is not None


class Request(_Record):
    """One call to an OpenAI-compatible endpoint, as its span recorded it."""

    uid: str
    trace_id: str | None = None
    cell_uid: str | None = None
    eval_name: str | None = None
    engine: str | None = None
    operation: str
    request_model: str | None = None
    response_model: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    start_unix_ns: int
    end_unix_ns: int
    streaming: bool = False
    time_to_first_chunk_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reasons: list[str] = Field(default_factory=list)
    error_type: str | None = None

    @property
    def elapsed_s(self) -> float:
        return (self.end_unix_ns - self.start_unix_ns) / NS_PER_S


class ServerTiming(_Record):
    """The engine's own split of one request (vLLM's ``llm_request`` server span, or the simulated
    engine's), keyed by the client request span it answered (its parent, through the injected
    ``traceparent``), so a cell's wait for first tokens splits into queue and prefill."""

    request_uid: str = Field(description="the client request span's id: the server span's parent")
    trace_id: str
    span_uid: str
    engine: str | None = None
    arrival_unix_ns: int
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    time_to_first_token_s: float | None = None
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class LoadWindow(_Record):
    """A span of time during which some load ran on the box: a probe level, an eval, a job.

    Neighbour-cost analysis compares a cell's rate with the windows it overlapped.
    """

    uid: str
    name: str
    kind: str = Field(description='"probe", "eval" or "load"')
    engine: str | None = None
    start_unix_ns: int
    end_unix_ns: int
    streams: int | None = None
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)

    @property
    def elapsed_s(self) -> float:
        return (self.end_unix_ns - self.start_unix_ns) / NS_PER_S


class MetricSample(_Record):
    """One value of one metric at one instant: an engine counter, a GPU gauge, an Nsight series."""

    name: str
    unix_ns: int
    value: float
    unit: str = ""
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    source: str = ""


def attributes_json(attributes: dict[str, Any]) -> dict[str, AttributeValue]:
    """Keep only attribute values the model can hold (OTel sequences become strings)."""
    out: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if isinstance(value, str | int | float | bool):
            out[key] = value
        elif isinstance(value, list | tuple):
            out[key] = ",".join(str(v) for v in value)
    return out
