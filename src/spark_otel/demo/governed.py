"""Act 5, the governor: the rules Act 4's records gave, enforced on the same two evals run again.

The serial eval runs a fixed set of cells on qwen; midway, an eval at four workers on nemotron
starts from another process (a runner of its own, as on a real box), once without rules, once
with the rules ``spark-otel advise`` wrote (`rules_from_advice`), both processes governed
through one state file, and once governed by the deadline-slack law with no rules file (issue
37: the article's case as a third arm). Without rules the serial eval pays the neighbour's cost;
with them the nemotron eval waits while the serial eval runs and then runs at its full width;
adaptive, it runs in the serial cells' slack. `RunFigures` says what each run cost, from the
cells in the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _clock
from .._clock import NS_PER_S
from .._exceptions import EngineError
from ..analysis.rates import ceiling_hit, rated_decode_rate
from ..analysis.stats import percentile
from ..sim.clock import follow
from .load import Lane, openai_client, sleep_model
from .schedule import LOAD_ENGINE, LOAD_WORKERS, SERIAL_ENGINE, DemoPlan

if TYPE_CHECKING:
    from ..model import Cell

__all__ = [
    "ACT5_RUNS",
    "DEMO_ACT",
    "RunFigures",
    "governed_answer",
    "load_eval_main",
    "run_figures",
    "run_governed_act",
]

DEMO_ACT = "spark_otel.demo.act"
"""The attribute naming which run of Act 5 a cell belongs to ("5-open", "5-governed", "5-adaptive")."""
_READY_S = 60.0
_DONE_S = 600.0


@dataclass(frozen=True)
class RunFigures:
    """One run of the two evals, with or without the rules: what the serial eval paid."""

    label: str
    serial_cells: int
    serial_median: float | None
    beside_cells: int
    """Serial cells that ran beside the nemotron eval (`BESIDE_FRACTION`)."""
    beside_median: float | None
    cost: float | None
    """1 - the median rate of the cells beside the neighbour over the serial eval's baseline;
    with none beside it, of all its cells."""
    ceiling_hits: int
    serial_longest_s: float
    """The longest serial cell (model s), of `serial_cells`."""
    load_cells: int
    load_wall_s: float
    """The nemotron eval's wall (model s): from its first cell asking (its start less its queue
    wait) to its last cell's end, over `load_cells`."""
    load_peak: int
    """The most nemotron cells in flight at once."""
    load_waited_max_s: float
    load_started_after_serial: bool
    """Every nemotron cell started after the serial eval's last cell ended."""
    both_wall_s: float
    """From the first cell of either eval to the last one's end (model s)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


BESIDE_FRACTION = 0.9
"""A serial cell ran beside the nemotron eval when at least 90% of its time was inside the span
of the nemotron eval's cells: the eval starts midway through a serial cell, and a cell half
beside it would price half the cost."""


def _inside(cell: Cell, window: tuple[int, int]) -> float:
    overlap = min(cell.end_unix_ns, window[1]) - max(cell.start_unix_ns, window[0])
    duration = cell.end_unix_ns - cell.start_unix_ns
    return max(0, overlap) / duration if duration > 0 else 0.0


def _median(values: Sequence[float]) -> float | None:
    return percentile(sorted(values), 0.5) if values else None


def run_figures(label: str, serial: Sequence[Cell], load: Sequence[Cell], baseline: float) -> RunFigures:
    """What one run cost the serial eval, against its ``baseline`` rate alone (pure)."""

    window = (min((c.start_unix_ns for c in load), default=0), max((c.end_unix_ns for c in load), default=0))
    beside = [c for c in serial if _inside(c, window) >= BESIDE_FRACTION]
    rates = [r for c in serial if (r := rated_decode_rate(c)) is not None]
    beside_rates = [r for c in beside if (r := rated_decode_rate(c)) is not None]
    reference = _median(beside_rates) if beside_rates else _median(rates)
    starts = sorted([(c.start_unix_ns, 1) for c in load] + [(c.end_unix_ns, -1) for c in load])
    peak = running = 0
    for _, step in starts:
        running += step
        peak = max(peak, running)
    every = [*serial, *load]
    waits = [c.admission_s or 0.0 for c in load]
    serial_end = max((c.end_unix_ns for c in serial), default=0)
    asked = min((c.start_unix_ns - int((c.admission_s or 0.0) * NS_PER_S) for c in load), default=0)
    return RunFigures(
        label=label,
        serial_cells=len(serial),
        serial_median=_median(rates),
        beside_cells=len(beside),
        beside_median=_median(beside_rates),
        cost=None if reference is None or not baseline else 1.0 - reference / baseline,
        ceiling_hits=sum(1 for c in serial if ceiling_hit(c)),
        serial_longest_s=max((c.elapsed_s for c in serial), default=0.0),
        load_cells=len(load),
        load_wall_s=(max(c.end_unix_ns for c in load) - asked) / NS_PER_S if load else 0.0,
        load_peak=peak,
        load_waited_max_s=max(waits, default=0.0),
        load_started_after_serial=bool(load) and all(c.start_unix_ns >= serial_end for c in load),
        both_wall_s=(max(c.end_unix_ns for c in every) - min(c.start_unix_ns for c in every)) / NS_PER_S
        if every
        else 0.0,
    )


def governed_answer(serial_eval: str, open_run: RunFigures, governed: RunFigures) -> str:
    """Act 5 in one line: what the rules saved the serial eval, and what they cost in wall time."""
    if open_run.cost is None or governed.cost is None:
        return f"{serial_eval}: no decode rates in Act 5's cells, so no cost to compare"
    if not open_run.beside_cells:
        return (
            f"without rules, no cell of {serial_eval} ran wholly beside the nemotron eval (its span "
            f"was shorter than a cell), so there is no cost to compare; with them the nemotron eval "
            f"waited up to {governed.load_waited_max_s:.0f} model s"
        )
    return (
        f"with the rules, {serial_eval} paid {round(governed.cost * 100)}% "
        f"(n={governed.serial_cells} cells, {governed.beside_cells} beside the neighbour) "
        f"against {round(open_run.cost * 100)}% without (n={open_run.beside_cells} beside), "
        f"{governed.ceiling_hits} ceiling hits against {open_run.ceiling_hits}; the nemotron eval "
        f"waited up to {governed.load_waited_max_s:.0f} model s, then ran {governed.load_peak} wide; "
        f"both evals took {governed.both_wall_s:.0f} model s against {open_run.both_wall_s:.0f}"
    )


def load_eval_main() -> None:
    """The nemotron runner of Act 5, in a process of its own: follows the box's model clock,
    records into the demo's store, governs with the rules file when given one, says "ready",
    waits for the model time to start at (a line on stdin), runs its cells, and exits."""
    import spark_otel

    from ..governor import govern
    from ..telemetry import configure

    config = json.loads(sys.argv[1])
    telemetry = configure(
        service_name="spark-otel-demo",
        store=config["store"],
        metric_export_interval_ms=60_000,
        clock=follow(config["clock_url"]),
    )
    if config.get("adaptive"):
        govern(state=config["state"], adaptive=True)
    elif config["rules"]:
        govern(config["rules"], state=config["state"])
    spark_otel.instrument()
    client = openai_client(config["url"])
    model = client.models.list().data[0].id
    print("ready", flush=True)
    start_at = int(sys.stdin.readline())
    while _clock.wall_ns() < start_at:
        sleep_model(1.0)
    lane = Lane(
        client=client,
        model=model,
        eval_name=config["eval"],
        engine=LOAD_ENGINE,
        workers=LOAD_WORKERS,
        tokens=tuple(config["tokens"]),
        prompt_chars=config["prompt_chars"],
        stream=False,
    )
    lane.run_set(config["cells"], **{DEMO_ACT: config["act"]})
    spark_otel.uninstrument()
    telemetry.force_flush()
    telemetry.shutdown()


class _LoadRunner:
    """The Act 5 nemotron runner as a child process."""

    def __init__(self, config: dict[str, Any]) -> None:
        code = "from spark_otel.demo.governed import load_eval_main; load_eval_main()"
        env = {
            k: v for k, v in os.environ.items() if k not in ("SPARK_OTEL_RULES", "SPARK_OTEL_GOVERNOR_STATE")
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(_READY_S)
        if not ready or ready[0].strip() != "ready":
            self.proc.kill()
            raise EngineError(f"the demo's nemotron runner did not start within {_READY_S:.0f} s")

    def start_at(self, unix_ns: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{unix_ns}\n")
        self.proc.stdin.close()

    def wait(self) -> None:
        try:
            code = self.proc.wait(_DONE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise EngineError("the demo's nemotron runner did not finish") from None
        if code != 0:
            raise EngineError(f"the demo's nemotron runner exited with {code}")


def _load_start_ns(plan: DemoPlan, now_ns: int) -> int:
    """When Act 5's nemotron runner starts its cells: ``governed_load_after_s`` model seconds
    after ``now_ns``, midway through the serial eval's first cell."""
    return now_ns + int(plan.governed_load_after_s * NS_PER_S)


ACT5_RUNS = (
    ("5-open", "without rules"),
    ("5-governed", "with the rules"),
    ("5-adaptive", "adaptive, no rules"),
)
"""Act 5's runs, in order: their `DEMO_ACT` value and their label."""


def run_governed_act(
    plan: DemoPlan,
    *,
    urls: dict[str, str],
    qwen: Any,
    qwen_model: str,
    serial_eval: str,
    load_eval: str,
    store_path: Path,
    rules_path: Path,
    state_path: Path,
    on_phase: Any,
) -> None:
    """Act 5's three runs, the open one first, then with the rules, then governed by the
    deadline-slack law with no rules file (a fresh state file beside ``state_path``: nothing
    measured before, and the serial cells declare their ``max_tokens``); their cells carry
    `DEMO_ACT`."""
    from ..governor import govern, ungovern

    for act, _label in ACT5_RUNS:
        adaptive = act == "5-adaptive"
        rules = rules_path if act == "5-governed" else None
        state = (
            state_path.with_name(f"{state_path.stem}-adaptive{state_path.suffix}") if adaptive else state_path
        )
        on_phase(f"Act 5: the serial eval and, from another process, nemotron at 4 workers ({act[2:]})")
        if rules is not None:
            govern(rules, state=state)
        elif adaptive:
            govern(state=state, adaptive=True)
        try:
            runner = _LoadRunner(
                {
                    "url": urls[LOAD_ENGINE],
                    "clock_url": urls[SERIAL_ENGINE],
                    "store": str(store_path),
                    "rules": str(rules) if rules is not None else "",
                    "adaptive": adaptive,
                    "state": str(state),
                    "eval": load_eval,
                    "cells": plan.governed_load_cells,
                    "tokens": list(plan.governed_load_tokens),
                    "prompt_chars": plan.load_prompt_chars,
                    "act": act,
                }
            )
            serial = Lane.serial(
                qwen, qwen_model, serial_eval, plan.governed_serial_tokens, plan.serial_prompt_chars
            )
            declared = {"max_tokens": plan.governed_serial_tokens[1]} if adaptive else {}
            runner.start_at(_load_start_ns(plan, _clock.wall_ns()))
            serial.run_set(plan.governed_serial_cells, **{DEMO_ACT: act}, **declared)
            runner.wait()
        finally:
            ungovern()
