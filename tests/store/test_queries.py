"""What each of the store's reads returns: every filter keeps exactly the records it names, the
time bounds are inclusive, and orders are what the callers rely on (oldest first, or newest first
with a limit)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from spark_otel import Cell, LoadWindow, MetricSample, Request
from spark_otel.store import Store

T0 = 1_790_000_000_000_000_000
S = 1_000_000_000


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Cells, requests, windows, samples and documents across two evals, engines and sources."""
    path = tmp_path_factory.mktemp("queries") / "s.sqlite"
    with Store(path) as writer:
        writer.write_cells(
            [
                Cell(
                    uid=f"c{i}",
                    eval_name=("golden", "cards")[i % 2],
                    cell_id=f"B#{i}",
                    engine=("qwen", "nemotron", None)[i % 3],
                    source=("live", "records")[i // 4],
                    start_unix_ns=T0 + i * S,
                    end_unix_ns=T0 + (i + 3) * S,
                )
                for i in range(8)
            ]
        )
        writer.write_requests(
            [
                Request(
                    uid=f"r{i}",
                    operation="chat",
                    cell_uid=f"c{i // 2}",
                    eval_name=("golden", "cards")[i % 2],
                    start_unix_ns=T0 + (7 - i) * S,
                    end_unix_ns=T0 + (8 - i) * S,
                )
                for i in range(6)
            ]
        )
        writer.write_windows(
            [
                LoadWindow(
                    uid=f"w{i}",
                    name=f"w{i}",
                    kind=("probe", "eval")[i % 2],
                    engine=("qwen", "nemotron")[i // 2],
                    start_unix_ns=T0 + (3 - i) * S,
                    end_unix_ns=T0 + (4 - i) * S,
                )
                for i in range(4)
            ]
        )
        writer.write_samples(
            [
                MetricSample(name=name, unix_ns=T0 + i * S, value=float(i), source=source)
                for i in range(5)
                for name, source in (("b.metric", "nvml"), ("a.metric", "smi"))
            ]
        )
        writer.put_document("probe", "qwen", {"n": 1}, uid="d1")
        writer.put_document("probe", "nemotron", {"n": 2}, uid="d2")
        writer.put_document("nsight", "capture", {"n": 3}, uid="d3")
    reader = Store(path, read_only=True)
    yield reader
    reader.close()


def uids(records: list) -> list[str]:
    return [r.uid for r in records]


def test_cells_by_eval_engine_source_and_start_with_a_limit_either_way(store: Store) -> None:
    assert uids(store.cells()) == [f"c{i}" for i in range(8)]
    assert uids(store.cells(eval_name="cards")) == ["c1", "c3", "c5", "c7"]
    assert uids(store.cells(engine="nemotron")) == ["c1", "c4", "c7"]
    assert uids(store.cells(source="records")) == ["c4", "c5", "c6", "c7"]
    assert uids(store.cells(eval_name="golden", engine="qwen", source="live")) == ["c0"]
    assert uids(store.cells(since_unix_ns=T0 + 2 * S, until_unix_ns=T0 + 4 * S)) == ["c2", "c3", "c4"]
    assert uids(store.cells(newest_first=True, limit=3)) == ["c7", "c6", "c5"]
    assert uids(store.cells(limit=2)) == ["c0", "c1"]
    assert uids(store.cells(limit=0)) == []


def test_requests_by_cell_eval_and_start_oldest_first(store: Store) -> None:
    assert uids(store.requests()) == ["r5", "r4", "r3", "r2", "r1", "r0"]
    assert uids(store.requests(cell_uid="c1")) == ["r3", "r2"]
    assert uids(store.requests(eval_name="cards")) == ["r5", "r3", "r1"]
    assert uids(store.requests(cell_uid="c1", eval_name="golden")) == ["r2"]
    assert uids(store.requests(since_unix_ns=T0 + 3 * S, until_unix_ns=T0 + 5 * S)) == ["r4", "r3", "r2"]


def test_windows_by_kind_engine_and_start_oldest_first(store: Store) -> None:
    assert uids(store.windows()) == ["w3", "w2", "w1", "w0"]
    assert uids(store.windows(kind="probe")) == ["w2", "w0"]
    assert uids(store.windows(engine="nemotron")) == ["w3", "w2"]
    assert uids(store.windows(kind="eval", engine="qwen")) == ["w1"]
    assert uids(store.windows(since_unix_ns=T0 + 1 * S, until_unix_ns=T0 + 2 * S)) == ["w2", "w1"]


def test_samples_by_name_source_and_time_and_whether_any_exist(store: Store) -> None:
    assert [s.value for s in store.samples("a.metric")] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [s.value for s in store.samples("a.metric", since_unix_ns=T0 + S, until_unix_ns=T0 + 3 * S)] == [
        1.0,
        2.0,
        3.0,
    ]
    assert store.samples("a.metric", source="nvml") == []
    assert len(store.samples("b.metric", source="nvml")) == 5
    assert store.sample_names() == ["a.metric", "b.metric"]
    names, sources = ("a.metric", "b.metric", "c.metric"), (None, "nvml", "smi")
    bounds = (None, T0 - S, T0, T0 + 4 * S, T0 + 5 * S)
    for name, source, since, until in itertools.product(names, sources, bounds, bounds):
        filters = {"source": source, "since_unix_ns": since, "until_unix_ns": until}
        assert store.has_samples(name, **filters) == bool(store.samples(name, **filters)), (name, filters)


def test_documents_by_kind_and_name_oldest_first_and_the_store_at_a_glance(store: Store) -> None:
    assert [d["uid"] for d in store.documents("probe")] == ["d1", "d2"]
    assert [d["body"] for d in store.documents("probe", name="nemotron")] == [{"n": 2}]
    assert store.documents("report") == []
    assert set(store.documents("nsight")[0]) == {"uid", "name", "created_unix_ns", "body"}
    assert store.eval_names() == ["cards", "golden"]
    assert store.row_counts() == {
        "cells": 8, "requests": 6, "load_windows": 4, "metric_samples": 10, "server_timings": 0,
        "documents": 3,
    }  # fmt: skip
    assert store.schema_version() == 4


def test_a_store_from_before_the_version_was_recorded_is_schema_1(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "s.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM meta WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Store(path, read_only=True) as reader:
        assert reader.schema_version() == 1
