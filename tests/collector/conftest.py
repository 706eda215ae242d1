"""Fixtures for the collector tests: the built collector and Prometheus binaries, and a stack
factory that starts the collector, the Tempo stand-in and Prometheus on free 127.0.0.1 ports in
temp dirs and always stops them.

Where the binaries come from: ``SPARK_OTEL_OTELCOL`` (set by ``.ci/run``), else the cached
build of ``scripts/build-collector.sh`` (built here on first use when Go is present), and
``prometheus`` / ``promtool`` on PATH. With ``SPARK_OTEL_REQUIRE_REAL_COMPONENTS=1`` or ``CI``
set, a missing binary fails the test; locally it skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The stack helpers sit beside this file; dashboards/ lives at the repository root, outside
# the installed package.
for _path in (Path(__file__).parent, Path(__file__).resolve().parents[2]):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from collector_stack import ROOT, Stack, missing, start_stack  # noqa: E402


@pytest.fixture(scope="session")
def otelcol_bin() -> Path:
    env = os.environ.get("SPARK_OTEL_OTELCOL")
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            pytest.fail(f"SPARK_OTEL_OTELCOL={env}: not an executable file")
        return path
    if shutil.which("go") is None:
        missing("no collector: SPARK_OTEL_OTELCOL is unset and Go is not installed to build one")
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-collector.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        missing(f"building the collector failed: {proc.stderr[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


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
