"""What each column of `spark-otel requests`' list holds for a request that recorded little
(`views.requests.requests_list`): the eval it counts in, the model it asked for where the engine
named none, blanks and dashes where a figure is unknown, no rate without elapsed time, whether it
streamed, and its start in UTC whatever the machine's time zone; its JSON's elapsed time; and what
a refusal for want of cells says a source holds (`no_cells`), compared call with call."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from spark_otel.analysis.request_cells import request_engine, request_eval
from spark_otel.model import Request
from spark_otel.views.requests import no_cells, requests_json, requests_list

T0 = 1_760_000_000_000_000_000  # 2025-10-09 08:53:20 UTC


def _row(**kw: Any) -> dict[str, str]:
    fields: dict[str, Any] = {"uid": "r1", "operation": "chat", "start_unix_ns": T0, "end_unix_ns": T0}
    columns, [row], _ = requests_list([Request(**(fields | kw))], {}, {}, ())
    return dict(zip(columns, row, strict=True))


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_request_that_recorded_little_leaves_its_unknown_figures_blank() -> None:
    row = _row()
    assert (row["engine"], row["model"], row["prompt tok"], row["output tok"]) == ("", "", "", "")
    assert (row["tok/s"], row["first chunk s"], row["stream"]) == ("-", "-", "no")


def test_the_model_asked_for_where_the_engine_named_none_and_the_one_it_named_first() -> None:
    assert _row(request_model="qwen-7b")["model"] == "qwen-7b"
    assert _row(request_model="qwen-7b", response_model="Qwen/Qwen2.5-7B")["model"] == "Qwen/Qwen2.5-7B"


def test_a_rate_needs_tokens_over_some_time() -> None:
    assert _row(output_tokens=10, end_unix_ns=T0 + 500_000_000)["tok/s"] == "20.00"
    assert _row(output_tokens=10)["tok/s"] == "-"
    assert _row(input_tokens=7, streaming=True, time_to_first_chunk_s=0.25)["prompt tok"] == "7"


def test_the_start_is_in_utc_whatever_the_machines_time_zone(tokyo: None) -> None:
    assert time.strftime("%H", time.localtime(T0 / 1e9)) == "17"
    assert _row()["started (UTC)"] == "2025-10-09 08:53:20"


def test_a_request_without_an_eval_counts_in_its_engines() -> None:
    request = Request(uid="r1", operation="chat", engine="qwen", start_unix_ns=T0, end_unix_ns=T0)
    engine = request_engine(request, {})
    assert engine == "qwen"
    assert _row(engine="qwen")["eval"] == request_eval(request, engine) != request_eval(request, None)


def test_the_json_keeps_each_requests_elapsed_time() -> None:
    request = Request(uid="r1", operation="chat", start_unix_ns=T0, end_unix_ns=T0 + 500_000_000)
    [row] = requests_json([request], {}, {}, ())
    assert row["elapsed_s"] == 0.5


def test_a_refusal_counts_only_what_the_source_holds_and_names_the_source() -> None:
    """A table a reader did not count (OTLP files have no metric samples) holds nothing; no
    request stands in for a cell unless the caller says so; the source is named whatever it
    holds."""
    every = {"cells": 0, "requests": 0, "load_windows": 2, "metric_samples": 0, "documents": 0}
    assert no_cells("trace.json", {"load_windows": 2}) == no_cells("trace.json", every)
    assert no_cells("s.db", {"requests": 3}) == no_cells("s.db", {"requests": 3}, stand_ins=0)
    assert no_cells("s.db", {"metric_samples": 12}).startswith("s.db: ")
