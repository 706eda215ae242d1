"""Shared fixtures: in-memory OpenTelemetry providers, a temporary store, free ports, the
process's model clock put back; and those several directories share: the simulated box for the
probe and the live receiver tests, a store the simulated box filled for the gauges, the realistic
Nsight capture, and an environment without OTLP or store variables. Helpers live in tests/support.

Property tests search at random on a developer's machine and the same examples every time in
CI (``SPARK_OTEL_REQUIRE_REAL_COMPONENTS`` or ``CI`` set): a build never fails on an example no
earlier run tried, and a new counterexample is found, and kept as an ``@example``, by hand."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.boxes import GAUGES_BOX_SPEED, PROBE_BOX_SPEED
from tests.support.nsight import build_capture
from tests.support.ports import free_ports

import spark_otel
from spark_otel import _clock, _guard
from spark_otel.probe import ProbeSettings, run_probe
from spark_otel.receivers.gpu import SimGpuSource
from spark_otel.receivers.receiver import Receiver
from spark_otel.sim import run_box
from spark_otel.store import Store

pytest_plugins = ["tests.support.snapshots"]

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("SPARK_OTEL_REQUIRE_REAL_COMPONENTS") or os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def tests_data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The default store and governor state (``$XDG_DATA_HOME/spark-otel/``) in a directory of the
    session, for this process and the ones its tests start: a test, or a mutant, that leaves a
    store path to its default must not write into the user's own store in ``~/.local/share``."""
    saved = {name: os.environ.get(name) for name in ("XDG_DATA_HOME", "SPARK_OTEL_STORE")}
    data_home = tmp_path_factory.mktemp("xdg-data-home")
    os.environ["XDG_DATA_HOME"] = str(data_home)
    os.environ.pop("SPARK_OTEL_STORE", None)
    yield data_home
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _no_warning_given_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of spark-otel's own failures warns once per process: every test starts with none
    given, so a test that checks a warning sees it whatever ran before."""
    monkeypatch.setattr(_guard, "_warned", set())


@pytest.fixture
def india_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone at UTC+5:30 (a POSIX TZ, no zone database needed), restored
    afterwards: a time printed as UTC that is really local time reads 5 h 30 min off."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def meter_provider(metric_reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[metric_reader])
    yield provider
    provider.shutdown()


@pytest.fixture
def instrumented(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> Iterator[None]:
    """`spark_otel.instrument()` into the in-memory providers for one test."""
    import spark_otel

    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield
    spark_otel.uninstrument()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "store.sqlite") as s:
        yield s


@pytest.fixture
def free_port() -> int:
    (port,) = free_ports(1)
    return port


@pytest.fixture
def restore_clock() -> Iterator[None]:
    """Put the process's model clock back exactly as it was: leaving `_clock.hold` keeps the
    monotonic clock's offset and restarts Unix time, so for tests that compare clock readings
    across a change of scale, ending the hold is not enough."""
    anchor = _clock._Anchor
    saved = {k: v for k, v in vars(anchor).items() if not k.startswith("__")}
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(anchor, key, value)


@pytest.fixture(scope="session")
def realistic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    """10 s at 10 kHz, 19 metrics: about 1.9 million GPU_METRICS rows (built once, a few seconds)."""
    path = tmp_path_factory.mktemp("nsight") / "capture-0716.sqlite"
    timestamps, values = build_capture(path, layout="raw", seconds=10, hz=10_000)
    return path, timestamps, values


@pytest.fixture(scope="module")
def live_box() -> Iterator[Any]:
    """The simulated two-engine box at 100x, one per module: the live receivers' tests."""
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=100.0, seed=0) as running:
        yield running


@pytest.fixture
def probe_box() -> Iterator[object]:
    """The simulated two-engine box at the probe tests' speed, one per test."""
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=PROBE_BOX_SPEED, seed=0) as b:
        yield b


@pytest.fixture(scope="module")
def sim_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A probe of the simulated box's dense engine at 1, 2, 4 and 8 streams, with the receiver
    scraping both engines and the box's GPU into the same store meanwhile."""
    path = tmp_path_factory.mktemp("instruments") / "sim.sqlite"
    meter_provider = MeterProvider()
    with (
        run_box({"qwen": "dense", "nemotron": "moe"}, speed=GAUGES_BOX_SPEED, seed=0) as box,
        Store(path) as store,
        Receiver(
            {"qwen": box.url("qwen"), "nemotron": box.url("nemotron")},
            interval_s=1.0,  # model seconds: about ten scrapes in each level
            meter_provider=meter_provider,
            store=store,
            gpu=SimGpuSource(box.url("qwen")),
            close_gpu=True,
        ),
    ):
        time.sleep(0.1)  # a scrape before the first level, for the counters to start from
        run_probe(
            box.url("qwen"), ProbeSettings(streams=[1, 2, 4, 8], tokens=128, name="gauges"), store=store
        )
        time.sleep(0.1)
    meter_provider.shutdown()
    return str(path)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No OTLP or store variable from the environment reaches `configure()`, or the processes a
    test starts; spark-otel's telemetry shut down afterwards."""
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "SPARK_OTEL_STORE",
    ):
        monkeypatch.delenv(name, raising=False)
    yield
    spark_otel.shutdown()
