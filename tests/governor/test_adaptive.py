"""Adaptive governing wired into admission, in one process: the deadline-slack law reads the
shared state file's slots (their live progress, their ceilings), the eval's completed cells and
the evals between cells, holds or admits, and its decision lands on the cell span and in the
holds counter. Static rules stay caps; ``SPARK_OTEL_GOVERN`` turns it on or everything off."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.metric_points import metric_points
from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel import cell, governor
from spark_otel.governor import Governor, govern
from spark_otel.governor.decision import InFlight
from spark_otel.governor.slack import SlackReason
from spark_otel.governor.state import LEASE_S, Decision
from spark_otel.live_progress import LiveProgress

SERIAL = InFlight("qwen", "serial", None, True, None, deadline_s=1000.0)
NEIGHBOUR = InFlight("nemotron", "batch", None, False)


def _attempt(g: Governor, c: InFlight, cell_id: str) -> Decision:
    rules = g.rules()
    assert rules is not None
    return g.state.attempt(c, cell_id, rules, ticket=None, waited_s=0.0, judge=g.judge)


def _admit(g: Governor, c: InFlight, cell_id: str) -> int:
    decision = _attempt(g, c, cell_id)
    assert decision.slot is not None, decision.rule
    return decision.slot


def test_nothing_to_protect_admits(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    decision = _attempt(g, NEIGHBOUR, "n0")
    assert decision.slot is not None
    assert decision.verdict is not None
    assert decision.verdict.reason is SlackReason.NOTHING_PROTECTED


def test_a_serial_cell_of_unknown_length_holds_the_neighbour_and_is_named(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    slot = _admit(g, SERIAL, "s0")
    g.state.renew({slot: LiveProgress(50.0, 500, 10.0)})
    decision = _attempt(g, NEIGHBOUR, "n0")
    assert decision.slot is None
    assert decision.verdict is not None
    assert decision.verdict.reason is SlackReason.LENGTH_UNKNOWN
    assert decision.verdict.protected is not None
    assert decision.verdict.protected.cell_id == "s0"
    assert decision.rule == "adaptive: length unknown, protecting s0 (serial on qwen)"


def test_the_evals_longest_completed_cell_gives_the_length_and_slack_admits(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    done = _admit(g, SERIAL, "s0")
    g.state.release(done, SERIAL, LiveProgress(300.0, 1000, 10.0))
    slot = _admit(g, SERIAL, "s1")
    g.state.renew({slot: LiveProgress(10.0, 100, 10.0)})
    decision = _attempt(g, NEIGHBOUR, "n0")
    assert decision.slot is not None
    verdict = decision.verdict
    assert verdict is not None
    assert verdict.reason is SlackReason.SLACK
    assert verdict.projection is not None
    # 900 tokens left at 10 tok/s x the prior 0.7
    assert verdict.projection.rate_used == pytest.approx(7.0)
    assert verdict.projection.finish_s == pytest.approx(10 + 900 / 7.0)
    # the next neighbour: the one just admitted has not shown in the rate yet, so it counts too
    second = _attempt(g, NEIGHBOUR, "n1")
    assert second.verdict is not None
    assert second.verdict.projection is not None
    assert second.verdict.projection.rate_used == pytest.approx(10 * 0.7**2)


def test_a_tight_projection_holds_and_a_stale_rate_is_not_used(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    done = _admit(g, SERIAL, "s0")
    g.state.release(done, SERIAL, LiveProgress(300.0, 9000, 10.0))
    slot = _admit(g, SERIAL, "s1")
    g.state.renew({slot: LiveProgress(100.0, 1000, 10.0)})
    held = _attempt(g, NEIGHBOUR, "n0")
    assert held.verdict is not None
    assert held.verdict.reason is SlackReason.TIGHT
    assert held.verdict.projection is not None
    assert held.verdict.projection.finish_s == pytest.approx(100 + 8000 / 7.0)
    # the runner stops publishing: figures older than the lease are none
    old = int((LEASE_S + 1) * 1e9)
    with g.state._transaction() as conn:
        conn.execute("UPDATE slots SET live_ns = live_ns - ?", (old,))
    stale = _attempt(g, NEIGHBOUR, "n1")
    assert stale.verdict is not None
    assert stale.verdict.reason is SlackReason.RATE_UNKNOWN


def test_a_neighbour_evals_completed_cells_bound_the_drain_and_max_tokens_bounds_the_length(
    state_path: Path,
) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    capped = InFlight("qwen", "serial", None, True, None, deadline_s=1000.0, max_tokens=8000)
    n = _admit(g, NEIGHBOUR, "n0")  # nothing to protect yet
    g.state.release(n, NEIGHBOUR, LiveProgress(40.0, 400, None))  # the neighbour's cells take 40 s
    done = _admit(g, capped, "s0")
    g.state.release(done, capped, LiveProgress(200.0, 2000, 12.0))  # a short cell: 2,000 tokens
    slot = _admit(g, capped, "s1")
    g.state.renew({slot: LiveProgress(100.0, 1000, 10.0)})
    decision = _attempt(g, NEIGHBOUR, "n1")
    assert decision.verdict is not None
    p = decision.verdict.projection
    assert p is not None
    # the length is the declared 8,000 (a bound), not the 2,000 the eval's one cell took: 7,000
    # left; 40 s at 7 tok/s while the neighbour runs, then the rest at the eval's best 12 tok/s
    assert p.rate_used == pytest.approx(7.0)
    assert p.finish_s == pytest.approx(100 + 40 + (7000 - 280) / 12.0)
    assert decision.verdict.reason is SlackReason.SLACK


def test_the_next_cell_of_an_eval_between_cells_is_protected_but_never_from_itself(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    done = _admit(g, SERIAL, "s0")
    g.state.release(done, SERIAL, LiveProgress(900.0, 9000, 10.0))  # 9000 tokens at 7 tok/s: too long
    held = _attempt(g, NEIGHBOUR, "n0")
    assert held.verdict is not None
    assert held.verdict.reason is SlackReason.TIGHT
    assert held.verdict.protected is not None
    assert held.verdict.protected.name == "next cell of serial"
    assert held.verdict.projection is not None
    assert held.verdict.projection.finish_s == pytest.approx(9000 / 7.0)
    own = _attempt(g, SERIAL, "s1")
    assert own.slot is not None


def test_static_rules_stay_caps(rules_file: Callable[[str], Path], state_path: Path) -> None:
    g = Governor(
        rules_file("[[lane]]\nengine = 'nemotron'\ncells = 1\n"), state_path=state_path, adaptive=True
    )
    _admit(g, NEIGHBOUR, "n0")
    capped = _attempt(g, NEIGHBOUR, "n1")
    assert capped.slot is None
    assert capped.rule is not None
    assert capped.rule.startswith("[[lane]]") or "lane" in capped.rule
    assert capped.verdict is None


def test_a_held_cells_span_names_the_protected_cell_and_holds_are_counted(
    state_path: Path, tracer_provider, meter_provider, span_exporter: InMemorySpanExporter, metric_reader
) -> None:
    g = govern(state=state_path, adaptive=True)
    slot = _admit(g, SERIAL, "s0")
    g.state.renew({slot: LiveProgress(50.0, 500, 10.0)})
    entered = threading.Event()

    def neighbour() -> None:
        with cell(
            "batch", "n0", engine="nemotron", tracer_provider=tracer_provider, meter_provider=meter_provider
        ):
            entered.set()

    t = threading.Thread(target=neighbour)
    t.start()
    wait_for(lambda: len(g.state.lanes()) == 2 and any(lane.waiting for lane in g.state.lanes()), "a hold", 5)
    assert not entered.is_set()
    g.state.release(slot, SERIAL, LiveProgress(60.0, 600, 10.0))
    nxt = _admit(g, SERIAL, "s1")  # the serial eval's next cell: 600 tokens expected, 100 done
    while t.is_alive():  # its runner publishes about once a second
        g.state.renew({nxt: LiveProgress(10.0, 100, 10.0)})
        t.join(0.5)
    assert entered.is_set()
    (span,) = [s for s in span_exporter.get_finished_spans() if s.attributes.get(sc.CELL_ID) == "n0"]
    attrs = span.attributes
    # held while s0's length was unknown; a missing fact does not arm the hysteresis, so once
    # s1 can be projected it is admitted on its slack at once, protecting s1
    assert attrs[sc.CELL_ADAPTIVE_HELD_FOR] == "s0"
    assert attrs[sc.CELL_ADAPTIVE_HELD_REASON] == "length unknown"
    assert attrs[sc.CELL_ADAPTIVE_REASON] == "slack"
    assert attrs[sc.CELL_ADAPTIVE_PROTECTED] == "s1"
    assert attrs[sc.CELL_ADAPTIVE_RATE] == pytest.approx(7.0)
    assert attrs[sc.CELL_ADAPTIVE_FINISH_S] == pytest.approx(10 + 500 / 7.0, abs=1e-3)
    assert attrs[sc.CELL_ADAPTIVE_MARGIN] == pytest.approx(1 - (10 + 500 / 7.0) / 1000, abs=1e-4)
    holds = {
        p.attributes[sc.GOVERNOR_HOLD_REASON]: p.value
        for p in metric_points(metric_reader, sc.GOVERNOR_ADAPTIVE_HOLDS)
    }
    assert holds == {"length unknown": 1}


@pytest.fixture
def first_use(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    governor.ungovern()
    monkeypatch.setattr(governor, "_environment_read", False)
    for name in (governor.RULES_ENV, governor.STATE_ENV, governor.FAIL_CLOSED_ENV, governor.GOVERN_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_environment_turns_adaptive_on_without_rules(
    first_use: pytest.MonkeyPatch, state_path: Path
) -> None:
    first_use.setenv(governor.GOVERN_ENV, "Adaptive")
    first_use.setenv(governor.STATE_ENV, str(state_path))
    g = governor.governor_from_environment()
    assert g is not None
    assert (g.adaptive, g.rules_path) == (True, None)


def test_govern_off_turns_every_governor_off(
    first_use: pytest.MonkeyPatch, rules_file: Callable[[str], Path], state_path: Path
) -> None:
    explicit = govern(rules_file("[[lane]]\nengine = 'q'\ncells = 1\n"), state=state_path)
    assert governor.governor_from_environment() is explicit
    first_use.setenv(governor.GOVERN_ENV, "off")
    first_use.setenv(governor.RULES_ENV, str(rules_file("[[lane]]\nengine = 'q'\ncells = 1\n")))
    assert governor.governor_from_environment() is None


def test_govern_without_rules_or_adaptive_is_refused() -> None:
    with pytest.raises(Exception, match="name a rules file, or govern adaptively"):
        Governor(None)


def test_an_unknown_govern_value_is_warned_once_and_read_as_unset(
    first_use: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first_use.setenv(governor.GOVERN_ENV, "adaptiv")
    with caplog.at_level("WARNING"):
        assert governor.governor_from_environment() is None
    assert "SPARK_OTEL_GOVERN='adaptiv': expected adaptive, static or off" in caplog.text


def test_a_declared_max_tokens_is_the_length_until_a_cell_of_the_eval_ends(
    state_path: Path, tracer_provider, meter_provider
) -> None:
    g = govern(state=state_path, adaptive=True)
    with cell(
        "serial", "s0", engine="qwen", deadline_s=1000, max_tokens=700,
        tracer_provider=tracer_provider, meter_provider=meter_provider,
    ):  # fmt: skip
        (slot,) = g.state._held
        g.state.renew({slot: LiveProgress(10.0, 100, 10.0)})
        decision = _attempt(g, NEIGHBOUR, "n0")
    assert decision.verdict is not None
    assert decision.verdict.reason is SlackReason.SLACK
    assert decision.verdict.projection is not None
    assert decision.verdict.projection.finish_s == pytest.approx(10 + 600 / 7.0)


def test_until_its_stream_shows_a_rate_a_cell_is_projected_at_its_evals_last_rate(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    done = _admit(g, SERIAL, "s0")
    g.state.release(done, SERIAL, LiveProgress(100.0, 1000, 10.0))
    slot = _admit(g, SERIAL, "s1")
    g.state.renew({slot: LiveProgress(1.0, None, None)})  # publishing; no chunk yet
    decision = _attempt(g, NEIGHBOUR, "n0")
    assert decision.verdict is not None
    assert decision.verdict.projection is not None
    assert decision.verdict.projection.rate_used == pytest.approx(7.0)
    assert decision.verdict.projection.finish_s == pytest.approx(1 + 1000 / 7.0)


def test_a_cell_of_an_eval_that_never_streams_cannot_be_projected(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    done = _admit(g, SERIAL, "s0")
    g.state.release(done, SERIAL, LiveProgress(100.0, 1000, None))  # answered whole: no rate
    slot = _admit(g, SERIAL, "s1")
    g.state.renew({slot: LiveProgress(50.0, None, None)})
    decision = _attempt(g, NEIGHBOUR, "n0")
    assert decision.slot is None
    assert decision.verdict is not None
    assert decision.verdict.reason is SlackReason.RATE_UNKNOWN


def test_the_laws_share_of_a_wait_and_its_holds_are_counted_apart_from_a_rules(
    state_path: Path, rules_file: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell the law holds (0 to 10 s), a static rule then holds (10 to 30 s), and the law again
    (30 to 34 s) before admitting it: it waited 34 s, the law held it 14 s in two holds; its span
    says so beside the whole wait."""
    from tests.support.wall_clock import WallClock

    from spark_otel import _clock
    from spark_otel.governor.admission import _Waiter
    from spark_otel.governor.slack import Protected, SlackVerdict
    from spark_otel.records.rules_file import load_rules

    clock = WallClock(monkeypatch)
    monkeypatch.setattr(_clock, "real_monotonic_ns", lambda: clock.now_ns)
    g = Governor(None, state_path=state_path, adaptive=True)
    open_rules = g.rules()
    capped = load_rules(rules_file("[[lane]]\nengine = 'nemotron'\ncells = 1\n"))
    assert open_rules is not None
    _admit(g, NEIGHBOUR, "x0")  # nothing to protect: it runs, and fills the capped lane
    s0 = Protected("s0", "qwen", "serial", 1000.0, 900.0, 900, 1.0, 1000.0)
    script = iter([SlackReason.TIGHT, SlackReason.TIGHT, SlackReason.TIGHT, SlackReason.SLACK])
    monkeypatch.setattr(g, "judge", lambda _cell, _box: SlackVerdict(next(script), s0))
    waiter = _Waiter(g, NEIGHBOUR, "n0", None)
    steps = [(0.0, open_rules), (10.0, capped), (20.0, open_rules), (4.0, open_rules), (0.0, open_rules)]
    decisions = []
    for advance, rules in steps[:-1]:
        clock.advance(advance)
        decisions.append(waiter.attempt(rules))
    assert [d.slot is not None for d in decisions if d is not None] == [False, False, False, False]
    assert [d.verdict.reason if d and d.verdict else None for d in decisions] == [
        SlackReason.TIGHT, None, SlackReason.TIGHT, SlackReason.TIGHT,
    ]  # fmt: skip
    decision = waiter.attempt(open_rules)  # at 34 s: slack, admitted
    assert decision is not None
    assert decision.slot is not None
    admission = waiter.admitted(decision)
    waiter.leave()
    assert (admission.waited_s, admission.held_s, admission.holds) == (34.0, 14.0, 2)
    attrs = admission.span_attributes()
    assert (attrs[sc.CELL_QUEUE_WAIT_S], attrs[sc.CELL_ADAPTIVE_HELD_S], attrs[sc.CELL_ADAPTIVE_HOLDS]) == (
        34.0, 14.0, 2,
    )  # fmt: skip


def test_a_cell_the_law_admitted_at_once_says_it_held_nothing_and_a_static_one_says_nothing(
    state_path: Path,
) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    rules = g.rules()
    assert rules is not None
    from spark_otel.governor.admission import Admission, _Waiter

    waiter = _Waiter(g, NEIGHBOUR, "n0", None)
    admission = waiter.admitted(waiter.attempt(rules))
    waiter.leave()
    attrs = admission.span_attributes()
    assert (attrs[sc.CELL_ADAPTIVE_HELD_S], attrs[sc.CELL_ADAPTIVE_HOLDS]) == (0.0, 0)
    static = Admission(1, NEIGHBOUR, 12.5, "a rule", None, None).span_attributes()
    assert sc.CELL_ADAPTIVE_HELD_S not in static
    assert sc.CELL_ADAPTIVE_HOLDS not in static
