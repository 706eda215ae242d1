"""`SparkOtelInstrumentor` keeps contrib's `BaseInstrumentor` contract: one instance, declared
client ranges matching the package's ``instruments-any`` extra, found by ``opentelemetry-instrument``."""

from __future__ import annotations

from importlib.metadata import distribution, entry_points

from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from packaging.requirements import Requirement

from spark_otel.instrumentation import INSTRUMENTS_ANY, SparkOtelInstrumentor


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
