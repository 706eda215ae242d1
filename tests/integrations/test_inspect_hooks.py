"""The hook's own edges, driven with Inspect's own event data (no eval run): a sample its task
ended before Inspect said it ended is closed, and nothing the hook meets raises into Inspect."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from inspect_ai.hooks import SampleEnd, SampleInit, TaskEnd, TaskStart
from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalPlan, EvalSample, EvalSampleSummary, EvalSpec

import spark_otel
from spark_otel import CellState, current_cell
from spark_otel.integrations.inspect_hooks import SparkOtelHooks
from spark_otel.model import CellStatus
from spark_otel.store import Store

SPEC = EvalSpec(
    created="2026-12-07T00:00:00+00:00",
    task="primes",
    dataset=EvalDataset(),
    model="vllm/Qwen/Qwen3-8B",
    model_base_url="http://127.0.0.1:8000/v1",
    config=EvalConfig(max_samples=4),
    eval_id="E1",
    run_id="R1",
    task_id="T1",
)


def _init(sample_uuid: str, sample_id: int) -> SampleInit:
    summary = EvalSampleSummary(id=sample_id, epoch=2, input="x", target="y")
    return SampleInit(eval_set_id=None, run_id="R1", eval_id="E1", sample_id=sample_uuid, summary=summary)


async def test_a_sample_its_task_ended_first_is_closed_as_an_error(
    store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The sample runs in a task of its own, as Inspect runs it, and is torn down before its end;
    the task's end, in another task, closes its cell quietly."""
    hook = SparkOtelHooks()
    await hook.on_task_start(
        TaskStart(eval_set_id=None, run_id="R1", eval_id="E1", spec=SPEC, plan=EvalPlan())
    )

    async def sample() -> CellState | None:
        await hook.on_sample_init(_init("u1", 7))
        return current_cell()  # set in the sample's task, as in the task Inspect runs it in

    opened = await asyncio.create_task(sample())
    assert opened is not None
    assert (opened.eval_name, opened.cell_id, opened.engine, opened.workers) == (
        "primes",
        "7_epoch_2",
        "vllm@127.0.0.1:8000",
        4,
    )
    assert current_cell() is None  # never in the task that runs the eval
    stranger = EvalSample(id=1, epoch=1, input="x", target="y")
    with caplog.at_level(logging.WARNING):
        await hook.on_sample_end(
            SampleEnd(eval_set_id=None, run_id="R1", eval_id="E1", sample_id="u9", sample=stranger)
        )
        await hook.on_task_end(TaskEnd(eval_set_id=None, run_id="R1", eval_id="E1", log=EvalLog(eval=SPEC)))
    assert caplog.records == []
    spark_otel.shutdown()
    with Store(store_path) as store:
        (c,) = store.cells()
    assert (c.cell_id, c.status) == ("7_epoch_2", CellStatus.ERROR)


async def test_nothing_the_hook_meets_raises_into_inspect(
    store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hook = SparkOtelHooks()
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        await hook.on_task_start(None)  # type: ignore[arg-type]
        await hook.on_sample_init(_init("u1", 1))  # a task it never saw start: no cell
    assert current_cell() is None
    assert [r.getMessage() for r in caplog.records] == [
        "spark_otel: inspect task start failed; the call goes on untouched"
    ]
