"""The simulated box: engines that share one GPU, stepped in model time.

Each engine runs one step loop on the box's event loop. A step emits one token to every
decoding stream and advances first-come-first-served prefill chunks; its length comes from the
engine's `Profile`, stretched by the memory pressure of the other engines decoding at that
moment. Timings are computed from the model, never from how fast Python runs: the loop sleeps
until the step's end in model time (wall = model / speed) and, when the process falls behind,
processes the overdue steps at once. At ``speed=inf`` it never sleeps.

The box also integrates a GPU readout: utilization pinned near 96% whenever any engine works,
power from the profiles' curves (nearly flat), and an energy counter in model time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _clock
from .._clock import NS_PER_S
from .._exceptions import ConfigError
from .metrics import EngineMetrics
from .profiles import Profile
from .tracing import end_server_span

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = [
    "BOX_MEMORY_TOTAL_BYTES",
    "IDLE_POWER_W",
    "MAX_SPEED",
    "MIN_SPEED",
    "BoxModel",
    "EngineModel",
    "EngineStats",
    "GpuReadout",
    "RequestTiming",
    "SimRequest",
    "check_speed",
    "draw_output_tokens",
]

_logger = logging.getLogger(__name__)

MIN_SPEED = 0.001
MAX_SPEED = 1_000_000.0
"""A finite speed lies in this range (or the box runs at ``inf``, as fast as it can): past it model
time overflows the clock's nanoseconds (a speed of 1e300 or 1e-300 was an internal error)."""

IDLE_POWER_W = 12.0
BUSY_UTILIZATION_PCT = 96.0
PREFILL_EXTRA_POWER_W = 2.0
EXTRA_ENGINE_POWER_W = 1.0
BUSY_SM_CLOCK_MHZ = 2405.0
IDLE_SM_CLOCK_MHZ = 1200.0
BOX_MEMORY_TOTAL_BYTES = 128 * 1024**3
# The step loop may run this far ahead of the wall clock instead of sleeping for less; it may fall
# this far behind before it drops model time rather than replaying a burst of overdue steps.
# Replaying keeps every model-time stamp exact (only delivery is late), so the window is wide
# enough to ride out a loaded machine's scheduling stalls; only a process that cannot keep up
# drops time.
_MAX_LEAD_WALL_S = 0.0005
_MAX_LAG_WALL_S = 0.25
# Without a sleep in between, the loop yields to the HTTP handlers after this much work (tokens).
_YIELD_AFTER_TOKENS = 256
# Each engine remembers the model-time stamps of this many finished requests.
_TIMINGS_KEPT = 4096


class _ScaledClock:
    """Model time read through `spark_otel._clock`, whose scale the server sets to the box's speed."""

    finite = True

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._perf0 = _clock.perf_ns()
        self._unix0 = _clock.wall_ns()

    def now_ns(self) -> int:
        return _clock.perf_ns()

    def unix_ns(self, model_ns: int) -> int:
        return self._unix0 + (model_ns - self._perf0)

    def wall_s(self, model_ns: int) -> float:
        return model_ns / NS_PER_S / self.speed

    def advance(self, model_ns: int) -> None:
        """Real time advances by itself."""


class _VirtualClock:
    """Model time at infinite speed: it is whatever the furthest engine has reached."""

    finite = False
    speed = math.inf

    def __init__(self) -> None:
        self._now = 0
        self._unix0 = _clock.wall_ns()

    def now_ns(self) -> int:
        return self._now

    def unix_ns(self, model_ns: int) -> int:
        return self._unix0 + model_ns

    def wall_s(self, model_ns: int) -> float:
        return 0.0

    def advance(self, model_ns: int) -> None:
        self._now = max(self._now, model_ns)


def draw_output_tokens(
    profile: Profile, key: str, min_tokens: int, max_tokens: int, ignore_eos: bool
) -> tuple[int, str]:
    """How many tokens a request produces and why it stops, reproducibly from ``key``.

    Pinned requests (``ignore_eos``, or ``min_tokens >= max_tokens``) produce exactly
    ``max_tokens``; others draw from a lognormal around the profile's median.
    """
    if ignore_eos or min_tokens >= max_tokens:
        return max_tokens, "length"
    seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    drawn = round(
        random.Random(seed).lognormvariate(
            math.log(profile.output_tokens_median), profile.output_tokens_sigma
        )
    )
    if drawn >= max_tokens:
        return max_tokens, "length"
    return max(drawn, min_tokens, 1), "stop"


class SimRequest:
    """One request inside an engine; the HTTP handler waits on ``event`` and reads ``produced``."""

    __slots__ = (
        "arrival_ns",
        "event",
        "finish_reason",
        "finished_ns",
        "first_token_ns",
        "id",
        "last_token_ns",
        "max_tokens",
        "prefilled",
        "produced",
        "prompt_tokens",
        "scheduled_ns",
        "stop_reason",
        "target_tokens",
        "text_offset",
        "trace_context",
    )

    def __init__(
        self, request_id: int, prompt_tokens: int, max_tokens: int, target: tuple[int, str], arrival_ns: int
    ) -> None:
        self.id = request_id
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.target_tokens, self.stop_reason = target
        self.arrival_ns = arrival_ns
        self.scheduled_ns: int | None = None
        self.first_token_ns: int | None = None
        self.last_token_ns = arrival_ns
        self.finished_ns: int | None = None
        self.prefilled = 0
        self.produced = 0
        self.finish_reason: str | None = None  # "stop" | "length" | "abort" once done
        self.text_offset = 0
        self.trace_context: Context | None = None
        """The W3C context the HTTP request carried (`tracing.incoming_context`)."""
        self.event = asyncio.Event()

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One finished request as the engine served it, stamped in model ns on the box's clock.

    These are the server's own truth: no HTTP handler or client delay is in them, so a test can
    check the timing model against them as tightly as the model itself, whatever the CPU load.
    """

    id: int
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    arrival_ns: int
    #: None when the request ended before its first token (aborted while queued or prefilling).
    first_token_ns: int | None
    last_token_ns: int
    finished_ns: int

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_ns is None else (self.first_token_ns - self.arrival_ns) / NS_PER_S

    @property
    def e2e_s(self) -> float:
        return (self.finished_ns - self.arrival_ns) / NS_PER_S

    @property
    def decode_rate(self) -> float | None:
        """Tok/s from the first token to the last (prefill excluded); None below two tokens."""
        if (
            self.first_token_ns is None
            or self.completion_tokens < 2
            or self.last_token_ns <= self.first_token_ns
        ):
            return None
        return (self.completion_tokens - 1) / ((self.last_token_ns - self.first_token_ns) / NS_PER_S)


@dataclass(frozen=True)
class EngineStats:
    """What one engine has done so far; token totals equal its /metrics counters."""

    engine: str
    profile: str
    generation_tokens: int
    prompt_tokens: int
    finished: Mapping[str, int]
    running: int
    waiting: int
    decoding: int
    model_time_s: float
    #: Model time the engine skipped because the process fell too far behind the wall clock; a
    #: measurement taken while this grows saw the engine slower than its profile.
    dropped_model_s: float


@dataclass(frozen=True)
class GpuReadout:
    """The box's GPU as nvidia-smi would read it; power and energy in model time."""

    utilization_gpu_pct: float
    power_w: float
    energy_j: float
    sm_clock_mhz: float
    memory_used_bytes: int
    memory_total_bytes: int
    unix_ns: int

    def as_dict(self) -> dict[str, float | int]:
        return {
            "utilization_gpu_pct": self.utilization_gpu_pct,
            "power_w": self.power_w,
            "energy_j": self.energy_j,
            "sm_clock_mhz": self.sm_clock_mhz,
            "memory_used_bytes": self.memory_used_bytes,
            "memory_total_bytes": self.memory_total_bytes,
            "unix_ns": self.unix_ns,
        }


class EngineModel:
    """One engine on the box: its queues, its step loop and its metrics."""

    def __init__(self, box: BoxModel, name: str, profile: Profile) -> None:
        self.box = box
        self.name = name
        self.profile = profile
        self.metrics = EngineMetrics(
            profile.model_id, self._count_running, self._count_waiting, self.kv_usage
        )
        self._waiting: deque[SimRequest] = deque()
        self._prefilling: list[SimRequest] = []
        self._decoding: list[SimRequest] = []
        self._ids = itertools.count(1)
        self._seen: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._stopped = False
        self.busy = False
        self.cursor_ns = box.clock.now_ns()
        self.generation_tokens = 0
        self.prompt_tokens = 0
        self.dropped_ns = 0
        self.finished = dict.fromkeys(("stop", "length", "abort"), 0)
        self.timings: deque[RequestTiming] = deque(maxlen=_TIMINGS_KEPT)
        self._warned_behind = False

    @property
    def n_decoding(self) -> int:
        return len(self._decoding)

    @property
    def n_prefilling(self) -> int:
        return len(self._prefilling)

    def _count_running(self) -> float:
        return float(len(self._prefilling) + len(self._decoding))

    def _count_waiting(self) -> float:
        return float(len(self._waiting))

    def kv_usage(self) -> float:
        used = sum(r.prefilled + r.produced for r in itertools.chain(self._prefilling, self._decoding))
        return min(1.0, used / self.profile.kv_cache_tokens)

    def stats(self) -> EngineStats:
        return EngineStats(
            engine=self.name,
            profile=self.profile.name,
            generation_tokens=self.generation_tokens,
            prompt_tokens=self.prompt_tokens,
            finished=dict(self.finished),
            running=len(self._prefilling) + len(self._decoding),
            waiting=len(self._waiting),
            decoding=len(self._decoding),
            model_time_s=self.cursor_ns / NS_PER_S,
            dropped_model_s=self.dropped_ns / NS_PER_S,
        )

    def submit(
        self,
        *,
        prompt_tokens: int,
        max_tokens: int,
        min_tokens: int = 0,
        ignore_eos: bool = False,
        key: str = "",
    ) -> SimRequest:
        """Queue a request (call on the box's event loop); its output length is drawn here."""
        digest = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()  # prompts can be long
        occurrence = self._seen[digest] = self._seen.get(digest, 0) + 1
        draw_key = f"{self.box.seed}\x00{self.name}\x00{digest}\x00{occurrence}"
        target = draw_output_tokens(self.profile, draw_key, min_tokens, max_tokens, ignore_eos)
        clock = self.box.clock
        now = clock.now_ns() if clock.finite else max(self.cursor_ns, clock.now_ns())
        if not self.busy:
            # An idle engine's model time resumes at this arrival; at infinite speed marking it busy
            # now also stops a busy neighbour from running ahead before this engine's loop wakes.
            self.cursor_ns = max(self.cursor_ns, now)
            self.busy = True
        req = SimRequest(next(self._ids), max(1, prompt_tokens), max_tokens, target, now)
        req.text_offset = int(digest[:8], 16) + occurrence  # the words reproduce too
        if self._stopped:  # the box is shutting down: the request ends before it starts
            self._finish(req, "abort", now)
            return req
        self._waiting.append(req)
        self._wake.set()
        return req

    def abort(self, req: SimRequest) -> None:
        """Drop a request whose client went away (or at shutdown); vLLM counts it as ``abort``."""
        if req.done:
            return
        for queue in (self._prefilling, self._decoding):
            if req in queue:
                queue.remove(req)
        if req in self._waiting:
            self._waiting.remove(req)
        now = max(self.cursor_ns, self.box.clock.now_ns()) if self.box.clock.finite else self.cursor_ns
        self._finish(req, "abort", now)
        self.box.account(now)

    def stop(self) -> None:
        for req in [*self._waiting, *self._prefilling, *self._decoding]:
            self.abort(req)
        self._stopped = True
        self._wake.set()

    async def run(self) -> None:
        """The step loop; returns after `stop`."""
        clock = self.box.clock
        work = 0
        while not self._stopped:
            if not (self._waiting or self._prefilling or self._decoding):
                self._wake.clear()
                self.busy = False
                await self._wake.wait()
                work = 0
                continue
            if not (self._prefilling or self._decoding):
                # Nothing runs and requests wait: idle to the first one's arrival, which a neighbour
                # at infinite speed may have put ahead of this engine's model time.
                self.cursor_ns = max(self.cursor_ns, self._waiting[0].arrival_ns)
            if not clock.finite:
                await self._keep_pace()
            chunks, step_s = self._plan()
            end = self.cursor_ns + max(1, round(step_s * NS_PER_S))
            if clock.finite:
                ahead_s = clock.wall_s(end - clock.now_ns())
                if ahead_s > _MAX_LEAD_WALL_S:
                    await asyncio.sleep(ahead_s)
                    work = 0
                elif ahead_s < -_MAX_LAG_WALL_S:
                    self._fell_behind(-ahead_s)
                    now = clock.now_ns()
                    self.dropped_ns += now - end
                    end = now
            if work >= _YIELD_AFTER_TOKENS:
                await asyncio.sleep(0)
                work = 0
            if self._stopped:
                break
            self.cursor_ns = end
            clock.advance(end)
            work += self._apply(chunks, end)
            self.box.account(end)

    def _fell_behind(self, lag_wall_s: float) -> None:
        # Once per engine: the first drop is what the user must hear about; the total is in stats.
        if not self._warned_behind:
            self._warned_behind = True
            _logger.warning(
                "sim engine %s fell %.3f s behind the wall clock and dropped model time: its rates now "
                "read slower than its profile (lower the speed or the load; dropped_model_s in /sim/info "
                "counts it)",
                self.name,
                lag_wall_s,
            )
        else:
            _logger.debug("sim engine %s fell %.3f s behind the wall clock", self.name, lag_wall_s)

    async def _keep_pace(self) -> None:
        """At infinite speed, never step past a busy neighbour, so contention happens at one model time."""
        others = [e for e in self.box.engines.values() if e is not self]
        # A neighbour's cursor moves on its own task; yielding is how it gets to move.
        while any(e.busy and e.cursor_ns < self.cursor_ns for e in others) and not self._stopped:  # noqa: ASYNC110
            await asyncio.sleep(0)

    def _plan(self) -> tuple[list[tuple[SimRequest, int]], float]:
        """The next step: which prefill chunks run beside the decoding streams, and how long it takes."""
        profile = self.profile
        n_decoding = len(self._decoding)
        budget = profile.max_num_batched_tokens - n_decoding
        chunks: list[tuple[SimRequest, int]] = []
        for req in self._prefilling:
            if budget <= 0:
                break
            take = min(req.prompt_tokens - req.prefilled, budget)
            chunks.append((req, take))
            budget -= take
        # A step takes no request that arrives after it starts (one that came while the engine ran
        # behind, or while a neighbour at infinite speed ran ahead): it would be served before it arrived.
        while (
            self._waiting
            and self._waiting[0].arrival_ns <= self.cursor_ns
            and budget > 0
            and len(self._prefilling) + n_decoding < profile.max_num_seqs
        ):
            req = self._waiting.popleft()
            req.scheduled_ns = self.cursor_ns
            self._prefilling.append(req)
            take = min(req.prompt_tokens, budget)
            chunks.append((req, take))
            budget -= take
        # Roofline: a step reads the weights once for every token in it (memory time) and computes
        # the prefill chunks (compute time); it takes the longer of the two, so short prompts ride
        # along with decode for free and long ones stall every stream in the step.
        prefill_s = sum(take for _, take in chunks) / profile.prefill_tokens_per_s
        memory_s = profile.decode_step_s(max(1, n_decoding), self.box.neighbour_pressure(self))
        return chunks, max(memory_s, prefill_s)

    def _apply(self, chunks: list[tuple[SimRequest, int]], end: int) -> int:
        """Make the planned step happen at model time ``end``; returns the tokens it produced."""
        metrics = self.metrics
        itl = metrics.inter_token_latency
        produced = 0
        finished: list[SimRequest] = []
        for req in self._decoding:
            req.produced += 1
            itl.observe(max(0, end - req.last_token_ns) / NS_PER_S)
            req.last_token_ns = end
            if req.produced >= req.target_tokens:
                finished.append(req)
            else:
                req.event.set()
        produced += len(self._decoding)
        prefill_tokens = 0
        for req, take in chunks:
            if req.done:
                continue
            req.prefilled += take
            prefill_tokens += take
            if req.prefilled >= req.prompt_tokens:
                self._prefilling.remove(req)
                req.produced = 1
                produced += 1
                req.first_token_ns = req.last_token_ns = end
                metrics.time_to_first_token.observe(max(0, end - req.arrival_ns) / NS_PER_S)
                if req.target_tokens <= 1:
                    finished.append(req)
                else:
                    self._decoding.append(req)
                    req.event.set()
        for req in finished:
            if req in self._decoding:
                self._decoding.remove(req)
            self._finish(req, req.stop_reason, end)
        if prefill_tokens:
            self.prompt_tokens += prefill_tokens
            metrics.prompt_tokens.inc(prefill_tokens)
        if produced:
            self.generation_tokens += produced
            metrics.generation_tokens.inc(produced)
        return produced + len(chunks)

    def _finish(self, req: SimRequest, reason: str, now: int) -> None:
        req.finish_reason = reason
        req.finished_ns = now
        self.finished[reason] += 1
        metrics = self.metrics
        metrics.request_success[reason].inc()
        metrics.e2e_request_latency.observe(max(0, now - req.arrival_ns) / NS_PER_S)
        metrics.request_prompt_tokens.observe(req.prompt_tokens)
        metrics.request_generation_tokens.observe(req.produced)
        metrics.observe_phases(req.arrival_ns, req.scheduled_ns, req.first_token_ns, req.last_token_ns, now)
        timing = RequestTiming(
            req.id, req.prompt_tokens, req.produced, reason, req.arrival_ns, req.first_token_ns,
            req.last_token_ns, now,
        )  # fmt: skip
        self.timings.append(timing)
        end_server_span(self.box.tracer, self.box.clock.unix_ns, self.name, req)
        req.event.set()


def check_speed(speed: float, *, what: str = "speed") -> float:
    """``speed`` when it is ``inf`` or from `MIN_SPEED` to `MAX_SPEED`; `ConfigError` naming ``what``."""
    if (
        isinstance(speed, bool)
        or not isinstance(speed, int | float)
        or not (speed == math.inf or MIN_SPEED <= speed <= MAX_SPEED)
    ):
        raise ConfigError(f"{what} must be inf or from {MIN_SPEED:g} to {MAX_SPEED:,.0f}, got {speed!r}")
    return float(speed)


class BoxModel:
    """Engines sharing one simulated GPU; create and run it on one event loop."""

    def __init__(
        self,
        engines: Mapping[str, Profile],
        speed: float,
        seed: int = 0,
        contention: float = 1.0,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        check_speed(speed)
        if contention < 0:
            raise ValueError(f"contention must not be negative, got {contention!r}")
        self.speed = float(speed)
        self.seed = seed
        self.contention = float(contention)
        self.clock: _ScaledClock | _VirtualClock = (
            _ScaledClock(self.speed) if math.isfinite(self.speed) else _VirtualClock()
        )
        self.tracer: Tracer | None = (
            tracer_provider.get_tracer("spark_otel.sim") if tracer_provider is not None else None
        )
        """Ends vLLM's ``llm_request`` server span per finished request (`tracing`); None: no tracing."""
        self.engines = {name: EngineModel(self, name, profile) for name, profile in engines.items()}
        self._energy_j = 0.0
        self._energy_ns = self.clock.now_ns()
        self._power_w = IDLE_POWER_W
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(e.run(), name=f"sim-{e.name}") for e in self.engines.values()]

    async def stop(self) -> None:
        for engine in self.engines.values():
            engine.stop()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def neighbour_pressure(self, engine: EngineModel) -> float:
        """The memory pressure every other engine's decoding puts on ``engine`` right now."""
        total = 0.0
        for other in self.engines.values():
            if other is not engine:
                total += other.profile.memory_pressure(other.n_decoding)
        return total * self.contention

    def predicted_rate(
        self, engine: str, n_streams: int, neighbours: Mapping[str, int] | None = None
    ) -> float:
        """Ground truth: per-stream decode tok/s on ``engine`` with ``neighbours`` decoding elsewhere."""
        pressure = sum(
            self.engines[name].profile.memory_pressure(n) for name, n in (neighbours or {}).items()
        )
        return self.engines[engine].profile.per_stream_rate(n_streams, pressure * self.contention)

    def _power_now(self) -> tuple[float, bool]:
        busy = [e for e in self.engines.values() if e.n_decoding or e.n_prefilling]
        if not busy:
            return IDLE_POWER_W, False
        power = max(e.profile.power_w(e.n_decoding) for e in busy)
        power += EXTRA_ENGINE_POWER_W * (len(busy) - 1)
        if any(e.n_prefilling for e in busy):
            power += PREFILL_EXTRA_POWER_W
        return power, True

    def account(self, now_ns: int) -> None:
        """Integrate energy up to ``now_ns`` at the power held since, then take the new power."""
        if now_ns > self._energy_ns:
            self._energy_j += self._power_w * (now_ns - self._energy_ns) / NS_PER_S
            self._energy_ns = now_ns
        self._power_w, _ = self._power_now()

    def gpu(self) -> GpuReadout:
        """The readout now; reads state without changing it, so any thread may call it."""
        now = max(self.clock.now_ns(), self._energy_ns)
        power, busy = self._power_now()
        energy = self._energy_j + self._power_w * (now - self._energy_ns) / NS_PER_S
        wobble = 0.4 * math.sin(now / 7e9)
        return GpuReadout(
            utilization_gpu_pct=round(BUSY_UTILIZATION_PCT + wobble, 1) if busy else 0.0,
            power_w=round(power, 2),
            energy_j=energy,
            sm_clock_mhz=BUSY_SM_CLOCK_MHZ if busy else IDLE_SM_CLOCK_MHZ,
            memory_used_bytes=sum(e.profile.memory_bytes for e in self.engines.values()),
            memory_total_bytes=BOX_MEMORY_TOTAL_BYTES,
            unix_ns=self.clock.unix_ns(now),
        )
