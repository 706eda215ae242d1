"""The instrumented eval both end-to-end tests run on a simulated box: lanes of cells back to back,
one cell cut off at its ceiling, and a governed pair. test_e2e.py runs it in the test's process;
tests/collector/fleet_box_runner.py runs it in each box's own process."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import spark_otel
from spark_otel.deadline import DeadlineResult, stream_with_deadline

__all__ = ["Lane", "ceiling_cell", "governed_pair"]


@dataclass
class Lane:
    """One eval's cells on one engine, run back to back until stopped; ``prefix`` starts every
    cell id (a box's name, where several boxes share eval names)."""

    client: Any
    model: str
    eval_name: str
    engine: str
    workers: int
    tokens: int
    prefix: str = ""
    cells: list[tuple[str, float, float]] = field(default_factory=list)  # (cell id, real start, real end)
    errors: list[BaseException] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, stop: threading.Event, worker: int) -> None:
        count = 0
        while not stop.is_set():
            cell_id = f"{self.prefix}{self.engine}-w{worker}-{count:04d}"
            start = time.perf_counter()
            try:
                with spark_otel.cell(
                    self.eval_name, cell_id, engine=self.engine, deadline_s=1800, workers=self.workers
                ):
                    self.client.chat.completions.create(
                        model=self.model,
                        messages=[{"role": "user", "content": f"review change {count} of lane {worker}"}],
                        max_tokens=self.tokens,
                        extra_body={"min_tokens": self.tokens, "ignore_eos": True},
                    )
            except Exception as exc:  # recorded on the cell; the test reports it
                self.errors.append(exc)
            with self._lock:
                self.cells.append((cell_id, start, time.perf_counter()))
            count += 1

    def cell_ids(self) -> list[str]:
        return [cell_id for cell_id, _, _ in self.cells]


def ceiling_cell(client: Any, model: str, eval_name: str, cell_id: str) -> DeadlineResult:
    """One nemotron cell cut off at its 20 s ceiling that keeps what it streamed: a degraded cell."""
    with spark_otel.cell(eval_name, cell_id, engine="nemotron", deadline_s=20, workers=1):
        return stream_with_deadline(
            client,
            deadline_s=20,
            model=model,
            messages=[{"role": "user", "content": "find every bug"}],
            max_tokens=20_000,
            extra_body={"min_tokens": 20_000, "ignore_eos": True},
            extractor=re.compile(r"\w+ "),
        )


def governed_pair(client: Any, model: str, eval_name: str, rules: Path, ids: Sequence[str]) -> None:
    """Two nemotron cells at once under a one-cell lane: the second (``ids[1]``) waits for the
    first, so the governor's wait, slots and queue reach the metrics and the wait the cell span."""
    rules.write_text('[[lane]]\nengine = "nemotron"\ncells = 1\n', encoding="utf-8")
    first_in = threading.Event()

    def cell(cell_id: str) -> None:
        with spark_otel.cell(eval_name, cell_id, engine="nemotron", deadline_s=1800, workers=2):
            first_in.set()
            client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "one governed cell"}],
                max_tokens=40,
                extra_body={"min_tokens": 40, "ignore_eos": True},
            )

    spark_otel.govern(rules, fail_closed=True)  # a governor that cannot decide fails the test
    try:
        with ThreadPoolExecutor(2) as pool:  # a cell's own error reaches the caller through result()
            first = pool.submit(cell, ids[0])
            first_in.wait(30)
            second = pool.submit(cell, ids[1])
            first.result()
            second.result()
    finally:
        spark_otel.ungovern()
