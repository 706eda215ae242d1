"""The demo's phases as `run_demo` reports them, a recorder of them that can stop the run at one,
and the check of the box's clock read at the first two."""

from __future__ import annotations

from spark_otel import _clock
from spark_otel._clock import NS_PER_S
from spark_otel.demo import DemoPlan

SPEED = 500.0


PHASES = [
    "starting the simulated box",
    "Act 2: probe on qwen, the box otherwise idle",
    "Act 2: probe on nemotron, the box otherwise idle",
    "Act 3: 8 cells on qwen at one worker",
    "Act 3: the same cells at 8 workers",
    "Act 4: the serial eval on qwen, alone",
    "Act 4: the serial eval beside 1 more qwen stream(s)",
    "Act 4: the serial eval beside 4 more qwen stream(s)",
    "Act 4: quiet gap",
    "Act 4: the serial eval beside an eval at 4 workers on nemotron",
    "Act 4: the serial eval alone again",
    "reading the evals' own records",
    "Act 5: the serial eval and, from another process, nemotron at 4 workers (open)",
    "Act 5: the serial eval and, from another process, nemotron at 4 workers (governed)",
    "Act 5: the serial eval and, from another process, nemotron at 4 workers (adaptive)",
    "reading Act 5's records",
]


class Phases:
    """The phases as reported, with the clocks read at the two that fix the box's epoch; with
    ``stop_at``, the run is stopped there (an exception out of the callback)."""

    def __init__(self, stop_at: str | None = None) -> None:
        self.names: list[str] = []
        self.stop_at = stop_at
        self.real_before_box_ns = 0
        self.real_at_probe_ns = self.model_at_probe_ns = 0

    def __call__(self, name: str) -> None:
        self.names.append(name)
        if name == PHASES[0]:
            self.real_before_box_ns = _clock.real_wall_ns()
        elif name == PHASES[1]:
            self.model_at_probe_ns, self.real_at_probe_ns = _clock.wall_ns(), _clock.real_wall_ns()
        if self.stop_at is not None and name == self.stop_at:
            raise Stopped(name)


class Stopped(Exception):
    pass


def check_the_box_clock(phases: Phases, plan: DemoPlan) -> None:
    """The box's model time starts 1.25 runs' worth of model time before now (so a run at a
    sensible speed ends near the real present): read between the box's start and the first act."""
    lead_ns = int(1.25 * plan.expected_model_s * NS_PER_S)
    box_start_span_ns = phases.real_at_probe_ns - phases.real_before_box_ns
    slack_ns = 30 * NS_PER_S  # the process's copy of the box's clock, read over HTTP
    assert phases.real_before_box_ns - lead_ns - slack_ns <= phases.model_at_probe_ns
    assert (
        phases.model_at_probe_ns
        <= phases.real_at_probe_ns - lead_ns + int(SPEED * box_start_span_ns) + slack_ns
    )
