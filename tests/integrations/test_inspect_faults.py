"""The eval-safety promise at every guarded step of the Inspect hook (as tests/core/test_guarded_points
does for the rest of the package): a fault injected into each step leaves Inspect's eval exactly
as it is with the hook off, and each fault is reported once however many samples meet it. The
fault is the one mock: the real step is monkeypatched to raise; the eval, the engine and the
store are real."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog
from tests.support.inspect_runs import fail_first, qa_task, served_model

from spark_otel import cells
from spark_otel.integrations import inspect_hooks
from spark_otel.sim import Box


class InjectedFault(RuntimeError):
    pass


def _fail(*args: Any, **kwargs: Any) -> None:
    raise InjectedFault("injected")


def _outcome(log: EvalLog) -> list[tuple[Any, ...]]:
    """What the user's eval gave: each sample's answer (its length: the engine's words vary from
    run to run), score, error and retries."""
    return [
        (
            s.id,
            s.epoch,
            s.output.usage.output_tokens if s.output.usage else None,
            {k: v.value for k, v in (s.scores or {}).items()},
            s.error is not None,
            len(s.error_retries or []),
        )
        for s in log.samples or []
    ]


def _run(box: Box, tmp_path: Path, name: str) -> EvalLog:
    model = f"openai-api/sim/{served_model(box.url('qwen'))}"
    (log,) = inspect_eval(
        qa_task(2, name="faults", solver=fail_first(1)),
        model=model,
        retry_on_error=1,
        log_dir=str(tmp_path / name),
        display="none",
    )
    assert log.status == "success"
    return log


def _reported(caplog: pytest.LogCaptureFixture) -> list[str]:
    """spark-otel's reports (inside a sample, Inspect's log filter puts ``sample=<id>`` before each)."""
    return sorted(r.getMessage().splitlines()[-1] for r in caplog.records if r.name == "spark_otel")


@pytest.mark.parametrize(
    ("faults", "sites"),
    [
        pytest.param(
            [(inspect_hooks, "_instrument"), (inspect_hooks, "_task_of")],
            ["inspect run start", "inspect task start"],
            id="run-and-task-start",
        ),
        pytest.param([(cells.cell, "__aenter__")], ["inspect sample start"], id="sample-start"),
        pytest.param(
            [
                (cells.CellState, "resume_answering"),
                (cells.CellState, "begin_scoring"),
                (inspect_hooks.rules, "sample_status"),
            ],
            ["inspect sample outcome", "inspect sample retry", "inspect sample scoring"],
            id="sample-retry-scoring-outcome",
        ),
        pytest.param(
            [(cells.CellState, "set_status"), (cells.cell, "__aexit__")],
            ["inspect sample end"],
            id="sample-end",
        ),
    ],
)
def test_a_fault_in_the_hook_leaves_the_eval_as_it_is_bare_and_is_reported_once(
    faults: list[tuple[Any, str]],
    sites: list[str],
    inspect_box: Box,
    store_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with monkeypatch.context() as off:
        off.setenv("SPARK_OTEL_INSPECT", "0")
        bare = _outcome(_run(inspect_box, tmp_path, "bare"))
    for owner, name in faults:
        monkeypatch.setattr(owner, name, _fail)
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        faulted = _outcome(_run(inspect_box, tmp_path, "faulted"))
    assert faulted == bare
    assert [row[5] for row in bare] == [1, 1]  # each sample was retried once: every step ran twice
    assert _reported(caplog) == [f"spark_otel: {site} failed; the call goes on untouched" for site in sites]
