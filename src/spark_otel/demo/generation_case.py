"""The generation-heavy case (issue 37, item 5's second case): one eval of long answers, no
ceiling, no rules, on the mixture-of-experts engine, whose aggregate throughput has a knee (82
tok/s at one stream, 262 at eight, 181 at sixteen): run at static worker counts and under
``govern(adaptive=True)`` with the most workers, the deadline-slack law has nothing to protect
and the throughput knee (`spark_otel.governor.knee`) sets the width.

Each arm runs on a fresh simulated box and store, one after another (`article_case.runner_main`
runs the eval, streamed). `GenerationFigures` says what each did, read from its store: the wall
and the width the eval held longest while it still had cells to start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .._clock import NS_PER_S
from .article_case import _boxes, _spawn

__all__ = ["GENERATION_EVAL", "GenerationCase", "GenerationFigures", "generation_figures", "run_generation"]

GENERATION_EVAL = "generation"
_DONE_S = 600.0


@dataclass(frozen=True)
class GenerationCase:
    """The sizes: ``cells`` answers of ``tokens`` each on nemotron; static arms at each of
    ``widths`` workers, the adaptive arm at the widest."""

    speed: float = 10.0
    """Eight streams of about 33 tok/s each: 2,600 chunks a real second, what a loaded core reads."""
    cells: int = 96
    tokens: int = 600
    """1.3 real s at four streams at 10x (where the knee's ramp starts): long enough for a cell's
    live rate to show; 5.3 s at sixteen."""
    widths: tuple[int, ...] = (1, 2, 4, 8, 16)

    @property
    def arms(self) -> tuple[str, ...]:
        return (*(f"static-{w}" for w in self.widths), "adaptive")

    def workers(self, arm: str) -> int:
        return max(self.widths) if arm == "adaptive" else int(arm.removeprefix("static-"))


@dataclass(frozen=True)
class GenerationFigures:
    """One arm, from its store, in model seconds."""

    arm: str
    workers: int
    cells: int
    wall_s: float
    """From the first cell asking (its start less its wait) to the last one's end."""
    held_width: int
    """The width (cells in flight) held longest between the first start and the last start."""
    peak_width: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def generation_figures(arm: str, workers: int, cells: Sequence[Any]) -> GenerationFigures:
    """`GenerationFigures` from the eval's stored cells (pure)."""
    if not cells:
        return GenerationFigures(arm, workers, 0, 0.0, 0, 0)
    last_start = max(c.start_unix_ns for c in cells)
    edges = sorted([(c.start_unix_ns, 1) for c in cells] + [(c.end_unix_ns, -1) for c in cells])
    held: dict[int, int] = {}
    width = peak = 0
    at = edges[0][0]
    for t, step in edges:
        if t > at and at < last_start:
            held[width] = held.get(width, 0) + min(t, last_start) - at
        at = t
        width += step
        peak = max(peak, width)
    asked = min(c.start_unix_ns - int((c.admission_s or 0.0) * NS_PER_S) for c in cells)
    return GenerationFigures(
        arm=arm,
        workers=workers,
        cells=len(cells),
        wall_s=(max(c.end_unix_ns for c in cells) - asked) / NS_PER_S,
        held_width=max(held, key=lambda w: held[w]) if held else peak,
        peak_width=peak,
    )


def run_generation(
    case: GenerationCase, folder: Path, arms: Sequence[str] | None = None
) -> dict[str, GenerationFigures]:
    """Each arm of ``arms`` (default: every static width, then adaptive) in turn on a fresh box;
    their figures by arm."""
    from ..store import Store

    figures = {}
    for arm in arms if arms is not None else case.arms:
        out = folder / arm
        out.mkdir(parents=True, exist_ok=True)
        store_path = out / "store.sqlite"
        workers = case.workers(arm)
        with _boxes(1, case.speed) as (urls,):
            proc = _spawn(
                {"mode": "adaptive" if arm == "adaptive" else "open", "state": str(out / "governor.sqlite"),
                 "store": str(store_path), "url": urls["nemotron"], "eval": GENERATION_EVAL,
                 "engine": "nemotron", "workers": workers, "tokens": [case.tokens] * case.cells,
                 "ceiling_s": 0, "max_tokens": 0, "stream": True}
            )  # fmt: skip
            proc.communicate(timeout=_DONE_S)
            if proc.returncode != 0:
                raise RuntimeError(f"generation arm {arm}: the runner exited with {proc.returncode}")
        store = Store(store_path)
        try:
            figures[arm] = generation_figures(arm, workers, store.cells(eval_name=GENERATION_EVAL))
        finally:
            store.close()
    return figures
