"""Neighbour cost with two llama.cpp servers sharing the machine's cores: an eval's serial cells on
one, alone and then beside four streams on the other. CPU contention is not a GPU's, so no figure
is asserted: the test checks that the cost is measured from the right evidence (three cells alone,
three attributed to the neighbour's window, exact tokens) and reports the figure with it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest
from tests.support.llama_server import LlamaServer

from spark_otel import cell
from spark_otel.analysis import neighbour_cost
from spark_otel.telemetry import Telemetry, configure

TOKENS = 64
LOAD_STREAMS = 4


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    tel = configure(store=tmp_path / "neighbour.sqlite", set_global=False)
    yield tel
    tel.shutdown()


def _serial_cell(tel: Telemetry, client: openai.OpenAI, cell_id: str) -> int:
    with cell(
        "serial",
        cell_id,
        engine="eval-engine",
        workers=1,
        tracer_provider=tel.tracer_provider,
        meter_provider=tel.meter_provider,
    ) as state:
        response = client.completions.create(
            model="eval-engine",
            prompt=f"Cell {cell_id}: review this diff",
            max_tokens=TOKENS,
            extra_body={"ignore_eos": True},
        )
        assert response.usage is not None
        state.add_tokens(prompt=response.usage.prompt_tokens, completion=response.usage.completion_tokens)
        return response.usage.completion_tokens


def test_a_neighbour_on_the_same_cores_is_priced_from_the_right_evidence(
    llama_pair: tuple[LlamaServer, LlamaServer], telemetry: Telemetry, record_property: object
) -> None:
    mine, neighbour = llama_pair
    client = openai.OpenAI(base_url=mine.url + "/v1", api_key="none", max_retries=0)
    produced = [_serial_cell(telemetry, client, f"alone {k}") for k in range(3)]

    # Four streams on the neighbour that last until the serial cells are done.
    stop = threading.Event()
    decoding = threading.Barrier(LOAD_STREAMS + 1)
    body = {"model": "neighbour", "prompt": "card", "max_tokens": 100_000, "stream": True, "ignore_eos": True}

    def load_worker(w: int) -> None:
        with (
            cell(
                "neighbour-load",
                f"card {w}",
                engine="neighbour",
                workers=LOAD_STREAMS,
                tracer_provider=telemetry.tracer_provider,
                meter_provider=telemetry.meter_provider,
            ),
            httpx2.Client(timeout=120) as http,
            http.stream("POST", neighbour.url + "/v1/completions", json=body) as response,
        ):
            chunks = response.iter_raw()
            next(chunks)
            decoding.wait()
            for _ in chunks:
                if stop.is_set():
                    break

    threads = [threading.Thread(target=load_worker, args=(w,), daemon=True) for w in range(LOAD_STREAMS)]
    for t in threads:
        t.start()
    decoding.wait(timeout=60)
    try:
        produced += [_serial_cell(telemetry, client, f"beside {k}") for k in range(3)]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)

    assert produced == [TOKENS] * 6
    assert telemetry.force_flush()
    assert telemetry.store is not None
    store = telemetry.store
    report = neighbour_cost("serial", store.cells(), store.windows())
    assert report.n_cells == 6
    assert report.baseline.n == 3
    assert {c.cell_id for c in report.cells if c.baseline} == {"alone 0", "alone 1", "alone 2"}
    (window,) = [w for w in report.windows if w.n_cells]
    assert window.engine == "neighbour"
    assert window.same_engine is False
    assert window.streams == LOAD_STREAMS
    assert window.n_cells == 3
    assert window.rate.n == 3
    assert report.baseline.median is not None
    assert window.rate.median is not None
    assert window.cost == pytest.approx(1 - window.rate.median / report.baseline.median)
    evidence = {
        "cost": window.cost,
        "baseline_median_tok_s": report.baseline.median,
        "beside_neighbour_median_tok_s": window.rate.median,
        "cells_alone": report.baseline.n,
        "cells_beside": window.n_cells,
        "neighbour_streams": window.streams,
    }
    record_property("neighbour_cost", json.dumps(evidence))  # type: ignore[operator]
    print(f"neighbour cost of {LOAD_STREAMS} streams on the same cores: {json.dumps(evidence)}")
