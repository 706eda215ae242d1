"""The long-running receiver: engines' ``/metrics`` (and optionally a GPU) as OpenTelemetry metrics.

One thread per engine scrapes on an interval and keeps the latest snapshot; observable
instruments on the meter scope ``spark_otel.receivers`` report them at each collection with
an ``spark_otel.engine`` attribute, plus generation and prompt token rates and the mean time to
first token, inter-token latency and end-to-end latency derived from the last two scrapes.
Every scrape is also written to the embedded store as `MetricSample` rows when a store is
given. (The scope is deliberately not ``spark_otel``: the store's metric
exporter keeps only that scope, and the receiver writes its own samples with their scrape
times.)

An engine that is unreachable or answers wrongly is logged, counted in
``spark_otel.receiver.errors``, reported as ``spark_otel.engine.up`` = 0 and retried with
exponential backoff; the other engines' threads never notice. While it is down none of its
other metrics are observed (a stale token rate would read as live load); likewise the GPU
gauges while the GPU cannot be read. Sleeps are ``Event.wait``, so
`Receiver.stop` interrupts them at once.

    with Receiver({"qwen": box.url("qwen"), "nemotron": box.url("nemotron")}, interval_s=1,
                  meter_provider=mp, store=store) as receiver:
        ...                                   # run the eval
        receiver.latest("qwen").generation_tokens
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

from .. import _clock
from .. import _semconv as sc
from .._exceptions import ConfigError, SparkOtelError, StoreError
from .._files import disk_full
from .._guard import guard, report_failure
from .._urls import check_engine_url
from ..model import AttributeValue, MetricSample
from ..store import Store
from .gpu import GPU_METRICS, GpuReading, GpuSource, gpu_attributes, gpu_samples
from .prometheus import CounterDelta, EngineSnapshot, counter_delta, scrape_engine

__all__ = [
    "ENGINE_METRICS",
    "METER_SCOPE",
    "EngineTarget",
    "Receiver",
    "engine_samples",
    "parse_engine_spec",
    "split_engine_spec",
]

_logger = logging.getLogger(__name__)
METER_SCOPE = "spark_otel.receivers"
_MAX_WAIT_S = 86_400  # past a day an interval or timeout is a typo (and NaN or inf never ends)
SOURCE = "receiver"

# (snapshot or delta field, OTel name, unit, instrument) — the table docs/receivers.md documents.
ENGINE_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("generation_tokens", sc.ENGINE_GENERATION_TOKENS, "{token}", "counter"),
    ("prompt_tokens", sc.ENGINE_PROMPT_TOKENS, "{token}", "counter"),
    ("requests_running", sc.ENGINE_REQUESTS_RUNNING, "{request}", "gauge"),
    ("requests_waiting", sc.ENGINE_REQUESTS_WAITING, "{request}", "gauge"),
    ("kv_cache_usage", sc.ENGINE_KV_CACHE_USAGE, "1", "gauge"),
    ("generation_rate", sc.ENGINE_GENERATION_TOKEN_RATE, "{token}/s", "gauge"),
    ("prompt_rate", sc.ENGINE_PROMPT_TOKEN_RATE, "{token}/s", "gauge"),
    ("mean_time_to_first_token_s", sc.ENGINE_TIME_TO_FIRST_TOKEN, "s", "gauge"),
    ("mean_inter_token_latency_s", sc.ENGINE_INTER_TOKEN_LATENCY, "s", "gauge"),
    ("mean_e2e_request_latency_s", sc.ENGINE_E2E_LATENCY, "s", "gauge"),
)
# Fields read from the delta between the last two scrapes; the rest come from the latest snapshot.
_DELTA_FIELDS = frozenset(
    {
        "generation_rate",
        "prompt_rate",
        "mean_time_to_first_token_s",
        "mean_inter_token_latency_s",
        "mean_e2e_request_latency_s",
    }
)


@dataclass(frozen=True)
class EngineTarget:
    """An engine to scrape: a short name (the ``engine`` attribute) and its base URL."""

    name: str
    url: str
    model_name: str | None = None


def split_engine_spec(spec: str, *, name_optional: bool = False) -> tuple[str | None, str]:
    """``NAME=URL`` (as ``--engine qwen=http://127.0.0.1:8011`` gives it), or with ``name_optional``
    also a bare URL: ``(name or None, url)``. An ``=`` inside the URL (a query) is not a name."""
    head, sep, tail = spec.partition("=")
    name, url = (head.strip(), tail.strip()) if sep and "://" not in head else (None, spec.strip())
    if (name is None and not name_optional) or name == "" or not url.startswith(("http://", "https://")):
        expected = "URL or NAME=URL" if name_optional else "NAME=URL"
        raise ConfigError(f"--engine {spec!r}: expected {expected}, e.g. qwen=http://127.0.0.1:8011")
    return name, check_engine_url(url, "--engine")


def parse_engine_spec(spec: str) -> EngineTarget:
    """``NAME=URL`` as an `EngineTarget`."""
    name, url = split_engine_spec(spec)
    assert name is not None
    return EngineTarget(name, url)


def engine_attributes(name: str, kind: str | None) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {sc.ENGINE: name}
    if kind:
        attrs[sc.ENGINE_KIND] = kind
    return attrs


def _up_attributes(name: str) -> dict[str, AttributeValue]:
    """``up`` carries only the engine name: it exists before the kind is known, as one series."""
    return {sc.ENGINE: name}


def _metric_value(
    field_name: str, snapshot: EngineSnapshot | None, delta: CounterDelta | None
) -> float | None:
    """One `ENGINE_METRICS` field: from the delta for rates and means, else from the snapshot."""
    holder: Any = delta if field_name in _DELTA_FIELDS else snapshot
    return getattr(holder, field_name) if holder is not None else None


def engine_samples(
    name: str, snapshot: EngineSnapshot, delta: CounterDelta | None, *, source: str = SOURCE
) -> list[MetricSample]:
    """Store samples for one successful scrape (pure): every value present, rates and means when known."""
    attrs = engine_attributes(name, snapshot.kind)
    out = [
        MetricSample(
            name=sc.ENGINE_UP,
            unix_ns=snapshot.unix_ns,
            value=1.0,
            unit="1",
            attributes=_up_attributes(name),
            source=source,
        )
    ]
    for field_name, metric, unit, _ in ENGINE_METRICS:
        value = _metric_value(field_name, snapshot, delta)
        if value is not None:
            out.append(
                MetricSample(
                    name=metric,
                    unix_ns=snapshot.unix_ns,
                    value=value,
                    unit=unit,
                    attributes=attrs,
                    source=source,
                )
            )
    return out


@dataclass
class _EngineState:
    target: EngineTarget
    snapshot: EngineSnapshot | None = None
    delta: CounterDelta | None = None
    up: bool | None = None
    failures: int = 0
    kind: str | None = None


@dataclass
class _GpuState:
    readings: list[GpuReading] = field(default_factory=list)
    failures: int = 0


class Receiver:
    """Scrapes engines (and a GPU source) on an interval until stopped; a context manager.

    ``interval_s`` is in model time (equal to wall time against real engines). ``store``,
    when given, receives every scrape as metric samples. ``meter_provider`` defaults to the
    global one. The receiver does not own the store or the GPU source's lifetime unless
    ``close_gpu`` is True.
    """

    def __init__(
        self,
        engines: Mapping[str, str] | Sequence[EngineTarget],
        *,
        interval_s: float = 5.0,
        meter_provider: MeterProvider | None = None,
        store: Store | None = None,
        gpu: GpuSource | None = None,
        timeout_s: float = 5.0,
        max_backoff_s: float = 60.0,
        close_gpu: bool = False,
        client: Any | None = None,
    ) -> None:
        for what, seconds in (
            ("interval_s", interval_s),
            ("timeout_s", timeout_s),
            ("max_backoff_s", max_backoff_s),
        ):
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not 0 < seconds <= _MAX_WAIT_S
            ):
                raise ConfigError(
                    f"Receiver {what.removesuffix('_s')} must be positive seconds, at most {_MAX_WAIT_S:,} "
                    f"(a day), got {seconds!r}"
                )
        targets = (
            [EngineTarget(name, url) for name, url in engines.items()]
            if isinstance(engines, Mapping)
            else list(engines)
        )
        names = [t.name for t in targets]
        if len(set(names)) != len(names):
            raise ConfigError(f"engine names must be unique, got {', '.join(names)}")
        if not targets and gpu is None:
            raise ConfigError("nothing to receive: give at least one engine or a GPU source")
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.max_backoff_s = max(max_backoff_s, interval_s)
        self._store = store
        self._gpu = gpu
        self._close_gpu = close_gpu
        self._own_client = client is None
        self._client = client if client is not None else httpx2.Client(timeout=timeout_s)
        self._lock = threading.Lock()
        self._states = {t.name: _EngineState(t) for t in targets}
        self._gpu_state = _GpuState()
        self._stop = threading.Event()
        self.fatal: StoreError | None = None
        """Why the receiver stopped by itself (the store's disk is full), if it did."""
        self._threads: list[threading.Thread] = []
        self._started = False
        self._stopped = False
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(METER_SCOPE)
        self._errors = meter.create_counter(
            sc.RECEIVER_ERRORS, unit="{error}", description="failed scrapes and GPU reads"
        )
        self._register_instruments(meter)

    # -- instruments ---------------------------------------------------------------------------------
    def _register_instruments(self, meter: Meter) -> None:
        for field_name, name, unit, instrument in ENGINE_METRICS:
            callback = self._engine_callback(field_name)
            if instrument == "counter":
                meter.create_observable_counter(name, callbacks=[callback], unit=unit)
            else:
                meter.create_observable_gauge(name, callbacks=[callback], unit=unit)
        meter.create_observable_gauge(
            sc.ENGINE_UP, callbacks=[self._up_callback], unit="1", description="1 when the last scrape worked"
        )
        if self._gpu is not None:
            for field_name, name, unit, instrument in GPU_METRICS:
                callback = self._gpu_callback(field_name)
                if instrument == "counter":
                    meter.create_observable_counter(name, callbacks=[callback], unit=unit)
                else:
                    meter.create_observable_gauge(name, callbacks=[callback], unit=unit)

    def _engine_callback(self, field_name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_: CallbackOptions) -> Iterable[Observation]:
            out = []
            with guard("engine metric callback"), self._lock:
                for name, state in self._states.items():
                    if not state.up:
                        continue  # down (or never up): its last values would pass for live ones
                    value = _metric_value(field_name, state.snapshot, state.delta)
                    if value is not None:
                        out.append(Observation(value, engine_attributes(name, state.kind)))
            return out

        return observe

    def _up_callback(self, _: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            return [
                Observation(1 if state.up else 0, _up_attributes(name))
                for name, state in self._states.items()
                if state.up is not None
            ]

    def _gpu_callback(self, field_name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_: CallbackOptions) -> Iterable[Observation]:
            with self._lock:
                failing = self._gpu_state.failures > 0
                readings = [] if failing else list(self._gpu_state.readings)
            return [
                Observation(getattr(r, field_name), gpu_attributes(r))
                for r in readings
                if getattr(r, field_name) is not None
            ]

        return observe

    # -- scraping ------------------------------------------------------------------------------------
    def _scrape_engine(self, state: _EngineState) -> EngineSnapshot:
        """One scrape; updates the state and store. Raises `SparkOtelError` on failure."""
        target = state.target
        try:
            snapshot = scrape_engine(
                target.url, client=self._client, timeout_s=self.timeout_s, model_name=target.model_name
            )
        except SparkOtelError as exc:
            self._engine_failed(state, exc)
            raise
        with self._lock:
            previous = state.snapshot
            delta = counter_delta(previous, snapshot) if previous is not None else None
            recovered = state.up is False
            state.snapshot, state.delta, state.up, state.kind = snapshot, delta, True, snapshot.kind
            state.failures = 0
        if recovered:
            _logger.info("engine %s (%s) answers again", target.name, target.url)
        self._write(engine_samples(target.name, snapshot, delta))
        return snapshot

    def _engine_failed(self, state: _EngineState, exc: Exception) -> None:
        with self._lock:
            first = state.up is not False
            state.up, state.failures = False, state.failures + 1
        self._errors.add(1, {sc.RECEIVER_NAME: "engine", sc.ENGINE: state.target.name})
        if first:
            _logger.warning("engine %s: %s%s", state.target.name, exc, self._retry_note())
        else:
            _logger.debug("engine %s still failing (%d): %s", state.target.name, state.failures, exc)
        self._write(
            [
                MetricSample(
                    name=sc.ENGINE_UP,
                    unix_ns=_clock.wall_ns(),
                    value=0.0,
                    unit="1",
                    attributes=_up_attributes(state.target.name),
                    source=SOURCE,
                )
            ]
        )

    def _read_gpu(self) -> list[GpuReading]:
        assert self._gpu is not None
        try:
            readings = self._gpu.read()
        except SparkOtelError as exc:
            with self._lock:
                first = self._gpu_state.failures == 0
                self._gpu_state.failures += 1
            self._errors.add(1, {sc.RECEIVER_NAME: "gpu"})
            (_logger.warning if first else _logger.debug)("GPU read failed: %s%s", exc, self._retry_note())
            raise
        with self._lock:
            self._gpu_state.readings = readings
            self._gpu_state.failures = 0
        self._write(gpu_samples(readings, source=SOURCE))
        return readings

    def _retry_note(self) -> str:
        """Only the running loop retries; a one-off `scrape_once` must not promise it."""
        return "; retrying with backoff" if self._started and not self._stopped else ""

    def _write(self, samples: list[MetricSample]) -> None:
        if self._store is None or not samples:
            return
        try:
            self._store.write_samples(samples)
        except Exception as exc:
            if not disk_full(exc):
                report_failure("receiver store write", exc)
                return
            with self._lock:
                if self.fatal is None:
                    self.fatal = StoreError(
                        f"{self._store.path}: disk full: {len(samples)} samples of this scrape could not be "
                        "stored, so the receiver stopped; every sample stored before is kept"
                    )
                    _logger.error("%s", self.fatal)
            self._stop.set()

    def halt(self) -> None:
        """Ask the loop to stop (a signal handler may call it); `stop` waits for it."""
        self._stop.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait up to ``timeout_s`` real seconds (None: forever) for the loop to be asked to stop, by
        `halt`, `stop` or a full disk (then `fatal` says so); True when it was."""
        return self._stop.wait(timeout_s)

    def scrape_once(self) -> dict[str, EngineSnapshot | SparkOtelError]:
        """Scrape every engine (and read the GPU) once, now; failures are returned, not raised."""
        results: dict[str, EngineSnapshot | SparkOtelError] = {}
        for name, state in self._states.items():
            try:
                results[name] = self._scrape_engine(state)
            except SparkOtelError as exc:
                results[name] = exc
        if self._gpu is not None:
            try:
                self._read_gpu()
            except SparkOtelError as exc:
                results["gpu"] = exc
        return results

    # -- loop ------------------------------------------------------------------------------------------
    def _backoff_s(self, failures: int) -> float:
        if failures == 0:
            return self.interval_s
        return float(min(self.interval_s * 2 ** min(failures, 16), self.max_backoff_s))

    def _run(self, step: Callable[[], object], failures: Callable[[], int], what: str) -> None:
        while not self._stop.is_set():
            try:
                step()
            except SparkOtelError:
                pass  # logged and counted where it happened
            except Exception:
                _logger.exception("receiver: %s failed unexpectedly; retrying", what)
            self._stop.wait(_clock.to_real_s(self._backoff_s(failures())))

    def start(self) -> Receiver:
        """Start one thread per engine (and one for the GPU); returns self."""
        if self._started:
            return self
        self._started = True
        for name, state in self._states.items():
            thread = threading.Thread(
                target=self._run,
                args=(lambda s=state: self._scrape_engine(s), lambda s=state: s.failures, f"engine {name}"),
                name=f"spark-otel-receiver-{name}",
                daemon=True,
            )
            self._threads.append(thread)
        if self._gpu is not None:
            self._threads.append(
                threading.Thread(
                    target=self._run,
                    args=(self._read_gpu, lambda: self._gpu_state.failures, "GPU"),
                    name="spark-otel-receiver-gpu",
                    daemon=True,
                )
            )
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every thread (interrupting their sleeps) and wait for them; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        if self._own_client:
            self._client.close()
        if self._close_gpu and self._gpu is not None:
            with guard("GPU source close"):
                self._gpu.close()

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading back ------------------------------------------------------------------------------------
    @property
    def engines(self) -> list[str]:
        return list(self._states)

    def latest(self, engine: str) -> EngineSnapshot | None:
        """The engine's most recent successful snapshot."""
        with self._lock:
            return self._states[engine].snapshot

    def rate(self, engine: str) -> CounterDelta | None:
        """Counter delta between the engine's last two successful scrapes."""
        with self._lock:
            return self._states[engine].delta

    def is_up(self, engine: str) -> bool | None:
        """True/False after the last scrape; None before the first."""
        with self._lock:
            return self._states[engine].up

    def failures(self, engine: str) -> int:
        """Consecutive failed scrapes of the engine so far."""
        with self._lock:
            return self._states[engine].failures

    def gpu_readings(self) -> list[GpuReading]:
        with self._lock:
            return list(self._gpu_state.readings)
