"""The concurrency probe (the article's Appendix A): what N concurrent streams buy on one engine.

Each level fires N identical ``/v1/completions`` with ``min_tokens = max_tokens`` and
``ignore_eos``, so every stream produces exactly the pinned count (checked against ``usage``).
The engine's generation counter is read at quiescent points, before the level's streams start
and after they have all finished and the engine's running count has settled, so the engine
aggregate covers the same work as the probe aggregate; their ratio above 1 means another tenant
decoded at the same time.

    report = run_probe("http://127.0.0.1:8011", ProbeSettings(streams=[1, 8], engine="qwen"), store=store)

The engine label (``engine``) must be the one the eval's cells carry, or analyses read the probe
as another engine's load; without one it is ``/sim/info``'s name, else the URL's host:port.
Mean power covers the streams only: it is read again as soon as the last stream ends, before the
wait for the engine to settle.

Timing loops only time: a stream's loop stamps the first byte, counts ``data:`` events and keeps
the last few raw chunks; the usage chunk is parsed once, after the stream ends. The client's own
CPU time per token is measured per level and flagged past budget, because a probe that cannot
keep up would report its own lag as the engine's. All times read in model time: an engine that
answers ``GET /sim/info`` with a finite ``speed`` sets the clock's time scale.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
from opentelemetry import context as otel_context

from . import _clock
from . import _semconv as sc
from ._exceptions import ConfigError, EngineError, InputError
from ._guard import guard
from ._version import __version__
from .analysis.stats import summarize
from .model import AttributeValue, LoadWindow
from .probe_results import (
    CLIENT_CPU_BUDGET_CORE_FRACTION,
    CLIENT_CPU_BUDGET_STEP_FRACTION,
    ProbeLevel,
    ProbeMetadata,
    ProbeReport,
    ProbeSettings,
    curve_of,
)
from .receivers.gpu import GpuSource
from .receivers.prometheus import EngineSnapshot, ascrape_engine, counter_delta, engine_base_url
from .store import Store
from .telemetry import current_telemetry

__all__ = [
    "LevelMeasurement",
    "ProbeIncomplete",
    "ProbeSettings",
    "arun_probe",
    "default_engine_label",
    "level_warnings",
    "mean_power",
    "probe_prompt",
    "run_probe",
    "summarize_level",
]

_logger = logging.getLogger(__name__)
_NS_PER_S = 1_000_000_000
_TAIL_CHUNKS = 8
# How long (real seconds) to wait after a level for the engine's running count to settle.
_SETTLE_WALL_S = 5.0
_SETTLE_POLL_S = 0.02
# How long (real seconds) past the per-request ceiling a level waits for its last streams.
_LEVEL_GRACE_WALL_S = 10.0

LevelCallback = Callable[[ProbeLevel], None]


class ProbeIncomplete(EngineError):
    """The probe stopped partway; ``report`` holds the levels measured before it (already stored)."""

    def __init__(self, message: str, report: ProbeReport) -> None:
        super().__init__(message)
        self.report = report


def default_engine_label(url: str) -> str:
    """An engine that names itself nowhere is labelled by its address, never by its model id:
    the eval's cells name the engine, and a model id would read as another engine."""
    return urlsplit(url).netloc or url


def probe_prompt(chars: int) -> str:
    """A fixed, plain prompt of exactly ``chars`` characters (no chat template, so no thinking)."""
    seed = "Write a long, detailed essay on the history of measurement and the instruments people built. "
    return (seed * (chars // len(seed) + 1))[:chars]


@dataclass(slots=True)
class _Stream:
    """What one stream's timing loop saw; parsed after the loop, never inside it."""

    start_ns: int
    end_ns: int = 0
    first_ns: int = 0
    events: int = 0
    completion_tokens: int | None = None
    error: str | None = None


def _usage_from_tail(tail: bytes) -> dict[str, Any] | None:
    """The ``usage`` object of the last SSE event that carries one (the final usage chunk)."""
    for event in reversed(tail.split(b"data:")):
        payload = event.strip()
        if not payload or payload == b"[DONE]" or b'"usage"' not in payload:
            continue
        try:
            usage = json.loads(payload).get("usage")
        except ValueError:
            return None  # the usage chunk was cut in the kept tail
        if isinstance(usage, dict):
            return usage
    return None


async def _stream_once(client: httpx2.AsyncClient, body: bytes) -> _Stream:
    perf = time.perf_counter_ns
    st = _Stream(start_ns=perf())
    tail: deque[bytes] = deque(maxlen=_TAIL_CHUNKS)
    try:
        async with client.stream("POST", "/v1/completions", content=body) as response:
            if response.status_code != 200:
                text = (await response.aread())[:200].decode("utf-8", "replace")
                st.error = f"HTTP {response.status_code}: {text}"
                return st
            async for chunk in response.aiter_raw():
                if not st.first_ns:
                    st.first_ns = perf()
                st.events += chunk.count(b"data:")
                tail.append(chunk)
        st.end_ns = perf()
    except Exception as exc:
        st.error = f"{type(exc).__name__}: {exc}"
        return st
    usage = _usage_from_tail(b"".join(tail))
    if usage is None:
        st.error = "no usage chunk at the end of the stream (is stream_options.include_usage supported?)"
    else:
        st.completion_tokens = int(usage.get("completion_tokens") or 0)
    return st


async def _plain_once(client: httpx2.AsyncClient, body: bytes) -> _Stream:
    perf = time.perf_counter_ns
    st = _Stream(start_ns=perf())
    try:
        response = await client.post("/v1/completions", content=body)
        st.end_ns = st.first_ns = perf()
        if response.status_code != 200:
            st.error = f"HTTP {response.status_code}: {response.text[:200]}"
            return st
        usage = response.json().get("usage") or {}
        st.completion_tokens = int(usage.get("completion_tokens") or 0)
    except Exception as exc:
        st.error = f"{type(exc).__name__}: {exc}"
    return st


def _request_body(settings: ProbeSettings, model: str, tokens: int) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "prompt": probe_prompt(settings.prompt_chars),
        "max_tokens": tokens,
        "min_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": settings.mode == "stream",
    }
    if settings.mode == "stream":
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


@dataclass(slots=True)
class LevelMeasurement:
    """Everything one level's timing loop and quiescent reads collected (perf times in real ns)."""

    streams: int
    repeat: int
    tokens: int
    streaming: bool
    results: list[_Stream]
    before: EngineSnapshot | None
    after: EngineSnapshot | None
    quiescent: bool
    start_unix_ns: int
    end_unix_ns: int
    cpu_s: float
    power_w: float | None = None


def summarize_level(m: LevelMeasurement) -> ProbeLevel:
    """A level's figures from its raw measurement (pure): rates in model time, counter deltas."""
    ok = [r for r in m.results if r.error is None and r.completion_tokens is not None]
    errors = [r.error for r in m.results if r.error is not None]
    errors.extend(["timed out"] * (m.streams - len(m.results)))
    mismatched = [r.completion_tokens or 0 for r in ok if r.completion_tokens != m.tokens]
    probe_tokens = sum(r.completion_tokens or 0 for r in ok)
    rates = sorted(
        (r.completion_tokens or 0) / (_clock.to_model_ns(r.end_ns - r.start_ns) / _NS_PER_S)
        for r in ok
        if r.end_ns > r.start_ns
    )
    wall_s = real_wall_s = 0.0
    if ok:
        real_wall_s = (max(r.end_ns for r in ok) - min(r.start_ns for r in m.results)) / _NS_PER_S
        wall_s = _clock.to_model_s(real_wall_s)
    ttfts = [
        _clock.to_model_ns(r.first_ns - r.start_ns) / _NS_PER_S for r in ok if r.first_ns and m.streaming
    ]
    engine_tokens = None
    if m.before is not None and m.after is not None:
        delta = counter_delta(m.before, m.after)
        engine_tokens = None if delta.reset else delta.generation_tokens
    probe_rate = probe_tokens / wall_s if wall_s > 0 else None
    engine_rate = engine_tokens / wall_s if engine_tokens is not None and wall_s > 0 else None
    cpu_us = m.cpu_s * 1e6 / probe_tokens if probe_tokens else None
    rate_stats = summarize(rates)
    median = rate_stats.median
    core = m.cpu_s / real_wall_s if real_wall_s > 0 else None
    # One inter-token interval in real seconds is 1 / (model rate x time scale).
    step = cpu_us * 1e-6 * m.streams * median * _clock.time_scale() if cpu_us and median else None
    over = (core is not None and core > CLIENT_CPU_BUDGET_CORE_FRACTION) or (
        step is not None and step > CLIENT_CPU_BUDGET_STEP_FRACTION
    )
    return ProbeLevel(
        streams=m.streams,
        repeat=m.repeat,
        start_unix_ns=m.start_unix_ns,
        end_unix_ns=m.end_unix_ns,
        wall_s=wall_s,
        tokens_expected=m.tokens,
        probe_tokens=probe_tokens,
        token_mismatches=len(mismatched),
        sse_events=sum(r.events for r in ok) if m.streaming else None,
        mismatched_counts=mismatched,
        errors=len(errors),
        error_messages=sorted({e for e in errors if e})[:5],
        stream_rates=rates,
        per_stream_median=median,
        per_stream_p10=rate_stats.p10,
        per_stream_p90=rate_stats.p90,
        probe_aggregate_rate=probe_rate,
        engine_generation_tokens=engine_tokens,
        engine_aggregate_rate=engine_rate,
        engine_probe_ratio=engine_rate / probe_rate if engine_rate is not None and probe_rate else None,
        requests_running_before=m.before.requests_running if m.before else None,
        requests_running_after=m.after.requests_running if m.after else None,
        quiescent=m.quiescent,
        ttft_s_median=summarize(ttfts).median,
        power_w=m.power_w,
        client_cpu_s=m.cpu_s,
        client_cpu_us_per_token=cpu_us,
        client_cpu_core_fraction=core,
        client_cpu_step_fraction=step,
        client_cpu_over_budget=over,
    )


def level_warnings(level: ProbeLevel) -> list[str]:
    """What a reader must know before trusting a level's figures."""
    out: list[str] = []
    n = level.streams
    if level.client_cpu_over_budget:
        out.append(
            f"level {n}: the client is past its CPU budget "
            f"({level.client_cpu_us_per_token or 0:.1f} us/token, "
            f"{level.client_cpu_core_fraction or 0:.0%} of a core, {level.client_cpu_step_fraction or 0:.0%} "
            f"of a decode step; budget {CLIENT_CPU_BUDGET_CORE_FRACTION:.0%} and "
            f"{CLIENT_CPU_BUDGET_STEP_FRACTION:.0%}): its own lag may read as the engine's"
        )
    if level.token_mismatches:
        out.append(
            f"level {n}: {level.token_mismatches} streams did not produce exactly "
            f"{level.tokens_expected} tokens (got {sorted(set(level.mismatched_counts))})"
        )
    if level.errors:
        first = level.error_messages[0] if level.error_messages else "unknown error"
        out.append(f"level {n}: {level.errors} of {n} streams failed: {first}")
    if not level.quiescent:
        out.append(
            f"level {n}: the engine's running count did not settle; the engine aggregate is approximate"
        )
    return out


GpuPoint = tuple[int, float | None, float | None]  # (unix ns in model time, power W, energy J)


class _PowerMeter:
    """Mean GPU power over a window: energy-counter delta where there is one, else mean samples.

    Readings of every GPU the source sees are summed: the probe reports the box's draw. A real
    GPU's energy counter runs in real time while reading timestamps are model time; the
    simulated box integrates its energy in model time.
    """

    def __init__(self, source: GpuSource) -> None:
        self._source = source
        self.source = source.kind
        self.real_time = source.kind != "sim"

    @property
    def sample_interval_wall_s(self) -> float:
        """3 s between samples, as the article sampled nvidia-smi: real seconds for a real GPU."""
        return 3.0 if self.real_time else max(0.05, _clock.to_wall_s(3.0))

    async def reading(self) -> GpuPoint | None:
        try:
            readings = await asyncio.to_thread(self._source.read)
        except Exception:
            _logger.debug("probe: GPU reading from %s failed", self.source, exc_info=True)
            return None
        if not readings:
            return None
        powers = [r.power_w for r in readings]
        energies = [r.energy_j for r in readings]
        return (
            max(r.unix_ns for r in readings),
            sum(p for p in powers if p is not None) if all(p is not None for p in powers) else None,
            sum(e for e in energies if e is not None) if all(e is not None for e in energies) else None,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._source.close()


def _power_meter(requested: str, engine_url: str, sim_info: dict[str, Any] | None) -> _PowerMeter | None:
    """The requested power source; ``auto`` reads the simulated box's GPU, else NVML or nvidia-smi,
    and leaves power out when the source it picked does not answer."""
    if requested == "none":
        return None
    from ._exceptions import NoGpuError
    from .receivers.gpu import open_gpu_source

    mode = "sim" if requested == "auto" and sim_info is not None else requested
    try:
        return _PowerMeter(open_gpu_source(mode, sim_url=engine_url))  # type: ignore[arg-type]
    except (NoGpuError, EngineError) as exc:
        if requested == "auto":
            _logger.info("probe: no GPU power source (%s); power is left out", exc)
            return None
        raise


def mean_power(
    before: GpuPoint | None, after: GpuPoint | None, samples: list[float], *, real_time: bool
) -> float | None:
    """Mean power over a window (pure): the energy-counter delta where both ends have one, else
    the mean of the power readings. ``real_time``: the energy counter runs in real time (a real
    GPU) while timestamps are model time; the simulated box keeps energy in model time."""
    if before is None or after is None:
        return None
    (t0, p0, e0), (t1, p1, e1) = before, after
    seconds = (t1 - t0) / _NS_PER_S
    if real_time:
        seconds /= _clock.time_scale()
    if e0 is not None and e1 is not None and seconds > 0 and e1 >= e0:
        return (e1 - e0) / seconds
    points = [p for p in (p0, *samples, p1) if p is not None]
    return sum(points) / len(points) if points else None


async def _sample_power(meter: _PowerMeter, out: list[float], stop: asyncio.Event) -> None:
    interval_wall = meter.sample_interval_wall_s
    while not stop.is_set():
        reading = await meter.reading()
        if reading is not None and reading[1] is not None:
            out.append(reading[1])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_wall)


class _Prober:
    """One probe run against one engine; holds the clients and what discovery found."""

    def __init__(self, engine_url: str, settings: ProbeSettings, store: Store | None) -> None:
        self.url = engine_base_url(engine_url)
        self.settings = settings
        self.store = store
        self.run_id = uuid.uuid4().hex[:12]
        self.model = settings.model or ""
        self.engine = settings.engine or ""
        self.sim_info: dict[str, Any] | None = None
        self.time_scale = 1.0
        self.warnings: list[str] = []
        self.control = httpx2.AsyncClient(base_url=self.url, timeout=10.0, trust_env=False)

    async def discover(self) -> None:
        """Check the engine answers, find its model and (for the simulated box) its speed."""
        try:
            info = await self.control.get("/sim/info")
            if info.status_code == 200:
                self.sim_info = info.json()
        except httpx2.HTTPError as exc:
            raise EngineError(f"{self.url}: cannot reach the engine: {type(exc).__name__}: {exc}") from exc
        except ValueError:
            self.sim_info = None
        scale = self.settings.time_scale
        if scale is None and self.sim_info is not None:
            speed = self.sim_info.get("speed")
            if isinstance(speed, int | float) and math.isfinite(speed) and speed > 0:
                scale = float(speed)
        if scale is not None and scale != _clock.time_scale():
            # Line our model clock up with the box's, so load windows meet its other clients' cells.
            anchor = self.sim_info.get("unix_ns") if self.sim_info is not None else None
            _clock.set_time_scale(scale, model_unix_ns=anchor if isinstance(anchor, int) else None)
        self.time_scale = _clock.time_scale()
        if not self.model:
            try:
                response = await self.control.get("/v1/models")
                models = [m["id"] for m in response.json()["data"]]
            except (httpx2.HTTPError, ValueError, KeyError, TypeError) as exc:
                raise EngineError(
                    f"{self.url}/v1/models: cannot list the engine's models ({exc}); pass --model"
                ) from exc
            if not models:
                raise EngineError(f"{self.url}/v1/models lists no model; pass --model")
            self.model = models[0]
        if not self.engine:
            self.engine = str((self.sim_info or {}).get("engine") or default_engine_label(self.url))

    def check_label(self) -> None:
        """Warn when no recorded cell names this engine: analyses would read the probe as load
        on another engine (a cross-engine neighbour) instead of the same one."""
        if self.store is None:
            return
        with guard("probe engine-label check"):
            if self.store.cells(engine=self.engine, limit=1):
                return
            engines = sorted({c.engine for c in self.store.cells(limit=1000, newest_first=True) if c.engine})
            if engines:
                self._warn_once(
                    f"engine label {self.engine!r} matches no engine of the recorded cells "
                    f"({', '.join(engines)}); neighbour-cost and advise will read this probe as "
                    f"another engine's load. Name it as the cells do: --engine NAME=URL or --engine-name"
                )

    async def scrape(self) -> EngineSnapshot | None:
        try:
            return await ascrape_engine(self.url, client=self.control)
        except EngineError as exc:
            self._warn_once(f"engine counters unavailable: {exc}")
            return None

    async def settle(self, running_before: float | None) -> tuple[EngineSnapshot | None, bool]:
        """Scrape until the engine runs no more requests than before the level (or give up)."""
        limit = time.monotonic() + _SETTLE_WALL_S
        while True:
            snap = await self.scrape()
            if snap is None or snap.requests_running is None or running_before is None:
                return snap, snap is not None
            if snap.requests_running <= running_before:
                return snap, True
            if time.monotonic() > limit:
                return snap, False
            await asyncio.sleep(_SETTLE_POLL_S)

    def _warn_once(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            _logger.warning("probe: %s", message)

    async def warm_up(self, client: httpx2.AsyncClient) -> None:
        body = _request_body(self.settings, self.model, min(self.settings.tokens, 16))
        once = _stream_once if self.settings.mode == "stream" else _plain_once
        result = await once(client, body)
        if result.error:
            raise EngineError(f"{self.url}/v1/completions: warm-up request failed: {result.error}")

    async def level(
        self, client: httpx2.AsyncClient, streams: int, repeat: int, meter: _PowerMeter | None
    ) -> ProbeLevel:
        tokens = self.settings.tokens
        body = _request_body(self.settings, self.model, tokens)
        once = _stream_once if self.settings.mode == "stream" else _plain_once
        before = await self.scrape()
        power_before = await meter.reading() if meter else None
        samples: list[float] = []
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample_power(meter, samples, stop)) if meter else None
        start_unix_ns = _clock.wall_ns()
        cpu0 = time.thread_time()
        ceiling = _clock.to_wall_s(self.settings.request_timeout_s)
        tasks = [asyncio.create_task(once(client, body)) for _ in range(streams)]
        done, pending = await asyncio.wait(tasks, timeout=ceiling + _LEVEL_GRACE_WALL_S)
        cpu_s = time.thread_time() - cpu0
        end_unix_ns = _clock.wall_ns()
        # Power over the streams' own window: read before the settle wait, which is idle time.
        power_after = await meter.reading() if meter else None
        stop.set()
        if pending:  # streams that finished are kept; the rest count as timed out
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            self._warn_once(
                f"level {streams}: {len(pending)} of {streams} streams did not finish within "
                f"{self.settings.request_timeout_s} s"
            )
        results = [task.result() for task in tasks if task in done]
        if sampler is not None:
            await sampler
        after, quiescent = await self.settle(before.requests_running if before else None)
        level = summarize_level(
            LevelMeasurement(
                streams=streams,
                repeat=repeat,
                tokens=tokens,
                streaming=self.settings.mode == "stream",
                results=results,
                before=before,
                after=after,
                quiescent=quiescent,
                start_unix_ns=start_unix_ns,
                end_unix_ns=end_unix_ns,
                cpu_s=cpu_s,
                power_w=mean_power(power_before, power_after, samples, real_time=meter.real_time)
                if meter
                else None,
            )
        )
        for message in level_warnings(level):
            self._warn_once(message)
        return level

    def record(self, level: ProbeLevel) -> None:
        """Keep the level as a load window at once, so a later failure loses nothing recorded.

        Into ``store`` directly; and as a load-window span when the active telemetry exports
        over OTLP, so a collector (and a report built from its file export) sees the level too.
        """
        attributes: dict[str, AttributeValue] = {
            sc.PROBE_RUN: self.settings.name or self.run_id,
            sc.PROBE_REPEAT: level.repeat,
            sc.PROBE_TOKENS: level.tokens_expected,
            sc.PROBE_MODE: self.settings.mode,
        }
        name = f"probe {level.streams} streams"
        telemetry = current_telemetry()
        if telemetry is not None and telemetry.otlp:
            with guard("probe load-window span"):
                tracer = telemetry.tracer_provider.get_tracer(
                    sc.SCOPE_NAME, __version__, schema_url=sc.SCHEMA_URL
                )
                span = tracer.start_span(
                    name,
                    start_time=level.start_unix_ns,
                    attributes={
                        sc.SPAN_KIND_ATTR: sc.SPAN_KIND_LOAD_WINDOW,
                        sc.LOAD_WINDOW_NAME: name,
                        sc.LOAD_WINDOW_KIND: "probe",
                        sc.LOAD_WINDOW_STREAMS: level.streams,
                        sc.ENGINE: self.engine,
                        **attributes,
                    },
                )
                span.end(end_time=level.end_unix_ns)
        if self.store is None or (telemetry is not None and telemetry.otlp and telemetry.store is self.store):
            return  # (the span reaches this store through the telemetry's own exporter)
        window = LoadWindow(
            uid=f"probe-{self.run_id}-{level.streams}-{level.repeat}",
            name=name,
            kind="probe",
            engine=self.engine,
            start_unix_ns=level.start_unix_ns,
            end_unix_ns=level.end_unix_ns,
            streams=level.streams,
            attributes=attributes,
        )
        self.store.write_windows([window])


def _validate(settings: ProbeSettings) -> None:
    if not settings.streams:
        raise ConfigError("--streams: give at least one concurrency level, e.g. 1,2,4,8")
    bad = [s for s in settings.streams if s < 1]
    if bad:
        raise ConfigError(f"--streams: levels must be positive integers, got {bad[0]}")


async def arun_probe(
    engine_url: str,
    settings: ProbeSettings | None = None,
    *,
    store: Store | None = None,
    on_level: LevelCallback | None = None,
) -> ProbeReport:
    """Run the probe; see `run_probe`."""
    settings = settings or ProbeSettings()
    _validate(settings)
    prober = _Prober(engine_url, settings, store)
    meter: _PowerMeter | None = None
    levels: list[ProbeLevel] = []
    previous_scale = _clock.time_scale()
    # Instrumentations honour this key: the probe must not trace (and pay for) its own requests.
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        await prober.discover()
        prober.check_label()
        meter = _power_meter(settings.gpu, prober.url, prober.sim_info)
        top = max(settings.streams)
        limits = httpx2.Limits(max_connections=top, max_keepalive_connections=top, keepalive_expiry=60.0)
        timeout = httpx2.Timeout(_clock.to_wall_s(settings.request_timeout_s), connect=10.0)
        headers = {"content-type": "application/json", "accept-encoding": "identity"}
        async with httpx2.AsyncClient(
            base_url=prober.url, limits=limits, timeout=timeout, headers=headers, trust_env=False
        ) as client:
            if settings.warmup:
                await prober.warm_up(client)
            for streams in settings.streams:
                for repeat in range(settings.repeats):
                    level = await prober.level(client, streams, repeat, meter)
                    if level.errors == streams:
                        raise EngineError(
                            f"{prober.url}/v1/completions: every stream at level {streams} failed: "
                            f"{level.error_messages[0] if level.error_messages else 'unknown error'}"
                        )
                    prober.record(level)
                    levels.append(level)
                    if on_level is not None:
                        on_level(level)
    except BaseException as exc:
        # What was measured before the failure stays: its windows are stored; add the report.
        partial = _partial_report(prober, meter, levels, exc)
        if partial is not None and isinstance(exc, EngineError):
            raise ProbeIncomplete(str(exc), partial) from exc
        raise
    finally:
        # The scale holds for this run only; figures already read in model time.
        if _clock.time_scale() != previous_scale:
            _clock.set_time_scale(previous_scale)
        otel_context.detach(token)
        await prober.control.aclose()
        if meter is not None:
            meter.close()
    report = _report(prober, meter, levels)
    _store_report(prober, report)
    return report


def _report(prober: _Prober, meter: _PowerMeter | None, levels: list[ProbeLevel]) -> ProbeReport:
    try:
        curve = curve_of(prober.engine, levels)
    except InputError as exc:
        raise EngineError(f"{prober.url}: {exc}") from exc
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=_clock.wall_ns(),
            engine_url=prober.url,
            engine=prober.engine,
            model=prober.model,
            time_scale=prober.time_scale,
            gpu_source=meter.source if meter else None,
        ),
        settings=prober.settings,
        levels=levels,
        curve=curve,
        warnings=prober.warnings,
    )


def _store_report(prober: _Prober, report: ProbeReport) -> None:
    if prober.store is not None:
        name = prober.settings.name or f"probe {prober.engine} {prober.run_id}"
        prober.store.put_document("probe", name, report.model_dump(mode="json"))


def _partial_report(
    prober: _Prober, meter: _PowerMeter | None, levels: list[ProbeLevel], exc: BaseException
) -> ProbeReport | None:
    """The report of the levels measured before ``exc``, stored; None when there is none."""
    if not levels:
        return None
    reason = str(exc) or type(exc).__name__
    prober._warn_once(
        f"the probe stopped before finishing ({reason}); this report holds only the "
        f"{len(levels)} level(s) measured before that"
    )
    try:
        report = _report(prober, meter, levels)
        _store_report(prober, report)
    except EngineError as no_curve:
        _logger.warning("probe: no partial report: %s", no_curve)
        return None
    except Exception:
        _logger.warning("probe: could not keep the partial report", exc_info=True)
        return None
    return report


def run_probe(
    engine_url: str,
    settings: ProbeSettings | None = None,
    *,
    store: Store | None = None,
    on_level: LevelCallback | None = None,
) -> ProbeReport:
    """Measure ``engine_url``'s concurrency curve; record each level and the report in ``store``.

    Raises `EngineError` when the engine is unreachable, every stream of a level fails or no
    level measured a rate, and `ConfigError` for impossible settings. A run that stops partway
    raises `ProbeIncomplete`, whose ``report`` holds the levels measured before it; those
    levels and that report are in the store by then.
    """
    return asyncio.run(arun_probe(engine_url, settings, store=store, on_level=on_level))
