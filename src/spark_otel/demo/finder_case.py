"""The finder's case (the article's Appendix E; issue 37, item 5): one ceiling-bound eval run at
several streams on one engine, where each more stream slows every stream (the mixture-of-experts
engine: 82 tok/s alone, 33 at eight), so the long cells of a flat eight reach their ceiling.

Two arms, one after another, each on a fresh simulated box and store (`article_case.runner_main`
runs the eval): ``flat`` runs eight workers ungoverned; ``adaptive`` runs the same eight workers
under ``govern(adaptive=True)`` with no rules file, which admits a cell only while every cell in
flight (of the same eval too) stays projected under its ceiling. `FinderFigures` says what each
did, read from its store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .._clock import NS_PER_S
from .article_case import _boxes, _spawn

__all__ = ["FINDER_ARMS", "FinderCase", "FinderFigures", "run_finder"]

FINDER_ARMS = ("flat", "adaptive")
FINDER_EVAL = "finder"
_DONE_S = 600.0


@dataclass(frozen=True)
class FinderCase:
    """The sizes: each cell's answer (tokens), its ceiling and declared ``max_tokens``, on
    nemotron at ``workers`` workers."""

    speed: float = 10.0
    """Eight streams of about 33 tok/s each: 2,600 chunks a real second, what a loaded core reads."""
    tokens: tuple[int, ...] = (300, 700, 1100, 500, 900, 1200) * 4
    ceiling_s: float = 30.0
    """At eight streams a 1,100-token answer takes 34 s, at four 23 s."""
    max_tokens: int = 1200
    workers: int = 8


@dataclass(frozen=True)
class FinderFigures:
    """One arm, from its store, in model seconds."""

    arm: str
    cells: int
    ceiling_hits: int
    longest_s: float
    peak_width: int
    """The most cells in flight at once."""
    wall_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def finder_figures(arm: str, cells: Sequence[Any]) -> FinderFigures:
    """`FinderFigures` from the eval's stored cells (pure)."""
    edges = sorted([(c.start_unix_ns, 1) for c in cells] + [(c.end_unix_ns, -1) for c in cells])
    peak = width = 0
    for _, step in edges:
        width += step
        peak = max(peak, width)
    return FinderFigures(
        arm=arm,
        cells=len(cells),
        ceiling_hits=sum(1 for c in cells if c.deadline_hit),
        longest_s=max((c.elapsed_s for c in cells), default=0.0),
        peak_width=peak,
        wall_s=(max(c.end_unix_ns for c in cells) - min(c.start_unix_ns for c in cells)) / NS_PER_S
        if cells
        else 0.0,
    )


def run_finder(case: FinderCase, folder: Path, arms: Sequence[str] = FINDER_ARMS) -> dict[str, FinderFigures]:
    """Each arm in turn on a fresh box; their figures by arm."""
    from ..store import Store

    figures = {}
    for arm in arms:
        out = folder / arm
        out.mkdir(parents=True, exist_ok=True)
        store_path = out / "store.sqlite"
        with _boxes(1, case.speed) as (urls,):
            proc = _spawn(
                {"mode": "adaptive" if arm == "adaptive" else "open", "state": str(out / "governor.sqlite"),
                 "store": str(store_path), "url": urls["nemotron"], "eval": FINDER_EVAL, "engine": "nemotron",
                 "workers": case.workers, "tokens": list(case.tokens), "ceiling_s": case.ceiling_s,
                 "max_tokens": case.max_tokens, "stream": True}
            )  # fmt: skip
            proc.communicate(timeout=_DONE_S)
            if proc.returncode != 0:
                raise RuntimeError(f"finder arm {arm}: the runner exited with {proc.returncode}")
        store = Store(store_path)
        try:
            figures[arm] = finder_figures(arm, store.cells(eval_name=FINDER_EVAL))
        finally:
            store.close()
    return figures
