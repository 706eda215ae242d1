"""A cell's class, and whether it is ceiling-bound, known at admission from what it declares.

The rules hold by class and for ceiling-bound cells, not by eval name, so the next run of an
eval is governed whatever it is called. At admission the governor knows what the cell declares
(its ceiling ``deadline_s``, its ``cell_class``, its prompt size where the runner or an
integration passes it) and, from the rules file, its eval family's history (`History`: the
eval's name without its run id, `eval_family`):

* **class**: the one declared; else long-context when the declared prompt reaches the file's
  ``long_context_prompt_tokens``; else the family's most common class on the engine; else the
  class a version 1 limit gives the eval by name.
* **ceiling-bound**: a cell with no ceiling never is. With history, it is when its family's
  (class's) p90 length alone, slowed by the engine's measured ``slowdown`` beside its costliest
  neighbour, reaches ``ceiling_bound_fraction`` of its own ceiling: the cell could come near its
  ceiling if a neighbour ran. With no history (an eval never measured), a cell with a ceiling is
  taken as ceiling-bound: protecting a deadline nobody measured is the safe side, and one run
  then ``advise`` makes it precise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..records.eval_family import eval_family
from ..records.rules_file import RulesFile

__all__ = ["Profile", "near_ceiling", "profile"]

Evidence = Literal["history", "no ceiling", "no history"]


@dataclass(frozen=True, slots=True)
class Profile:
    """What the rules see of a cell at admission."""

    cell_class: str | None
    ceiling_bound: bool
    evidence: Evidence
    """What decided ``ceiling_bound``."""


def profile(
    rules: RulesFile,
    *,
    engine: str,
    eval_name: str,
    deadline_s: float | None,
    cell_class: str | None = None,
    prompt_tokens: int | None = None,
) -> Profile:
    """The cell's class and whether it is ceiling-bound (see the module's docstring)."""
    history = rules.history_of(engine, eval_family(eval_name)) if rules.history else []
    if cell_class is None and prompt_tokens is not None and prompt_tokens >= rules.long_context_prompt_tokens:
        cell_class = "long-context"
    if cell_class is None and history:
        cell_class = max(history, key=lambda h: (h.share, h.n_cells)).cell_class
    if cell_class is None and rules.limit:
        cell_class = rules.class_of(eval_name)
    if deadline_s is None:
        return Profile(cell_class, False, "no ceiling")
    if not history:
        return Profile(cell_class, True, "no history")
    same = [h for h in history if h.cell_class == cell_class] or history
    p90_alone_s = max(h.p90_alone_s for h in same)
    bound = near_ceiling(
        p90_alone_s, rules.slowdown.get(engine, 1.0), rules.ceiling_bound_fraction, deadline_s
    )
    return Profile(cell_class, bound, "history")


def near_ceiling(p90_alone_s: float, slowdown: float, fraction: float, ceiling_s: float) -> bool:
    """Ceiling-bound: the p90 length alone, at the measured slowdown, reaches ``fraction`` of the
    ceiling (the advisor's test, with the slowdown a neighbour costs)."""
    return p90_alone_s * slowdown >= fraction * ceiling_s
