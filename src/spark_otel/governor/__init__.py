"""The queue governor: the advisor's rules enforced at runtime, across every runner on the box.

    spark-otel advise --write-rules rules.toml      # decide, from what was measured
    SPARK_OTEL_RULES=rules.toml python runner.py     # or spark_otel.govern("rules.toml")

With a rules file in force, entering ``spark_otel.cell(...)`` waits until the cell's lane
admits it and holds a slot until the cell exits by any path. Runners share the admission state
through one SQLite file beside the embedded store, with no daemon; a killed runner's slots
are freed within seconds. See docs/governor.md.

    decision   the admission decision (`holding_rule`), pure, over a `RulesFile`
               (`spark_otel.records.rules_file`, the rules as data)
    classing   a cell's class and whether it is ceiling-bound, known at admission
    slack      the deadline-slack control law (adaptive governing), pure
    costs      what one more neighbour costs a cell's rate, learned from the live rates
    matching   which cells each rule catches (in a store's recent cells, in the lanes now)
    state      the shared state file: slots (with each cell's live progress), the queue, leases
    admission  `Governor`: waiting, holding and releasing a slot; fail-open or fail-closed
"""

from __future__ import annotations

import math
import os
import threading

from .._guard import warn_once
from ..records.rules_file import RulesFile, load_rules, parse_rules
from .admission import Admission, Governor, GovernorError
from .decision import holding_rule

__all__ = [
    "BUDGET_ENV",
    "GOVERN_ENV",
    "RULES_ENV",
    "STATE_ENV",
    "Admission",
    "Governor",
    "GovernorError",
    "RulesFile",
    "current_governor",
    "govern",
    "governor_from_environment",
    "holding_rule",
    "load_rules",
    "parse_rules",
    "ungovern",
]

RULES_ENV = "SPARK_OTEL_RULES"
GOVERN_ENV = "SPARK_OTEL_GOVERN"
"""``adaptive``: the deadline-slack law, with or without ``$SPARK_OTEL_RULES``; ``off``: no
governing at all, whatever else is set; ``static`` (or unset): the rules file alone."""
STATE_ENV = "SPARK_OTEL_GOVERNOR_STATE"
FAIL_CLOSED_ENV = "SPARK_OTEL_RULES_FAIL_CLOSED"
BUDGET_ENV = "SPARK_OTEL_SLOWDOWN_BUDGET"
"""This process's cells' slowdown budget, a share (``0.1``: at most 10% slower than their eval's
best rate), with adaptive governing."""

_current: Governor | None = None
_environment_read = False
_lock = threading.Lock()


def govern(
    rules: str | os.PathLike[str] | None = None,
    *,
    state: str | os.PathLike[str] | None = None,
    fail_closed: bool = False,
    adaptive: bool = False,
    slowdown_budget: float | None = None,
) -> Governor:
    """Enforce the rules file ``rules`` on every cell this process enters from now on; replaces
    any governor in force. ``adaptive``: also admit a cell only while every ceiling-bound cell on
    the box stays projected to finish under its ceiling with a margin (the deadline-slack law;
    ``rules`` may then be None, and the rules, if any, stay in force as caps). ``state``: the
    shared state file (default: beside the embedded store, or ``$SPARK_OTEL_GOVERNOR_STATE``).
    ``fail_closed``: raise `GovernorError` before a cell starts when the governor cannot decide,
    instead of letting it run unthrottled. ``slowdown_budget``: this process's cells (its eval,
    most often) may be made at most this much slower (0.1: 10%) than their eval's best rate by a
    neighbour the law admits anywhere on the box; for throughput, where there is no ceiling."""
    global _current
    if state is None:
        state = os.environ.get(STATE_ENV) or None
    governor = Governor(
        rules, state_path=state, fail_closed=fail_closed, adaptive=adaptive, slowdown_budget=slowdown_budget
    )
    with _lock:
        old, _current = _current, governor
    if old is not None:
        old.close()
    governor.rules()  # a bad file is said now: logged once, or (fail-closed) raised, as every cell will
    return governor


def ungovern() -> None:
    """Stop governing this process's cells (slots already held are released as their cells end)."""
    global _current
    with _lock:
        old, _current = _current, None
    if old is not None:
        old.close()


def current_governor() -> Governor | None:
    """The governor in force in this process, if any."""
    return _current


def governor_from_environment() -> Governor | None:
    """The governor in force; on the process's first call, `govern` with ``$SPARK_OTEL_RULES``
    (and ``$SPARK_OTEL_RULES_FAIL_CLOSED=1``) and ``$SPARK_OTEL_GOVERN`` when set and no
    governor is in force yet; ``SPARK_OTEL_GOVERN=off`` governs nothing, even a governor set in
    code. The first cell calls it, so the environment is read then, never at import."""
    global _environment_read
    mode = os.environ.get(GOVERN_ENV, "").strip().lower()
    if mode == "off":
        return None
    if _environment_read:
        return _current
    with _lock:
        first, _environment_read = not _environment_read, True
    path = os.environ.get(RULES_ENV) or None
    adaptive = mode == "adaptive"
    if mode not in ("", "static", "adaptive"):
        warn_once(
            f"{GOVERN_ENV} value",
            f"{GOVERN_ENV}={mode!r}: expected adaptive, static or off; governing as if it were unset",
        )
    if not first or (not path and not adaptive) or _current is not None:
        return _current
    fail_closed = os.environ.get(FAIL_CLOSED_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return govern(
        path, fail_closed=fail_closed, adaptive=adaptive, slowdown_budget=_budget_from_environment()
    )


def _budget_from_environment() -> float | None:
    """``$SPARK_OTEL_SLOWDOWN_BUDGET`` as a share; a value that is not one is warned once and
    read as unset (the cells run, governed as without it)."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw.removesuffix("%")) / (100 if raw.endswith("%") else 1)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        warn_once(
            f"{BUDGET_ENV} value",
            f"{BUDGET_ENV}={raw!r}: expected a share between 0 and 1 (0.1) or a percentage (10%); "
            "governing without a slowdown budget",
        )
        return None
    return value
