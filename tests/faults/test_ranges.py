"""Values outside their documented range are refused or left out with a word, never stored as they
came: an engine's KV-cache fill of 7.5 (documented 0 to 1) or a negative count of requests, and a
cell read from an OTLP JSON export with 0 workers or a 0 s ceiling (`cell()` refuses both)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from tests.support.otlp_json_export import CELL, export, span

from spark_otel import _semconv as sc
from spark_otel._exceptions import InputError
from spark_otel.receivers.otlp_json import read_otlp_json
from spark_otel.receivers.prometheus import parse_metrics

URL = "http://127.0.0.1:8011"


def _page(kv: float, running: float) -> str:
    return (
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{model_name="m"} 100\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="m"}} {running}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{model_name="m"}} {kv}\n'
    )


def test_an_engine_value_outside_its_range_is_left_out_with_one_warning_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        first = parse_metrics(_page(7.5, -2), url=URL, unix_ns=0)
        again = parse_metrics(_page(7.5, -2), url=URL, unix_ns=1)
    assert (first.kv_cache_usage, first.requests_running, first.generation_tokens) == (None, None, 100.0)
    assert (again.kv_cache_usage, again.requests_running) == (None, None)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"spark_otel: {URL}: requests_running is -2, outside its range (0 or more); left out as not exposed",
        f"spark_otel: {URL}: kv_cache_usage is 7.5, outside its range (0 to 1); left out as not exposed",
    ]


def test_the_edges_of_the_range_are_kept() -> None:
    snapshot = parse_metrics(_page(1.0, 0), url=URL, unix_ns=0)
    assert (snapshot.kv_cache_usage, snapshot.requests_running) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("attribute", "value", "message"),
    [
        (sc.CELL_WORKERS, {"intValue": "0"}, "workers is 0; a cell runs on 1 worker or more"),
        (sc.CELL_DEADLINE_S, {"doubleValue": 0.0}, "deadline_s is 0.0; a ceiling is above 0 seconds"),
    ],
)
def test_a_cell_outside_the_ranges_cell_keeps_is_refused_from_an_otlp_json_file(
    attribute: str, value: dict[str, object], message: str, tmp_path: Path
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(export(span(name="c", attrs={**CELL, attribute: value}))) + "\n")
    with pytest.raises(InputError) as raised:
        read_otlp_json([path])
    assert str(raised.value).endswith(message)
