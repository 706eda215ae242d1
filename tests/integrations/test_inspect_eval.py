"""Inspect AI with no code, through `inspect_ai.eval()` and `eval_set()`: the hook shipped with
spark-otel opens one cell per sample and epoch, with Inspect's own token counts, limits as
statuses, and a model-graded scorer kept out of the sample's figures."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai import eval_set
from inspect_ai.log import read_eval_log
from tests.support.inspect_runs import (
    ANSWER_TOKENS,
    cells_by_id,
    fail_first,
    qa_task,
    samples_by_cell_id,
    served_model,
    usage_of,
)

import spark_otel
from spark_otel import _clock
from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.model import CellStatus
from spark_otel.sim import Box
from spark_otel.store import Store


def _stored(path: Path) -> Store:
    spark_otel.shutdown()  # every span exported
    return Store(path)


def test_each_sample_and_epoch_is_a_cell_with_inspects_own_tokens(
    inspect_box: Box, store_path: Path, tmp_path: Path
) -> None:
    model = served_model(inspect_box.url("qwen"))
    solver_model, grader_model = f"openai-api/sim/{model}", f"openai-api/grader/{model}"
    logs = inspect_eval(
        qa_task(3, grader=grader_model, epochs=2),
        model=solver_model,
        max_connections=2,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    samples = samples_by_cell_id(logs)
    with _stored(store_path) as store:
        cells = cells_by_id(store.cells())
        requests = store.requests()
    assert sorted(cells) == sorted(samples) == [f"q{i}_epoch_{e}" for i in range(3) for e in (1, 2)]
    port = inspect_box.url("qwen").rsplit(":", 1)[1]
    for cell_id, sample in samples.items():
        c = cells[cell_id]
        assert (c.eval_name, c.engine, c.workers, c.status) == (
            "primes",
            f"openai-api/sim@127.0.0.1:{port}",
            2,
            CellStatus.OK,
        )
        assert c.deadline_s is None
        # The solver's tokens are the cell's; the grader's are counted apart, never in its figures.
        assert (c.prompt_tokens, c.completion_tokens) == usage_of(sample, solver_model)
        assert c.completion_tokens == ANSWER_TOKENS
        grader_in, grader_out = usage_of(sample, grader_model)
        assert c.attributes[sc.CELL_SCORING_INPUT_TOKENS] == grader_in
        assert c.attributes[sc.CELL_SCORING_OUTPUT_TOKENS] == grader_out
        assert c.attributes[sc.CELL_SCORING_REQUESTS] == 1
        assert c.attributes[sc.CELL_RETRIES] == 0
        # Scoring (and writing the log) is its own phase, and the phases add up to elapsed.
        assert c.scoring_s is not None
        assert c.scoring_s > 0
        parts = [c.first_token_s, c.decode_s, c.unsplit_s, c.other_s, c.scoring_s]
        assert sum(p or 0.0 for p in parts) == pytest.approx(c.elapsed_s, abs=0.01)
        assert c.decode_rate == pytest.approx(ANSWER_TOKENS / c.elapsed_s)
    # Every request nests under its sample's cell: the answer's in the cell's trace and solve time,
    # the grader's marked as scoring.
    by_uid = {c.uid: c for c in cells.values()}
    assert len(requests) == 2 * len(cells)
    for r in requests:
        c = by_uid[r.cell_uid]  # type: ignore[index]
        assert r.trace_id == c.trace_id
        assert r.eval_name == "primes"
    answers = [r for r in requests if r.output_tokens == ANSWER_TOKENS]
    assert sorted(by_uid[r.cell_uid].cell_id for r in answers) == sorted(cells)  # type: ignore[index]


def test_a_sample_cut_by_its_time_limit_is_a_deadline_cell(
    inspect_box: Box, store_path: Path, tmp_path: Path
) -> None:
    model = f"openai-api/sim/{served_model(inspect_box.url('qwen'))}"
    (log,) = inspect_eval(
        qa_task(1, time_limit=1, dwell_s=30.0),
        model=model,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    (sample,) = log.samples or []
    assert sample.limit is not None
    assert sample.limit.type == "time"
    with _stored(store_path) as store:
        (c,) = store.cells()
    assert c.status is CellStatus.DEADLINE
    assert c.deadline_hit
    # Inspect's limit is real seconds; the cell's, like its times, follow the box's model clock.
    assert c.deadline_s == pytest.approx(_clock.to_clock_s(1.0))
    assert (c.prompt_tokens, c.completion_tokens) == usage_of(sample, model)


def test_limits_and_errors_are_statuses_and_a_retried_sample_stays_one_cell(
    inspect_box: Box, store_path: Path, tmp_path: Path
) -> None:
    """A token limit is a length cap; a sample that fails once and is retried is one ok cell that
    counts the retry and both attempts' tokens; one that fails for good is an error."""
    model = f"openai-api/sim/{served_model(inspect_box.url('qwen'))}"
    logs = [
        inspect_eval(
            qa_task(1, name=name, **args),  # type: ignore[arg-type]
            model=model,
            log_dir=str(tmp_path / "logs"),
            display="none",
            **run_args,
        )[0]
        for name, args, run_args in (
            ("capped", {"token_limit": 3}, {}),
            ("retried", {"solver": fail_first(1)}, {"retry_on_error": 1}),
            ("failed", {"solver": fail_first(9)}, {"fail_on_error": False}),
        )
    ]
    capped, retried, failed = ((log.samples or [])[0] for log in logs)
    assert capped.limit is not None
    assert capped.limit.type == "token"
    assert retried.error is None
    assert len(retried.error_retries or []) == 1
    assert failed.error is not None
    with _stored(store_path) as store:
        cells = {c.eval_name: c for c in store.cells()}
    assert sorted(cells) == ["capped", "failed", "retried"]
    assert (cells["capped"].status, cells["retried"].status, cells["failed"].status) == (
        CellStatus.LENGTH_CAP,
        CellStatus.OK,
        CellStatus.ERROR,
    )
    assert cells["retried"].attributes[sc.CELL_RETRIES] == 1
    assert cells["failed"].attributes[sc.CELL_RETRIES] == 0
    # Both attempts ran on the box; Inspect's log keeps the last attempt's usage.
    assert cells["retried"].completion_tokens == 2 * usage_of(retried, model)[1]
    assert (cells["capped"].prompt_tokens, cells["capped"].completion_tokens) == usage_of(capped, model)


def test_the_eval_and_engine_are_named_as_the_users_other_cells(
    inspect_box: Box, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_OTEL_ENGINE", "qwen")
    model = f"openai-api/sim/{served_model(inspect_box.url('qwen'))}"
    done, headers = eval_set(
        [qa_task(1, name="alpha"), qa_task(1, name="beta", metadata={"spark_otel_eval": "golden"})],
        model=model,
        log_dir=str(tmp_path / "logs"),
        max_samples=1,
        display="none",
    )
    assert done
    logs = [read_eval_log(h.location) for h in headers]  # eval_set returns the headers alone
    with _stored(store_path) as store:
        cells = store.cells()
    assert sorted((c.eval_name, c.engine, c.workers) for c in cells) == [
        ("alpha", "qwen", 1),
        ("golden", "qwen", 1),
    ]
    by_eval = {{"alpha": "alpha", "beta": "golden"}[log.eval.task]: log for log in logs}
    for c in cells:
        (sample,) = by_eval[c.eval_name].samples or []
        assert c.cell_id == "q0_epoch_1"
        assert (c.prompt_tokens, c.completion_tokens) == usage_of(sample, model)


def test_spark_otel_inspect_0_turns_the_hook_off(
    inspect_box: Box, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_OTEL_INSPECT", "0")
    model = f"openai-api/sim/{served_model(inspect_box.url('qwen'))}"
    (log,) = inspect_eval(qa_task(2), model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    with _stored(store_path) as store:
        assert store.row_counts()["cells"] == 0
        assert store.row_counts()["requests"] == 0  # nothing instrumented either


def test_a_user_who_instruments_too_hears_nothing_and_gets_one_span_per_call(
    inspect_box: Box, store_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spark_otel.instrument()
    model = f"openai-api/sim/{served_model(inspect_box.url('qwen'))}"
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        (log,) = inspect_eval(qa_task(2), model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("spark_otel")] == []
    with _stored(store_path) as store:
        assert store.row_counts()["cells"] == 2
        assert store.row_counts()["requests"] == 2
    assert log.status == "success"


def test_a_sample_recorded_on_a_model_clock_is_kept_when_its_log_is_backfilled(
    inspect_box: Box, store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The box runs faster than real time: the live cell's times are model seconds, the log's real
    ones, so the live cell stays as recorded (its requests beside it) and the log adds none."""
    model = f"openai-api/sim/{served_model(inspect_box.url('qwen'))}"
    (log,) = inspect_eval(qa_task(1), model=model, log_dir=str(tmp_path / "logs"), display="none")
    with _stored(store_path) as store:
        live = store.cells()
    assert live[0].attributes[sc.TIME_SCALE] == _clock.rate() != 1.0
    capsys.readouterr()
    assert main(["backfill", "--mapping", "inspect", log.location, "--store", str(store_path), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert (counts["records"], counts["cells"], counts["replaced_live"], counts["kept_live"]) == (1, 0, 0, 1)
    with Store(store_path) as store:
        assert store.cells() == live
