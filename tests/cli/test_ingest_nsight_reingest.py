"""Ingesting a capture again replaces its summary document and never stores its series twice,
whatever the capture's shape: samples all before the session start (the reader places them
there, floor-dividing into buckets before it), or one instant, shorter than an interval.

The store is asked whether the capture's points are already there within a time window; a
window that missed them all stored every point a second time (samples before the session start
did, on the code before this test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.nsight import MS, SM_ISSUE_ID, capture_with
from tests.support.nsight import SESSION_START_UNIX_NS as S

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.store import Store

EARLY = 10 * MS  # how far before the session start the first capture's samples are moved


@pytest.mark.parametrize(
    ("sql", "points"),
    [
        pytest.param(  # SM Issue's samples at -9, -8, -7 and -6 ms: 2 ms buckets at -10, -8 and -6 ms
            f"DELETE FROM GPU_METRICS WHERE metricId != {SM_ISSUE_ID};"
            f"UPDATE GPU_METRICS SET timestamp = timestamp - {EARLY}, rawTimestamp = timestamp - {EARLY};",
            [S - 10 * MS, S - 8 * MS, S - 6 * MS],
            id="before the session start",
        ),
        pytest.param(  # one sample, at 1 ms: a capture that ends before one interval is over
            f"DELETE FROM GPU_METRICS WHERE metricId != {SM_ISSUE_ID} OR timestamp > {MS};",
            [S],
            id="one instant",
        ),
    ],
)
def test_ingesting_a_capture_again_stores_its_points_once(
    sql: str, points: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = capture_with(tmp_path / "capture.sqlite", sql)
    store_path = tmp_path / "s.sqlite"
    for _ in range(2):
        assert (
            main(["ingest-nsight", str(path), "--store", str(store_path), "--interval-ms", "2", "--json"])
            == 0
        )
    capsys.readouterr()
    with Store(store_path) as store:
        samples = store.samples(sc.NSIGHT_METRIC)
        documents = store.documents("nsight_summary")
    assert sorted(s.unix_ns for s in samples) == points
    assert [d["name"] for d in documents] == ["capture.sqlite"]  # replaced, not added
