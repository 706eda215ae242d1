from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_otel import governor


@pytest.fixture
def rules_file(tmp_path: Path) -> Callable[[str], Path]:
    """Write a rules file; call again to edit it in place (a new size or mtime, as an editor does)."""
    path = tmp_path / "rules.toml"

    def write(text: str) -> Path:
        path.write_text(text)
        return path

    return write


@pytest.fixture
def state_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "governor.sqlite"


@pytest.fixture(autouse=True)
def _no_governor_left() -> Iterator[None]:
    yield
    governor.ungovern()
