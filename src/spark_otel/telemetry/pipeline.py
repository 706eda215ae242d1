"""Telemetry setup: where spans, metrics and cells go.

`configure()` builds an OpenTelemetry tracer provider and meter provider from the standard
``OTEL_*`` settings. With no OTLP endpoint configured, everything goes to the embedded store
(a local SQLite file), so one machine needs no server. With ``OTEL_EXPORTER_OTLP_ENDPOINT``
(or the per-signal variants) set, everything goes over OTLP to a collector; set
``SPARK_OTEL_STORE`` or pass ``store=True`` as well to keep the local copy too.

Settings honoured (all standard OpenTelemetry ones are read by the SDK and exporters):
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL``
(``http/protobuf`` default, or ``grpc`` with the ``grpc`` extra), ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_EXPORTER_OTLP_TIMEOUT``, ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE``,
``OTEL_METRIC_EXPORT_INTERVAL``, ``OTEL_METRIC_EXPORT_TIMEOUT``, ``OTEL_BSP_*``,
``OTEL_SDK_DISABLED``; and spark-otel's ``SPARK_OTEL_STORE``. A value that would lose data (a
negative delay, an OTLP exporter that cannot be built) is replaced with one warning
(`settings`), never raised into the user's process.

Setup happens once per process however many threads start at once: `ensure_telemetry()` is what
a cell or `instrument()` calls on first use, and it and `configure()` share one lock, so no thread
shuts down the providers another thread just built.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from .. import _clock
from .._exceptions import ConfigError
from .._guard import warn_once
from ..store import STORE_ENV, Store
from ..store.exporters import StoreMetricExporter, StoreSpanExporter
from .providers import (
    build_providers,
    is_own_provider,
    otlp_configured,
    otlp_metric_exporter,
    otlp_span_exporter,
    set_global_providers,
)
from .settings import BatchSettings, export_settings

__all__ = [
    "Telemetry",
    "configure",
    "current_telemetry",
    "ensure_telemetry",
    "shutdown",
    "user_pipeline_installed",
]

_logger = logging.getLogger(__name__)
# The store keeps every cell: a deep queue so a burst of short cells is never dropped.
_STORE_QUEUE_SIZE = 65_536
_STORE_METRIC_INTERVAL_MS = 10_000
TIME_SCALE_ENV = "SPARK_OTEL_TIME_SCALE"
RETIRED_MODEL_CLOCK_ENV = "SPARK_OTEL_MODEL_CLOCK"

_lock = threading.Lock()
"""Guards `_current` alone: held for an assignment, never across a setup."""
_setup_lock = threading.RLock()
"""Held across a whole setup (`configure`, `ensure_telemetry`): one at a time per process."""
_current: Telemetry | None = None


@dataclass
class Telemetry:
    """The providers spark-otel set up, and the store they write to (None when off)."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    store: Store | None = None
    otlp: bool = False
    owns_store: bool = True
    """False when the caller handed `configure()` its own `Store`: the caller closes it."""
    _clock_hold: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)
    """The clock this telemetry holds (given, or from the environment), released at shutdown."""
    _closed: bool = False

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        spans = self.tracer_provider.force_flush(timeout_millis)
        return self.meter_provider.force_flush(timeout_millis) and spans

    def shutdown(self) -> None:
        """Flush and stop exporting; idempotent. A telemetry in force stops being so: later cells
        and requests set up afresh instead of recording into closed providers."""
        if self._closed:
            return
        self._closed = True
        _no_longer_in_force(self)
        try:
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown()
        finally:
            if self.store is not None and self.owns_store:
                self.store.close()
            self._clock_hold.close()


def configure(
    *,
    service_name: str | None = None,
    store: bool | str | os.PathLike[str] | Store | None = None,
    otlp: bool | None = None,
    metric_export_interval_ms: int | None = None,
    metric_export_interval_model_s: float | None = None,
    set_global: bool = True,
    clock: _clock.Clock | None = None,
) -> Telemetry:
    """Set up tracing and metrics; returns the `Telemetry` in force.

    ``store``: None decides from the environment (on unless an OTLP endpoint is set and
    ``SPARK_OTEL_STORE`` is not), True uses the default path, a path or `Store` picks the file,
    False turns it off. ``otlp``: None follows the ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variables.
    Calling again replaces the previous setup (which is flushed and shut down).
    ``metric_export_interval_ms`` is real time; ``metric_export_interval_model_s`` (for a process
    whose readings follow an injected clock, such as the receiver beside a simulated box) is in
    the clock's seconds, converted once the clock is held, and never under 1 s of real time.
    ``clock``: the `Clock` the process runs on while this telemetry is in force (a simulated
    box's: ``spark_otel.sim.follow(URL)``); None takes ``SPARK_OTEL_CLOCK`` from the environment,
    else real time.

    This is where spark-otel reads its environment (nothing is read at import): besides the
    ``OTEL_*`` settings, ``SPARK_OTEL_STORE`` and ``SPARK_OTEL_CLOCK``. A bad value of those
    raises `ConfigError`. An unusable batch or export setting is its default, warned once
    (`settings`); an OTLP exporter that cannot be built sends everything to the embedded store
    instead, warned once, and raises `ConfigError` only with ``store=False``.
    """
    with _setup_lock:
        return _configure(
            service_name=service_name,
            store=store,
            otlp=otlp,
            metric_export_interval_ms=metric_export_interval_ms,
            metric_export_interval_model_s=metric_export_interval_model_s,
            set_global=set_global,
            clock=clock,
        )


def _configure(
    *,
    service_name: str | None,
    store: bool | str | os.PathLike[str] | Store | None,
    otlp: bool | None,
    metric_export_interval_ms: int | None,
    metric_export_interval_model_s: float | None,
    set_global: bool,
    clock: _clock.Clock | None,
) -> Telemetry:
    global _current
    clock_hold = _held_clock(clock)
    if metric_export_interval_model_s is not None:
        metric_export_interval_ms = max(1000, int(_clock.to_real_s(metric_export_interval_model_s) * 1000))
    try:
        telemetry = _pipeline(service_name, store, otlp, metric_export_interval_ms)
    except BaseException:
        clock_hold.close()
        raise
    telemetry._clock_hold = clock_hold

    import multiprocessing.util

    multiprocessing.util.register_after_fork(telemetry, _flush_at_worker_exit)
    _flush_at_exit()
    with _lock:
        previous, _current = _current, telemetry
    if previous is not None:
        previous.shutdown()
    if set_global:
        set_global_providers(telemetry.tracer_provider, telemetry.meter_provider)
    return telemetry


def _pipeline(
    service_name: str | None,
    store: bool | str | os.PathLike[str] | Store | None,
    otlp: bool | None,
    metric_export_interval_ms: int | None,
) -> Telemetry:
    """The providers, exporters and store `configure` asked for."""
    use_otlp = otlp_configured() or otlp_configured("metrics") if otlp is None else otlp
    settings = export_settings()
    otlp_exporters = None
    if use_otlp:
        try:
            otlp_exporters = (
                otlp_span_exporter(timeout_s=settings.traces_timeout_s),
                otlp_metric_exporter(timeout_s=settings.metrics_timeout_s),
            )
        except ConfigError as exc:
            if store is False:  # asked for OTLP alone: nowhere else to send anything
                raise
            warn_once(
                "otlp exporter",
                f"OTLP export is off: {exc}; spans and metrics go to the embedded store instead",
            )
    if store is None:
        store = otlp_exporters is None or bool(os.environ.get(STORE_ENV))
    the_store: Store | None
    if store is False:
        the_store = None
    elif isinstance(store, Store):
        the_store = store
    elif store is True:
        the_store = Store()
    else:
        the_store = Store(Path(store))

    span_processors: list[SpanProcessor] = []
    metric_exporters: list[tuple[MetricExporter, float | None]] = []
    if the_store is not None:
        span_processors.append(
            _batch(StoreSpanExporter(the_store), settings.batch.with_queue(_STORE_QUEUE_SIZE, 500))
        )
        metric_exporters.append(
            (StoreMetricExporter(the_store), metric_export_interval_ms or _STORE_METRIC_INTERVAL_MS)
        )
    if otlp_exporters is not None:
        span_exporter, metric_exporter = otlp_exporters
        span_processors.append(_batch(span_exporter, settings.batch))
        interval = metric_export_interval_ms or settings.metric_interval_millis
        metric_exporters.append((metric_exporter, interval))
    tracer_provider, meter_provider = build_providers(
        span_processors,
        metric_exporters,
        service_name=service_name,
        export_timeout_millis=settings.metric_timeout_millis,
    )
    return Telemetry(
        tracer_provider,
        meter_provider,
        the_store,
        otlp_exporters is not None,
        owns_store=not isinstance(store, Store),
    )


def _batch(exporter: SpanExporter, settings: BatchSettings) -> BatchSpanProcessor:
    """A batch processor with every argument given, so the SDK reads no ``OTEL_BSP_*`` itself."""
    return BatchSpanProcessor(
        exporter,
        max_queue_size=settings.max_queue_size,
        schedule_delay_millis=settings.schedule_delay_millis,
        max_export_batch_size=settings.max_export_batch_size,
        export_timeout_millis=settings.export_timeout_millis,
    )


def _no_longer_in_force(telemetry: Telemetry) -> None:
    global _current  # noqa: PLW0603 - this module is the one owner of the telemetry in force
    with _lock:
        if _current is telemetry:
            _current = None


def current_telemetry() -> Telemetry | None:
    return _current


def ensure_telemetry() -> Telemetry | None:
    """The telemetry in force, set up with the defaults on first use; None when the user installed
    providers of their own (spark-otel then records into those). However many threads or tasks
    ask at once, one setup runs and every one of them gets it. A failed setup raises (callers run
    under `guard`) and the next call tries again."""
    telemetry = _current
    if telemetry is not None:
        return telemetry
    with _setup_lock:
        if _current is not None:
            return _current
        if user_pipeline_installed():
            return None
        return configure()


def user_pipeline_installed() -> bool:
    """Whether the user installed a global tracer provider of their own (not spark-otel's,
    not the API's placeholder): then spark-otel records into it instead of setting up its own."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider) and not is_own_provider(provider)


def shutdown() -> None:
    """Flush and shut down what `configure()` set up."""
    global _current
    with _lock:
        telemetry, _current = _current, None
    if telemetry is not None:
        telemetry.shutdown()


def _flush_at_worker_exit(_telemetry: Telemetry) -> None:
    """In a multiprocessing worker (Pool, ProcessPoolExecutor): such workers leave through
    ``os._exit``, which skips atexit, so flush the cells at multiprocessing's own exit hook."""
    import multiprocessing.util

    multiprocessing.util.Finalize(None, shutdown, exitpriority=10)


_exit_hook = threading.Event()


def _flush_at_exit() -> None:
    """Flush what is still queued when the interpreter exits; registered by the first configure()."""
    if not _exit_hook.is_set():
        _exit_hook.set()
        atexit.register(shutdown)


def _held_clock(clock: _clock.Clock | None) -> contextlib.ExitStack:
    """The clock this telemetry runs on, held: ``clock`` when given, else the environment's."""
    held = contextlib.ExitStack()
    clock = clock if clock is not None else _clock_from_environment()
    if clock is not None:
        held.enter_context(_clock.hold(clock))
    return held


def _clock_from_environment() -> _clock.Clock | None:
    """``SPARK_OTEL_CLOCK`` (`Clock.spec`'s form), or ``SPARK_OTEL_TIME_SCALE=N``, its older
    spelling for a rate from now (kept for 0.2, with a warning). ``SPARK_OTEL_MODEL_CLOCK=URL``
    (0.1's way to follow a simulated box from here) is read no more: following a box is the
    simulator's work, and a warning names what replaces it."""
    spec = os.environ.get(_clock.CLOCK_ENV, "").strip()
    scale = os.environ.get(TIME_SCALE_ENV, "").strip()
    if os.environ.get(RETIRED_MODEL_CLOCK_ENV, "").strip():
        warn_once(
            RETIRED_MODEL_CLOCK_ENV,
            f"{RETIRED_MODEL_CLOCK_ENV} is no longer read (spark-otel 0.2): to follow a simulated box, set "
            f'{_clock.CLOCK_ENV}="$(spark-otel sim --clock-of URL)" or call '
            "spark_otel.configure(clock=spark_otel.sim.follow(URL)); this process runs on real time",
        )
    if spec and scale:
        raise ConfigError(f"set {_clock.CLOCK_ENV} or {TIME_SCALE_ENV} (its older spelling), not both")
    if spec:
        try:
            return _clock.Clock.parse(spec)
        except ConfigError as exc:
            raise ConfigError(f"{_clock.CLOCK_ENV}: {exc}") from None
    if not scale:
        return None
    warn_once(
        TIME_SCALE_ENV, f"{TIME_SCALE_ENV} is deprecated (removed in 0.3): set {_clock.CLOCK_ENV}={scale}"
    )
    try:
        value = float(scale)
    except ValueError:
        raise ConfigError(
            f"{TIME_SCALE_ENV}={scale!r} is not a number (clock seconds per real second)"
        ) from None
    try:
        return _clock.Clock(value)
    except ConfigError as exc:
        raise ConfigError(f"{TIME_SCALE_ENV}={scale!r}: {exc}") from exc
