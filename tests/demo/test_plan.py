"""The demo's schedules and the simulation's ground truth, worked out by hand from the profiles'
calibration curves (src/spark_otel/sim/profiles.py), and `run_demo`'s documented defaults: the
figures every act is checked against, so a changed number is a changed story."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from spark_otel.demo import DEFAULT_SPEED, DemoPlan, ground_truth, run_demo
from spark_otel.demo.run import _scrape_interval_s
from spark_otel.demo.schedule import box_model
from spark_otel.sim import DENSE, MOE

# The dense profile's per-stream rates (tok/s) at 1, 2, 4 and 8 streams, and the MoE profile's
# memory pressure at 4 streams (0.3 + 0.29 x 3): the calibration the ground truth rests on.
QWEN_1, QWEN_2, QWEN_4, QWEN_8 = 11.1, 10.6, 10.35, 10.06
NEMOTRON_4_PRESSURE = 0.3 + 0.29 * 3


def test_the_full_schedule_is_the_articles() -> None:
    assert DemoPlan.full(250.0) == DemoPlan(
        speed=250.0,
        probe_tokens=512,
        review_cells=8,
        review_tokens=(800, 1500),
        baseline_s=1200.0,
        same_engine_load_s=400.0,
        gap_s=300.0,
        load_s=2000.0,
        tail_s=400.0,
        serial_tokens=(1200, 2000),
        load_tokens=(2000, 3000),
    )
    assert DemoPlan.full() == DemoPlan.full(DEFAULT_SPEED)


def test_the_quick_schedule_is_shorter_with_the_same_acts() -> None:
    assert DemoPlan.quick(250.0) == DemoPlan(
        speed=250.0,
        probe_tokens=256,
        review_cells=8,
        review_tokens=(300, 500),
        baseline_s=500.0,
        same_engine_load_s=170.0,
        gap_s=100.0,
        load_s=800.0,
        tail_s=100.0,
        serial_tokens=(500, 800),
        load_tokens=(1500, 2500),
    )
    assert DemoPlan.quick() == DemoPlan.quick(DEFAULT_SPEED)


def test_the_ground_truth_is_what_the_profiles_say() -> None:
    # Five qwen streams: the step time interpolates linearly between 4 and 8 streams.
    qwen_5 = 1 / (1 / QWEN_4 + (1 / QWEN_8 - 1 / QWEN_4) * (5 - 4) / (8 - 4))
    assert ground_truth(DemoPlan.quick(250.0)) == pytest.approx(
        {
            "baseline_rate": QWEN_1,
            "1 more qwen stream": 1 - QWEN_2 / QWEN_1,  # 4.5%
            "4 more qwen streams": 1 - qwen_5 / QWEN_1,  # 7.4%
            # Each dense step takes (1 + the neighbour's pressure) as long: 54%, the article's.
            "load": 1 - 1 / (1 + NEMOTRON_4_PRESSURE),
            "review_per_cell_cost": 1 - QWEN_8 / QWEN_1,  # 9.4%
        },
        rel=1e-12,
    )
    assert ground_truth(DemoPlan.quick(250.0))["load"] == pytest.approx(0.539, abs=0.001)


def test_the_ground_truth_follows_the_plans_worker_count() -> None:
    plan = dataclasses.replace(DemoPlan.quick(50.0), review_workers=2)
    assert ground_truth(plan)["review_per_cell_cost"] == pytest.approx(1 - QWEN_2 / QWEN_1, rel=1e-12)


def test_the_box_model_is_the_demos_two_engines_at_its_speed() -> None:
    model = box_model(250.0)
    assert model.speed == 250.0
    assert {name: engine.profile for name, engine in model.engines.items()} == {
        "qwen": DENSE,
        "nemotron": MOE,
    }


def test_the_receiver_scrapes_every_50_ms_of_real_time_and_at_least_every_model_second() -> None:
    assert _scrape_interval_s(500.0) == 25.0
    assert _scrape_interval_s(100.0) == 5.0
    assert _scrape_interval_s(20.0) == 1.0
    assert _scrape_interval_s(10.0) == 1.0


def test_run_demo_defaults_to_the_full_schedule_into_its_own_folder() -> None:
    defaults = {name: p.default for name, p in inspect.signature(run_demo).parameters.items()}
    assert defaults == {
        "speed": DEFAULT_SPEED,
        "store_path": None,
        "out_dir": "spark-otel-demo",
        "quick": False,
        "on_phase": None,
    }
