"""Eval cells: the parent span of one prompt and its answer, with the cell's own accounting.

    with spark_otel.cell("golden-review", cell_id="B#265", engine="qwen", deadline_s=1800, workers=4):
        client.chat.completions.create(...)      # request spans nest under the cell

Requests made inside the cell (in this thread, in tasks it starts, or in threads started
through `ContextThreadPoolExecutor`) add their server-reported tokens to the cell. On exit
the cell records prompt and completion tokens, elapsed time, decode rate (completion tokens
over elapsed), status, whether the deadline was hit, salvaged findings and the degraded flag,
on its span and as metrics. The user's exceptions pass through untouched.

Under a queue governor (`spark_otel.govern`, ``$SPARK_OTEL_RULES``) entering a cell first waits
for its lane; the cell's span and times start once it is admitted (so its decode rate is its
own), its wait is on the span, and its slot is freed however the cell ends.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, TracerProvider

from . import _clock
from . import _semconv as sc
from ._clock import NS_PER_S
from ._guard import guard, report_failure
from ._validate import check_cell_arguments
from ._version import __version__
from .live_progress import ChunkStamps, LiveProgress, RateWindow
from .model import AttributeValue, CellStatus
from .records.span_codec import cell_end_attributes, cell_error, cell_span_name, cell_start_attributes
from .telemetry.instruments import instruments
from .time_budget import SCORING, RequestStamps, split_elapsed

if TYPE_CHECKING:
    from .governor import Admission, Governor
    from .governor.decision import InFlight

__all__ = ["CellState", "ContextThreadPoolExecutor", "carry_context", "cell", "current_cell"]

_logger = logging.getLogger(__name__)
_current_cell: contextvars.ContextVar[CellState | None] = contextvars.ContextVar(
    "spark_otel_cell", default=None
)
F = TypeVar("F", bound=Callable[..., Any])

# A deadline result's status, as `spark_otel.stream_with_deadline` reports it.
_DEADLINE_TO_CELL = {
    "complete": CellStatus.OK,
    "deadline": CellStatus.DEADLINE,
    "length_cap": CellStatus.LENGTH_CAP,
    "error": CellStatus.ERROR,
}


def current_cell() -> CellState | None:
    """The cell running in this context, if any."""
    return _current_cell.get()


def _providers() -> tuple[TracerProvider | None, MeterProvider | None]:
    """spark-otel's providers; failing those, ones the user installed globally; failing both,
    a default setup (the embedded store, or OTLP from the environment), so a cell is never
    silently dropped."""
    from .telemetry import current_telemetry, ensure_telemetry

    telemetry = current_telemetry()
    if telemetry is None:
        with guard("telemetry setup for a cell"):
            telemetry = ensure_telemetry()
    if telemetry is None:
        return None, None
    return telemetry.tracer_provider, telemetry.meter_provider


class CellState:
    """The live accounting of one running cell; requests and the deadline helper report here.

    Methods are thread-safe: requests of one cell may finish on several worker threads.
    """

    def __init__(
        self,
        *,
        eval_name: str,
        cell_id: str,
        engine: str | None,
        deadline_s: float | None,
        workers: int | None,
        span: Span,
    ) -> None:
        self.eval_name = eval_name
        self.cell_id = cell_id
        self.engine = engine
        self.deadline_s = deadline_s
        self.workers = workers
        self.span = span
        ctx = span.get_span_context()
        self.uid = format(ctx.span_id, "016x") if ctx.is_valid else uuid.uuid4().hex[:16]
        self.request_attributes: dict[str, AttributeValue] = {
            sc.EVAL_NAME: eval_name,
            sc.CELL_ID: cell_id,
            sc.CELL_UID: self.uid,
        }
        """What a request span inside this cell carries, so traces can be filtered by eval."""
        if engine is not None:
            self.request_attributes[sc.ENGINE] = engine
        self.start_ns = _clock.perf_ns()
        self.real_start_ns = _clock.real_monotonic_ns()
        """The cell's start on the requests' clock (`RequestStamps` are real monotonic ns)."""
        self.request_stamps: list[RequestStamps] = []
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.requests = 0
        self.failed_requests = 0
        self.scoring_real_ns: int | None = None
        """Where the runner's grading began (`begin_scoring`), on the requests' clock; None: no mark."""
        self.scoring_perf_ns: int | None = None
        self.scoring_requests = 0
        self.scoring_input_tokens: int | None = None
        self.scoring_output_tokens: int | None = None
        self.salvaged_findings = 0
        self.deadline_hit = False
        self.status: CellStatus | None = None
        self._explicit_status: CellStatus | None = None
        self._lock = threading.Lock()
        self._streams: list[ChunkStamps] = []
        """The cell's streams still being read (`watch_stream`), for its live progress."""
        self._done_chunks = 0
        """Chunks of the cell's streams that ended."""
        self._first_chunk_ns = 0
        self._rate_window = RateWindow()

    def add_tokens(self, *, prompt: int | None = None, completion: int | None = None) -> None:
        """Add token counts by hand, for calls the instrumentation does not see."""
        with self._lock:
            self._add_tokens_locked(prompt, completion)

    def _add_tokens_locked(self, prompt: int | None, completion: int | None) -> None:
        if prompt is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + prompt
        if completion is not None:
            self.completion_tokens = (self.completion_tokens or 0) + completion

    def watch_stream(self, stream: ChunkStamps) -> None:
        """Called by the instrumentation when a request inside this cell starts streaming: its
        chunks count in the cell's live progress until the request finalizes (`add_request`). A
        grader's stream (after `begin_scoring`) is not the cell's own and is not watched."""
        with self._lock:
            if self.scoring_real_ns is None:
                self._streams.append(stream)

    def live_progress(self) -> LiveProgress:
        """The cell now: elapsed (model s), tokens so far, and the decode rate of its streams
        over the last few seconds (`spark_otel.live_progress`); called about once a second by a
        governed runner's lease renewal, which publishes it."""
        now_real, now_perf = _clock.real_monotonic_ns(), _clock.perf_ns()
        with self._lock:
            running = [(s.first_ns, s.chunks) for s in self._streams]
            chunks = self._done_chunks + sum(n for _, n in running)
            firsts = [f for f, _ in running if f]
            if firsts and (not self._first_chunk_ns or min(firsts) < self._first_chunk_ns):
                self._first_chunk_ns = min(firsts)
            first = self._first_chunk_ns
            tokens = self.completion_tokens
            if tokens is None and self._done_chunks:  # streams that ended without reporting usage
                tokens = self._done_chunks
            if running:
                tokens = (tokens or 0) + sum(n for _, n in running)
            rate = self._rate_window.rate(now_real, chunks, first, scale=_clock.rate())
        return LiveProgress((now_perf - self.start_ns) / NS_PER_S, tokens, rate)

    def add_request(
        self,
        *,
        input_tokens: int | None,
        output_tokens: int | None,
        error_type: str | None,
        stamps: RequestStamps | None = None,
        stream: ChunkStamps | None = None,
    ) -> None:
        """Called by the instrumentation when a request inside this cell finalizes; ``stamps``
        (real monotonic ns) place it in the cell's time budget. A request that began once grading
        had (`begin_scoring`) is the grader's: counted apart, never in the cell's own tokens.
        ``stream``: the stream it was read from (`watch_stream`), no longer running."""
        with self._lock:
            if stream is not None and any(s is stream for s in self._streams):
                self._streams = [s for s in self._streams if s is not stream]
                self._done_chunks += stream.chunks
                if stream.first_ns and (not self._first_chunk_ns or stream.first_ns < self._first_chunk_ns):
                    self._first_chunk_ns = stream.first_ns
            if self._is_scoring(stamps):
                self.scoring_requests += 1
                if input_tokens is not None:
                    self.scoring_input_tokens = (self.scoring_input_tokens or 0) + input_tokens
                if output_tokens is not None:
                    self.scoring_output_tokens = (self.scoring_output_tokens or 0) + output_tokens
                return
            if stamps is not None:
                self.request_stamps.append(stamps)
            self._add_tokens_locked(input_tokens, output_tokens)
            self.requests += 1
            if error_type is not None:
                self.failed_requests += 1

    def _is_scoring(self, stamps: RequestStamps | None) -> bool:
        if self.scoring_real_ns is None:
            return False
        return stamps is None or stamps.start_ns >= self.scoring_real_ns

    def begin_scoring(self) -> None:
        """Mark where the runner's grading of the answer begins (an Inspect sample's scorers, then
        its log writing): the rest of the cell is its ``scoring`` phase, and requests made from
        here on (a model-graded scorer's) are counted apart from the cell's tokens and decode
        rate. Marking again keeps the first mark."""
        with self._lock:
            if self.scoring_real_ns is not None:
                return
            self.scoring_real_ns, self.scoring_perf_ns = _clock.real_monotonic_ns(), _clock.perf_ns()
            # Rebound, not changed in place: a request starting in another thread copies it.
            self.request_attributes = {**self.request_attributes, sc.CELL_PHASE: SCORING}

    def resume_answering(self) -> None:
        """Drop the grading mark: the runner answers again (an attempt retried after an error). The
        time since the mark goes back to the cell's other phases; requests already counted as the
        grader's stay so."""
        with self._lock:
            self.scoring_real_ns = self.scoring_perf_ns = None
            self.request_attributes = {k: v for k, v in self.request_attributes.items() if k != sc.CELL_PHASE}

    def add_findings(self, count: int) -> None:
        with self._lock:
            self.salvaged_findings += count

    def record_deadline_result(self, status: str, salvaged_findings: int) -> None:
        """Called by `stream_with_deadline` with its result's status and findings."""
        with self._lock:
            self.salvaged_findings += salvaged_findings
            mapped = _DEADLINE_TO_CELL.get(status, CellStatus.ERROR)
            if mapped is CellStatus.DEADLINE:
                self.deadline_hit = True
            # The worst outcome of the cell's streams decides: deadline > length cap > error > ok.
            order = [CellStatus.OK, CellStatus.ERROR, CellStatus.LENGTH_CAP, CellStatus.DEADLINE]
            if self.status is None or order.index(mapped) > order.index(self.status):
                self.status = mapped

    def set_status(self, status: CellStatus | str) -> None:
        """Override the status the cell would derive (e.g. a judged timeout)."""
        with self._lock:
            self._explicit_status = CellStatus(status)
            if self._explicit_status is CellStatus.DEADLINE:
                self.deadline_hit = True

    def _final_status(self, exc: BaseException | None) -> CellStatus:
        if self._explicit_status is not None:
            return self._explicit_status
        if exc is not None:
            if self.deadline_hit or (self.deadline_s is not None and "Timeout" in type(exc).__name__):
                self.deadline_hit = True
                return CellStatus.DEADLINE
            return CellStatus.ERROR
        if self.status is None and self.requests and self.failed_requests == self.requests:
            # The runner caught the failure, but the cell got no answer at all.
            return CellStatus.ERROR
        return self.status or CellStatus.OK

    @property
    def degraded(self) -> bool:
        """A cell cut off at its ceiling that still kept findings: degraded, not lost."""
        return self.deadline_hit and self.salvaged_findings > 0


class cell:
    """Context manager (sync and async) and decorator for one eval cell.

    As a decorator, ``cell_id`` may be omitted: the call's ``cell_id`` keyword is used if it
    has one, else a fresh id.
    """

    def __init__(
        self,
        eval_name: str,
        cell_id: str | None = None,
        *,
        engine: str | None = None,
        deadline_s: float | None = None,
        workers: int | None = None,
        cell_class: str | None = None,
        prompt_tokens: int | None = None,
        max_tokens: int | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        **attributes: AttributeValue,
    ) -> None:
        # The user's own typo fails here, naming the argument, before anything is recorded.
        check_cell_arguments(
            eval_name,
            cell_id,
            engine=engine,
            deadline_s=deadline_s,
            workers=workers,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
        )
        self.eval_name = eval_name
        self.cell_id = cell_id
        self.engine = engine
        self.deadline_s = deadline_s
        self.workers = workers
        self.cell_class = cell_class
        """The class the governor admits the cell as; by default, the one its rules give the eval."""
        self.prompt_tokens = prompt_tokens
        """The prompt's size (tokens, an estimate will do) where the runner knows it before the
        cell runs: the governor classes a long prompt as long-context at admission. Not recorded:
        the cell records the prompt tokens its requests report."""
        self.max_tokens = max_tokens
        """The most completion tokens the cell's answer may take, where the runner caps it: under
        adaptive governing, its expected length until a cell of its eval has ended. Not recorded."""
        self.attributes = attributes
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._bound_meter_provider: MeterProvider | None = None
        """The provider this entry records to; the argument above stays as given, so an instance
        entered again after a `configure()` resolves afresh."""
        self._state: CellState | None = None
        self._token: contextvars.Token[CellState | None] | None = None
        self._otel_token: object | None = None
        self._in_flight = False
        self._admission: Admission | None = None
        self._governor: Governor | None = None

    # -- context manager -----------------------------------------------------------------------------
    def __enter__(self) -> CellState:
        tracer_provider, meter_provider = self._resolve_providers()
        governor, candidate = self._admission_candidate()
        if governor is not None and candidate is not None:
            self._governor = governor
            try:
                self._admission = governor.admit(candidate, self.cell_id, meter_provider=meter_provider)
            except Exception as exc:
                if _fails_closed(exc):
                    raise
                report_failure("governor admission", exc)  # the cell runs ungoverned
        return self._start(tracer_provider, meter_provider)

    def _resolve_providers(self) -> tuple[TracerProvider | None, MeterProvider | None]:
        tracer_provider, meter_provider = self._tracer_provider, self._meter_provider
        if tracer_provider is None and meter_provider is None:
            tracer_provider, meter_provider = _providers()
        self._bound_meter_provider = meter_provider
        return tracer_provider, meter_provider

    def _admission_candidate(self) -> tuple[Governor | None, InFlight | None]:
        """The governor in force and this cell as its rules see it; (None, None) when no
        governor is in force or the cell names no engine (nothing to hold it to)."""
        from .governor import GovernorError, governor_from_environment
        from .governor.classing import profile
        from .governor.decision import InFlight

        try:
            governor = governor_from_environment()
            if governor is None or self.engine is None:
                return None, None
            rules = governor.rules()
            if rules is None:
                return governor, InFlight(
                    self.engine, self.eval_name, self.cell_class, self.deadline_s is not None,
                    deadline_s=self.deadline_s, max_tokens=self.max_tokens,
                )  # fmt: skip
            seen = profile(
                rules,
                engine=self.engine,
                eval_name=self.eval_name,
                deadline_s=self.deadline_s,
                cell_class=self.cell_class,
                prompt_tokens=self.prompt_tokens,
            )
            has_deadline = self.deadline_s is not None
            return governor, InFlight(
                self.engine, self.eval_name, seen.cell_class, has_deadline, seen.ceiling_bound,
                deadline_s=self.deadline_s, max_tokens=self.max_tokens,
            )  # fmt: skip
        except GovernorError:
            raise  # fail-closed, as the user asked: before the cell starts
        except Exception as exc:
            report_failure("governor admission", exc)
            return None, None

    def _start(
        self, tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None
    ) -> CellState:
        tracer = trace.get_tracer(
            sc.SCOPE_NAME, __version__, tracer_provider=tracer_provider, schema_url=sc.SCHEMA_URL
        )
        cell_id = self.cell_id or uuid.uuid4().hex[:12]
        attrs = cell_start_attributes(
            self.eval_name,
            cell_id,
            engine=self.engine,
            deadline_s=self.deadline_s,
            workers=self.workers,
            time_scale=_clock.rate(),
        )
        if self._admission is not None:
            attrs.update(self._admission.span_attributes())
            with guard("governor wait report"):
                if self._governor is not None and self._governor.waited_past_deadline(
                    self._admission, cell_id, self.deadline_s
                ):
                    attrs[sc.CELL_QUEUE_PAST_DEADLINE] = True
        attrs.update(self.attributes)
        span: Span = trace.INVALID_SPAN  # no span: the cell still runs, and counts its requests
        start_ns, start_perf_ns, start_real_ns = (
            _clock.wall_ns(),
            _clock.perf_ns(),
            _clock.real_monotonic_ns(),
        )
        with guard("cell span start"):
            span = tracer.start_span(
                cell_span_name(self.eval_name),
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=start_ns,
            )
        state = CellState(
            eval_name=self.eval_name,
            cell_id=cell_id,
            engine=self.engine,
            deadline_s=self.deadline_s,
            workers=self.workers,
            span=span,
        )
        state.start_ns, state.real_start_ns = start_perf_ns, start_real_ns  # the span's own start
        self._state = state
        self._otel_token = None
        with guard("cell span context attach"):
            self._otel_token = otel_context.attach(trace.set_span_in_context(span))
        self._token = _current_cell.set(state)
        with guard("cell start metrics"):
            instruments(meter_provider).cells_in_flight.add(1, self._metric_attributes(state))
            self._in_flight = True
        if self._admission is not None and self._governor is not None:
            with guard("governor live progress"):
                self._governor.running(self._admission, state.live_progress)
        return state

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        state = self._state
        if state is None:
            return
        self._state = None
        # Before the slot is freed (a cell admitted next starts after it), and each clock's end
        # read together, so the span's times, its elapsed and its budget agree.
        end_ns, end_perf_ns, end_real_ns = _clock.wall_ns(), _clock.perf_ns(), _clock.real_monotonic_ns()
        try:
            with guard("cell finish"):
                self._finish(state, exc, end_perf_ns, end_real_ns)
        finally:
            self._release(state)
            # Each step on its own: leaving from another context (an async generator closed
            # by the event loop) must not cost the cell its span.
            if self._in_flight:
                self._in_flight = False
                with guard("cell in-flight metric"):
                    instruments(self._bound_meter_provider).cells_in_flight.add(
                        -1, self._metric_attributes(state)
                    )
            if self._token is not None:
                with guard("cell context reset"):
                    _current_cell.reset(self._token)
            if self._otel_token is not None:
                with guard("cell span context detach"):
                    otel_context.detach(self._otel_token)  # type: ignore[arg-type]
            with guard("cell span end"):  # a span processor that raises must not replace the user's outcome
                state.span.end(end_time=end_ns)

    async def __aenter__(self) -> CellState:
        tracer_provider, meter_provider = self._resolve_providers()
        governor, candidate = self._admission_candidate()
        if governor is not None and candidate is not None:
            self._governor = governor
            try:
                self._admission = await governor.aadmit(
                    candidate, self.cell_id, meter_provider=meter_provider
                )
            except Exception as exc:
                if _fails_closed(exc):
                    raise
                report_failure("governor admission", exc)  # the cell runs ungoverned
        return self._start(tracer_provider, meter_provider)

    def leave_context(self) -> None:
        """Forget the context the cell was entered in, before an exit from another one: a
        framework's sweep ending a cell whose own task is gone (its context went with it). The
        exit still ends the span, records the cell and frees its slot."""
        self._token = self._otel_token = None

    def _release(self, state: CellState) -> None:
        """Free the governor's slot, once, whatever ended the cell; a lease that lapsed while the
        cell ran is marked on its span."""
        admission, governor = self._admission, self._governor
        self._admission = self._governor = None
        if admission is not None and governor is not None:
            with guard("governor release"):
                lapse = governor.release(admission, meter_provider=self._bound_meter_provider)
                if lapse is not None:
                    state.span.set_attributes(lapse.span_attributes())

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- decorator -----------------------------------------------------------------------------------
    def _for_call(self, kwargs: dict[str, Any]) -> cell:
        cell_id = self.cell_id or (str(kwargs["cell_id"]) if "cell_id" in kwargs else None)
        return cell(
            self.eval_name,
            cell_id,
            engine=self.engine,
            deadline_s=self.deadline_s,
            workers=self.workers,
            cell_class=self.cell_class,
            prompt_tokens=self.prompt_tokens,
            max_tokens=self.max_tokens,
            tracer_provider=self._tracer_provider,
            meter_provider=self._meter_provider,
            **self.attributes,
        )

    def __call__(self, func: F) -> F:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with self._for_call(kwargs):
                    return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._for_call(kwargs):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    # -- accounting ----------------------------------------------------------------------------------
    def _metric_attributes(self, state: CellState) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {sc.EVAL_NAME: state.eval_name}
        if state.engine is not None:
            attrs[sc.ENGINE] = state.engine
        return attrs

    def _finish(
        self, state: CellState, exc: BaseException | None, end_perf_ns: int, end_real_ns: int
    ) -> None:
        elapsed_s = (end_perf_ns - state.start_ns) / NS_PER_S
        budget = _budget(state, elapsed_s, end_perf_ns, end_real_ns)
        status = state._final_status(exc)
        span = state.span
        attrs = cell_end_attributes(
            status=status,
            elapsed_s=elapsed_s,
            salvaged_findings=state.salvaged_findings,
            prompt_tokens=state.prompt_tokens,
            completion_tokens=state.completion_tokens,
            budget=budget,
        )
        attrs[sc.CELL_REQUESTS] = state.requests
        attrs[sc.CELL_FAILED_REQUESTS] = state.failed_requests
        attrs.update(_scoring_attributes(state))
        span.set_attributes(attrs)
        error = cell_error(status, type(exc).__qualname__ if exc is not None else None)
        if error is not None:
            span.set_attribute(sc.ERROR_TYPE, error[0])
            span.set_status(error[1])
        rate = attrs.get(sc.CELL_DECODE_RATE)

        inst = instruments(self._bound_meter_provider)
        done = self._metric_attributes(state)
        done[sc.CELL_STATUS] = status.value
        if state.workers is not None:
            done[sc.CELL_WORKERS] = state.workers
        inst.cells.add(1, done)
        inst.cell_duration.record(elapsed_s, done)
        if state.prompt_tokens is not None:
            inst.cell_tokens.record(state.prompt_tokens, {**done, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT})
        if state.completion_tokens is not None:
            inst.cell_tokens.record(
                state.completion_tokens, {**done, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT}
            )
        if isinstance(rate, float):
            inst.cell_decode_rate.record(rate, done)
        if self._admission is not None:
            budget = {"admission": self._admission.waited_s, **budget}
        for phase, seconds in budget.items():
            inst.cell_phase_duration.record(seconds, {**done, sc.CELL_PHASE: phase})
        if status is CellStatus.DEADLINE:
            inst.cell_deadline_hits.add(1, done)
        if state.salvaged_findings:
            inst.cell_salvaged_findings.add(state.salvaged_findings, done)


def _budget(state: CellState, elapsed_s: float, end_perf_ns: int, end_real_ns: int) -> dict[str, float]:
    """The cell's elapsed time by phase (`time_budget`), the runner's grading apart where it marked it."""
    with state._lock:
        stamps = list(state.request_stamps)
    budget = split_elapsed(
        stamps, state.real_start_ns, end_real_ns, scale=_clock.rate(), scoring_from_ns=state.scoring_real_ns
    )
    # On the cell's own clock, so the parts add up to its elapsed time exactly.
    if state.scoring_perf_ns is not None:
        budget[SCORING] = min(elapsed_s, max(0.0, (end_perf_ns - state.scoring_perf_ns) / NS_PER_S))
    split = budget["first_token"] + budget["decode"] + budget["unsplit"] + budget.get(SCORING, 0.0)
    budget["other"] = max(0.0, elapsed_s - split)
    return budget


def _scoring_attributes(state: CellState) -> dict[str, AttributeValue]:
    """What the grader's requests used, on a cell that marked its grading (none on any other)."""
    if state.scoring_real_ns is None:
        return {}
    attrs: dict[str, AttributeValue] = {sc.CELL_SCORING_REQUESTS: state.scoring_requests}
    if state.scoring_input_tokens is not None:
        attrs[sc.CELL_SCORING_INPUT_TOKENS] = state.scoring_input_tokens
    if state.scoring_output_tokens is not None:
        attrs[sc.CELL_SCORING_OUTPUT_TOKENS] = state.scoring_output_tokens
    return attrs


def _fails_closed(exc: Exception) -> bool:
    """A `GovernorError`: fail-closed's refusal, before the cell starts (any other failure of the
    governor lets the cell run ungoverned)."""
    from .governor import GovernorError

    return isinstance(exc, GovernorError)


def carry_context(func: F) -> F:
    """Wrap ``func`` so it runs in a copy of the caller's context (cell, span, baggage).

    Use for threads you start yourself; asyncio tasks copy the context on their own.
    """
    ctx = contextvars.copy_context()

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        # A fresh copy per call: one Context cannot be entered by two threads at once.
        return ctx.copy().run(func, *args, **kwargs)

    return run  # type: ignore[return-value]


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A `ThreadPoolExecutor` whose tasks run in the context of the code that submitted them,
    so requests made by worker threads nest under the submitting cell."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        ctx = contextvars.copy_context()
        return super().submit(ctx.run, fn, *args, **kwargs)
