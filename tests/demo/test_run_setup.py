"""The demo's setup before its first act, each test stopping there (about 1 s: the box starts and
stops): the telemetry in force names the demo as its service (what an OTLP backend shows the
demo's spans and metrics under) and writes to the demo's store, the receiver beside the acts
scrapes at the plan's interval and closes the GPU source it was handed; and a receiver that
cannot start its threads unwinds the demo with that error, the box, the telemetry and every
thread stopped.

The run is the test's call, not a fixture's, as in test_run_demo.py (mutmut's CPU limit), and
in the test's own directory: the defaults' ./spark-otel-demo is
test_run_demo.py::test_a_demo_stopped_at_its_first_act_leaves_nothing_running_and_its_defaults_in_place,
which the mutation run leaves out (it changes directory, where the box cannot find mutmut's
configuration)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import SERVICE_NAME
from tests.support.demo_phases import PHASES, SPEED, Phases, Stopped, check_the_box_clock

from spark_otel.demo import DemoPlan, run_demo
from spark_otel.receivers.gpu import SimGpuSource
from spark_otel.receivers.receiver import Receiver
from spark_otel.store import Store
from spark_otel.telemetry import current_telemetry


@pytest.fixture(autouse=True)
def no_service_name_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing but the demo names the service, and nothing is exported over OTLP."""
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


def test_the_demos_defaults_telemetry_and_receiver_as_set_up_and_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default the full schedule. The real receiver and GPU source, spied on: the receiver
    scrapes every 25 model s at 500x (50 ms of real time, `_scrape_interval_s`), and the simulated
    GPU source it was handed is closed with it (its HTTP client would otherwise stay open)."""
    receivers: list[Receiver] = []
    closed: list[SimGpuSource] = []
    real_start, real_close = Receiver.start, SimGpuSource.close

    def recording_start(self: Receiver) -> Receiver:
        receivers.append(self)
        return real_start(self)

    def recording_close(self: SimGpuSource) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(Receiver, "start", recording_start)
    monkeypatch.setattr(SimGpuSource, "close", recording_close)
    seen: list[tuple[object, object]] = []
    phases = Phases(stop_at=PHASES[1])

    def at_phase(name: str) -> None:
        if name == PHASES[1]:
            telemetry = current_telemetry()
            assert telemetry is not None
            assert telemetry.store is not None
            seen.append((telemetry.tracer_provider.resource.attributes[SERVICE_NAME], telemetry.store.path))
        phases(name)

    with pytest.raises(Stopped):
        run_demo(speed=SPEED, out_dir=tmp_path, on_phase=at_phase)
    assert seen == [("spark-otel-demo", tmp_path / "store.sqlite")]
    assert current_telemetry() is None  # shut down on the way out
    # Not quick by default: the box's clock was set for the full schedule, and the document says so.
    check_the_box_clock(phases, DemoPlan.full(SPEED))
    with Store(tmp_path / "store.sqlite", read_only=True) as store:
        [document] = store.documents("demo")
    assert (document["body"]["quick"], document["body"]["speed"]) == (False, SPEED)
    assert [r.interval_s for r in receivers] == [25.0]
    assert len(closed) == 1


def test_a_receiver_that_cannot_start_unwinds_the_demo_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault no real box produces on demand (the process out of threads), so patched in."""

    def cannot_start(self: Receiver) -> Receiver:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(Receiver, "start", cannot_start)
    phases: list[str] = []
    threads_before = {t.name for t in threading.enumerate()}
    with pytest.raises(RuntimeError) as raised:
        run_demo(speed=SPEED, out_dir=tmp_path, quick=True, on_phase=phases.append)
    assert str(raised.value) == "can't start new thread"  # not an error of the unwinding itself
    assert phases == ["starting the simulated box"]
    assert {t.name for t in threading.enumerate()} - threads_before == set()
    assert current_telemetry() is None
