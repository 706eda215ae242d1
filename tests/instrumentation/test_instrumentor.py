"""`SparkOtelInstrumentor` keeps contrib's `BaseInstrumentor` contract: one instance, declared
client ranges matching the package's ``instruments-any`` extra, found by ``opentelemetry-instrument``."""

from __future__ import annotations

import logging
import sys
import types
from importlib.metadata import distribution, entry_points

import httpx2
import pytest
import wrapt
from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from packaging.requirements import Requirement

import spark_otel
from spark_otel import ConfigError, instrumentation
from spark_otel.instrumentation import (
    INSTRUMENTS_ANY,
    InstrumentationConfig,
    SparkOtelInstrumentor,
    _installed,
)


def test_it_is_a_base_instrumentor_singleton() -> None:
    assert isinstance(SparkOtelInstrumentor(), BaseInstrumentor)
    assert SparkOtelInstrumentor() is SparkOtelInstrumentor()


def test_declared_dependencies_are_the_instruments_any_extra_and_are_met_here() -> None:
    dist = distribution("spark-otel")
    requirements = [Requirement(r) for r in dist.requires or []]
    extra = [
        f"{r.name}{r.specifier}"
        for r in requirements
        if r.marker is not None and r.marker.evaluate({"extra": "instruments-any"})
    ]
    assert sorted(extra) == sorted(f"{r.name}{r.specifier}" for r in map(Requirement, INSTRUMENTS_ANY))
    assert set(SparkOtelInstrumentor().instrumentation_dependencies()) == set(INSTRUMENTS_ANY)
    assert get_dist_dependency_conflicts(dist) is None  # what opentelemetry-instrument checks
    assert SparkOtelInstrumentor()._check_dependency_conflicts() is None


def test_the_entry_point_opentelemetry_instrument_loads_is_this_instrumentor() -> None:
    (found,) = [ep for ep in entry_points(group="opentelemetry_instrumentor") if ep.name == "spark_otel"]
    assert found.load() is SparkOtelInstrumentor


def test_a_provider_of_the_wrong_kind_is_named_and_nothing_is_patched(
    tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    with pytest.raises(ConfigError) as raised:
        spark_otel.instrument(tracer_provider=meter_provider)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"instrument(tracer_provider={meter_provider!r}): expected an OpenTelemetry TracerProvider"
    )
    with pytest.raises(ConfigError) as raised:
        spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=tracer_provider)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"instrument(meter_provider={tracer_provider!r}): expected an OpenTelemetry MeterProvider"
    )
    assert not SparkOtelInstrumentor().is_instrumented
    assert not hasattr(httpx2.Client.__dict__["send"], "__wrapped__")


def test_every_unknown_argument_is_named_in_order() -> None:
    with pytest.raises(ConfigError) as raised:
        SparkOtelInstrumentor().instrument(zeta=1, alpha=2, skip_dep_check=True)
    assert str(raised.value) == "instrument(): unknown argument(s) alpha, zeta"


def test_any_one_supported_client_meets_the_dependencies(monkeypatch: pytest.MonkeyPatch) -> None:
    instrumentor = SparkOtelInstrumentor()
    monkeypatch.setattr(instrumentation, "INSTRUMENTS_ANY", ("no-such-client-a >= 1", "httpx2 >= 2.16, < 3"))
    assert instrumentor._check_dependency_conflicts() is None
    monkeypatch.setattr(
        instrumentation, "INSTRUMENTS_ANY", ("no-such-client-a >= 1", "no-such-client-b >= 1")
    )
    conflict = instrumentor._check_dependency_conflicts()
    assert conflict is not None
    assert "no-such-client-a" in str(conflict)
    assert "no-such-client-b" not in str(conflict)


def test_the_settings_in_force_are_the_instrumented_ones(
    tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    assert SparkOtelInstrumentor().config is None
    spark_otel.instrument(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=True,
        include_usage=True,
        inject_traceparent=True,
        provider_name="sglang",
        chunk_metrics=False,
    )
    assert SparkOtelInstrumentor().config == InstrumentationConfig(
        capture_content=True,
        include_usage=True,
        inject_traceparent=True,
        provider_name="sglang",
        chunk_metrics=False,
    )
    spark_otel.uninstrument()
    assert SparkOtelInstrumentor().config is None


def test_a_send_someone_patched_after_us_is_left_in_place(
    tracer_provider: TracerProvider, meter_provider: MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    from openai.resources.completions import Completions

    original_send, original_create = httpx2.Client.__dict__["send"], Completions.__dict__["create"]
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    theirs = wrapt.FunctionWrapper(httpx2.Client.__dict__["send"], lambda wrapped, _i, a, k: wrapped(*a, **k))
    httpx2.Client.send = theirs  # type: ignore[method-assign]
    try:
        with caplog.at_level(logging.DEBUG, logger="spark_otel.instrumentation"):
            spark_otel.uninstrument()
        assert httpx2.Client.__dict__["send"] is theirs
        assert f"{httpx2.Client}.send was re-patched by someone else; left in place" in caplog.messages
        assert Completions.__dict__["create"] is original_create
        assert httpx2.AsyncClient.__dict__["send"].__name__ == "send"
        assert not hasattr(httpx2.AsyncClient.__dict__["send"], "__wrapped__")
    finally:
        httpx2.Client.send = original_send  # type: ignore[method-assign]


def test_a_class_without_the_method_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    class Plain:
        pass

    before = list(SparkOtelInstrumentor._patches)
    with caplog.at_level(logging.DEBUG, logger="spark_otel.instrumentation"):
        SparkOtelInstrumentor._patch(Plain, "create", lambda wrapped, _i, a, k: wrapped(*a, **k))
    assert "create" not in Plain.__dict__
    assert SparkOtelInstrumentor._patches == before
    assert f"{Plain} has no create to patch" in caplog.messages


def test_a_module_is_installed_only_when_it_can_be_found(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _installed("json")
    assert not _installed("no_such_parent_module.child")  # find_spec raises ImportError
    spec_less = types.ModuleType("spec_less_module")
    spec_less.__spec__ = None
    monkeypatch.setitem(sys.modules, "spec_less_module", spec_less)
    assert not _installed("spec_less_module")  # find_spec raises ValueError


def test_httpx_is_patched_where_httpx2_is_missing(
    tracer_provider: TracerProvider, meter_provider: MeterProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    monkeypatch.setattr(instrumentation, "_installed", lambda module: module != "httpx2")
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert hasattr(httpx.Client.__dict__["send"], "__wrapped__")
    assert hasattr(httpx.AsyncClient.__dict__["send"], "__wrapped__")
    assert not hasattr(httpx2.Client.__dict__["send"], "__wrapped__")
