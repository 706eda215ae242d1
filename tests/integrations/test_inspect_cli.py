"""Inspect AI's own command line, with no code: ``inspect eval`` in a process of its own records a
cell per sample with Inspect's tokens, and a rules file in ``SPARK_OTEL_RULES`` governs it.
Slow: each starts Inspect in a new process (several seconds of imports on a loaded machine)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log
from tests.support.inspect_runs import TASK_FILE, cells_by_id, samples_by_cell_id, served_model, usage_of

from spark_otel import _semconv as sc
from spark_otel.model import Cell
from spark_otel.sim import Box
from spark_otel.store import Store

pytestmark = pytest.mark.slow


def _inspect_eval(box: Box, tmp_path: Path, *args: str, **env: str) -> tuple[list[Cell], dict[str, object]]:
    """``inspect eval`` of the task file against the box: the cells it recorded, and its samples."""
    task_file = tmp_path / "primes.py"
    task_file.write_text(TASK_FILE)
    model = f"openai-api/sim/{served_model(box.url('qwen'))}"
    store = tmp_path / "store.sqlite"
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SPARK_OTEL_", "OTEL_"))},
        "SPARK_OTEL_STORE": str(store),
        **env,
    }
    command = [sys.executable, "-m", "inspect_ai", "eval", task_file.name, "--model", model]
    run = subprocess.run(
        [*command, "--log-dir", str(tmp_path / "logs"), "--display", "none", *args],
        check=False,
        env=environment,
        cwd=tmp_path,  # Inspect reads a task file's path relative to where it runs
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (log_info,) = list_eval_logs(str(tmp_path / "logs"))
    log = read_eval_log(log_info)
    assert log.status == "success"
    with Store(store) as s:
        cells = s.cells()
    return cells, {"model": model, "samples": samples_by_cell_id([log])}


def test_inspect_eval_on_the_command_line_records_a_cell_per_sample(inspect_box: Box, tmp_path: Path) -> None:
    cells, run = _inspect_eval(inspect_box, tmp_path, "--max-connections", "3", "-T", "n=4")
    samples = run["samples"]
    assert isinstance(samples, dict)
    by_id = cells_by_id(cells)
    assert sorted(by_id) == sorted(samples) == [f"q{i}_epoch_1" for i in range(4)]
    for cell_id, sample in samples.items():
        c = by_id[cell_id]
        assert (c.eval_name, c.workers) == ("primes", 3)
        assert (c.prompt_tokens, c.completion_tokens) == usage_of(sample, str(run["model"]))


def test_a_rules_file_governs_an_inspect_eval_with_no_code(inspect_box: Box, tmp_path: Path) -> None:
    """One cell at a time on the engine, though Inspect would run three: the samples queue for the
    lane (in asyncio, so the admitted sample keeps running) and never overlap."""
    rules = tmp_path / "rules.toml"
    rules.write_text("[[lane]]\nengine = 'qwen'\ncells = 1\n")
    cells, run = _inspect_eval(
        inspect_box,
        tmp_path,
        "--max-connections",
        "3",
        "-T",
        "n=3",
        SPARK_OTEL_RULES=str(rules),
        SPARK_OTEL_ENGINE="qwen",
        SPARK_OTEL_GOVERNOR_STATE=str(tmp_path / "governor.sqlite"),
    )
    samples = run["samples"]
    assert isinstance(samples, dict)
    assert len(cells) == len(samples) == 3
    ordered = sorted(cells, key=lambda c: c.start_unix_ns)
    for earlier, later in itertools.pairwise(ordered):
        assert later.start_unix_ns >= earlier.end_unix_ns  # the lane held one cell at a time
    waits = sorted(c.admission_s or 0.0 for c in cells)
    assert waits[0] == 0.0
    assert waits[1] > 0  # the two others waited for their lane
    assert waits[2] > 0
    assert all(c.attributes[sc.CELL_QUEUE_RULE] for c in ordered[1:])
    for c in cells:
        assert (c.engine, c.workers) == ("qwen", 3)
        assert (c.prompt_tokens, c.completion_tokens) == usage_of(samples[c.cell_id], str(run["model"]))  # type: ignore[arg-type]
