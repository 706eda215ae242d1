"""The log of an Inspect run the live hook recorded, backfilled into the same store: each sample
stays one cell (the live cell's uid, its requests still linked), now with the log's own figures.

The box runs at real speed here: Inspect writes real times in its log, and the live cells' times
are on the box's clock, so only at speed 1 are the two the same seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from tests.support.inspect_runs import cells_by_id, qa_task, samples_by_cell_id, served_model, usage_of

import spark_otel
from spark_otel import _semconv as sc
from spark_otel._clock import NS_PER_S
from spark_otel.cli import main
from spark_otel.sim import Box, run_box
from spark_otel.store import Store


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    """A box at real speed (the conftest's runs faster than real time)."""
    with run_box({"qwen": "dense"}, speed=1.0, seed=0) as b:
        yield b


def _ns(moment: datetime | str) -> int:
    """A time Inspect wrote (to the µs), in Unix ns."""
    when = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    return round(when.timestamp() * 1_000_000) * 1000


def _backfill(log: str, store: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, int]:
    assert main(["backfill", "--mapping", "inspect", log, "--store", str(store), "--json", *args]) == 0
    counts: dict[str, int] = json.loads(capsys.readouterr().out)["counts"]
    return counts


def test_the_log_of_a_live_run_backfills_into_its_cells(
    inspect_box: Box, store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = f"openai-api/sim/{served_model(inspect_box.url('qwen'))}"
    (log,) = inspect_eval(
        qa_task(2, epochs=2), model=model, max_connections=2, log_dir=str(tmp_path / "logs"), display="none"
    )
    capsys.readouterr()  # Inspect's banner
    samples = samples_by_cell_id([log])
    spark_otel.shutdown()  # every span exported
    with Store(store_path) as store:
        live = cells_by_id(store.cells())
        requests = store.requests()
    assert sorted(live) == sorted(samples) == ["q0_epoch_1", "q0_epoch_2", "q1_epoch_1", "q1_epoch_2"]
    assert {r.cell_uid for r in requests} == {c.uid for c in live.values()}

    # A dry run says what a write would replace, and writes nothing.
    dry = _backfill(log.location, store_path, capsys, "--dry-run")
    assert (dry["cells"], dry["replaced_live"], dry["kept_live"]) == (4, 4, 0)
    with Store(store_path) as store:
        assert cells_by_id(store.cells()) == live

    counts = _backfill(log.location, store_path, capsys)
    assert (counts["records"], counts["cells"], counts["replaced_live"], counts["kept_live"]) == (4, 4, 4, 0)
    with Store(store_path) as store:
        backfilled = cells_by_id(store.cells())  # one cell per sample and epoch: no id twice
        assert store.requests() == requests
    assert sorted(backfilled) == sorted(live)
    for cell_id, sample in samples.items():
        c, before = backfilled[cell_id], live[cell_id]
        assert (
            before.attributes[sc.INSPECT_SAMPLE_UUID] == c.attributes[sc.INSPECT_SAMPLE_UUID] == sample.uuid
        )
        # The same cell: its uid and trace, so its requests still reference it.
        assert (c.uid, c.trace_id, c.source) == (before.uid, before.trace_id, "backfill")
        # Its names as the hook gave them (the log, whose URL came from the environment, names no
        # host), and the concurrency it ran at.
        assert (c.eval_name, c.engine, c.workers) == (before.eval_name, before.engine, before.workers)
        assert (c.prompt_tokens, c.completion_tokens) == usage_of(sample, model)
        assert (c.prompt_tokens, c.completion_tokens) == (before.prompt_tokens, before.completion_tokens)
        # The log's own times, within a second of what the hook recorded.
        assert c.start_unix_ns == _ns(sample.started_at)  # type: ignore[arg-type]
        assert c.end_unix_ns == _ns(sample.completed_at)  # type: ignore[arg-type]
        assert abs(c.start_unix_ns - before.start_unix_ns) < NS_PER_S
        assert abs(c.end_unix_ns - before.end_unix_ns) < NS_PER_S
        # The log's time budget, whole; what only the live cell knew kept.
        assert c.scoring_s is None
        assert (c.unsplit_s or 0.0) + (c.other_s or 0.0) == pytest.approx(c.elapsed_s, abs=1e-6)
        assert c.attributes[sc.INSPECT_WORKING_S] == sample.working_time
        assert c.attributes[sc.CELL_RETRIES] == before.attributes[sc.CELL_RETRIES] == 0

    # Backfilling the same log again changes nothing.
    again = _backfill(log.location, store_path, capsys)
    assert (again["cells"], again["replaced_live"]) == (4, 0)
    with Store(store_path) as store:
        assert cells_by_id(store.cells()) == backfilled
        assert store.requests() == requests
