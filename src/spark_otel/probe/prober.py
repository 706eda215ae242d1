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
import logging
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx2
from opentelemetry import context as otel_context

from .. import _clock
from .. import _semconv as sc
from .._clock import NS_PER_S
from .._exceptions import ConfigError, EngineError, InputError
from .._guard import guard
from .._urls import engine_base_url
from .._version import __version__
from ..analysis.probe_levels import LevelMeasurement, curve_of, level_warnings, mean_power, summarize_level
from ..model import AttributeValue, LoadWindow
from ..receivers.prometheus import EngineSnapshot, ascrape_engine, counter_delta
from ..records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings
from ..sim.clock import READINGS, BoxClock, box_clock, closest, model_time
from ..store import Store
from ..telemetry import current_telemetry
from .power import PowerMeter, power_meter, sample_power
from .streams import plain_once, request_body, stream_once

__all__ = ["ProbeIncomplete", "arun_probe", "default_engine_label", "run_probe"]

_logger = logging.getLogger(__name__)
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

    async def discover(self, held: contextlib.ExitStack) -> None:
        """Check the engine answers, find its model and (for the simulated box) its speed; hold
        the model clock at that speed in ``held``, lined up with the box's own."""
        box: BoxClock | None = None
        try:
            readings: list[BoxClock] = []
            for _ in range(READINGS):  # the shortest round trip, as read_box_clock keeps
                sent = _clock.real_monotonic_ns()
                info = await self.control.get("/sim/info")
                received = _clock.real_monotonic_ns()
                if info.status_code != 200:
                    break
                body = info.json()
                if not isinstance(body, dict):  # JSON, but no simulated box's answer: a plain engine
                    break
                self.sim_info = body
                reading = box_clock(body, sent_real_ns=sent, received_real_ns=received)
                if reading is None:
                    break
                readings.append(reading)
            box = closest(readings) if readings else None
        except httpx2.HTTPError as exc:
            raise EngineError(f"{self.url}: cannot reach the engine: {type(exc).__name__}: {exc}") from exc
        except ValueError:
            self.sim_info = None
        scale = self.settings.time_scale
        if scale is None and box is not None:
            scale = box.speed
        if scale is not None:
            # Line our model clock up with the box's, so load windows meet its other clients' cells.
            epoch = box.epoch_now() if box is not None and box.speed == scale else None
            held.enter_context(model_time(scale, epoch_unix_ns=epoch))
        self.time_scale = _clock.rate()
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
        limit = _clock.real_monotonic_ns() + int(_SETTLE_WALL_S * NS_PER_S)
        while True:
            snap = await self.scrape()
            if snap is None or snap.requests_running is None or running_before is None:
                return snap, snap is not None
            if snap.requests_running <= running_before:
                return snap, True
            if _clock.real_monotonic_ns() > limit:
                return snap, False
            await asyncio.sleep(_SETTLE_POLL_S)

    def _warn_once(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            _logger.warning("probe: %s", message)

    async def warm_up(self, client: httpx2.AsyncClient) -> None:
        body = request_body(self.settings, self.model, min(self.settings.tokens, 16))
        once = stream_once if self.settings.mode == "stream" else plain_once
        result = await once(client, body)
        if result.error:
            raise EngineError(f"{self.url}/v1/completions: warm-up request failed: {result.error}")

    async def level(
        self, client: httpx2.AsyncClient, streams: int, repeat: int, meter: PowerMeter | None
    ) -> ProbeLevel:
        tokens = self.settings.tokens
        body = request_body(self.settings, self.model, tokens)
        once = stream_once if self.settings.mode == "stream" else plain_once
        before = await self.scrape()
        power_before = await meter.reading() if meter else None
        samples: list[float] = []
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_power(meter, samples, stop)) if meter else None
        start_unix_ns = _clock.wall_ns()
        cpu0 = _clock.thread_cpu_s()
        ceiling = _clock.to_real_s(self.settings.request_timeout_s)
        tasks = [asyncio.create_task(once(client, body)) for _ in range(streams)]
        done, pending = await asyncio.wait(tasks, timeout=ceiling + _LEVEL_GRACE_WALL_S)
        cpu_s = _clock.thread_cpu_s() - cpu0
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
                engine_generation_tokens=_engine_tokens(before, after),
                requests_running_before=before.requests_running if before else None,
                requests_running_after=after.requests_running if after else None,
                quiescent=quiescent,
                start_unix_ns=start_unix_ns,
                end_unix_ns=end_unix_ns,
                cpu_s=cpu_s,
                time_scale=_clock.rate(),
                power_w=mean_power(
                    power_before,
                    power_after,
                    samples,
                    real_time=meter.real_time,
                    time_scale=_clock.rate(),
                )
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


def _engine_tokens(before: EngineSnapshot | None, after: EngineSnapshot | None) -> float | None:
    """The engine's generation tokens between two quiescent reads; None across a counter reset."""
    if before is None or after is None:
        return None
    delta = counter_delta(before, after)
    return None if delta.reset else delta.generation_tokens


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
    meter: PowerMeter | None = None
    levels: list[ProbeLevel] = []
    # The model clock holds for this run only: every figure is read in model time inside it.
    held = contextlib.ExitStack()
    # Instrumentations honour this key: the probe must not trace (and pay for) its own requests.
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        await prober.discover(held)
        prober.check_label()
        meter = power_meter(settings.gpu, prober.url, prober.sim_info)
        top = max(settings.streams)
        limits = httpx2.Limits(max_connections=top, max_keepalive_connections=top, keepalive_expiry=60.0)
        timeout = httpx2.Timeout(_clock.to_real_s(settings.request_timeout_s), connect=10.0)
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
        report = _report(prober, meter, levels)
        _store_report(prober, report)
        return report
    except BaseException as exc:
        # What was measured before the failure stays: its windows are stored; add the report.
        partial = _partial_report(prober, meter, levels, exc)
        if partial is not None and isinstance(exc, EngineError):
            raise ProbeIncomplete(str(exc), partial) from exc
        raise
    finally:
        held.close()
        otel_context.detach(token)
        await prober.control.aclose()
        if meter is not None:
            meter.close()


def _report(prober: _Prober, meter: PowerMeter | None, levels: list[ProbeLevel]) -> ProbeReport:
    created = _clock.wall_ns()
    try:
        curve = curve_of(
            prober.engine,
            levels,
            model=prober.model,
            run=prober.settings.name or prober.run_id,
            measured_unix_ns=max(lv.end_unix_ns for lv in levels) if levels else created,
        )
    except InputError as exc:
        raise EngineError(f"{prober.url}: {exc}") from exc
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=created,
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
    prober: _Prober, meter: PowerMeter | None, levels: list[ProbeLevel], exc: BaseException
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
