"""Requests no cell holds still answer: a real `openai` client instrumented with `instrument()`
against the simulated engine, most of its calls outside any `cell()`, recorded into a real store;
then concurrency, neighbour-cost, advise, timeouts, report and requests read it, each request
outside a cell counted once as a cell of its own, and every output says so."""

from __future__ import annotations

import json
import threading
import tomllib
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

import spark_otel
from spark_otel.cli import main
from spark_otel.report import build_report, inputs_from_store
from spark_otel.sim import run_box
from spark_otel.store import Store
from spark_otel.telemetry import configure
from spark_otel.views.requests import requests_as_cells_line

pytestmark = pytest.mark.usefixtures("clean_env")

SPEED = 50.0
EVAL = "lm-script"


def _record(path: Path, url: str, *, with_cell: bool, eval_env: str | None) -> dict[str, Any]:
    """Calls through an instrumented client into ``path``: four at once and two streamed one at a
    time, outside any cell; one that times out; and, ``with_cell``, two inside a cell. Returns what
    the client saw."""
    with pytest.MonkeyPatch.context() as env:
        if eval_env is not None:
            env.setenv("SPARK_OTEL_EVAL", eval_env)
        tel = configure(store=path, set_global=False)
    spark_otel.instrument(tracer_provider=tel.tracer_provider, meter_provider=tel.meter_provider)
    seen: dict[str, Any] = {"outside": [], "cell": []}
    try:
        model = str(httpx2.get(url + "/sim/info").json()["model"])
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)

        def call(into: list[int]) -> None:
            response = client.completions.create(model=model, prompt="review", max_tokens=24)
            assert response.usage is not None
            into.append(response.usage.completion_tokens)

        threads = [threading.Thread(target=call, args=(seen["outside"],)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for _ in range(2):
            stream = client.completions.create(
                model=model,
                prompt="review",
                max_tokens=16,
                stream=True,
                stream_options={"include_usage": True},
            )
            usage = [chunk.usage for chunk in stream if chunk.usage is not None]
            seen["outside"].append(usage[-1].completion_tokens)
        slow = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=0.3)
        with pytest.raises(openai.APITimeoutError):
            slow.completions.create(
                model=model, prompt="long", max_tokens=100_000, extra_body={"ignore_eos": True}
            )
        if with_cell:
            with spark_otel.cell(
                "golden",
                "g1",
                engine="qwen",
                workers=1,
                tracer_provider=tel.tracer_provider,
                meter_provider=tel.meter_provider,
            ):
                call(seen["cell"])
                call(seen["cell"])
        assert tel.force_flush()
    finally:
        spark_otel.uninstrument()
        tel.shutdown()
    return seen


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One store with a cell and requests outside it (SPARK_OTEL_EVAL set), one with bare
    requests only (no eval named)."""
    folder = tmp_path_factory.mktemp("requests")
    with run_box({"qwen": "dense"}, speed=SPEED, seed=0) as box:
        url = box.url("qwen")
        mixed = _record(folder / "mixed.sqlite", url, with_cell=True, eval_env=EVAL)
        bare = _record(folder / "bare.sqlite", url, with_cell=False, eval_env=None)
    port = int(url.rsplit(":", 1)[1])
    return {
        "mixed": str(folder / "mixed.sqlite"),
        "bare": str(folder / "bare.sqlite"),
        "mixed_seen": mixed,
        "bare_seen": bare,
        "address": f"127.0.0.1:{port}",
    }


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_concurrency_counts_each_request_outside_a_cell_once_as_a_cell(recorded, capsys) -> None:
    seen = recorded["mixed_seen"]
    report = _json(capsys, "concurrency", "--store", recorded["mixed"], "--cells")
    (engine,) = report["engines"]
    # Requests no cell holds stand in on the engine the cell named at the same address.
    assert engine["engine"] == "qwen"
    assert report["requests_as_cells"] == engine["requests_as_cells"] == 7  # 4 + 2 + the timeout
    assert engine["n_cells"] == 8  # and the one cell: its two requests are never counted again
    assert engine["ceiling_hits"] == 1
    with Store(recorded["mixed"], read_only=True) as store:
        (golden,) = store.cells()
    assert golden.completion_tokens == sum(seen["cell"])
    assert engine["completion_tokens"] == sum(seen["outside"]) + sum(seen["cell"])
    stand_ins = [c for c in engine["cells"] if c["request_as_cell"]]
    assert {c["eval_name"] for c in stand_ins} == {EVAL}
    assert sorted(c["completion_tokens"] or 0 for c in stand_ins) == sorted([0, *seen["outside"]])
    assert {c["status"] for c in stand_ins} == {"length_cap", "deadline"}
    assert [c["eval_name"] for c in engine["cells"] if not c["request_as_cell"]] == ["golden"]

    assert main(["concurrency", "--store", recorded["mixed"], "--cells"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(str(requests_as_cells_line(7, 8)).split()) in out
    assert "(request)" in out


def test_neighbour_cost_advise_and_timeouts_say_how_many_cells_are_requests(
    recorded, tmp_path: Path, capsys
) -> None:
    store = recorded["mixed"]
    neighbour = _json(capsys, "neighbour-cost", "--store", store, "--eval", EVAL)
    assert neighbour["n_cells"] == neighbour["requests_as_cells"] == 7
    assert neighbour["timeouts"] == 1
    assert all(c["request_as_cell"] for c in neighbour["cells"])

    rules = tmp_path / "rules.toml"
    advice = _json(capsys, "advise", "--store", store, "--write-rules", str(rules))
    assert (advice["n_cells"], advice["requests_as_cells"]) == (8, 7)
    source = tomllib.loads(rules.read_text("utf-8"))["source"]
    assert source == f"{store} (7 of the 8 cells are requests no cell() recorded, standing in for cells)"
    assert {a["eval_name"] for a in advice["classes"]} <= {EVAL, "golden"}

    (verdict,) = _json(capsys, "timeouts", "--store", store)
    assert verdict["request_as_cell"] is True
    assert verdict["eval_name"] == EVAL
    with Store(store, read_only=True) as s:
        (timed_out,) = [r for r in s.requests() if r.error_type is not None]
    assert timed_out.error_type == "APITimeoutError"
    assert verdict["cell_id"] == verdict["uid"] == timed_out.uid
    assert verdict["ceiling_s"] == verdict["elapsed_s"] == pytest.approx(timed_out.elapsed_s)

    for argv in (["advise"], ["timeouts"], ["neighbour-cost", "--eval", EVAL]):
        assert main([argv[0], "--store", store, *argv[1:]]) == 0
        out = " ".join(capsys.readouterr().out.split())
        expected = requests_as_cells_line(7, 7 if argv[0] == "neighbour-cost" else 8)
        assert " ".join(str(expected).split()) in out, argv


def test_the_report_says_how_many_cells_are_requests(recorded, tmp_path: Path, capsys) -> None:
    with Store(recorded["mixed"], read_only=True) as store:
        content = build_report(inputs_from_store(store))
    assert (content.n_cells, content.requests_as_cells) == (8, 7)
    assert content.concurrency is not None
    assert content.concurrency.requests_as_cells == 7
    assert main(["report", "--store", recorded["mixed"], "--out", str(tmp_path / "r")]) == 0
    line = str(requests_as_cells_line(7, 8))
    assert line in " ".join(capsys.readouterr().out.split())
    page = next((tmp_path / "r").glob("*.html")).read_text("utf-8")
    assert f'<p class="note requests-as-cells">{line}</p>' in page


def test_requests_lists_every_request_and_marks_those_outside_cells(recorded, capsys) -> None:
    listed = _json(capsys, "requests", "--store", recorded["mixed"])
    assert len(listed) == 9
    inside = [r for r in listed if not r["stands_in_for_cell"]]
    assert [r["cell_id"] for r in inside] == ["g1", "g1"]
    assert {r["eval"] for r in inside} == {"golden"}
    outside = [r for r in listed if r["stands_in_for_cell"]]
    assert len(outside) == 7
    assert {r["eval"] for r in outside} == {EVAL}
    assert {r["counted_engine"] for r in listed} == {"qwen"}
    assert [r["status"] for r in outside].count("deadline") == 1
    only = _json(capsys, "requests", "--store", recorded["mixed"], "--outside-cells")
    assert sorted(r["uid"] for r in only) == sorted(r["uid"] for r in outside)
    assert len(_json(capsys, "requests", "--store", recorded["mixed"], "-n", "3")) == 3
    assert len(_json(capsys, "requests", "--store", recorded["mixed"], "--eval", "golden")) == 2


def test_bare_requests_without_an_eval_name_group_by_engine_address(recorded, capsys) -> None:
    address = recorded["address"]
    report = _json(capsys, "concurrency", "--store", recorded["bare"], "--cells")
    (engine,) = report["engines"]
    assert engine["engine"] == address
    assert engine["n_cells"] == engine["requests_as_cells"] == 7
    assert {c["eval_name"] for c in engine["cells"]} == {f"requests to {address}"}
    assert engine["completion_tokens"] == sum(recorded["bare_seen"]["outside"])


def test_a_refusal_names_what_the_store_holds(recorded, tmp_path: Path, capsys) -> None:
    store = recorded["bare"]
    assert main(["neighbour-cost", "--store", store, "--eval", "nope"]) == 1
    err = capsys.readouterr().err
    address = recorded["address"]
    with Store(store, read_only=True) as s:
        samples = s.row_counts()["metric_samples"]  # spark-otel's own request metrics
    assert err == (
        f"spark-otel: error: {store}: no cells of eval 'nope'; it holds 7 requests (7 outside any cell, "
        f"standing in for cells: `spark-otel requests`), {samples:,} metric samples "
        f"(`spark-otel instruments`); evals: requests to {address}\n"
    )
    assert main(["timeouts", "--store", store, "--eval", "nope"]) == 1
    assert capsys.readouterr().err == err
