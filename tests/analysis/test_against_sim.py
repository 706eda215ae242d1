"""End to end on the simulated box: real cells over real HTTP, through the store, into the analyses.

A serial eval on the dense engine runs alone, then beside a four-worker eval on the MoE engine;
neighbour cost must recover the simulation's ground truth (the article's 54%) within two
percentage points. The same eval at four workers must show four cells in flight and the
simulated per-stream rate at four streams.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest

from spark_otel import cell
from spark_otel.analysis import concurrency, neighbour_cost
from spark_otel.cells import ContextThreadPoolExecutor
from spark_otel.sim import Box, run_box
from spark_otel.store import Store
from spark_otel.telemetry import Telemetry, configure

SPEED = 25.0  # slow enough that a loaded 2-core machine keeps up with the box
PINNED = {"ignore_eos": True}
SERIAL_TOKENS = 360

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED, seed=0) as b:
        yield b


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    tel = configure(store=tmp_path / "e2e.sqlite", set_global=False)
    yield tel
    tel.shutdown()


def _model(box: Box, engine: str) -> str:
    return str(httpx2.get(box.url(engine) + "/sim/info").json()["model"])


def _run_cell(
    tel: Telemetry,
    client: openai.OpenAI,
    model: str,
    eval_name: str,
    cell_id: str,
    *,
    engine: str,
    tokens: int,
    workers: int,
) -> None:
    with cell(
        eval_name,
        cell_id,
        engine=engine,
        workers=workers,
        tracer_provider=tel.tracer_provider,
        meter_provider=tel.meter_provider,
    ) as state:
        response = client.completions.create(
            model=model,
            prompt="review this diff",
            max_tokens=tokens,
            extra_body={"min_tokens": tokens, **PINNED},
        )
        assert response.usage is not None
        state.add_tokens(prompt=response.usage.prompt_tokens, completion=response.usage.completion_tokens)


def _cells(tel: Telemetry) -> Store:
    assert tel.force_flush()
    assert tel.store is not None
    return tel.store


def test_neighbour_cost_recovers_the_simulated_cross_engine_cost(box: Box, telemetry: Telemetry) -> None:
    qwen = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none", max_retries=0)
    qwen_model, nemo_model = _model(box, "qwen"), _model(box, "nemotron")

    for k in range(3):
        _run_cell(
            telemetry,
            qwen,
            qwen_model,
            "serial",
            f"alone {k}",
            engine="qwen",
            tokens=SERIAL_TOKENS,
            workers=1,
        )

    # Four load streams that last until the serial cells are done, so the load never dips.
    stop = threading.Event()
    decoding = threading.Barrier(5)
    body = {"model": nemo_model, "prompt": "card", "max_tokens": 100_000, "stream": True, **PINNED}

    def load_worker(w: int) -> None:
        with (
            cell(
                "nemotron-load",
                f"card {w}",
                engine="nemotron",
                workers=4,
                tracer_provider=telemetry.tracer_provider,
                meter_provider=telemetry.meter_provider,
            ),
            httpx2.Client(timeout=60) as client,
            client.stream("POST", box.url("nemotron") + "/v1/completions", json=body) as response,
        ):
            chunks = response.iter_raw()
            next(chunks)
            decoding.wait()
            for _ in chunks:
                if stop.is_set():
                    break

    threads = [threading.Thread(target=load_worker, args=(w,), daemon=True) for w in range(4)]
    for t in threads:
        t.start()
    decoding.wait(timeout=30)
    try:
        for k in range(3):
            _run_cell(
                telemetry,
                qwen,
                qwen_model,
                "serial",
                f"loaded {k}",
                engine="qwen",
                tokens=SERIAL_TOKENS,
                workers=1,
            )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)

    store = _cells(telemetry)
    report = neighbour_cost("serial", store.cells(), store.windows())
    truth = 1 - box.predicted_rate("qwen", 1, neighbours={"nemotron": 4}) / box.predicted_rate("qwen", 1)
    assert truth == pytest.approx(0.54, abs=0.01)  # the box is calibrated to the article
    assert report.baseline.n == 3
    # A cell's elapsed time includes its request's round trip, which model time magnifies.
    assert report.baseline.median == pytest.approx(box.predicted_rate("qwen", 1), rel=0.08)
    (window,) = [w for w in report.windows if w.n_cells]
    assert window.engine == "nemotron"
    assert window.same_engine is False
    assert window.streams == 4
    assert window.n_cells == 3
    assert window.cost == pytest.approx(truth, abs=0.02)


def test_concurrency_sees_four_cells_in_flight_at_the_simulated_rate(box: Box, telemetry: Telemetry) -> None:
    qwen = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none", max_retries=0)
    model = _model(box, "qwen")
    for k in range(2):
        _run_cell(
            telemetry, qwen, model, "batched", f"serial {k}", engine="qwen", tokens=SERIAL_TOKENS, workers=1
        )
    with ContextThreadPoolExecutor(max_workers=4) as pool:
        futures = [
            pool.submit(
                _run_cell,
                telemetry,
                qwen,
                model,
                "batched",
                f"four {k}",
                engine="qwen",
                tokens=SERIAL_TOKENS,
                workers=4,
            )
            for k in range(4)
        ]
        for f in futures:
            f.result()

    store = _cells(telemetry)
    (engine,) = concurrency(store.cells(), eval_name="batched").engines
    by_workers = {lv.level: lv for lv in engine.by_workers}
    four = [c for c in engine.cells if c.workers == 4]
    assert all(c.in_flight == pytest.approx(4.0, abs=0.3) for c in four)
    assert by_workers[1].rate.median == pytest.approx(box.predicted_rate("qwen", 1), rel=0.06)
    assert by_workers[4].rate.median == pytest.approx(box.predicted_rate("qwen", 4), rel=0.06)
    (speedup,) = engine.speedups
    # Two serial cells against four concurrent ones: per cell, about four times faster.
    assert speedup.speedup == pytest.approx(
        4 * box.predicted_rate("qwen", 4) / box.predicted_rate("qwen", 1), rel=0.15
    )
