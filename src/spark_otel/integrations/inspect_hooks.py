"""Inspect AI with no code: one governed cell per sample and epoch, loaded by Inspect itself.

Inspect imports this module through its ``inspect_ai`` entry point (``pip install
'spark-otel[inspect]'``); ``SPARK_OTEL_INSPECT=0`` turns it off. For each sample and epoch:

- ``on_sample_init`` (in the sample's own task, before its sandboxes and its time limit start)
  waits for the governor's lane without holding up Inspect's event loop, then opens the cell
  (marked with the sample's uuid, which its log keeps too), and calls `spark_otel.instrument()`
  if nothing has. The cell is the current span and cell of the
  sample's task, so every task Inspect starts for the sample inherits it: the sample's model
  calls nest under the cell and add up in it.
- ``on_sample_scoring`` marks where grading begins: the rest is the cell's ``scoring`` phase, and
  a model-graded scorer's calls are counted apart from the cell's tokens and decode rate.
- ``on_sample_end`` closes the cell with Inspect's own outcome (`records.inspect_sample`), the
  sample's retries and its model calls retried; error retries keep one cell, as they keep one
  sample.

Names: the eval is the task's name, or ``spark_otel_eval`` in the eval's metadata, or
``$SPARK_OTEL_EVAL``; the engine is the model's provider and host, or ``spark_otel_engine`` in the
metadata, or ``$SPARK_OTEL_ENGINE``. Nothing here raises into Inspect: each step runs under
`spark_otel._guard` (Inspect would swallow it too, but with no word of what failed).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inspect_ai.hooks import (
    Hooks,
    ModelRetry,
    RunStart,
    SampleAttemptEnd,
    SampleEnd,
    SampleInit,
    SampleScoring,
    TaskEnd,
    TaskStart,
    hooks,
)

from .. import _clock
from .. import _semconv as sc
from .._guard import guard
from ..records import inspect_sample as rules

if TYPE_CHECKING:
    from inspect_ai.log import EvalSpec

    from ..cells import CellState, cell

__all__ = ["ENGINE_ENV", "EVAL_ENV", "SWITCH_ENV", "SparkOtelHooks", "enabled"]

SWITCH_ENV = "SPARK_OTEL_INSPECT"
"""``0`` (or ``false``, ``no``, ``off``) turns the hook off; anything else, or unset, leaves it on."""
EVAL_ENV = "SPARK_OTEL_EVAL"
"""Names the eval of every task this process runs (the eval's ``spark_otel_eval`` metadata wins)."""
ENGINE_ENV = "SPARK_OTEL_ENGINE"
"""Names the engine of every task this process runs (``spark_otel_engine`` metadata wins)."""

_OFF = frozenset({"0", "false", "no", "off"})
_logger = logging.getLogger(__name__)


def enabled() -> bool:
    """Whether the hook is on: unless ``$SPARK_OTEL_INSPECT`` turns it off."""
    return os.environ.get(SWITCH_ENV, "").strip().lower() not in _OFF


@dataclass(frozen=True)
class _Task:
    """What every sample of one task (one eval id) shares."""

    eval_name: str
    model: str
    base_url: str | None
    engine_named: str | None
    task_id: str
    max_samples: int | None
    max_connections: int | None


@dataclass
class _Sample:
    """One sample's open cell and what its hooks count until it ends."""

    eval_id: str
    cm: cell
    state: CellState
    retries: int = 0
    request_retries: int = 0


def _named(spec: EvalSpec, key: str, env: str) -> str | None:
    value = (spec.metadata or {}).get(key)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return os.environ.get(env, "").strip() or None


def _task_of(spec: EvalSpec) -> _Task:
    return _Task(
        eval_name=rules.eval_name(spec.task, _named(spec, rules.EVAL_KEY, EVAL_ENV)),
        model=spec.model,
        base_url=spec.model_base_url,
        engine_named=_named(spec, rules.ENGINE_KEY, ENGINE_ENV),
        task_id=spec.task_id,
        max_samples=spec.config.max_samples,
        max_connections=spec.model_generate_config.max_connections,
    )


def _served_from(task: _Task) -> str | None:
    """The base URL the sample's model is called at: the one the eval names (``--model-base-url``),
    else the model Inspect made for the sample (whose URL may come from a ``<SERVICE>_BASE_URL``
    variable)."""
    if task.base_url:
        return task.base_url
    try:
        from inspect_ai.model import get_model

        url = getattr(get_model().api, "base_url", None)
    except Exception:  # no active model: the provider alone names the engine
        _logger.debug("spark_otel: no active Inspect model for the sample", exc_info=True)
        return None
    return url if isinstance(url, str) and url else None


def _sample_limit(task: _Task) -> int | None:
    """The task's sample limit in force now (it adapts, unless max_samples or max_connections fix
    it); None where this Inspect keeps it elsewhere (a private name: the settings then stand)."""
    try:
        from inspect_ai.util._concurrency import task_sample_semaphore

        limit = getattr(task_sample_semaphore(task.task_id), "limit", None)
    except Exception:
        _logger.debug("spark_otel: Inspect's sample limit is not where it was", exc_info=True)
        return None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def _instrument() -> None:
    """`spark_otel.instrument()` unless something already did (a user's own call stays as it was)."""
    from ..instrumentation import SparkOtelInstrumentor, instrument

    if not SparkOtelInstrumentor().is_instrumented:
        instrument()


@hooks(name="cells", description="a governed cell per sample and epoch (SPARK_OTEL_INSPECT=0: off)")
class SparkOtelHooks(Hooks):
    """The hook Inspect registers; one instance serves every run, task and sample in the process,
    so each sample's state is keyed by its uuid and dropped when it ends."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}
        self._samples: dict[str, _Sample] = {}

    def enabled(self) -> bool:
        return enabled()

    async def on_run_start(self, data: RunStart) -> None:
        with guard("inspect run start"):
            _instrument()

    async def on_task_start(self, data: TaskStart) -> None:
        with guard("inspect task start"):
            self._tasks[data.eval_id] = _task_of(data.spec)

    async def on_sample_init(self, data: SampleInit) -> None:
        with guard("inspect sample start"):
            await self._open(data)

    async def _open(self, data: SampleInit) -> None:
        from inspect_ai.log._samples import sample_active

        from ..cells import cell

        task = self._tasks.get(data.eval_id)
        if task is None or data.sample_id in self._samples:
            return
        _instrument()
        active = sample_active()
        limit = rules.ceiling_s(getattr(active, "time_limit", None), getattr(active, "working_limit", None))
        cm = cell(
            task.eval_name,
            rules.cell_id(data.summary.id, data.summary.epoch),
            engine=rules.engine_name(task.model, _served_from(task), task.engine_named),
            # Inspect's limits are real seconds; under a model clock the cell's are model seconds.
            deadline_s=_clock.to_clock_s(limit) if limit is not None else None,
            workers=rules.workers(task.max_samples, task.max_connections, _sample_limit(task)),
        )
        # The governor's wait (an asyncio sleep between attempts), then the cell's span and context,
        # set in this task: Inspect's tasks for the sample copy it.
        state = await cm.__aenter__()
        # Inspect's uuid of the sample (``EvalSample.uuid`` in its log): a backfill of the log
        # finds this cell by it and replaces it rather than adding a second.
        state.span.set_attribute(sc.INSPECT_SAMPLE_UUID, data.sample_id)
        self._samples[data.sample_id] = _Sample(data.eval_id, cm, state)

    async def on_sample_attempt_end(self, data: SampleAttemptEnd) -> None:
        sample = self._samples.get(data.sample_id)
        if sample is not None and data.will_retry:
            sample.retries += 1
            with guard("inspect sample retry"):
                sample.state.resume_answering()  # the failed attempt's scoring mark: not the retry's

    async def on_model_retry(self, data: ModelRetry) -> None:
        sample = self._samples.get(data.sample_id or "")
        if sample is not None:
            sample.request_retries += 1

    async def on_sample_scoring(self, data: SampleScoring) -> None:
        sample = self._samples.get(data.sample_id)
        if sample is not None:
            with guard("inspect sample scoring"):
                sample.state.begin_scoring()

    async def on_sample_end(self, data: SampleEnd) -> None:
        sample = self._samples.pop(data.sample_id, None)
        if sample is None:
            return
        status: Any = None
        with guard("inspect sample outcome"):
            limit = data.sample.limit
            status = rules.sample_status(
                limit.type if limit is not None else None, data.sample.error is not None
            )
        await self._close(sample, status)

    async def on_task_end(self, data: TaskEnd) -> None:
        """Close what no ``on_sample_end`` closed (a sample torn down before its end), as errors:
        their spans end and their lanes are freed."""
        from ..model import CellStatus

        self._tasks.pop(data.eval_id, None)
        for key in [k for k, s in self._samples.items() if s.eval_id == data.eval_id]:
            sample = self._samples.pop(key)
            sample.cm.leave_context()  # set in the sample's task, not this one
            await self._close(sample, CellStatus.ERROR)

    async def _close(self, sample: _Sample, status: Any) -> None:
        with guard("inspect sample end"):
            if status is not None:
                sample.state.set_status(status)
            sample.state.span.set_attributes(
                {sc.CELL_RETRIES: sample.retries, sc.CELL_REQUEST_RETRIES: sample.request_retries}
            )
        with guard("inspect sample end"):
            await sample.cm.__aexit__(None, None, None)
