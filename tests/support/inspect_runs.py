"""Real Inspect AI evals against the simulated engine: the tasks (written here, no internet), the
environment that points Inspect's ``openai-api`` provider at the box, and the figures to compare
the recorded cells with (Inspect's own ``EvalSample.model_usage``).

The solver's model is ``openai-api/sim/<model>`` (``SIM_BASE_URL``); a model-graded scorer's is
``openai-api/grader/<model>`` (``GRADER_BASE_URL``): the same engine under another name, so
Inspect keeps the grader's usage apart from the solver's in each sample's ``model_usage``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.scorer import Score, Scorer, Target, accuracy, match, scorer
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver

from spark_otel.model import Cell

ANSWER_TOKENS = 6
"""Each answer's length: short, so a whole eval takes about a second at the box's speed."""
GRADE_TOKENS = 3


def served_model(base_url: str) -> str:
    """The model the simulated engine at ``base_url`` serves."""
    return str(httpx2.get(base_url + "/sim/info").json()["model"])


def inspect_env(base_url: str) -> dict[str, str]:
    """What points Inspect's ``openai-api/sim/...`` and ``openai-api/grader/...`` at the engine,
    offline."""
    return {
        "SIM_BASE_URL": base_url + "/v1",
        "SIM_API_KEY": "none",
        "GRADER_BASE_URL": base_url + "/v1",
        "GRADER_API_KEY": "none",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "INSPECT_LOG_LEVEL": "warning",
    }


def point_inspect_at(monkeypatch: Any, env: dict[str, str]) -> None:
    """Inspect's providers pointed where ``env`` says, spark-otel's own variables unset, and no
    model memoized: Inspect memoizes a model by its name, not by the base URL its provider read
    from the environment, so a model kept from an earlier test would call that test's stopped
    engine (and back off for minutes)."""
    import inspect_ai.model._model as inspect_models

    monkeypatch.setattr(inspect_models, "_models", {})
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("SPARK_OTEL_INSPECT", "SPARK_OTEL_EVAL", "SPARK_OTEL_ENGINE", "SPARK_OTEL_RULES"):
        monkeypatch.delenv(name, raising=False)


@contextmanager
def store_for_test(path: Path) -> Iterator[Path]:
    """``path`` the store this test's cells and requests go to; nothing instrumented or
    configured after."""
    import spark_otel
    from spark_otel.instrumentation import SparkOtelInstrumentor

    spark_otel.configure(store=path)
    try:
        yield path
    finally:
        if SparkOtelInstrumentor().is_instrumented:
            spark_otel.uninstrument()
        spark_otel.shutdown()


def dataset(n: int) -> list[Sample]:
    return [Sample(input=f"Name a prime number above {i}.", target="7", id=f"q{i}") for i in range(n)]


@scorer(metrics=[accuracy()])
def graded_by(model: str) -> Scorer:
    """A model-graded scorer: the grader model reads the answer and says whether it is right."""

    async def score(state: TaskState, target: Target) -> Score:
        grader = get_model(model, config=GenerateConfig(max_tokens=GRADE_TOKENS))
        verdict = await grader.generate(f"Is '{state.output.completion}' the answer {target.text}?")
        return Score(value="C" if "yes" in verdict.completion.lower() else "I")

    return score


@solver
def answer_then_dwell(seconds: float) -> Solver:
    """Answer, then keep working for ``seconds`` (real): a sample a time limit cuts off."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state = await generate(state)
        await asyncio.sleep(seconds)
        return state

    return solve


@solver
def fail_first(attempts: int) -> Solver:
    """Answer, then fail the sample's first ``attempts`` tries (counted per sample): a sample
    Inspect retries (``retry_on_error``), or one that errors for good."""
    tries: dict[object, int] = {}

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state = await generate(state)
        tries[state.sample_id] = tries.get(state.sample_id, 0) + 1
        if tries[state.sample_id] <= attempts:
            raise RuntimeError(f"attempt {tries[state.sample_id]} fails")
        return state

    return solve


def qa_task(
    n: int,
    *,
    name: str = "primes",
    grader: str | None = None,
    time_limit: int | None = None,
    dwell_s: float = 0.0,
    solver: Solver | None = None,
    **task_args: Any,
) -> Task:
    """``n`` questions answered in ``ANSWER_TOKENS`` tokens (by ``solver``, else once), matched,
    or graded by ``grader``."""
    return Task(
        name=name,
        dataset=dataset(n),
        solver=solver or (answer_then_dwell(dwell_s) if dwell_s else generate()),
        scorer=graded_by(grader) if grader else match(),
        config=GenerateConfig(max_tokens=ANSWER_TOKENS),
        time_limit=time_limit,
        **task_args,
    )


TASK_FILE = f"""
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def primes(n: int = 4) -> Task:
    return Task(
        dataset=[
            Sample(input=f"Name a prime number above {{i}}.", target="7", id=f"q{{i}}") for i in range(n)
        ],
        solver=generate(),
        scorer=match(),
        config=GenerateConfig(max_tokens={ANSWER_TOKENS}),
    )
"""
"""The same questions as a task file, for Inspect's own command line (``inspect eval FILE``)."""


def usage_of(sample: EvalSample, model: str) -> tuple[int, int]:
    """(input, output) tokens Inspect counted for ``model`` in the sample."""
    usage = sample.model_usage[model]
    return usage.input_tokens, usage.output_tokens


def samples_by_cell_id(logs: list[EvalLog]) -> dict[str, EvalSample]:
    """Every sample of the logs, by the cell id spark-otel gives it."""
    return {f"{s.id}_epoch_{s.epoch}": s for log in logs for s in log.samples or []}


def cells_by_id(cells: list[Cell]) -> dict[str, Cell]:
    by_id = {c.cell_id: c for c in cells}
    assert len(by_id) == len(cells), f"cell ids repeat: {sorted(c.cell_id for c in cells)}"
    return by_id
