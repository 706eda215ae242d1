"""Two waits that must end in nothing: a request that has not finished, a box that never answers.

`end_server_span` emits a span only for a finished request; one as `submit` builds it (no
``finished_ns`` yet) gets none, and no warning either: nothing was tried. `read_box_clock` gives
each reading its own timeout, so a process pointed at something that accepts the connection and
never answers fails at that timeout with an `EngineError` (here shortened to 0.2 s; a listener
that hangs up after 3 s ends a reading that had no timeout, so such a regression fails, not hangs).
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spark_otel import EngineError
from spark_otel.sim import DENSE, BoxModel
from spark_otel.sim import clock as sim_clock
from spark_otel.sim.box import SimRequest
from spark_otel.sim.tracing import end_server_span


def test_a_request_as_submitted_gets_no_span_and_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="spark_otel.sim")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    box = BoxModel({"qwen": DENSE}, speed=math.inf, tracer_provider=provider)
    queued = SimRequest(1, 30, 12, (12, "length"), arrival_ns=1_000_000_000)
    end_server_span(box.tracer, box.clock.unix_ns, "qwen", queued)
    assert exporter.get_finished_spans() == ()
    assert caplog.records == []


def test_a_box_that_never_answers_fails_the_reading_at_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_clock, "_INFO_TIMEOUT_S", 0.2)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        hang_up = threading.Timer(3.0, silent.close)
        hang_up.start()
        started = time.monotonic()
        try:
            with pytest.raises(EngineError) as refused:
                sim_clock.read_box_clock(url)
        finally:
            hang_up.cancel()
        waited_s = time.monotonic() - started
    assert str(refused.value) == f"{url}/sim/info: cannot read the simulated box's clock: timed out"
    assert waited_s < 2.5  # the 0.2 s timeout, not httpx's default 5 s
