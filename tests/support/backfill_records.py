"""The recorded eval records under tests/data/receivers/backfill (the serial arm of Appendix D, a
CSV with bad rows), and an ISO time as the Unix ns the records' cells carry."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.support.data_files import RECEIVER_DATA

BACKFILL = RECEIVER_DATA / "backfill"


SERIAL = BACKFILL / "serial-arm-2026-09-17.jsonl"


CSV = BACKFILL / "cells-with-bad-rows.csv"


def utc_ns(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()) * 1_000_000_000
