"""Inspect AI's own logs, backfilled: a tiny real Inspect eval (its task and dataset written here)
runs against the simulated engine on 127.0.0.1 and writes a ``.eval`` and a ``.json`` log; each
sample and epoch must come back as one cell with the sample's ``model_usage`` summed, Inspect's
own start and end, its limit as the cell's status, and its time split into its model calls and
the rest.

The eval runs in a process of its own (``inspect_ai.eval()`` sets up logging and display for
its process); the reader runs here. ``SPARK_OTEL_INSPECT=0`` keeps a live Inspect hook, should
one be registered in the environment, out of it: the logs are the only source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from inspect_ai.log import read_eval_log, write_eval_log

from spark_otel import _semconv as sc
from spark_otel._clock import NS_PER_S
from spark_otel.cli import main
from spark_otel.model import Cell, CellStatus
from spark_otel.receivers.backfill import BUILTIN_MAPPINGS, FieldMapping, backfill_files
from spark_otel.receivers.backfill import inspect_log as inspect_log_module
from spark_otel.store import Store

INSPECT = BUILTIN_MAPPINGS["inspect"]
SAMPLES, EPOCHS, MAX_CONNECTIONS, TIME_LIMIT = 3, 2, 2, 30
STALL_LIMIT_S = 0.5

# The task: each sample asks the simulated engine once; the sample "s2" then stalls under a scoped
# time limit, which halts it as Inspect halts a sample that runs out of time. A second task's
# answers are graded by a model (the same engine), as model_graded_qa does.
EVAL_SCRIPT = """
import asyncio, sys
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match, model_graded_qa
from inspect_ai.solver import generate, solver
from inspect_ai.util import time_limit


@solver
def answer_then_stall():
    async def solve(state, generate):
        state = await generate(state)
        if state.metadata.get("stall"):
            with time_limit({stall}):
                await asyncio.sleep(60)
        return state

    return solve


task = Task(
    name="tiny-qa",
    dataset=[
        Sample(input=f"question {{i}}", target="x", id=f"s{{i}}", metadata={{"stall": i == 2}})
        for i in range({samples})
    ],
    solver=answer_then_stall(),
    scorer=match(),
    epochs={epochs},
)
for log_format in ("eval", "json"):
    [log] = eval(
        task,
        model="openai-api/sim/qwen",
        model_base_url=sys.argv[1],
        log_dir=sys.argv[2],
        log_format=log_format,
        max_connections={max_connections},
        time_limit={time_limit},
        display="none",
    )
    print(log_format, log.location)

graded = Task(
    name="graded-qa",
    dataset=[Sample(input=f"question {{i}}", target="x", id=f"g{{i}}") for i in range({samples})],
    solver=generate(),
    scorer=model_graded_qa(),
)
[log] = eval(
    graded,
    model="openai-api/sim/qwen",
    model_base_url=sys.argv[1],
    log_dir=sys.argv[2],
    log_format="json",
    display="none",
)
print("graded", log.location)
"""


@pytest.fixture(scope="module")
def logs(live_box: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The ``.eval`` and ``.json`` logs of two runs of the tiny task, by format, and the graded
    task's ``.json`` log."""
    where = tmp_path_factory.mktemp("inspect-logs")
    script = where / "tiny_eval.py"
    script.write_text(
        EVAL_SCRIPT.format(
            stall=STALL_LIMIT_S,
            samples=SAMPLES,
            epochs=EPOCHS,
            max_connections=MAX_CONNECTIONS,
            time_limit=TIME_LIMIT,
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    env |= {
        "SPARK_OTEL_INSPECT": "0",
        "SIM_API_KEY": "none",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, str(script), live_box.url("qwen") + "/v1", str(where / "logs")],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=where,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found = (line.split(maxsplit=1) for line in done.stdout.splitlines())  # Inspect prints its own lines too
    return {words[0]: Path(words[1]) for words in found if words and words[0] in {"eval", "json", "graded"}}


def _ns(moment: str | datetime) -> int:
    stamp = moment if isinstance(moment, datetime) else datetime.fromisoformat(moment)
    return round(stamp.timestamp() * NS_PER_S)


def _cells(path: Path, **names: str | None) -> dict[str, Cell]:
    result = backfill_files([path], INSPECT, eval_name=names.get("eval_name"), engine=names.get("engine"))
    assert result.errors == []
    assert result.records == SAMPLES * EPOCHS
    return {cell.cell_id: cell for cell in result.cells}


@pytest.mark.parametrize("log_format", ["eval", "json"])
def test_each_sample_and_epoch_is_a_cell_with_its_model_usage_and_inspects_own_times(
    logs: dict[str, Path], log_format: str
) -> None:
    log = read_eval_log(str(logs[log_format]))
    assert log.samples is not None
    cells = _cells(logs[log_format])
    assert sorted(cells) == sorted(f"s{i}_epoch_{e}" for i in range(SAMPLES) for e in range(1, EPOCHS + 1))
    for sample in log.samples:
        cell = cells[f"{sample.id}_epoch_{sample.epoch}"]
        usage = sample.model_usage.values()
        assert cell.prompt_tokens == sum(u.input_tokens for u in usage)
        assert cell.completion_tokens == sum(u.output_tokens for u in usage)
        assert cell.completion_tokens > 0
        assert sample.started_at is not None
        assert sample.completed_at is not None
        assert abs(cell.start_unix_ns - _ns(sample.started_at)) < NS_PER_S
        assert abs(cell.end_unix_ns - _ns(sample.completed_at)) < NS_PER_S
        assert (cell.eval_name, cell.engine, cell.workers, cell.source) == (
            "tiny-qa",
            f"openai-api/sim@{urlsplit(log.eval.model_base_url or '').netloc}",
            MAX_CONNECTIONS,
            "backfill",
        )
        assert cell.attributes[sc.INSPECT_MODEL] == "openai-api/sim/qwen"
        assert cell.attributes[sc.INSPECT_RETRIES] == 0


@pytest.mark.parametrize("log_format", ["eval", "json"])
def test_a_sample_halted_by_a_time_limit_is_a_deadline_cell_at_that_limit(
    logs: dict[str, Path], log_format: str
) -> None:
    cells = _cells(logs[log_format])
    for epoch in range(1, EPOCHS + 1):
        stalled = cells[f"s2_epoch_{epoch}"]
        assert (stalled.status, stalled.deadline_s) == (CellStatus.DEADLINE, STALL_LIMIT_S)
        assert stalled.attributes[sc.INSPECT_LIMIT] == "time"
        assert stalled.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_DEADLINE
        for other in ("s0", "s1"):
            cell = cells[f"{other}_epoch_{epoch}"]
            assert (cell.status, cell.deadline_s) == (CellStatus.OK, TIME_LIMIT)
            assert sc.INSPECT_LIMIT not in cell.attributes


def test_a_cells_time_is_split_into_its_model_calls_and_the_rest(logs: dict[str, Path]) -> None:
    """Each model call's working time, ending when it completed, is unsplit (Inspect does not
    stream); the rest of the sample's time is other; Inspect's working time and waits are kept."""
    log = read_eval_log(str(logs["eval"]))
    assert log.samples is not None
    cells = _cells(logs["eval"])
    for sample in log.samples:
        cell = cells[f"{sample.id}_epoch_{sample.epoch}"]
        [call] = [e for e in sample.events if e.event == "model"]
        assert call.working_time is not None
        assert cell.unsplit_s == pytest.approx(call.working_time, abs=1e-6)
        assert cell.other_s == pytest.approx(cell.elapsed_s - call.working_time, abs=1e-6)
        assert (cell.first_token_s, cell.decode_s) == (None, None)
        assert sample.working_time is not None
        assert sample.total_time is not None
        assert cell.attributes[sc.INSPECT_WORKING_S] == pytest.approx(sample.working_time)
        assert cell.attributes[sc.INSPECT_WAITING_S] == pytest.approx(sample.total_time - sample.working_time)


def test_a_model_graded_scorers_calls_are_not_the_answers_tokens_or_time(logs: dict[str, Path]) -> None:
    """Inspect counts the grader's calls in the sample's ``model_usage``; the cell keeps the
    answer's own call: its tokens, and its working time as the cell's only request."""
    log = read_eval_log(str(logs["graded"]))
    assert log.samples is not None
    result = backfill_files([logs["graded"]], INSPECT, eval_name=None)
    cells = {cell.cell_id: cell for cell in result.cells}
    for sample in log.samples:
        answer, grading = [e for e in sample.events if e.event == "model"]
        assert answer.output.usage is not None
        assert grading.output.usage is not None
        cell = cells[f"{sample.id}_epoch_1"]
        assert cell.completion_tokens == answer.output.usage.output_tokens
        assert cell.completion_tokens == (
            sum(u.output_tokens for u in sample.model_usage.values()) - grading.output.usage.output_tokens
        )
        assert cell.prompt_tokens == answer.output.usage.input_tokens
        assert answer.working_time is not None
        assert cell.unsplit_s == pytest.approx(answer.working_time, abs=1e-6)


def test_the_same_run_read_from_its_eval_and_its_json_is_the_same_cells(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    """The cell's uid is the sample's own uuid: the ``.json`` Inspect converts from a ``.eval``
    gives the very cells the ``.eval`` gives, so reading both replaces rather than adds."""
    converted = tmp_path / "converted.json"
    write_eval_log(read_eval_log(str(logs["eval"])), str(converted), format="json")
    assert _cells(converted) == _cells(logs["eval"])
    store = tmp_path / "s.sqlite"
    for path in (logs["eval"], converted, logs["eval"]):
        assert main(["backfill", str(path), "--mapping", "inspect", "--store", str(store)]) == 0
    with Store(store, read_only=True) as read:
        assert len(read.cells()) == SAMPLES * EPOCHS


def test_the_eval_and_the_engine_can_be_named_as_the_users_other_cells(logs: dict[str, Path]) -> None:
    cells = _cells(logs["json"], eval_name="golden-review", engine="qwen-box-a")
    assert {(c.eval_name, c.engine) for c in cells.values()} == {("golden-review", "qwen-box-a")}


def test_a_converted_log_reads_through_a_mapping_of_the_new_language(logs: dict[str, Path]) -> None:
    """The trial of issue 36 with a mapping of one's own: records under ``samples``, the task and
    max_connections from the enclosing document, tokens summed over every model, a literal engine."""
    mapping = FieldMapping.model_validate(
        {
            "name": "inspect-by-hand",
            "records": "samples",
            "cell_id": "{id}_epoch_{epoch}",
            "eval_name": {"document": "eval.task"},
            "engine": {"value": "qwen"},
            "prompt_tokens": {"sum": "model_usage.*.input_tokens"},
            "completion_tokens": {"sum": "model_usage.*.output_tokens"},
            "start": "started_at",
            "end": "completed_at",
            "workers": {"document": "eval.model_generate_config.max_connections"},
            "attributes": {
                "my.model_output": {"path": ["model_usage", "openai-api/sim/qwen", "output_tokens"]}
            },
        }
    )
    result = backfill_files([logs["json"]], mapping, eval_name=None)
    assert (result.errors, result.warnings) == ([], [])
    by_reader = _cells(logs["json"])
    for cell in result.cells:
        same = by_reader[cell.cell_id]
        assert (cell.eval_name, cell.engine, cell.workers) == ("tiny-qa", "qwen", MAX_CONNECTIONS)
        assert (cell.prompt_tokens, cell.completion_tokens) == (same.prompt_tokens, same.completion_tokens)
        assert (cell.start_unix_ns, cell.end_unix_ns) == (same.start_unix_ns, same.end_unix_ns)
        assert cell.attributes["my.model_output"] == same.completion_tokens


def test_an_inspect_log_read_with_another_mapping_is_pointed_to_the_inspect_reader(
    logs: dict[str, Path],
) -> None:
    result = backfill_files([logs["eval"], logs["json"]], BUILTIN_MAPPINGS["generic-csv"], eval_name="e")
    assert [(e.file, e.message) for e in result.errors] == [
        (
            str(logs["eval"]),
            "a zip file (an Inspect AI .eval log?): read Inspect logs with --mapping inspect",
        ),
        (
            str(logs["json"]),
            "an Inspect AI log: read it with --mapping inspect (or give your mapping a records root: "
            '"records": "samples")',
        ),
    ]


# -- what is not an Inspect log ------------------------------------------------------------------------
def test_files_that_are_not_inspect_logs_are_errors_naming_them(tmp_path: Path) -> None:
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    other_zip = tmp_path / "other.eval"
    with zipfile.ZipFile(other_zip, "w") as packed:
        packed.writestr("readme.txt", "not a log")
    text = tmp_path / "notes.eval"
    text.write_text("PK but not a zip")
    result = backfill_files([listing, other_zip, text], INSPECT, eval_name=None)
    assert result.cells == []
    assert [(e.file, e.message.split(" (")[0]) for e in result.errors] == [
        (str(listing), "not an Inspect AI log"),
        (str(other_zip), "not an Inspect AI log"),
        (str(text), "not an Inspect AI log"),
    ]


def test_a_log_without_samples_says_so(logs: dict[str, Path], tmp_path: Path) -> None:
    header = read_eval_log(str(logs["json"]), header_only=True)
    empty = tmp_path / "header.json"
    empty.write_text(header.model_dump_json())
    [error] = backfill_files([empty], INSPECT, eval_name=None).errors
    assert error.message == (
        "this Inspect AI log holds no samples (written with log_samples off, or from a run that "
        "has not finished one)"
    )


def test_an_eval_log_that_unpacks_past_the_cap_is_refused_before_it_is_unpacked(
    logs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    with zipfile.ZipFile(logs["eval"]) as packed:
        unpacked = sum(info.file_size for info in packed.infolist())
    monkeypatch.setattr(inspect_log_module, "MAX_UNPACKED_BYTES", unpacked - 1)
    [error] = backfill_files([logs["eval"]], INSPECT, eval_name=None).errors
    assert error.message.startswith("unpacks to 0 MiB, over the cap of 0 MiB")


@pytest.fixture
def without_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect-ai not installed: its log module cannot be imported."""
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)


@pytest.mark.usefixtures("without_inspect")
def test_without_inspect_ai_the_error_says_what_to_install(logs: dict[str, Path]) -> None:
    [error] = backfill_files([logs["json"]], INSPECT, eval_name=None).errors
    assert error.message == "reading Inspect AI logs needs inspect-ai: pip install 'spark-otel[inspect]'"


# -- lm-eval's sample logs --------------------------------------------------------------------------------
LM_EVAL_RECORD = {
    "doc_id": 0,
    "doc": {"question": "2+2?", "answer": "4"},
    "target": "4",
    "arguments": {"gen_args_0": {"arg_0": "Q: 2+2?\nA:", "arg_1": {"until": ["\n"]}}},
    "resps": [["4"]],
    "filtered_resps": ["4"],
    "filter": "none",
    "metrics": ["exact_match"],
    "doc_hash": "a" * 64,
    "prompt_hash": "b" * 64,
    "target_hash": "c" * 64,
    "exact_match": 1.0,
}


def test_lm_evals_logged_samples_are_refused_with_what_they_lack_and_how_to_record_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = tmp_path / "samples_gsm8k_2026-12-07T06-00-00.jsonl"
    samples.write_text(json.dumps(LM_EVAL_RECORD) + "\n" + json.dumps(LM_EVAL_RECORD | {"doc_id": 1}) + "\n")
    [error] = backfill_files([samples], BUILTIN_MAPPINGS["spark-bench"], eval_name="e").errors
    assert error.message.startswith(
        "lm-evaluation-harness --log_samples records hold no token counts and no times"
    )
    assert "spark_otel.instrument()" in error.message
    assert main(["backfill", str(samples), "--mapping", "lm-eval", "--dry-run"]) == 2
    assert "spark_otel.instrument() before lm_eval.simple_evaluate" in capsys.readouterr().err
