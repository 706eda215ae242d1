"""The demo's schedule and the simulation's ground truth: what the box was told, to check the
answers against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import _semconv as sc

__all__ = ["DEFAULT_SPEED", "DemoPlan", "box_model", "ground_truth"]

CEILING_S = 1800.0
SERIAL_ENGINE = "qwen"
LOAD_ENGINE = "nemotron"
LOAD_WORKERS = 4
_ENGINES = {SERIAL_ENGINE: "dense", LOAD_ENGINE: "moe"}
_BOX_START_S = 60.0
DEMO_SOURCE = "demo"
DEMO_RUN = "spark_otel.demo.run"
"""The attribute naming the demo run on its load windows."""
_DEMO_CELL_ATTRIBUTES: dict[str, Any] = {sc.CELL_SOURCE: DEMO_SOURCE}
STORE_FILE = "store.sqlite"
# At 100x an instrumented streamed cell reads within about 3% of the simulated rate on a 2-core
# machine; at 200x the client's own work per chunk (openai parsing, instrumentation) holds a
# serial stream about 8% under it, which understates every cost against the baseline.
DEFAULT_SPEED = 100.0
PhaseCallback = Callable[[str], None]


@dataclass(frozen=True)
class DemoPlan:
    """The demo's schedule, in model seconds, and the cells' shapes.

    Each imposed load lasts at least twice the longest serial cell, so whole cells run inside it
    and its cost reads as the simulation's, not diluted by cells half outside.
    """

    speed: float
    probe_tokens: int
    review_cells: int
    review_tokens: tuple[int, int]
    baseline_s: float
    same_engine_load_s: float
    gap_s: float
    load_s: float
    tail_s: float
    serial_tokens: tuple[int, int]
    load_tokens: tuple[int, int]
    qwen_levels: tuple[int, ...] = (1, 2, 4, 8)
    nemotron_levels: tuple[int, ...] = (1, 2, 4, 8, 16)
    review_workers: int = 8
    same_engine_loads: tuple[int, ...] = (1, 4)
    governed_serial_cells: int = 5
    """Act 5: the serial eval's cells in each run."""
    governed_serial_tokens: tuple[int, int] = (500, 800)
    governed_load_tokens: tuple[int, int] = (1500, 2500)
    """Act 5's answer lengths, the same in both schedules: the nemotron eval's span must hold
    whole serial cells (slowed by it) for the open run to price the neighbour at all."""
    governed_load_cells: int = 12
    """Act 5: the nemotron eval's cells in each run, four at a time."""
    governed_load_after_s: float = 40.0
    """Act 5: how long after the serial eval starts the nemotron runner starts its cells."""
    governed_eval_gap_s: float = 0.5
    """Act 5's rules: an eval counts as running this long (real s) after its last cell ended;
    enough for the serial runner's next cell at the demo's speed, and short in model time."""
    serial_prompt_chars: int = 1600
    load_prompt_chars: int = 800

    @property
    def expected_model_s(self) -> float:
        """About how long the run lasts in model time, from the simulation's own rates."""
        truth = box_model(self.speed)

        def level_s(engine: str, n: int) -> float:
            return float(self.probe_tokens / truth.predicted_rate(engine, n))

        probes = sum(level_s(SERIAL_ENGINE, n) for n in self.qwen_levels)
        probes += sum(level_s(LOAD_ENGINE, n) for n in self.nemotron_levels)
        mean_review = sum(self.review_tokens) / 2
        review = self.review_cells * mean_review / truth.predicted_rate(SERIAL_ENGINE, 1)
        review += self.review_tokens[1] / truth.predicted_rate(SERIAL_ENGINE, self.review_workers)
        act4 = self.baseline_s + len(self.same_engine_loads) * self.same_engine_load_s
        act4 += self.gap_s + self.load_s + self.tail_s
        serial = (
            self.governed_serial_cells
            * sum(self.governed_serial_tokens)
            / 2
            / truth.predicted_rate(SERIAL_ENGINE, 1)
        )
        waves = -(-self.governed_load_cells // LOAD_WORKERS)
        load = waves * self.governed_load_tokens[1] / truth.predicted_rate(LOAD_ENGINE, LOAD_WORKERS)
        act5 = 3 * serial + load + self.governed_load_after_s
        return float(probes + review + act4 + act5)

    @classmethod
    def full(cls, speed: float = DEFAULT_SPEED) -> DemoPlan:
        return cls(
            speed=speed,
            probe_tokens=512,
            review_cells=8,
            review_tokens=(800, 1500),
            baseline_s=1200.0,
            same_engine_load_s=400.0,
            gap_s=300.0,
            load_s=2000.0,
            tail_s=400.0,
            serial_tokens=(1200, 2000),
            load_tokens=(2000, 3000),
        )

    @classmethod
    def quick(cls, speed: float = DEFAULT_SPEED) -> DemoPlan:
        return cls(
            speed=speed,
            probe_tokens=256,
            review_cells=8,
            review_tokens=(300, 500),
            baseline_s=500.0,
            same_engine_load_s=170.0,
            gap_s=100.0,
            load_s=800.0,
            tail_s=100.0,
            serial_tokens=(500, 800),
            load_tokens=(1500, 2500),
        )


def box_model(speed: float) -> Any:
    from ..sim import BoxModel, get_profile

    return BoxModel({name: get_profile(profile) for name, profile in _ENGINES.items()}, speed=speed)


def ground_truth(plan: DemoPlan) -> dict[str, float]:
    """What the simulation was told: the serial stream's cost under each imposed load, and the
    review cells' per-cell cost at the plan's worker count."""
    box = box_model(plan.speed)
    alone = box.predicted_rate(SERIAL_ENGINE, 1)
    truth = {"baseline_rate": alone}
    for n in plan.same_engine_loads:
        name = f"{n} more {SERIAL_ENGINE} stream{'' if n == 1 else 's'}"
        truth[name] = 1.0 - box.predicted_rate(SERIAL_ENGINE, 1 + n) / alone
    truth["load"] = 1.0 - box.predicted_rate(SERIAL_ENGINE, 1, {LOAD_ENGINE: LOAD_WORKERS}) / alone
    truth["review_per_cell_cost"] = 1.0 - box.predicted_rate(SERIAL_ENGINE, plan.review_workers) / alone
    return truth
