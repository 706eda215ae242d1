"""How an Inspect sample becomes a cell (`records.inspect_samples`): one rule for the live hook and
a reader of Inspect's logs."""

from __future__ import annotations

import pytest

from spark_otel.model import CellStatus
from spark_otel.records.inspect_samples import (
    sample_cell_id,
    sample_deadline_s,
    sample_engine,
    sample_eval_name,
    sample_status,
    sample_workers,
)


def test_names_the_user_sets_win_over_the_task_and_the_models_provider() -> None:
    assert sample_eval_name("gsm8k") == "gsm8k"
    assert sample_eval_name("gsm8k", "golden") == "golden"
    assert sample_eval_name("gsm8k", "  ") == "gsm8k"
    assert sample_cell_id(12, 3) == "12_epoch_3"
    assert sample_cell_id("B#265", 1) == "B#265_epoch_1"
    assert sample_engine("vllm/Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1") == "vllm@127.0.0.1:8000"
    assert sample_engine("openai-api/local/qwen", "http://box:9/v1") == "openai-api/local@box:9"
    assert sample_engine("openai-api/local/qwen", "http://key@box:9/v1") == "openai-api/local@box:9"
    assert sample_engine("openai/gpt-4o", None) == "openai"
    assert sample_engine("vllm/Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1", "qwen") == "qwen"


def test_the_ceiling_is_the_tighter_limit_and_workers_the_concurrency_in_force() -> None:
    assert sample_deadline_s(None, None) is None
    assert sample_deadline_s(600, None) == 600.0
    assert sample_deadline_s(600, 120) == 120.0
    assert sample_deadline_s(0, 120) == 120.0
    assert sample_workers(None, None) is None
    assert sample_workers(None, 4) == 4
    assert sample_workers(8, 4) == 4
    assert sample_workers(2, 4) == 2
    assert sample_workers(8, None, sample_limit=3) == 3  # the adaptive limit read live wins


@pytest.mark.parametrize(
    ("limit", "errored", "status"),
    [
        ("time", False, CellStatus.DEADLINE),
        ("working", True, CellStatus.DEADLINE),
        ("token", False, CellStatus.LENGTH_CAP),
        ("message", False, CellStatus.LENGTH_CAP),
        ("context", False, CellStatus.LENGTH_CAP),
        (None, True, CellStatus.ERROR),
        ("operator", True, CellStatus.ERROR),
        ("operator", False, CellStatus.OK),
        (None, False, CellStatus.OK),
    ],
)
def test_inspects_outcome_is_the_cells_status(limit: str | None, errored: bool, status: CellStatus) -> None:
    assert sample_status(limit, errored) is status
