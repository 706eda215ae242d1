"""`spark-otel demo`: `--quick` end to end against the simulation's ground truth; a bad speed refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel.analysis.neighbour import neighbour_cost
from spark_otel.cli import main
from spark_otel.demo import DemoPlan, _ground_truth
from spark_otel.model import CellStatus
from spark_otel.store import Store

# Slow enough that the instrumented client keeps pace with the streams on a loaded 2-core box.
SPEED = 60.0


@pytest.mark.slow
def test_demo_quick_recovers_the_simulated_neighbour_cost_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's own store (named by the environment, as in production) must stay untouched:
    # without --store, the demo's simulated records go to a store of their own beside the report.
    user_store = tmp_path / "user" / "store.sqlite"
    monkeypatch.setenv("SPARK_OTEL_STORE", str(user_store))
    out = tmp_path / "report"
    store_path = out / "store.sqlite"
    code = main(["demo", "--quick", "--speed", str(SPEED), "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    for title in ("Probe on qwen", "cells in flight", "What other load cost demo-serial-", "Queue rules"):
        assert title in printed
    assert not user_store.exists()
    assert f"store:  {store_path} (evals demo-serial-" in printed
    assert f"spark-otel neighbour-cost --store {store_path} --eval demo-serial-" in printed
    assert f"spark-otel report --store {store_path}" in printed

    with Store(store_path) as store:
        evals = store.eval_names()
        [serial_eval] = [e for e in evals if e.startswith("demo-serial-")]
        [load_eval] = [e for e in evals if e.startswith("demo-nemotron-")]
        serial, load = store.cells(eval_name=serial_eval), store.cells(eval_name=load_eval)
        windows = store.windows()
        requests = store.requests(eval_name=serial_eval)
        [probe_doc] = store.documents("probe")

    # The serial eval ran throughout, one cell at a time, every cell with its own tokens.
    assert len(serial) >= 10
    assert {c.source for c in serial + load} == {"demo"}  # recognisable wherever they end up
    assert all(c.engine == "qwen" and c.workers == 1 and c.status is CellStatus.OK for c in serial)
    # At least min_tokens each; an answer may run longer on its own, never past max_tokens.
    assert all(c.completion_tokens and 500 <= c.completion_tokens <= 4 * 800 for c in serial)
    assert {r.cell_uid for r in requests} == {c.uid for c in serial}  # instrumented request spans
    assert all(c.engine == "nemotron" and c.workers == 4 for c in load)
    assert [w.name for w in windows if w.kind == "probe"] == ["probe 1 streams", "probe 4 streams"]
    assert {w.kind for w in windows} == {"probe"}  # the nemotron eval's load is read from its cells
    assert probe_doc["body"]["metadata"]["engine"] == "qwen"

    truth = _ground_truth(DemoPlan.quick(SPEED))
    result = neighbour_cost(serial_eval, serial + load, [w for w in windows if w.kind == "probe"])
    assert result.baseline.n >= 5
    # Every cell reads a little under the simulated rate (its own time to first token, client work).
    assert result.baseline.median == pytest.approx(truth["baseline_rate"], rel=0.06)
    [nemotron] = [w for w in result.windows if w.engine == "nemotron" and w.n_cells]
    assert nemotron.n_cells >= 3
    assert nemotron.cost == pytest.approx(truth["load"], abs=0.02)
    for level in (1, 4):
        probe = result.window(f"probe {level} streams")
        assert probe.same_engine
        assert probe.cost is not None
        assert -0.05 < probe.cost < 0.2  # a few percent, far from the other engine's half
    # Against the ground truth, the cells that ran wholly inside a probe level: a cell half
    # outside it decoded part of its answer alone, which dilutes the cost it reports.
    inside = neighbour_cost(
        serial_eval, serial, [w for w in windows if w.kind == "probe"], min_overlap_fraction=1.0
    )
    for level in (1, 4):
        probe = inside.window(f"probe {level} streams")
        assert probe.n_cells >= 1
        assert probe.cost == pytest.approx(truth[f"probe {level} streams"], abs=0.02)

    page = (out / "report.html").read_text()
    assert "Neighbour cost" in page
    assert "Queue rules" in page
    assert page.count("data:image/png;base64,") >= 3
    # nemotron ran only at 4 workers beside the serial eval: no count was measured harmless, so it yields.
    assert "nemotron yields while demo-serial-" in page


def test_demo_refuses_an_infinite_or_zero_speed_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for speed in ("0", "inf"):
        assert main(["demo", "--speed", speed, "--store", str(tmp_path / "s.sqlite")]) == 2
        assert "--speed must be a positive finite number" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()
