"""The per-eval slowdown budget (issue 37, item 3): a runner declares that its cells may be made at
most so much slower than their eval's best rate (``govern(adaptive=True, slowdown_budget=0.1)``,
or ``SPARK_OTEL_SLOWDOWN_BUDGET``); the budget goes on each of its slots, and the deadline-slack
law in every process on the box holds a neighbour that would slow them past it, with or without
a ceiling."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from spark_otel import governor
from spark_otel._exceptions import ConfigError
from spark_otel.governor import Governor
from spark_otel.governor.decision import InFlight
from spark_otel.governor.slack import Hysteresis, Protected, SlackParams, SlackReason, decide
from spark_otel.live_progress import LiveProgress

THROUGHPUT = InFlight("qwen", "nightly", None, False)
NEIGHBOUR = InFlight("nemotron", "batch", None, False)


def budgeted(**more: object) -> Protected:
    base: dict[str, object] = dict(
        cell_id="t0", engine="qwen", eval_name="nightly", deadline_s=None, elapsed_s=50.0, tokens=500,
        rate=10.0, expected_tokens=None, alone_rate=10.0, budget=0.10,
    )  # fmt: skip
    base.update(more)
    return Protected(**base)  # type: ignore[arg-type]


def test_a_neighbour_that_would_slow_a_budgeted_cell_past_its_budget_is_held() -> None:
    ok, _ = decide([budgeted()], lambda _c: 0.95, Hysteresis(), 0.0, SlackParams())
    assert ok.reason is SlackReason.SLACK  # 9.5 tok/s: 5% slower than its best
    held, memory = decide([budgeted()], lambda _c: 0.85, Hysteresis(), 0.0, SlackParams())
    assert (held.reason, held.admit, memory) == (SlackReason.BUDGET, False, Hysteresis())
    assert held.describe() == (
        "adaptive: over its slowdown budget, protecting t0 (nightly on qwen): 8.5 tok/s after the "
        "admission against its best 10.0 (budget 10% slower)"
    )
    # already slowed to 9.6 by a neighbour: one more at 0.95 leaves 9.12, within 10% of its best
    assert decide([budgeted(rate=9.6)], lambda _c: 0.95, Hysteresis(), 0.0, SlackParams())[0].admit
    # at 9.4, one more leaves 8.93: past the budget of its best 10
    assert not decide([budgeted(rate=9.4)], lambda _c: 0.95, Hysteresis(), 0.0, SlackParams())[0].admit


def test_a_budgeted_cell_with_no_rate_protects_nothing_and_a_ceiling_still_counts() -> None:
    quiet = budgeted(rate=None)
    verdict, _ = decide([quiet], lambda _c: 0.5, Hysteresis(), 0.0, SlackParams())
    assert verdict.reason is SlackReason.NOTHING_PROTECTED
    # with a ceiling too, a missing rate holds, as for any ceiling-bound cell
    bound = budgeted(rate=None, deadline_s=1000.0, expected_tokens=3000.0)
    assert (
        decide([bound], lambda _c: 0.5, Hysteresis(), 0.0, SlackParams())[0].reason
        is SlackReason.RATE_UNKNOWN
    )


def _admit(g: Governor, cell: InFlight, cell_id: str) -> int:
    rules = g.rules()
    assert rules is not None
    decision = g.state.attempt(g._budgeted(cell), cell_id, rules, ticket=None, waited_s=0.0, judge=g.judge)
    assert decision.slot is not None, decision.rule
    return decision.slot


def test_the_budget_goes_on_the_slot_and_another_process_holds_its_neighbour_to_it(
    state_path: Path, rules_file: Callable[[str], Path]
) -> None:
    nightly = Governor(None, state_path=state_path, adaptive=True, slowdown_budget=0.10)
    done = _admit(nightly, THROUGHPUT, "t0")
    nightly.state.release(done, THROUGHPUT, LiveProgress(100.0, 1000, 10.0))  # its best: 10 tok/s
    slot = nightly.admit(THROUGHPUT, "t1").slot  # the way a cell enters: the budget put on its slot
    assert slot is not None
    nightly.state.renew({slot: LiveProgress(20.0, 200, 10.0)})
    ((row_budget,),) = nightly.state._connection().execute("SELECT slowdown_budget FROM slots")
    assert row_budget == 0.10

    # the neighbour's process knows nothing of the budget but the slot: the prior 0.7 would make
    # the nightly cell 30% slower
    batch = Governor(None, state_path=state_path, adaptive=True)
    rules = batch.rules()
    assert rules is not None
    held = batch.state.attempt(NEIGHBOUR, "n0", rules, ticket=None, waited_s=0.0, judge=batch.judge)
    assert held.slot is None
    assert held.verdict is not None
    assert held.verdict.reason is SlackReason.BUDGET
    assert held.rule is not None
    assert held.rule.startswith(
        "adaptive: over its slowdown budget, protecting t1 (nightly on qwen): 7.0 tok/s"
    )
    batch.state.withdraw(held.ticket)  # type: ignore[arg-type]

    # measured: nemotron costs qwen 5% (the rules file's slowdown): within the budget
    measured = Governor(
        rules_file("version = 2\n[slowdown]\nqwen = 1.05\n"), state_path=state_path, adaptive=True
    )
    admitted = measured.state.attempt(
        NEIGHBOUR,
        "n1",
        measured._governed(NEIGHBOUR),
        ticket=None,
        waited_s=0.0,
        judge=measured.judge,  # type: ignore[arg-type]
    )
    assert admitted.slot is not None
    assert admitted.verdict is not None
    assert admitted.verdict.reason is SlackReason.SLACK
    assert admitted.verdict.projection is not None
    assert admitted.verdict.projection.rate_used == pytest.approx(10 / 1.05)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_a_budget_outside_0_to_1_is_refused_by_name(state_path: Path, bad: float) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^slowdown budget must be a share between 0 and 1 \(0\.1: at most 10% slower\), got ",
    ):
        governor.govern(state=state_path, adaptive=True, slowdown_budget=bad)


@pytest.mark.parametrize(("value", "budget"), [("0.1", 0.1), ("10%", 0.1), (" 25% ", 0.25)])
def test_the_environment_sets_the_budget(
    monkeypatch: pytest.MonkeyPatch, state_path: Path, value: str, budget: float
) -> None:
    governor.ungovern()
    monkeypatch.setattr(governor, "_environment_read", False)
    monkeypatch.delenv(governor.RULES_ENV, raising=False)
    monkeypatch.setenv(governor.GOVERN_ENV, "adaptive")
    monkeypatch.setenv(governor.STATE_ENV, str(state_path))
    monkeypatch.setenv(governor.BUDGET_ENV, value)
    g = governor.governor_from_environment()
    assert g is not None
    assert g.slowdown_budget == pytest.approx(budget)


@pytest.mark.parametrize("value", ["fast", "0", "100%", "1.5"])
def test_a_budget_in_the_environment_that_is_not_a_share_is_warned_once_and_unset(
    monkeypatch: pytest.MonkeyPatch, state_path: Path, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    governor.ungovern()
    monkeypatch.setattr(governor, "_environment_read", False)
    monkeypatch.delenv(governor.RULES_ENV, raising=False)
    monkeypatch.setenv(governor.GOVERN_ENV, "adaptive")
    monkeypatch.setenv(governor.STATE_ENV, str(state_path))
    monkeypatch.setenv(governor.BUDGET_ENV, value)
    with caplog.at_level("WARNING"):
        g = governor.governor_from_environment()
    assert g is not None
    assert g.slowdown_budget is None
    said = (
        f"SPARK_OTEL_SLOWDOWN_BUDGET={value!r}: expected a share between 0 and 1 (0.1) or a percentage "
        "(10%); governing without a slowdown budget"
    )
    assert said in caplog.text
