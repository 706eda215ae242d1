"""Fixtures for the collector tests: the built collector, Jaeger and Prometheus binaries, a stack
factory that starts the collector, Jaeger and Prometheus on free 127.0.0.1 ports in temp dirs,
and a fleet factory (a collector per box, a central collector, Prometheus and Jaeger); every
service they start is stopped after the test.

Where the binaries come from: ``SPARK_OTEL_OTELCOL`` and ``SPARK_OTEL_JAEGER`` (set by
``.ci/run``), else the cached builds of ``scripts/build-collector.sh`` and
``scripts/build-jaeger.sh`` (built on first use when Go is present), and ``prometheus`` /
``promtool`` on PATH. The collector and Jaeger are found, or built, once the tests are collected
and before any runs, so a cold build (minutes) is never cut off by a test's timeout. With
``SPARK_OTEL_REQUIRE_REAL_COMPONENTS=1`` or ``CI`` set, a missing binary fails the test; locally
it skips with the reason.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# dashboards/ lives at the repository root, outside the installed package.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.support.collector_stack import (  # noqa: E402
    JAEGER_KEY,
    OTELCOL_KEY,
    Fleet,
    Stack,
    Unusable,
    missing,
    resolve_jaeger,
    resolve_otelcol,
    start_fleet,
    start_stack,
)

# fixture name -> where the collection hook keeps what it resolved, and how it resolves it
_BUILT = {"otelcol_bin": (OTELCOL_KEY, resolve_otelcol), "jaeger_bin": (JAEGER_KEY, resolve_jaeger)}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Find or build the collector and Jaeger after collection, outside every test's timeout."""
    if config.option.collectonly:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for fixture, (key, resolve) in _BUILT.items():
        if any(fixture in getattr(item, "fixturenames", ()) for item in items):
            config.stash[key] = resolve(reporter.write_line if reporter else None)


def _resolved(pytestconfig: pytest.Config, fixture: str) -> Path:
    key, _ = _BUILT[fixture]
    resolved = pytestconfig.stash.get(key, None)
    if resolved is None:
        pytest.fail(f"{fixture} was not resolved at collection (tests/collector/conftest.py hook)")
    if isinstance(resolved, Unusable):
        if resolved.always_fails:
            pytest.fail(resolved.reason)
        missing(resolved.reason)
    return resolved


@pytest.fixture(scope="session")
def otelcol_bin(pytestconfig: pytest.Config) -> Path:
    return _resolved(pytestconfig, "otelcol_bin")


@pytest.fixture(scope="session")
def jaeger_bin(pytestconfig: pytest.Config) -> Path:
    return _resolved(pytestconfig, "jaeger_bin")


@pytest.fixture(scope="session")
def prometheus_bin() -> Path:
    found = shutil.which("prometheus")
    if found is None:
        missing("prometheus is not installed (apt-get install prometheus)")
    return Path(str(found))


@pytest.fixture(scope="session")
def promtool_bin() -> Path:
    found = shutil.which("promtool")
    if found is None:
        missing("promtool is not installed (it ships with Debian's prometheus package)")
    return Path(str(found))


@pytest.fixture
def stack_factory(
    tmp_path: Path, otelcol_bin: Path, prometheus_bin: Path, jaeger_bin: Path
) -> Iterator[Callable[..., Stack]]:
    """Start the stack (optionally scraping the given engines); every service is stopped after."""
    started: list[Stack] = []

    def make(
        engine_targets: dict[str, str] | None = None,
        extra_env: dict[str, str] | None = None,
        collector_config: Path | None = None,
    ) -> Stack:
        stack = start_stack(
            tmp_path / f"stack{len(started)}",
            otelcol_bin,
            prometheus_bin,
            jaeger_bin,
            engine_targets=engine_targets,
            extra_env=extra_env,
            collector_config=collector_config,
        )
        started.append(stack)
        for service in stack.services():
            service.start()
        return stack

    yield make
    for stack in started:
        for service in reversed(stack.services()):
            service.stop()


@pytest.fixture
def fleet_factory(
    tmp_path: Path, otelcol_bin: Path, prometheus_bin: Path, jaeger_bin: Path
) -> Iterator[Callable[..., Fleet]]:
    """Start the fleet's collectors and central stores for the named boxes; all stopped after."""
    started: list[Fleet] = []

    def make(boxes: list[str], box_env: dict[str, str] | None = None) -> Fleet:
        fleet = start_fleet(
            tmp_path / f"fleet{len(started)}", otelcol_bin, prometheus_bin, jaeger_bin, boxes, box_env=box_env
        )
        started.append(fleet)
        for service in fleet.services():
            service.start()
        return fleet

    yield make
    for fleet in started:
        for service in reversed(fleet.services()):
            service.stop()
