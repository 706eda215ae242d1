"""One stream's run: what arrived so far, the notes for its request span, and the sync watchdog
that shuts the connection's socket at the deadline."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from .. import _clock
from .. import _semconv as sc
from .._clock import NS_PER_S
from .._guard import guard
from ..cells import current_cell
from ..instrumentation.request_notes import RequestNotes
from ..time_budget import RequestStamps
from .arguments import Plan
from .results import DeadlineResult, DeadlineStatus, Timings, TokenUsage
from .salvage import ExtractorSpec, as_extractor

__all__ = ["StreamRun"]

_logger = logging.getLogger(__name__)
_MAX_ERROR_CHARS = 500
# The request's timeout is the time left on the deadline plus this much, so the watchdog (sync)
# or the expiry (async) has marked the request as cut off by the time a timeout ends it.
_HEADER_GRACE_S = 0.02


def _instrumented() -> bool:
    """Whether `spark_otel.instrument()` is on, so request spans count the cell's tokens."""
    module = sys.modules.get("spark_otel.instrumentation")
    return module is not None and bool(module.SparkOtelInstrumentor().is_instrumented)


def _socket_of(response: Any) -> socket.socket | None:
    """The connection's socket, from httpcore's ``network_stream`` response extension."""
    with guard("deadline socket lookup"):
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            return sock
    return None


def _before_release(response: Any, hook: Callable[[], None]) -> bool:
    """Runs ``hook`` just before the response hands its connection back to the pool.

    httpx (and httpx2) release the connection when the response stream closes, which they do
    themselves once the body is read: inside the read loop, before the caller's ``finally``.
    A watchdog that shut the socket after that could break a connection the pool has already
    lent to another request. False when the stream's close cannot be hooked."""
    with guard("deadline release hook"):
        stream = response.stream
        release = stream.close

        def close() -> None:
            hook()
            release()

        stream.close = close
        return True
    return False


class StreamRun:
    """One stream's accumulation, shared by the reading code and the watchdog."""

    def __init__(self, plan: Plan, extractor: ExtractorSpec | None) -> None:
        self.plan = plan
        self.extractor = as_extractor(extractor)
        self.texts: list[str] = []
        self.reasonings: list[str] = []
        self.streamed = 0
        self.usage: tuple[int | None, int] | None = None
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.error: str | None = None
        self.extractor_error: str | None = None
        self.expired = False
        self.cap_hit = False
        self.start_ns = _clock.perf_ns()
        self.first_ns = 0
        self.real_start_ns = _clock.real_monotonic_ns()
        self.real_first_ns = 0
        """The start and first token on the requests' clock, for the cell's time budget."""
        self.notes: RequestNotes | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._done = False

    # -- time ----------------------------------------------------------------------------------------
    def wall_left_s(self) -> float | None:
        """Real seconds until the deadline, or None without one."""
        if self.plan.budget_s is None:
            return None
        spent = (_clock.perf_ns() - self.start_ns) / NS_PER_S
        return max(0.0, _clock.to_real_s(self.plan.budget_s - spent))

    def timeout_s(self) -> float | None:
        """The request's timeout: the time left on the deadline replaces the client's own, so
        a long gap between chunks (a 5 s default read timeout, a small client timeout) cannot
        end a stream the deadline still allows. None without a deadline: keep the client's."""
        left = self.wall_left_s()
        return None if left is None else left + _HEADER_GRACE_S

    # -- chunks --------------------------------------------------------------------------------------
    def tokens(self) -> int:
        return self.usage[1] if self.usage is not None else self.streamed

    def take(
        self,
        content: str | None,
        reasoning: str | None,
        finish_reason: str | None,
        usage: tuple[int | None, int] | None,
        model: str | None,
    ) -> bool:
        """Adds one chunk; False when the stream should stop (deadline passed, cap reached)."""
        with self._lock:
            if self.expired:
                return False
            if content or reasoning:
                if not self.first_ns:
                    self.first_ns = _clock.perf_ns()
                    self.real_first_ns = _clock.real_monotonic_ns()
                self.streamed += 1
            if content:
                self.texts.append(content)
                self._feed(content)
            if reasoning:
                self.reasonings.append(reasoning)
            if model and self.model is None:
                self.model = model
            if usage is not None:
                self.usage = usage
                self._note(sc.REQUEST_TOKENS_SOURCE, "usage")
            if finish_reason:
                self.finish_reason = finish_reason
                self._note(
                    sc.REQUEST_DEADLINE_STATUS,
                    DeadlineStatus.LENGTH_CAP.value
                    if finish_reason == "length"
                    else DeadlineStatus.COMPLETE.value,
                )
            cap = self.plan.max_output_tokens
            if cap is not None and self.finish_reason is None and self.tokens() >= cap:
                self.cap_hit = True
                self._note_cutoff(DeadlineStatus.LENGTH_CAP)
                return False
            return True

    def _feed(self, content: str) -> None:
        try:
            if self.extractor.feed(content):
                self._note(sc.REQUEST_SALVAGED_FINDINGS, len(self.extractor.findings))
        except Exception as exc:
            if self.extractor_error is None:
                _logger.warning("spark_otel: findings extractor failed: %r", exc, exc_info=True)
                self.extractor_error = f"extractor failed: {exc!r}"

    def fail(self, exc: BaseException | str) -> None:
        """A server or connection error; after expiry it is just how the cut-off looked."""
        with self._lock:
            if self.expired or self.cap_hit:
                return
            message = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
            self.error = message[:_MAX_ERROR_CHARS]
            self._note(sc.REQUEST_DEADLINE_STATUS, DeadlineStatus.ERROR.value)

    # -- notes on the request span -------------------------------------------------------------------
    def _note(self, key: str, value: str | int) -> None:
        if self.notes is not None:
            self.notes.attributes[key] = value

    def _note_cutoff(self, status: DeadlineStatus) -> None:
        """Before a cut-off stream closes, tell the request span how and what was kept."""
        notes = self.notes
        if notes is None:
            return
        if status is DeadlineStatus.DEADLINE:
            notes.error_type = sc.ERROR_TYPE_DEADLINE
        notes.attributes[sc.REQUEST_DEADLINE_STATUS] = status.value
        notes.attributes[sc.REQUEST_SALVAGED_FINDINGS] = len(self.extractor.findings)
        notes.attributes[sc.REQUEST_TOKENS_SOURCE] = "usage" if self.usage is not None else "streamed"

    # -- the watchdog (sync) -------------------------------------------------------------------------
    def attach(self, response: Any) -> None:
        """Registers the connection the watchdog may shut; shuts it now if already expired.

        The socket is registered only when `detach` is sure to run before the connection goes
        back to the pool: the watchdog shuts under the same lock, so it never reaches a socket
        the pool may have lent on."""
        sock = _socket_of(response)
        if sock is not None and not _before_release(response, self.detach):
            _logger.debug("spark_otel: cannot hook the connection's release; no watchdog shutdown")
            sock = None
        with self._lock:
            if self._done:
                return
            self._sock = sock
            if self.expired:
                self._shut()

    def detach(self) -> None:
        """The stream is finished with its connection: the watchdog must not touch it now."""
        with self._lock:
            self._done = True
            self._sock = None

    def expire(self) -> None:
        """At the deadline: mark the cut-off, then wake a blocked read by shutting the socket.

        An answer already finished (only the usage chunk or ``[DONE]`` outstanding) stays
        complete, but its wait ends here too."""
        with self._lock:
            if self._done:
                return
            self.expired = True
            if self.finish_reason is None and not self.cap_hit:
                self._note_cutoff(DeadlineStatus.DEADLINE)
            self._shut()

    def _shut(self) -> None:
        if self._sock is None:
            return
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            _logger.debug("spark_otel: deadline socket already closed", exc_info=True)

    # -- the result ----------------------------------------------------------------------------------
    def status(self) -> DeadlineStatus:
        if self.cap_hit or self.finish_reason == "length":
            return DeadlineStatus.LENGTH_CAP
        if self.finish_reason is not None:
            return DeadlineStatus.COMPLETE
        if self.expired:
            return DeadlineStatus.DEADLINE
        return DeadlineStatus.ERROR

    def result(self) -> DeadlineResult:
        end_ns = _clock.perf_ns()
        with self._lock:
            self._done = True
            status = self.status()
            error = self.error
            if status is DeadlineStatus.ERROR and error is None:
                error = "the stream ended before the server finished the answer"
            try:
                self.extractor.close(cut_off=status is not DeadlineStatus.COMPLETE)
            except Exception as exc:
                _logger.warning("spark_otel: findings extractor failed: %r", exc, exc_info=True)
                self.extractor_error = self.extractor_error or f"extractor failed: {exc!r}"
            if error is None:
                error = self.extractor_error
            findings = list(self.extractor.findings)
            elapsed_s = (end_ns - self.start_ns) / NS_PER_S
            tokens = self.tokens()
            result = DeadlineResult(
                status=status,
                text="".join(self.texts),
                reasoning="".join(self.reasonings),
                usage=TokenUsage(
                    prompt_tokens=self.usage[0] if self.usage is not None else None,
                    completion_tokens=tokens,
                    source="usage" if self.usage is not None else "streamed",
                ),
                timings=Timings(
                    time_to_first_token_s=(self.first_ns - self.start_ns) / NS_PER_S
                    if self.first_ns
                    else None,
                    elapsed_s=elapsed_s,
                    decode_rate=tokens / elapsed_s if tokens and elapsed_s > 0 else None,
                ),
                findings=findings,
                error=error,
                finish_reason=self.finish_reason,
                model=self.model,
                deadline_s=self.plan.budget_s,
            )
        if status is not DeadlineStatus.COMPLETE:
            _logger.debug(
                "spark_otel: stream ended %s after %.1f s with %d tokens and %d findings",
                status.value,
                elapsed_s,
                tokens,
                len(findings),
            )
        state = current_cell()
        if state is not None:
            with guard("deadline cell accounting"):
                state.record_deadline_result(status.value, salvaged_findings=len(findings))
                if not _instrumented() and self.notes is not None:
                    # Nobody else saw this request: count it in the cell here, once, with the
                    # server-reported tokens only, as the instrumentation would (a cut-off
                    # stream has none, like the article's timeout cells).
                    reported = self.usage is not None
                    state.add_request(
                        input_tokens=result.usage.prompt_tokens,
                        output_tokens=tokens if reported else None,
                        error_type=self.notes.error_type
                        or (sc.ERROR_TYPE_OTHER if status is DeadlineStatus.ERROR else None),
                        stamps=RequestStamps(
                            self.real_start_ns, self.real_first_ns, _clock.real_monotonic_ns(), streaming=True
                        ),
                    )
        return result
