"""Fixtures for the collector tests: the built collector and Prometheus binaries, and a stack
factory that starts the collector, the Tempo stand-in and Prometheus on free 127.0.0.1 ports in
temp dirs and always stops them.

Where the binaries come from: ``SPARK_OTEL_OTELCOL`` (set by ``.ci/run``), else the cached
build of ``scripts/build-collector.sh`` (built on first use when Go is present), and
``prometheus`` / ``promtool`` on PATH. The collector is found, or built, once the tests are
collected and before any runs, so a cold build (minutes) is never cut off by a test's timeout.
With ``SPARK_OTEL_REQUIRE_REAL_COMPONENTS=1`` or ``CI`` set, a missing binary fails the test;
locally it skips with the reason.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The stack helpers sit beside this file; dashboards/ lives at the repository root, outside
# the installed package.
for _path in (Path(__file__).parent, Path(__file__).resolve().parents[2]):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from collector_stack import OTELCOL_KEY, Stack, Unusable, missing, resolve_otelcol, start_stack  # noqa: E402


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Find or build the collector after collection, outside every test's timeout."""
    if config.option.collectonly:
        return
    if not any("otelcol_bin" in getattr(item, "fixturenames", ()) for item in items):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    config.stash[OTELCOL_KEY] = resolve_otelcol(reporter.write_line if reporter else None)


@pytest.fixture(scope="session")
def otelcol_bin(pytestconfig: pytest.Config) -> Path:
    resolved = pytestconfig.stash.get(OTELCOL_KEY, None)
    if resolved is None:
        pytest.fail("the collector was not resolved at collection (tests/collector/conftest.py hook)")
    if isinstance(resolved, Unusable):
        if resolved.always_fails:
            pytest.fail(resolved.reason)
        missing(resolved.reason)
    return resolved


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
def stack_factory(tmp_path: Path, otelcol_bin: Path, prometheus_bin: Path) -> Iterator[Callable[..., Stack]]:
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
            engine_targets=engine_targets,
            extra_env=extra_env,
            collector_config=collector_config,
        )
        started.append(stack)
        stack.prometheus.service.start()
        stack.standin.start()
        stack.collector.start()
        return stack

    yield make
    for stack in started:
        for service in (stack.collector, stack.standin, stack.prometheus.service):
            service.stop()
