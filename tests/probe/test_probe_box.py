"""The probe against the simulated box at 1000x, with tiny levels: the whole report read on the
box's model clock, and a real GPU's energy counter (real time) read beside model timestamps.

Each test starts its own box inside the test (a few tenths of a second), so its time is the
test's own; test_probe_sim.py measures the rates against the box's ground truth, at length.
"""

from __future__ import annotations

import sys
import time

import pytest
from tests.support.gpu_fakes import fake_pynvml
from tests.support.scripted_engine import load_free

from spark_otel.probe import ProbeSettings, run_probe
from spark_otel.sim import run_box
from spark_otel.sim.box import IDLE_POWER_W, PREFILL_EXTRA_POWER_W
from spark_otel.store import Store

SPEED = 1000.0


def test_a_probe_of_the_box_reads_every_figure_on_its_model_clock(store: Store) -> None:
    """At 1000x a 900 s request ceiling is 0.9 real seconds, under the level's grace: the level
    still waits for its streams. The box's power is read from its own energy counter."""
    with run_box({"qwen": "dense"}, speed=SPEED, seed=0) as box:
        report = run_probe(
            box.url("qwen"), ProbeSettings(streams=[1, 2], tokens=8, warmup=False), store=store
        )
        busiest = box.profile("qwen").power_w(2) + PREFILL_EXTRA_POWER_W
        truth = {n: box.predicted_rate("qwen", n) for n in (1, 2)}
    metadata = report.metadata
    assert (metadata.engine, metadata.model, metadata.time_scale, metadata.gpu_source) == (
        "qwen",
        "qwen3.8-27b",
        SPEED,
        "sim",
    )
    for level in report.levels:
        n = level.streams
        # Eight tokens take at least seven decode steps of the box's model, in model seconds.
        assert level.wall_s >= 7 / truth[n]
        assert (level.probe_tokens, level.sse_events, level.engine_generation_tokens) == (
            8 * n,
            10 * n,
            8.0 * n,
        )
        assert (level.errors, level.token_mismatches, level.quiescent, level.engine_probe_ratio) == (
            0,
            0,
            True,
            1.0,
        )
        assert level.power_w is not None
        assert IDLE_POWER_W <= level.power_w <= busiest
    assert load_free(report.warnings) == []
    windows = store.windows(kind="probe")
    assert [(w.engine, w.streams, w.start_unix_ns, w.end_unix_ns) for w in windows] == [
        ("qwen", lv.streams, lv.start_unix_ns, lv.end_unix_ns) for lv in report.levels
    ]


def test_a_real_gpus_energy_counter_runs_in_real_time_beside_model_timestamps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 500 W GPU read through NVML while the probe runs on the box's 100x clock: its energy
    over the level's real seconds is 500 W, not a hundredth of it. (The level lasts about 60 ms;
    each reading stamps its time a moment before it reads the counter, hence the tolerance.)"""
    nvml = fake_pynvml()
    # Its energy counter in mJ, at 500 W of real time.
    nvml.nvmlDeviceGetTotalEnergyConsumption = lambda handle: time.monotonic_ns() // 2_000  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with run_box({"qwen": "dense"}, speed=100.0, seed=0) as box:
        report = run_probe(
            box.url("qwen"), ProbeSettings(streams=[1], tokens=64, warmup=False, gpu="nvml", mode="plain")
        )
    [level] = report.levels
    assert (report.metadata.gpu_source, report.metadata.time_scale) == ("nvml", 100.0)
    assert (level.probe_tokens, level.sse_events) == (64, None)
    assert level.power_w == pytest.approx(500.0, rel=0.05)
