"""Admission: a cell waits for its lane, holds a slot while it runs, and frees it however it ends.

`Governor.admit` (threads) and `Governor.aadmit` (asyncio, never blocking the loop) queue the
cell in the shared state and poll until the rules and the queue let it start; `Governor.release`
frees the slot. The rules file is read again whenever it changes on disk, so an edit takes
effect at the next admission without restarting anything.

Never break the eval: when the state file cannot be read or written, or the rules file is
missing, unreadable, empty or invalid, the cell runs unthrottled and the failure is logged once,
as one line naming the file (fail-open, the default); with ``fail_closed=True`` a
`GovernorError` is raised before the cell starts.

A cell whose lease lapsed while it ran (its process stopped or starved past it) is told so by
`Governor.release`: the caller marks its span, and the lapse is counted in
``spark_otel.governor.lease_lapses``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from opentelemetry.metrics import MeterProvider

from .. import _clock
from .. import _semconv as sc
from .._exceptions import ConfigError, GovernorError, InputError
from .._files import check_regular
from .._guard import report_failure
from ..live_progress import LiveProgress
from ..model import AttributeValue
from ..records.rules_file import RulesFile, load_rules
from ..telemetry.instruments import instruments
from .costs import NeighbourCosts
from .decision import InFlight
from .knee import KneeCap
from .slack import Hysteresis, SlackParams, SlackReason, SlackVerdict, decide
from .state import BoxNow, Decision, Lapse, Lease, SharedState, default_state_path

__all__ = ["Admission", "Governor", "GovernorError"]

_logger = logging.getLogger(__name__)
POLL_S = 0.05
"""How often a waiting cell asks again (real seconds, with jitter): the hand-off latency."""
REPORT_WAIT_S = 120.0
"""A cell still waiting after this many real seconds is reported (a warning naming it, its lane
and what holds it), once: a wait is never unbounded without a word, whatever holds it (a rule,
a protected cell that never ends, a fact the law lacks)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """A cell let in: its slot (None when it ran ungoverned), how long it waited and what held it."""

    slot: int | None
    cell: InFlight
    waited_s: float
    """Model seconds, like the cell's own times."""
    rule: str | None
    """The rule that held the cell back last, if any did."""
    verdict: SlackVerdict | None = None
    """The deadline-slack law's verdict it was admitted on (adaptive governing)."""
    held: SlackVerdict | None = None
    """The law's last hold of it, if it held it."""
    held_s: float = 0.0
    """The law's own share of ``waited_s`` (model s): from each attempt it held the cell at to
    the next attempt it did not (a rule, or the queue ahead, holding the rest)."""
    holds: int = 0
    """How many times the law began holding it (consecutive held attempts are one hold)."""

    def span_attributes(self) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {sc.CELL_QUEUE_WAIT_S: self.waited_s}
        if self.rule is not None:
            attrs[sc.CELL_QUEUE_RULE] = self.rule
        if self.cell.cell_class is not None:
            attrs[sc.CELL_CLASS] = self.cell.cell_class
        if self.verdict is not None:
            attrs[sc.CELL_ADAPTIVE_REASON] = self.verdict.reason.value
            if self.verdict.protected is not None:
                attrs[sc.CELL_ADAPTIVE_PROTECTED] = self.verdict.protected.name
            if (p := self.verdict.projection) is not None:
                attrs[sc.CELL_ADAPTIVE_FINISH_S] = round(p.finish_s, 3)
                if math.isfinite(p.margin):  # no ceiling (a slowdown budget alone): no margin
                    attrs[sc.CELL_ADAPTIVE_MARGIN] = round(p.margin, 4)
                attrs[sc.CELL_ADAPTIVE_RATE] = round(p.rate_used, 3)
        if self.held is not None:
            attrs[sc.CELL_ADAPTIVE_HELD_REASON] = self.held.reason.value
            if self.held.protected is not None:
                attrs[sc.CELL_ADAPTIVE_HELD_FOR] = self.held.protected.name
        if self.verdict is not None or self.held is not None:  # the law judged it
            attrs[sc.CELL_ADAPTIVE_HELD_S] = round(self.held_s, 3)
            attrs[sc.CELL_ADAPTIVE_HOLDS] = self.holds
        return attrs


_NO_RULES = RulesFile()


class Governor:
    """The rules in ``rules_path``, enforced through the state file at ``state_path`` (default:
    beside the embedded store) for every process that governs with the same file; with
    ``adaptive``, the deadline-slack law (`slack`) too, on every engine, with or without rules
    (``rules_path`` None: the law alone)."""

    def __init__(
        self,
        rules_path: str | os.PathLike[str] | None,
        *,
        state_path: str | os.PathLike[str] | None = None,
        fail_closed: bool = False,
        poll_s: float = POLL_S,
        adaptive: bool = False,
        params: SlackParams | None = None,
        report_wait_s: float = REPORT_WAIT_S,
        slowdown_budget: float | None = None,
    ) -> None:
        if not poll_s > 0:
            raise ConfigError(f"poll_s must be positive, got {poll_s!r}")
        if not report_wait_s > 0:
            raise ConfigError(f"report_wait_s must be positive, got {report_wait_s!r}")
        if slowdown_budget is not None and not 0 < slowdown_budget < 1:
            raise ConfigError(
                "slowdown budget must be a share between 0 and 1 (0.1: at most 10% slower), "
                f"got {slowdown_budget!r}"
            )
        if rules_path is None and not adaptive:
            raise ConfigError("govern: name a rules file, or govern adaptively (adaptive=True)")
        self.rules_path = Path(rules_path) if rules_path is not None else None
        self.adaptive = adaptive
        self.params = params or SlackParams()
        self._costs = NeighbourCosts(prior=self.params.prior_factor)
        self._knee = KneeCap()
        """Each engine's throughput knee, for when the law has nothing to protect."""
        self._memory: dict[str, Hysteresis] = {}
        """The law's hysteresis, per candidate engine."""
        self._law_lock = threading.Lock()
        self.fail_closed = fail_closed
        self.poll_s = poll_s
        self.report_wait_s = report_wait_s
        self.slowdown_budget = slowdown_budget
        """This process's cells' slowdown budget, declared on their slots: the law, in every
        process on the box, admits no neighbour that would slow them past it."""
        self.state = SharedState(Path(state_path) if state_path is not None else default_state_path())
        self._lease = Lease(
            self.state, lambda exc: report_failure("governor lease renewal", exc), self.live_progress
        )
        self._lock = threading.Lock()
        self._running: dict[int, Callable[[], LiveProgress]] = {}
        """Each admitted cell's progress, by slot, published with every lease renewal."""
        self._rules: RulesFile | None = None
        self._rules_key: tuple[int, int] | None = None
        self._rules_error: ConfigError | None = None
        self._long_waits: set[str] = set()

    # -- rules ----------------------------------------------------------------------------------------
    def rules(self) -> RulesFile | None:
        """The rules as the file says now (read again when it changed); None when it cannot be
        read or is invalid, which fail-open logs once and fail-closed raises. Adaptive with no
        rules file: no rules (the law alone)."""
        if self.rules_path is None:
            return _NO_RULES
        error: ConfigError | None = None
        try:
            info = self.rules_path.stat()
            key: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
            if not stat.S_ISREG(info.st_mode):
                key, error = None, _not_regular(self.rules_path)
        except OSError as exc:
            key = None
            error = ConfigError(f"{self.rules_path}: cannot read the rules file: {exc.strerror or exc}")
        with self._lock:
            if key is not None and key != self._rules_key:
                try:
                    self._rules, self._rules_error = (
                        _nonempty(load_rules(self.rules_path), self.rules_path),
                        None,
                    )
                except ConfigError as exc:
                    self._rules, self._rules_error = None, exc
                self._rules_key = key
            elif key is None:
                self._rules, self._rules_error, self._rules_key = None, error, None
            rules, error = self._rules, self._rules_error
        if error is not None:
            if self.fail_closed:
                raise GovernorError(f"governor (fail-closed): {error}") from error
            report_failure(f"governor rules {self.rules_path}", error)
        return rules

    # -- admission ------------------------------------------------------------------------------------
    def _governed(self, cell: InFlight) -> RulesFile | None:
        rules = self.rules()
        if rules is None:
            return None
        if self.adaptive:
            self._costs.measured = rules.slowdown
            return rules
        return rules if cell.engine in rules.engines_governed() else None

    def _budgeted(self, cell: InFlight) -> InFlight:
        if self.slowdown_budget is None or cell.slowdown_budget is not None:
            return cell
        return replace(cell, slowdown_budget=self.slowdown_budget)

    def judge(self, cell: InFlight, box: BoxNow) -> SlackVerdict:
        """The deadline-slack law for ``cell`` on the box now, with this process's learned
        neighbour costs and hysteresis (per candidate engine)."""
        now_s = _clock.real_monotonic_ns() / _clock.NS_PER_S
        with self._law_lock:
            self._costs.observe(now_s, box.widths, box.rates)

            def factor(protected: Any) -> float:
                return self._costs.factor(protected.engine, cell.engine, box.widths)

            memory = self._memory.get(cell.engine, Hysteresis())
            verdict, self._memory[cell.engine] = decide(box.protected, factor, memory, now_s, self.params)
            if verdict.reason is SlackReason.NOTHING_PROTECTED and not self._knee.admits(
                cell.engine, ((a, r) for e, a, r in box.admitted if e == cell.engine), _clock.real_wall_ns()
            ):
                verdict = SlackVerdict(SlackReason.KNEE)
        return verdict

    def _failed(self, exc: BaseException) -> None:
        if self.fail_closed:
            raise GovernorError(
                f"governor (fail-closed): the state file {self.state.path} failed: {exc}"
            ) from exc
        report_failure(f"governor state {self.state.path}", exc)

    def admit(
        self, cell: InFlight, cell_id: str | None, *, meter_provider: MeterProvider | None = None
    ) -> Admission:
        """Wait (blocking this thread) until ``cell`` may start; the slot is the caller's to release."""
        cell = self._budgeted(cell)
        rules = self._governed(cell)
        if rules is None:
            return Admission(None, cell, 0.0, None)
        waiter = _Waiter(self, cell, cell_id, meter_provider)
        try:
            while True:
                decision = waiter.attempt(rules)
                if decision is None or decision.slot is not None:
                    return waiter.admitted(decision)
                waiter.report_long_wait()
                time.sleep(self.poll_s * random.uniform(0.8, 1.2))
                rules = self._governed(cell)
                if rules is None:
                    return waiter.admitted(None)
        finally:
            waiter.leave()

    async def aadmit(
        self, cell: InFlight, cell_id: str | None, *, meter_provider: MeterProvider | None = None
    ) -> Admission:
        """`admit` for asyncio: each attempt runs in a worker thread, the wait is an
        ``asyncio.sleep``; a cancelled wait leaves the queue (and frees a slot won meanwhile)."""
        cell = self._budgeted(cell)
        rules = self._governed(cell)
        if rules is None:
            return Admission(None, cell, 0.0, None)
        waiter = _Waiter(self, cell, cell_id, meter_provider)
        try:
            while True:
                attempt = asyncio.ensure_future(asyncio.to_thread(waiter.attempt, rules))
                try:
                    decision = await asyncio.shield(attempt)
                except asyncio.CancelledError:
                    attempt.add_done_callback(waiter.undo)
                    raise
                if decision is None or decision.slot is not None:
                    return waiter.admitted(decision)
                waiter.report_long_wait()
                await asyncio.sleep(self.poll_s * random.uniform(0.8, 1.2))
                rules = self._governed(cell)
                if rules is None:
                    return waiter.admitted(None)
        finally:
            waiter.leave()

    def running(self, admission: Admission, progress: Callable[[], LiveProgress]) -> None:
        """The admitted cell started: publish what ``progress`` says of it about once a second,
        with the lease renewal, until its slot is released."""
        if admission.slot is not None:
            with self._lock:
                self._running[admission.slot] = progress

    def live_progress(self) -> dict[int, LiveProgress]:
        """Each running cell's progress now, by slot; a cell whose progress fails is left out
        (logged once) and the others are published."""
        with self._lock:
            running = list(self._running.items())
        live: dict[int, LiveProgress] = {}
        for slot, progress in running:
            try:
                live[slot] = progress()
            except Exception as exc:
                report_failure("governor live progress", exc)
        return live

    def waited_past_deadline(self, admission: Admission, cell_id: str, deadline_s: float | None) -> bool:
        """Whether the cell waited longer than its own ceiling: allowed (the ceiling counts from
        when the cell starts) but reported, with a warning once per eval."""
        if deadline_s is None or admission.waited_s <= deadline_s:
            return False
        eval_name = admission.cell.eval_name
        with self._lock:
            first = eval_name not in self._long_waits
            self._long_waits.add(eval_name)
        if first:
            _logger.warning(
                "spark-otel governor: cell %s of %s waited %.1f s for its lane (%s), longer than its "
                "own %.1f s ceiling; later cells of %s that do so are marked on their spans only "
                "(spark-otel lanes shows what holds them)",
                cell_id, eval_name, admission.waited_s, admission.rule, deadline_s, eval_name,
            )  # fmt: skip
        return True

    def release(self, admission: Admission, *, meter_provider: MeterProvider | None = None) -> Lapse | None:
        """The cell ended (any way): free its slot, and say whether its lease lapsed while it ran
        (counted in the lease-lapse metric). A failure is logged once; the slot's lease then
        lapses within seconds."""
        if admission.slot is None:
            return None
        with self._lock:
            progress = self._running.pop(admission.slot, None)
        lapse = None
        try:
            end = None
            if progress is not None:
                try:
                    end = progress()
                except Exception as exc:
                    report_failure("governor live progress", exc)
            lapse = self.state.release(admission.slot, admission.cell, end).lapse
        except Exception as exc:
            report_failure(f"governor state {self.state.path}", exc)
        finally:
            self._lease.drop()
            _add(meter_provider, "governor_slots", -1, admission.cell.engine)
        if lapse is not None:
            attrs: dict[str, AttributeValue] = {
                sc.ENGINE: lapse.engine,
                sc.EVAL_NAME: lapse.eval_name,
                sc.GOVERNOR_SLOT_TAKEN: lapse.taken,
            }
            try:
                instruments(meter_provider).governor_lease_lapses.add(1, attrs)
            except Exception as exc:
                report_failure("governor metrics", exc)
            _logger.warning(
                "spark-otel governor: cell %s of %s ran %.1f s past its lease on %s (its process was "
                "stopped or starved)%s; its span is marked",
                lapse.cell_id, lapse.eval_name, lapse.lapsed_s, lapse.engine,
                ", and its slot was given to another cell meanwhile" if lapse.taken else "",
            )  # fmt: skip
        return lapse

    def close(self) -> None:
        self.state.close()


def _not_regular(path: Path) -> ConfigError:
    """The rules path that is not a file, named by kind (a FIFO, a device, a directory) as every
    reader of a user's file names it."""
    try:
        check_regular(path, what="rules file")
    except InputError as exc:
        return ConfigError(str(exc))
    return ConfigError(f"rules file {path}: not a regular file")  # replaced by one meanwhile


def _nonempty(rules: RulesFile, path: Path) -> RulesFile:
    """``rules``, unless the file said nothing at all (0 bytes, or only comments: a truncated
    file, most often), which is an error: a fail-open governor warns and governs nothing, a
    fail-closed one refuses the cell. A file with tables and no rules (the advisor had nothing
    to say yet) is valid."""
    if not rules.model_fields_set:
        raise ConfigError(f"{path}: the rules file is empty: no rules, no engines; nothing is governed")
    return rules


def _add(meter_provider: MeterProvider | None, field: str, delta: int, engine: str) -> None:
    try:
        getattr(instruments(meter_provider), field).add(delta, {sc.ENGINE: engine})
    except Exception as exc:
        report_failure("governor metrics", exc)


class _Waiter:
    """One cell's way through the queue: its ticket, how long it has waited, what held it."""

    def __init__(self, governor: Governor, cell: InFlight, cell_id: str | None, meter_provider: Any) -> None:
        self.governor = governor
        self.cell = cell
        self.cell_id = cell_id
        self.meter_provider = meter_provider
        self.started_ns = _clock.real_monotonic_ns()
        self.ticket: int | None = None
        self.rule: str | None = None
        self.queued = False
        self.verdict: SlackVerdict | None = None
        self.held: SlackVerdict | None = None
        self.holds = 0
        self.held_real_s = 0.0
        self.holding_since_ns: int | None = None
        """When the law's current hold began (real monotonic), while it holds the cell."""
        self.reported = False

    def waited_real_s(self) -> float:
        return (_clock.real_monotonic_ns() - self.started_ns) / _clock.NS_PER_S

    def attempt(self, rules: RulesFile) -> Decision | None:
        """One try; None when the state failed (fail-open: the cell goes ungoverned)."""
        try:
            decision = self.governor.state.attempt(
                self.cell,
                self.cell_id,
                rules,
                ticket=self.ticket,
                waited_s=self.waited_real_s(),
                judge=self.governor.judge if self.governor.adaptive else None,
            )
        except Exception as exc:  # never into the user's eval: fail open (or closed, if asked)
            self.governor._failed(exc)
            return None
        self.ticket = decision.ticket
        self.verdict = decision.verdict
        self._count_hold(decision.verdict is not None and not decision.verdict.admit)
        if decision.verdict is not None and not decision.verdict.admit:
            if self.held is None or self.held.reason is not decision.verdict.reason:
                attrs = {sc.ENGINE: self.cell.engine, sc.GOVERNOR_HOLD_REASON: decision.verdict.reason.value}
                try:
                    instruments(self.meter_provider).governor_adaptive_holds.add(1, attrs)
                except Exception as exc:
                    report_failure("governor metrics", exc)
            self.held = decision.verdict
        if decision.slot is None:
            self.rule = decision.rule
            if not self.queued:
                self.queued = True
                self.governor._lease.hold()
                _add(self.meter_provider, "governor_queue", 1, self.cell.engine)
        return decision

    def _count_hold(self, law_holds: bool) -> None:
        """The law's share of the wait: a hold runs from the attempt it began at to the first
        attempt it did not hold the cell at (or the end of the wait)."""
        now = _clock.real_monotonic_ns()
        if law_holds and self.holding_since_ns is None:
            self.holding_since_ns = now
            self.holds += 1
        elif not law_holds and self.holding_since_ns is not None:
            self.held_real_s += (now - self.holding_since_ns) / _clock.NS_PER_S
            self.holding_since_ns = None

    def report_long_wait(self) -> None:
        """Past `Governor.report_wait_s`, say once that this cell still waits, and what holds it
        (the rule, or the law's reason and the cell it protects); it goes on waiting."""
        if self.reported or self.waited_real_s() < self.governor.report_wait_s:
            return
        self.reported = True
        _logger.warning(
            "spark-otel governor: cell %s of %s has waited %.0f s (real) for its lane on %s, held by %s; "
            "it goes on waiting (spark-otel lanes shows what holds it)",
            self.cell_id, self.cell.eval_name, self.waited_real_s(), self.cell.engine, self.rule,
        )  # fmt: skip

    def admitted(self, decision: Decision | None) -> Admission:
        self._count_hold(False)
        slot = decision.slot if decision is not None else None
        waited = _clock.to_clock_s(self.waited_real_s()) if self.queued else 0.0
        if slot is not None:
            self.governor._lease.hold()
            _add(self.meter_provider, "governor_slots", 1, self.cell.engine)
            try:
                instruments(self.meter_provider).governor_wait.record(
                    waited, {sc.ENGINE: self.cell.engine, sc.EVAL_NAME: self.cell.eval_name}
                )
            except Exception as exc:
                report_failure("governor metrics", exc)
        verdict = self.verdict if slot is not None else None
        held_s = min(waited, _clock.to_clock_s(self.held_real_s)) if self.queued else 0.0
        return Admission(slot, self.cell, waited, self.rule, verdict, self.held, held_s, self.holds)

    def leave(self) -> None:
        """However the wait ended: out of the queue, and the queue gauge down."""
        if self.ticket is not None:
            self._withdraw(self.ticket)
            self.ticket = None
        if self.queued:
            self.queued = False
            self.governor._lease.drop()
            _add(self.meter_provider, "governor_queue", -1, self.cell.engine)

    def _withdraw(self, ticket: int) -> None:
        try:
            self.governor.state.withdraw(ticket)
        except Exception as exc:
            report_failure(f"governor state {self.governor.state.path}", exc)

    def undo(self, attempt: asyncio.Future[Decision | None]) -> None:
        """The wait was cancelled while an attempt ran: undo what the attempt won or queued."""
        if attempt.cancelled() or attempt.exception() is not None:
            return
        decision = attempt.result()
        if decision is None:
            return
        if decision.ticket is not None:
            self._withdraw(decision.ticket)
        if decision.slot is not None:
            try:
                self.governor.state.release(decision.slot, self.cell)
            except Exception as exc:
                report_failure(f"governor state {self.governor.state.path}", exc)
