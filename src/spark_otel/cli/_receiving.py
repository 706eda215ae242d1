"""What `receive` and `gpu-sample` share: telemetry and a `Receiver` set up and torn down together,
the run loop that stops on SIGTERM, Ctrl-C or ``--duration``, and the GPU table.

Imported inside the commands' ``run``, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .. import _clock
from ..receivers.gpu import GpuReading, GpuSource
from ..receivers.receiver import EngineTarget, Receiver
from ..telemetry import configure
from ..views.tables import fmt_number
from ._common import print_table


@contextmanager
def receiving(
    args: argparse.Namespace,
    *,
    service_name: str,
    targets: Sequence[EngineTarget] = (),
    gpu: GpuSource | None = None,
    timeout_s: float = 5.0,
) -> Iterator[Receiver]:
    """A receiver (not started) on ``args.interval`` and ``args.store``; everything is shut down at exit.

    The receiver owns ``gpu``; it is closed here too when telemetry or the receiver cannot be set up.
    """
    try:
        telemetry = configure(
            service_name=os.environ.get("OTEL_SERVICE_NAME") or service_name,
            store=args.store or None,
            metric_export_interval_model_s=args.interval,
            set_global=False,
        )
    except BaseException:
        if gpu is not None:
            gpu.close()
        raise
    try:
        receiver = Receiver(
            list(targets),
            interval_s=args.interval,
            meter_provider=telemetry.meter_provider,
            store=telemetry.store,
            gpu=gpu,
            timeout_s=timeout_s,
            close_gpu=True,
        )
    except BaseException:
        if gpu is not None:
            gpu.close()
        telemetry.shutdown()
        raise
    try:
        yield receiver
    finally:
        receiver.stop()
        telemetry.shutdown()


def run_until_stopped(receiver: Receiver, duration_s: float | None) -> int:
    """Run the receiver's loop until ``duration_s`` passes (None: forever), SIGTERM or Ctrl-C;
    a store whose disk is full stops it too. The exit code: 1 when the receiver stopped by itself
    (it logged why, once, as an error line), else 0.

    ``duration_s`` is model time, like the receiver's interval (the same as wall time against
    real engines), so ``--interval 15 --duration 60`` is four scrapes under any model clock.
    """
    previous = signal.signal(signal.SIGTERM, lambda *_: receiver.halt())
    try:
        receiver.start()
        receiver.wait(None if duration_s is None else _clock.to_real_s(duration_s))
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0 if receiver.fatal is None else 1


def print_gpu_table(readings: Sequence[GpuReading]) -> None:
    def mib(value: float | None) -> str:
        return fmt_number(value / 2**20 if value is not None else None, 0)

    print_table(
        "GPU (utilization is the resident-kernel flag, not load)",
        [
            "gpu",
            "name",
            "util %",
            "power W",
            "energy J",
            "SM MHz",
            "mem MHz",
            "memory used MiB",
            "memory total MiB",
        ],
        [
            [
                r.gpu_id,
                r.name,
                f"{r.utilization * 100:.0f}" if r.utilization is not None else "-",
                fmt_number(r.power_w, 1),
                fmt_number(r.energy_j, 1),
                fmt_number(r.sm_clock_mhz, 0),
                fmt_number(r.memory_clock_mhz, 0),
                mib(r.memory_used_bytes),
                mib(r.memory_total_bytes),
            ]
            for r in readings
        ],
    )
