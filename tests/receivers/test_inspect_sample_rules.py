"""The rules that make one Inspect AI sample and epoch one cell (`records.inspect_sample`), shared
by backfill's Inspect reader and the live hook: each rule on the values Inspect writes."""

from __future__ import annotations

import pytest

from spark_otel.model import CellStatus
from spark_otel.records import inspect_sample as rules


@pytest.mark.parametrize(
    ("model", "base_url", "engine"),
    [
        ("vllm/Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1", "vllm@127.0.0.1:8000"),
        ("openai-api/local/qwen", "http://box:9/v1", "openai-api/local@box:9"),
        ("openai-api/local/qwen", "http://key@box:9/v1", "openai-api/local@box:9"),
        ("openai-api/local/qwen", None, "openai-api/local"),
        ("openai/gpt-4o", None, "openai"),
        ("mockllm", "", "mockllm"),
    ],
)
def test_the_engine_is_the_models_provider_and_where_it_was_served(
    model: str, base_url: str | None, engine: str
) -> None:
    assert rules.engine_name(model, base_url) == engine
    assert rules.engine_name(model, base_url, "qwen-box-a") == "qwen-box-a"
    assert rules.engine_name(model, base_url, "  ") == engine


@pytest.mark.parametrize(
    ("limit", "errored", "status"),
    [
        ("time", False, CellStatus.DEADLINE),
        ("working", False, CellStatus.DEADLINE),
        ("token", False, CellStatus.LENGTH_CAP),
        ("message", False, CellStatus.LENGTH_CAP),
        ("turn", False, CellStatus.LENGTH_CAP),
        ("context", False, CellStatus.LENGTH_CAP),
        ("cost", False, CellStatus.LENGTH_CAP),
        ("custom", False, CellStatus.LENGTH_CAP),
        ("a-limit-inspect-adds-later", False, CellStatus.LENGTH_CAP),
        ("operator", False, CellStatus.ERROR),
        ("time", True, CellStatus.DEADLINE),
        (None, True, CellStatus.ERROR),
        (None, False, CellStatus.OK),
    ],
)
def test_the_status_is_inspects_own_outcome(limit: str | None, errored: bool, status: CellStatus) -> None:
    assert rules.sample_status(limit, errored=errored) is status


@pytest.mark.parametrize(
    ("max_samples", "max_connections", "workers"),
    [(None, None, None), (None, 4, 4), (8, None, 8), (2, 4, 2), (8, 4, 4), (0, 4, 4)],
)
def test_workers_are_the_smaller_of_the_concurrency_settings(
    max_samples: int | None, max_connections: int | None, workers: int | None
) -> None:
    assert rules.workers(max_samples, max_connections) == workers


def test_the_sample_limit_read_live_stands_for_max_samples() -> None:
    assert rules.workers(8, None, sample_limit=3) == 3
    assert rules.workers(8, 2, sample_limit=3) == 2


def test_the_ceiling_is_the_limit_that_halted_the_sample_else_time_else_working() -> None:
    assert rules.ceiling_s(1800, 600, halted_at=0.5) == 0.5
    assert rules.ceiling_s(1800, 600) == 1800.0
    assert rules.ceiling_s(None, 600) == 600.0
    assert rules.ceiling_s(None, None) is None


def test_tokens_are_summed_over_models_with_cached_input_counted() -> None:
    usages = [
        {
            "input_tokens": 100,
            "output_tokens": 1000,
            "input_tokens_cache_read": 400,
            "input_tokens_cache_write": None,
        },
        {"input_tokens": 40, "output_tokens": 20},
    ]
    assert rules.usage_tokens(usages) == (540, 1020)
    assert rules.usage_tokens([]) == (0, 0)


def test_names_and_uid() -> None:
    assert rules.cell_id(42, 3) == "42_epoch_3"
    assert rules.eval_name("tiny-qa") == "tiny-qa"
    assert rules.eval_name("tiny-qa", "golden-review") == "golden-review"
    assert rules.eval_name("tiny-qa", "  ") == "tiny-qa"
    uid = rules.cell_uid("bce5qGJYmjhqxPN582BENC")
    assert uid == rules.cell_uid("bce5qGJYmjhqxPN582BENC") != rules.cell_uid("other")
    assert len(uid) == 16
    int(uid, 16)
