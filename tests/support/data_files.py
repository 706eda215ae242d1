"""Where the tests' data files are: tests/data, and its receivers/ (recorded /metrics pages,
backfill records, Nsight exports)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent.parent / "data"
RECEIVER_DATA = Path(__file__).parent.parent / "data" / "receivers"
