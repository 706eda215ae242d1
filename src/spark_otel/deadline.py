"""Stream a completion against a deadline and keep what arrives.

A finder seed that runs past its ceiling returns nothing from a plain call. Streamed against
its own deadline, it returns the text so far and every complete finding in it:

    result = spark_otel.stream_with_deadline(
        client, model="qwen3.8-27b", messages=[...], max_tokens=32768, deadline_s=1800
    )
    result.status            # complete | deadline | length_cap | error
    result.findings          # the complete findings, even from a cut-off answer

``client`` is an ``openai.OpenAI`` (chat when ``messages`` is given, a text completion when
``prompt`` is), or an ``httpx2.Client`` / ``httpx.Client`` with a ``base_url`` (raw HTTP to
``/v1/chat/completions`` or ``/v1/completions``, server-sent events). `astream_with_deadline`
is the twin for ``AsyncOpenAI`` and the async HTTP clients.

The deadline replaces the client's own timeout (sync and async alike): the request's timeout
is the time left on the deadline, so a gap between chunks longer than, say, httpx's 5 s default
read timeout ends nothing the deadline still allows. The deadline holds while the server sends
nothing at all. Sync: until the response headers arrive that timeout bounds the wait; after
that a watchdog thread shuts the connection's socket at expiry, which wakes the blocked read at
once (never after the stream has handed its connection back to the pool). Async: the stream
runs in a task that is cancelled at expiry. Either way a cut-off connection is closed, not
returned to the pool, and the server sees the disconnect. Deadlines are in model seconds
(`_clock`).

Inside `spark_otel.cell(...)` the result sets the cell's status, ``deadline_hit``, salvaged
findings and degraded flag; the request span (when `spark_otel.instrument()` is on) records
the cut-off through `request_notes`.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import math
import socket
import sys
import threading
from collections.abc import Callable
from contextlib import aclosing, closing
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

import httpx2
from pydantic import BaseModel, ConfigDict, Field, computed_field

from . import _clock
from . import _semconv as sc
from ._exceptions import ConfigError
from ._guard import guard
from ._request_notes import RequestNotes, request_notes
from .cells import current_cell
from .instrumentation._sse import error_of
from .salvage import ExtractorSpec, as_extractor

__all__ = [
    "DeadlineResult",
    "DeadlineStatus",
    "Timings",
    "TokenUsage",
    "astream_with_deadline",
    "stream_with_deadline",
]

_logger = logging.getLogger(__name__)

# The request's timeout is the time left on the deadline plus this much, so the watchdog (sync)
# or the expiry (async) has marked the request as cut off by the time a timeout ends it.
_HEADER_GRACE_S = 0.02
_MAX_ERROR_CHARS = 500


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


# --- the plan: validated arguments ----------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    kind: Literal["openai", "raw"]
    chat: bool
    body: dict[str, Any]
    budget_s: float | None  # model seconds from the call's start
    max_output_tokens: int | None


def _client_kind(client: Any, *, is_async: bool) -> Literal["openai", "raw"]:
    name = "astream_with_deadline" if is_async else "stream_with_deadline"
    openai = sys.modules.get("openai")  # an openai client means the SDK is imported already
    if openai is not None:
        if isinstance(client, openai.AsyncOpenAI if is_async else openai.OpenAI):
            return "openai"
        if isinstance(client, openai.OpenAI if is_async else openai.AsyncOpenAI):
            other = "stream_with_deadline" if is_async else "astream_with_deadline"
            raise ConfigError(f"{name}: {type(client).__name__} needs {other}")
    raw: list[type] = [httpx2.AsyncClient if is_async else httpx2.Client]
    wrong: list[type] = [httpx2.Client if is_async else httpx2.AsyncClient]
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        raw.append(httpx.AsyncClient if is_async else httpx.Client)
        wrong.append(httpx.Client if is_async else httpx.AsyncClient)
    if isinstance(client, tuple(raw)):
        if not str(getattr(client, "base_url", "")).strip("/"):
            raise ConfigError(f"{name}: the HTTP client has no base_url (e.g. http://127.0.0.1:8011)")
        return "raw"
    if isinstance(client, tuple(wrong)):
        other = "stream_with_deadline" if is_async else "astream_with_deadline"
        raise ConfigError(f"{name}: {type(client).__name__} needs {other}")
    raise ConfigError(
        f"{name}: client must be an openai client or an httpx2/httpx client, got {type(client).__name__}"
    )


def _budget_s(deadline_s: float | None, deadline_at: float | datetime | None) -> float | None:
    if deadline_s is not None and deadline_at is not None:
        raise ConfigError("give deadline_s or deadline_at, not both")
    if deadline_s is not None:
        if isinstance(deadline_s, bool) or not isinstance(deadline_s, int | float):
            raise ConfigError(f"deadline_s must be a number of seconds, got {deadline_s!r}")
        if not math.isfinite(deadline_s) or deadline_s < 0:
            raise ConfigError(f"deadline_s must be a finite number >= 0, got {deadline_s!r}")
        return float(deadline_s)
    if deadline_at is None:
        return None
    if isinstance(deadline_at, datetime):
        at_s = deadline_at.timestamp()
    elif isinstance(deadline_at, int | float) and not isinstance(deadline_at, bool):
        at_s = float(deadline_at)
    else:
        raise ConfigError(f"deadline_at must be Unix seconds or a datetime, got {deadline_at!r}")
    if not math.isfinite(at_s):
        raise ConfigError(f"deadline_at must be finite, got {deadline_at!r}")
    return at_s - _clock.wall_ns() / 1e9


def _plan(
    client: Any,
    *,
    is_async: bool,
    deadline_s: float | None,
    deadline_at: float | datetime | None,
    max_output_tokens: int | None,
    create_kwargs: dict[str, Any],
) -> _Plan:
    kind = _client_kind(client, is_async=is_async)
    budget = _budget_s(deadline_s, deadline_at)
    if max_output_tokens is not None and (
        isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens < 1
    ):
        raise ConfigError(f"max_output_tokens must be a positive integer, got {max_output_tokens!r}")
    if budget is None and max_output_tokens is None:
        raise ConfigError(
            "give deadline_s, deadline_at or max_output_tokens: without one the stream is unbounded"
        )
    has_messages, has_prompt = "messages" in create_kwargs, "prompt" in create_kwargs
    if has_messages == has_prompt:
        raise ConfigError("give messages (a chat completion) or prompt (a text completion), exactly one")
    if not create_kwargs.get("model"):
        raise ConfigError("model is required (the served model id, as /v1/models lists it)")
    if create_kwargs.get("stream") is False:
        raise ConfigError("stream=False cannot keep what arrives; leave stream unset")
    if create_kwargs.get("n", 1) not in (1, None):
        raise ConfigError(f"n={create_kwargs['n']!r}: only one choice per stream is supported")
    body = dict(create_kwargs)
    body["stream"] = True
    options = dict(body.get("stream_options") or {})
    options["include_usage"] = True
    body["stream_options"] = options
    return _Plan(kind, has_messages, body, budget, max_output_tokens)


# --- one stream's state ---------------------------------------------------------------------------


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a failing server or connection raises, in whichever clients are loaded.

    Read from ``sys.modules``: a client of a library never imported cannot be in use, and an
    import here would cost its first cut-off a noticeable part of the 100 ms it has."""
    errors: list[type[BaseException]] = [httpx2.HTTPError, httpx2.StreamError, OSError]
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        errors += [httpx.HTTPError, httpx.StreamError]
    openai = sys.modules.get("openai")
    if openai is not None:
        errors.append(openai.APIError)
    return tuple(errors)


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


class _Run:
    """One stream's accumulation, shared by the reading code and the watchdog."""

    def __init__(self, plan: _Plan, extractor: ExtractorSpec | None) -> None:
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
        self.notes: RequestNotes | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._done = False

    # -- time ----------------------------------------------------------------------------------------
    def wall_left_s(self) -> float | None:
        """Real seconds until the deadline, or None without one."""
        if self.plan.budget_s is None:
            return None
        spent = (_clock.perf_ns() - self.start_ns) / 1e9
        return max(0.0, _clock.to_wall_s(self.plan.budget_s - spent))

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
            elapsed_s = (end_ns - self.start_ns) / 1e9
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
                    time_to_first_token_s=(self.first_ns - self.start_ns) / 1e9 if self.first_ns else None,
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
                    )
        return result


# --- chunk fields ---------------------------------------------------------------------------------


def _usage_of(usage: Any) -> tuple[int | None, int] | None:
    if usage is None:
        return None
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    else:
        prompt, completion = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
    if not isinstance(completion, int):
        return None
    return (prompt if isinstance(prompt, int) else None), completion


def _take_object(run: _Run, chunk: Any) -> bool:
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
        content, reasoning, finish, _usage_of(getattr(chunk, "usage", None)), getattr(chunk, "model", None)
    )


def _take_dict(run: _Run, data: dict[str, Any]) -> bool:
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
    return run.take(content, reasoning, finish, _usage_of(data.get("usage")), data.get("model"))


def _server_error(data: dict[str, Any]) -> str | None:
    """The message of a failure the server reported mid-stream (see `error_of`)."""
    error = error_of(data)
    if error is None:
        return None
    if isinstance(error, dict):
        return f"server error mid-stream: {error.get('message') or error}"
    return f"server error mid-stream: {error}"


class _SSE:
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


def _raw_path(client: Any, chat: bool) -> str:
    """Relative to the client's base_url, which may or may not end in /v1."""
    endpoint = "chat/completions" if chat else "completions"
    return endpoint if str(client.base_url.path).rstrip("/").endswith("/v1") else f"v1/{endpoint}"


def _http_error(response: Any) -> str:
    try:
        body = response.text
    except Exception:
        body = ""
    return f"HTTP {response.status_code}: {body.strip()}"


def _raw_events(run: _Run, sse: _SSE, raw: bytes) -> bool:
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
        message = _server_error(event)
        if message is not None:
            run.fail(message)
            return False
        if not _take_dict(run, event):
            return False
    return True


# --- sync -----------------------------------------------------------------------------------------


def _stream_openai(run: _Run, client: Any) -> None:
    errors = _transport_errors()
    api = client.with_options(max_retries=0)
    resource = api.chat.completions if run.plan.chat else api.completions
    kwargs = dict(run.plan.body)
    timeout = run.timeout_s()
    if timeout is not None:
        kwargs["timeout"] = timeout
    try:
        stream = resource.create(**kwargs)
    except errors as exc:
        run.fail(exc)
        return
    try:
        run.attach(stream.response)
        for chunk in stream:
            if not _take_object(run, chunk):
                break
    except errors as exc:
        run.fail(exc)
    finally:
        run.detach()
        with guard("deadline stream close"):
            stream.close()


def _stream_raw(run: _Run, client: Any) -> None:
    errors = _transport_errors()
    timeout = run.timeout_s()
    request = client.build_request(
        "POST",
        _raw_path(client, run.plan.chat),
        json=run.plan.body,
        timeout=client.timeout if timeout is None else timeout,
    )
    try:
        response = client.send(request, stream=True)
    except errors as exc:
        run.fail(exc)
        return
    try:
        run.attach(response)
        if response.status_code >= 400:
            response.read()
            run.fail(_http_error(response))
            return
        sse = _SSE()
        with closing(response.iter_bytes()) as reads:
            for raw in reads:
                if not _raw_events(run, sse, raw):
                    break
    except errors as exc:
        run.fail(exc)
    finally:
        run.detach()
        with guard("deadline stream close"):
            response.close()


def stream_with_deadline(
    client: Any,
    *,
    deadline_s: float | None = None,
    deadline_at: float | datetime | None = None,
    max_output_tokens: int | None = None,
    extractor: ExtractorSpec | None = "json",
    **create_kwargs: Any,
) -> DeadlineResult:
    """Streams one completion until it finishes, the deadline passes or the cap is reached.

    ``deadline_s`` is model seconds from now; ``deadline_at`` an absolute time (Unix seconds
    or a datetime). ``max_output_tokens`` is enforced here, counting streamed tokens; pass
    ``max_tokens`` to cap the engine itself. ``extractor`` salvages findings (`salvage`):
    ``"json"`` (default), ``"jsonl"``, a compiled pattern, an extractor or a callable.
    Everything else goes to the create call (``model``, ``messages`` or ``prompt``, ...);
    ``stream`` and ``stream_options.include_usage`` are set here, retries are off (a retry
    cannot fit a deadline) and the deadline replaces any ``timeout``.

    Never raises for what the server or connection does: an HTTP error, an error mid-stream
    or a dropped connection return status ``error`` with what arrived. Bad arguments raise
    `ConfigError`. A deadline already past returns status ``deadline`` without a request.
    """
    plan = _plan(
        client,
        is_async=False,
        deadline_s=deadline_s,
        deadline_at=deadline_at,
        max_output_tokens=max_output_tokens,
        create_kwargs=create_kwargs,
    )
    run = _Run(plan, extractor)
    left = run.wall_left_s()
    if left is not None and left <= 0:
        run.expired = True
        return run.result()
    with request_notes() as notes:
        run.notes = notes
        run._note(sc.REQUEST_TOKENS_SOURCE, "streamed")
        run._note(sc.REQUEST_SALVAGED_FINDINGS, 0)
        watchdog = None
        if left is not None:
            watchdog = threading.Timer(left, run.expire)
            watchdog.daemon = True
            watchdog.start()
        try:
            if plan.kind == "openai":
                _stream_openai(run, client)
            else:
                _stream_raw(run, client)
        finally:
            if watchdog is not None:
                watchdog.cancel()
                watchdog.join()
    return run.result()


# --- async ----------------------------------------------------------------------------------------


async def _aclose_all(chunks: Any, stream: Any) -> None:
    """Close the SDK stream and the async generators behind it now: left to the garbage
    collector, each would be finalized by a task of its own, after we return."""
    for generator in (chunks, getattr(stream, "_iterator", None)):
        aclose = getattr(generator, "aclose", None)
        if aclose is not None:
            await aclose()
    await stream.close()


async def _astream_openai(run: _Run, client: Any) -> None:
    errors = _transport_errors()
    api = client.with_options(max_retries=0)
    resource = api.chat.completions if run.plan.chat else api.completions
    kwargs = dict(run.plan.body)
    timeout = run.timeout_s()
    if timeout is not None:
        kwargs["timeout"] = timeout
    try:
        stream = await resource.create(**kwargs)
    except errors as exc:
        run.fail(exc)
        return
    chunks = aiter(stream)
    try:
        async for chunk in chunks:
            if not _take_object(run, chunk):
                break
    except errors as exc:
        run.fail(exc)
    finally:
        with guard("deadline stream close"):
            await _aclose_all(chunks, stream)


async def _astream_raw(run: _Run, client: Any) -> None:
    errors = _transport_errors()
    timeout = run.timeout_s()
    request = client.build_request(
        "POST",
        _raw_path(client, run.plan.chat),
        json=run.plan.body,
        timeout=client.timeout if timeout is None else timeout,
    )
    try:
        response = await client.send(request, stream=True)
    except errors as exc:
        run.fail(exc)
        return
    try:
        if response.status_code >= 400:
            await response.aread()
            run.fail(_http_error(response))
            return
        sse = _SSE()
        async with aclosing(response.aiter_bytes()) as reads:
            async for raw in reads:
                if not _raw_events(run, sse, raw):
                    break
    except errors as exc:
        run.fail(exc)
    finally:
        with guard("deadline stream close"):
            await response.aclose()


async def astream_with_deadline(
    client: Any,
    *,
    deadline_s: float | None = None,
    deadline_at: float | datetime | None = None,
    max_output_tokens: int | None = None,
    extractor: ExtractorSpec | None = "json",
    **create_kwargs: Any,
) -> DeadlineResult:
    """The async twin of `stream_with_deadline`, for ``AsyncOpenAI`` and async HTTP clients.

    The stream runs in its own task; at the deadline the request span is told of the cut-off
    and the task is cancelled, which closes the connection. Cancelling the caller cancels the
    stream too, and the cancellation propagates.
    """
    plan = _plan(
        client,
        is_async=True,
        deadline_s=deadline_s,
        deadline_at=deadline_at,
        max_output_tokens=max_output_tokens,
        create_kwargs=create_kwargs,
    )
    run = _Run(plan, extractor)
    left = run.wall_left_s()
    if left is not None and left <= 0:
        run.expired = True
        return run.result()
    with request_notes() as notes:
        run.notes = notes
        run._note(sc.REQUEST_TOKENS_SOURCE, "streamed")
        run._note(sc.REQUEST_SALVAGED_FINDINGS, 0)
        body = _astream_openai(run, client) if plan.kind == "openai" else _astream_raw(run, client)
        worker = asyncio.ensure_future(body)
        try:
            done, _ = await asyncio.wait({worker}, timeout=left)
            if not done:
                run.expire()
                worker.cancel()
                await asyncio.wait({worker})
        except BaseException:
            worker.cancel()
            await asyncio.wait({worker})
            raise
        if not worker.cancelled():
            worker.result()  # our own bug, if any, surfaces here rather than vanishing
    return run.result()
