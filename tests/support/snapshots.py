"""Printed output checked against one file per snapshot, kept under tests/snapshots/: the one
mechanism for tests that pin what a person reads (a table, a report section, a command's text).

    def test_the_table(snapshot): snapshot(printed_text)            # tests/snapshots/<module>/<test>.txt
    def test_two(snapshot): snapshot(first, "first"); snapshot(second, "second")

A difference fails with a unified diff. ``pytest --snapshot-update`` (or
``SPARK_OTEL_UPDATE_SNAPSHOTS=1``) rewrites the files instead of comparing: the one switch after a
deliberate change to what is printed, reviewed in the diff of tests/snapshots/. A missing snapshot
fails (it is never written silently, so CI cannot pass on a file it just made).

Registered as a pytest plugin by tests/conftest.py (``pytest_plugins``).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

__all__ = ["SNAPSHOTS", "Snapshot", "snapshot"]

SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"
UPDATE_ENV = "SPARK_OTEL_UPDATE_SNAPSHOTS"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--snapshot-update",
        action="store_true",
        default=False,
        help=f"rewrite tests/snapshots/ from what the tests print (also: {UPDATE_ENV}=1)",
    )


class Snapshot:
    """Compares a test's printed text with its files (or rewrites them, when updating)."""

    def __init__(self, directory: Path, test: str, update: bool) -> None:
        self.directory = directory
        self.test = test
        self.update = update

    def shown(self, path: Path) -> str:
        """The path as a person finds it: under tests/, where it is there."""
        return str(path.relative_to(SNAPSHOTS.parent)) if path.is_relative_to(SNAPSHOTS.parent) else str(path)

    def path(self, name: str | None) -> Path:
        stem = self.test if name is None else f"{self.test}--{name}"
        return self.directory / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', stem)}.txt"

    def __call__(self, text: str, name: str | None = None) -> None:
        path = self.path(name)
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(
                f"no snapshot {self.shown(path)}: run `pytest --snapshot-update` to write it, then review it"
            )
        kept = path.read_text(encoding="utf-8")
        if text != kept:
            diff = "".join(
                difflib.unified_diff(
                    kept.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"{path.name} (kept)",
                    tofile=f"{path.name} (printed)",
                )
            )
            pytest.fail(f"printed text differs from {self.shown(path)}:\n{diff}", pytrace=False)


@pytest.fixture
def snapshot(request: pytest.FixtureRequest) -> Snapshot:
    """This test's snapshots: under tests/snapshots/<test module path>/, one file per call name."""
    module = Path(request.node.path).resolve().relative_to(SNAPSHOTS.parent).with_suffix("")
    update = bool(request.config.getoption("--snapshot-update")) or os.environ.get(UPDATE_ENV) == "1"
    return Snapshot(SNAPSHOTS / module, request.node.name, update)
