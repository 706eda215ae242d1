"""What one deadline-bound stream kept: its status, text, token usage, timings and findings."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

__all__ = ["DeadlineResult", "DeadlineStatus", "Timings", "TokenUsage", "TokensSource"]


class DeadlineStatus(StrEnum):
    """How the stream ended."""

    COMPLETE = "complete"
    """The server finished the answer."""
    DEADLINE = "deadline"
    """The deadline passed first; the result holds what arrived before it."""
    LENGTH_CAP = "length_cap"
    """The output-token cap was reached: ``max_output_tokens`` here, or the server's own
    (``finish_reason == "length"``)."""
    ERROR = "error"
    """The server or the connection failed; the result holds what arrived before."""


TokensSource = Literal["usage", "streamed"]


class TokenUsage(BaseModel):
    """Token counts: the server's ``usage`` when its final chunk came, else one token per
    streamed content chunk (``source="streamed"``), which is what a cut-off stream has."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_tokens: int | None = Field(description="From the server's usage; None without it")
    completion_tokens: int
    source: TokensSource


class Timings(BaseModel):
    """Model-time seconds from the call, so a simulated box reads as the article does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_to_first_token_s: float | None = Field(description="None when no token arrived")
    elapsed_s: float
    decode_rate: float | None = Field(description="completion tokens / elapsed_s, in tok/s")


class DeadlineResult(BaseModel):
    """What one deadline-bound stream kept."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: DeadlineStatus
    text: str = Field(description="The answer's content so far")
    reasoning: str = Field("", description="Reasoning deltas (vLLM's reasoning_content), if any")
    usage: TokenUsage
    timings: Timings
    findings: list[Any] = Field(description="Complete findings the extractor salvaged")
    error: str | None = Field(None, description="What failed, for status error")
    finish_reason: str | None = None
    model: str | None = Field(None, description="The model the server reported")
    deadline_s: float | None = Field(None, description="The budget in model seconds, if any")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def findings_count(self) -> int:
        return len(self.findings)

    @property
    def tokens_source(self) -> TokensSource:
        return self.usage.source

    @property
    def degraded(self) -> bool:
        """Cut off at the deadline but kept findings: degraded, not lost."""
        return self.status is DeadlineStatus.DEADLINE and bool(self.findings)
