"""Inspect AI with spark-otel's hook against llama.cpp's server: a two-sample eval through
`inspect_ai.eval()`, its model ``openai-api/llama/<model>`` found through ``LLAMA_BASE_URL``, is
two ok cells in a real store, each with the tokens Inspect itself counted for its sample, named
after the provider and the server's host and port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from tests.support.inspect_runs import (
    cells_by_id,
    point_inspect_at,
    qa_task,
    samples_by_cell_id,
    store_for_test,
    usage_of,
)
from tests.support.llama_server import LlamaServer

import spark_otel
from spark_otel.model import CellStatus
from spark_otel.store import Store


@pytest.fixture
def inspect_llama(llama: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """The server, with Inspect's ``openai-api/llama`` provider pointed at it, offline."""
    env = {
        "LLAMA_BASE_URL": llama.url + "/v1",
        "LLAMA_API_KEY": "none",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "INSPECT_LOG_LEVEL": "warning",
    }
    point_inspect_at(monkeypatch, env)
    return llama


@pytest.fixture
def store_path(tmp_path: Path, clean_env: None) -> Iterator[Path]:
    """The store the cells go to; nothing instrumented or configured after."""
    with store_for_test(tmp_path / "store.sqlite") as path:
        yield path


def test_each_sample_is_an_ok_cell_with_inspects_own_tokens(
    inspect_llama: LlamaServer, store_path: Path, tmp_path: Path
) -> None:
    model = f"openai-api/llama/{inspect_llama.model}"
    logs = inspect_eval(
        qa_task(2),
        model=model,
        max_connections=2,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert [log.status for log in logs] == ["success"]
    samples = samples_by_cell_id(logs)
    spark_otel.shutdown()  # every span exported
    with Store(store_path) as store:
        cells = cells_by_id(store.cells())
        requests = store.requests()
    assert sorted(cells) == sorted(samples) == ["q0_epoch_1", "q1_epoch_1"]
    host = inspect_llama.url.removeprefix("http://")
    for cell_id, sample in samples.items():
        c = cells[cell_id]
        assert (c.eval_name, c.engine, c.status) == ("primes", f"openai-api/llama@{host}", CellStatus.OK)
        tokens = usage_of(sample, model)
        assert tokens[1] > 0
        assert (c.prompt_tokens, c.completion_tokens) == tokens
    # One request per sample, nested in its cell, with the server's tokens.
    by_uid = {c.uid: c for c in cells.values()}
    assert sorted(
        (by_uid[r.cell_uid].cell_id, r.input_tokens, r.output_tokens)  # type: ignore[index]
        for r in requests
    ) == sorted((cell_id, *usage_of(sample, model)) for cell_id, sample in samples.items())
