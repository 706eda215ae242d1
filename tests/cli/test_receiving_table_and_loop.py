"""What `receive` and `gpu-sample` share (`spark_otel.cli._receiving`): the GPU table, printed whole
(every header, every unit conversion and digit count, "-" for what a part does not report), and
the run loop: ``--duration`` ends it, SIGTERM ends a run without one, and the process's SIGTERM
handler is put back either way (a test runner or an embedding app keeps its own)."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from tests.support.gpu_fakes import SIM_GPU
from tests.support.metrics_server import MetricsServer
from tests.support.printed import unpadded
from tests.support.waiting import wait_for

from spark_otel.cli._receiving import print_gpu_table, run_until_stopped
from spark_otel.receivers.gpu import GpuReading, SimGpuSource
from spark_otel.receivers.receiver import Receiver

GB10 = GpuReading(
    gpu_id="0",
    name="NVIDIA GB10",
    unix_ns=1_790_000_000_000_000_000,
    utilization=0.96,  # x 100 = 96 (x 101 would round to 97)
    power_w=312.45,  # one digit: 312.4 (the float is just under .45)
    energy_j=5000.0,
    sm_clock_mhz=1980.0,
    memory_clock_mhz=2619.0,
    memory_used_bytes=40_536 * 2**20,  # bytes -> MiB: 40,536
    memory_total_bytes=81_559 * 2**20,
)
NOTHING_REPORTED = GpuReading(gpu_id="1", unix_ns=1_790_000_000_000_000_000)

GPU_TABLE = """\
                          GPU (utilization is the resident-kernel flag, not load)
┏━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┓
┃ gpu ┃ name        ┃ util % ┃ power W ┃ energy J ┃ SM MHz ┃ mem MHz ┃ memory used MiB ┃ memory total MiB ┃
┡━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━┩
│   0 │ NVIDIA GB10 │     96 │   312.4 │  5,000.0 │  1,980 │   2,619 │          40,536 │           81,559 │
│   1 │             │      - │       - │        - │      - │       - │               - │                - │
└─────┴─────────────┴────────┴─────────┴──────────┴────────┴─────────┴─────────────────┴──────────────────┘
"""


def test_the_gpu_table_shows_every_quantity_in_its_unit_and_dashes_for_the_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_gpu_table([GB10, NOTHING_REPORTED])
    assert unpadded(capsys.readouterr().out) == GPU_TABLE


def _gpu_receiver(server: MetricsServer) -> Receiver:
    """A receiver of the simulated GPU readout ``server`` serves, on a 1 s interval."""
    server.json_body = SIM_GPU
    return Receiver([], interval_s=1.0, gpu=SimGpuSource(server.url), close_gpu=True)


def test_a_duration_of_zero_returns_at_once_and_puts_the_sigterm_handler_back(
    metrics_server: MetricsServer,
) -> None:
    def own_handler(*_: object) -> None:
        raise AssertionError("not called")

    previous = signal.signal(signal.SIGTERM, own_handler)
    try:
        receiver = _gpu_receiver(metrics_server)
        run_until_stopped(receiver, 0)
        assert signal.getsignal(signal.SIGTERM) is own_handler
        receiver.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_stops_a_run_without_a_duration_and_the_handler_is_put_back(
    metrics_server: MetricsServer,
) -> None:
    """The run has no end of its own: only the SIGTERM sent once its handler is in place ends it
    (a broken handler would hang here, which the test timeout reports)."""
    before = signal.getsignal(signal.SIGTERM)

    def terminate_once_handled() -> None:
        wait_for(lambda: signal.getsignal(signal.SIGTERM) is not before, "the run's SIGTERM handler", 30)
        os.kill(os.getpid(), signal.SIGTERM)

    receiver = _gpu_receiver(metrics_server)
    sender = threading.Thread(target=terminate_once_handled)
    sender.start()
    try:
        run_until_stopped(receiver, None)
    finally:
        sender.join()
        receiver.stop()
    assert signal.getsignal(signal.SIGTERM) is before
