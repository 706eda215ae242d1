"""The fleet shape (docs/deploy.md, shape 3), run: two simulated boxes, each its own processes (a
simulated engine pair with an instrumented eval, tests/collector/fleet_box_runner.py, and the
`spark-otel receive` it starts, plus an `ingest-nsight` of a capture) sending OTLP to its own
collector (otelcol.yaml + otelcol-fleet.yaml, its SPARK_OTEL_BOX), both collectors sending to one
central collector (otelcol-central.yaml) in front of one Prometheus and one Jaeger, all on
127.0.0.1.

Both boxes run the same evals on engines of the same names, as a fleet running one suite does:
only the box tells their series and spans apart. Each box runs a serial eval on qwen throughout
and a four-worker load eval on nemotron for a while, then a ceiling cell and a governed pair on
nemotron (so every panel has data from both boxes). The loads are staggered (box A's, then box
B's), so a query that mixed the boxes would price one box's eval against the other box's load.
Then:

(a) every panel query of the four dashboards, sent as Grafana sends it over the run: with the
box variable at All every series carries `host_name`, one of the two boxes, and each box has
series on every panel; with one box picked, only that box's series come back, each equal to its
series under All. Neighbour cost (single-select box, its results summed over the box) gives
different answers for the two boxes;
(b) per box, the Neighbour cost panels (cost over the load window, the cost stat, the baseline
band's median, the 1-minute baseline stat) equal that box's `spark-otel neighbour-cost` answer
from its own embedded store;
(c) in Jaeger each box's cell spans are found by eval and host.name, each in its own trace with
its requests, and carry that box's host.name; found by eval alone, they split by host.name into
exactly the two stores' cells;
(d) box B's collector is stopped near the end of the run while both boxes keep running: every
cell of box A reaches Prometheus and Jaeger (counts equal its store's), box B's embedded store
holds every cell its runner ran, and nothing of box B reaches Prometheus after the stop;
(e) cells are spans, never series: every series carries its box, no label names a cell or a
request, no label but `le` has more than a handful of values per box, both boxes have as many
series, and box A's did not grow while it ran more cells. (What the series and the traffic
cost, per box and for 100 boxes, is measured by benchmarks/bench_fleet.py.)
Never skipped where real components are required (CI).
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboards import build, lint, neighbour_cost
from tests.support import series_checks, trace_checks
from tests.support.collector_stack import Fleet, JaegerSpan, Prometheus, grafana_expr, variable_values
from tests.support.fleet_boxes import SERVICE, BoxRun, otlp_env, start_box
from tests.support.nsight import build_capture
from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel.store import Store

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

BOX_A, BOX_B = "fleet-a", "fleet-b"
BOXES = (BOX_A, BOX_B)
# Model seconds per real second. Two boxes on a loaded 2-core machine: the loopback carries at
# most one box's four MoE workers and both serial streams at a time (the loads are staggered),
# about 1,500 SSE chunks a wall second at 10.
SPEED = 10.0
SERIAL_TOKENS = 100  # ~8.7 model s (0.9 s wall) per serial cell on the dense engine alone
LOAD_TOKENS = 300
LOAD_WORKERS = 4
BASELINE_S = 8.0  # box A's serial lane alone before its load
SERIAL_STAGGER_S = 2.0  # box B's serial lane starts this much later
LOAD_S = 12.0  # each box's load window
TAIL_S = 5.0  # after box B's load and extras, before box B's collector stops
OUTAGE_S = 5.0  # both boxes run on with box B's collector down
RATE_INTERVAL = "5s"
# The series a box's data made exist in Prometheus this long after it was sent (the SDK's 1 s
# export and 0.5 s span batching, the box collector's batches and 1 s span-metrics flush, the
# central collector's batch, remote write), with room for a loaded machine.
SERIES_SETTLE_S = 8.0
# At most this many values of any label (but `le`) on one box: the run's evals, engines, span
# names, processes. Each box runs several times as many cells, so a label per cell exceeds it.
SERIES_LABEL_BOUND = 16
# A cell that ended this long before box B's collector stopped may still have been on its way
# (the SDK's 0.5 s span batching, the box collector's 1 s batch) and be lost with it.
IN_FLIGHT_S = 2.5


@pytest.fixture
def box_runs() -> Iterator[Callable[..., BoxRun]]:
    """Start box runners; any still running after the test is killed (with its receiver)."""
    started: list[BoxRun] = []

    def start(name: str, workdir: Path, collector_http: str, config: dict[str, Any]) -> BoxRun:
        run = start_box(name, workdir, collector_http, config)
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill()


def _ingest_nsight(capture: Path, box: str, collector_http: str) -> None:
    """`spark-otel ingest-nsight --otlp` of a capture taken a few seconds ago, on the box."""
    with sqlite3.connect(capture) as conn:
        conn.execute(
            "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = ?", (time.time_ns() - 5_000_000_000,)
        )
    env = otlp_env(collector_http, box, capture.with_suffix(".store"))
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"service.instance.id={box}-nsight"
    proc = subprocess.run(
        [sys.executable, "-m", "spark_otel", "ingest-nsight", "--otlp", "--no-store", str(capture)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr


def _cli(store: Path, *args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "spark_otel", *args, "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))},
    )
    assert proc.returncode == 0, f"spark-otel {' '.join(args)} failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


def test_two_boxes_through_one_central_collector(
    fleet_factory: Callable[..., Fleet], box_runs: Callable[..., BoxRun], tmp_path: Path
) -> None:
    tag = f"{int(time.time())}"
    evals = {
        "serial": f"fleet-serial-{tag}",
        "load": f"fleet-load-{tag}",
        "ceiling": f"fleet-ceiling-{tag}",
        "governed": f"fleet-governed-{tag}",
    }
    capture = tmp_path / "capture.sqlite"
    # A synthetic Nsight GPU-metrics export, before anything runs: building it holds a core for a while.
    build_capture(capture, seconds=1.0, hz=1000)
    fleet = fleet_factory(list(BOXES))
    run_start = time.time()
    for box in BOXES:
        box_capture = tmp_path / box / "capture.sqlite"
        box_capture.parent.mkdir(parents=True, exist_ok=True)
        box_capture.write_bytes(capture.read_bytes())
        _ingest_nsight(box_capture, box, fleet.boxes[box].otlp_http)

    config = {
        "speed": SPEED,
        "evals": evals,
        "serial_tokens": SERIAL_TOKENS,
        "load_tokens": LOAD_TOKENS,
        "load_workers": LOAD_WORKERS,
        "receive_interval_s": 1.0,
    }
    runs = {
        box: box_runs(box, tmp_path / box, fleet.boxes[box].otlp_http, {**config, "seed": seed})
        for seed, box in enumerate(BOXES)
    }
    for run in runs.values():
        run.ready = run.wait("ready", 90)
    a, b = runs[BOX_A], runs[BOX_B]
    extras: dict[str, dict[str, Any]] = {}
    a.command("serial-start")
    time.sleep(SERIAL_STAGGER_S)  # the boxes' lanes never in step, so no two panels agree by chance
    b.command("serial-start")
    time.sleep(BASELINE_S - SERIAL_STAGGER_S)
    a.command("load-start")
    time.sleep(LOAD_S)
    a.command("load-stop")
    # Each box's ceiling cell and governed pair (on nemotron) after its load: the neighbour-cost
    # comparison below reads the time range up to the load, as test_e2e's does.
    a.send("extras")
    extras[BOX_A] = a.wait("extras", 60)
    b.command("load-start")
    a_series_settled = b.marks["load-start"] + SERIES_SETTLE_S  # every series of box A exists
    time.sleep(LOAD_S)
    b.command("load-stop")
    b.send("extras")
    extras[BOX_B] = b.wait("extras", 60)
    time.sleep(TAIL_S)
    panel_time = time.time()
    # Box B's collector goes away for good; both boxes run on.
    b_collector = fleet.boxes[BOX_B]
    stopped_at = time.time()
    b_collector.service.stop()
    stop_done = time.time()
    time.sleep(OUTAGE_S)
    for run in runs.values():
        run.send("finish")
    for run in runs.values():
        run.done = run.wait("done", 90)
        run.proc.wait(timeout=30)
    run_end = time.time()

    for box, run in runs.items():
        done = run.done
        assert not done["errors"], (box, done["errors"][:3])
        assert done["receive_rc"] == 0, (box, run.log_tail())
        ceiling = extras[box]["ceiling"]
        assert ceiling["status"] == "deadline", ceiling
        assert ceiling["findings"] > 0, ceiling
        # The box kept pace with the wall clock (as test_e2e allows: 2% of the run's model time).
        allowed = 0.02 * (run_end - run_start) * SPEED
        worst = max(done["dropped_model_s"].values())
        assert worst <= allowed, f"{box} dropped {worst:.1f} > {allowed:.1f} model s"

    prom = fleet.prometheus
    # (a) every panel, sent as Grafana sends it, over the run up to the panel time (which both
    # boxes' data had long reached when they finished).
    _check_every_panel(prom, run_start, panel_time, evals["serial"])

    # (b) per box, the Neighbour cost panels against the box's own CLI answer.
    for run in runs.values():
        _compare_neighbour_cost(prom, run, evals["serial"], evals["load"], run_start)

    # (d) box B's store holds every cell its runner ran, those of the outage too; so does A's.
    for box, run in runs.items():
        with Store(run.store, read_only=True) as store:
            for eval_name, ids in run.done["cells"].items():
                stored = {c.cell_id for c in store.cells(eval_name=eval_name)}
                assert stored == set(ids), (box, eval_name, sorted(stored ^ set(ids))[:10])
    b_serial_real_ends = _real_ends(b, evals["serial"])
    after_stop = [cid for cid, end in b_serial_real_ends.items() if end > stopped_at]
    assert len(after_stop) >= 2, f"box B ran {len(after_stop)} serial cells while its collector was down"

    # (d) every cell of box A reaches Prometheus (the SDK's cell counter and the span metrics of
    # its cell spans), its final export included; box B's stop costs box A nothing.
    a_counts = _store_counts(a.store, evals.values())
    cells_total, span_calls = "spark_otel_cells_total", "traces_span_metrics_calls_total"
    wait_for(
        lambda: _prom_counts(prom, cells_total, BOX_A) == a_counts or None,
        f"Prometheus to count box A's cells {a_counts} (has {_prom_counts(prom, cells_total, BOX_A)})",
        30,
        0.5,
    )
    wait_for(
        lambda: _span_counts(prom, span_calls, BOX_A) == a_counts or None,
        f"span metrics to count box A's cell spans {a_counts} (has {_span_counts(prom, span_calls, BOX_A)})",
        30,
        0.5,
    )
    # Nothing of box B arrives after its collector stopped; box A's keeps arriving.
    last = {
        box: float(r[0]["value"][1])
        for box in BOXES
        if (r := prom.query(f'max(timestamp(spark_otel_cells_total{{host_name="{box}"}}))'))
    }
    assert last[BOX_B] <= stop_done, (last, stopped_at, stop_done)
    assert last[BOX_A] > stopped_at + OUTAGE_S - 1.5, (last, stopped_at)
    # What box B's collector had passed on before it stopped is all there.
    b_counts = _store_counts(b.store, evals.values())
    b_prom = _prom_counts(prom, cells_total, BOX_B)
    assert all(b_prom.get(e, 0) <= n for e, n in b_counts.items()), (b_prom, b_counts)
    b_before = sum(end < stopped_at - IN_FLIGHT_S for end in b_serial_real_ends.values())
    assert b_prom[evals["serial"]] >= b_before, (b_prom, b_before)

    # (c) traces per box in Jaeger; (d) every cell of A there, B's but those on their way at the stop.
    _check_traces(fleet, runs, list(evals.values()), stopped_at)

    # (e) cells are spans, never series.
    _check_series(prom, runs, evals["serial"], run_start, run_end, a_series_settled)


def _real_ends(run: BoxRun, eval_name: str) -> dict[str, float]:
    with Store(run.store, read_only=True) as store:
        return {c.cell_id: run.real_s(c.end_unix_ns) for c in store.cells(eval_name=eval_name)}


def _store_counts(path: Path, evals: Any) -> dict[str, int]:
    with Store(path, read_only=True) as store:
        return {e: n for e in evals if (n := len(store.cells(eval_name=e)))}


def _prom_counts(prom: Prometheus, metric: str, box: str) -> dict[str, int]:
    result = prom.query(f'sum by (spark_otel_eval) ({metric}{{host_name="{box}"}})')
    return {r["metric"]["spark_otel_eval"]: round(float(r["value"][1])) for r in result}


def _span_counts(prom: Prometheus, metric: str, box: str) -> dict[str, int]:
    result = prom.query(f'sum by (spark_otel_eval) ({metric}{{host_name="{box}", span_name=~"cell .*"}})')
    return {r["metric"]["spark_otel_eval"]: round(float(r["value"][1])) for r in result}


def _check_series(
    prom: Prometheus, runs: dict[str, BoxRun], serial_eval: str, start: float, end: float, a_settled: float
) -> None:
    """(e): every series carries its box; per box, no label names a cell (its id, its span or
    trace id, a request's span id), no label but `le` takes more than SERIES_LABEL_BOUND values
    though each box ran many times that many cells; box A's series did not grow while it went on
    running cells after its last new eval. (The two boxes' counts are not compared: a series is a
    combination of bounded labels, and which combinations occur depends on what happened, a cell
    that failed on one box, a governed cell's admission, not on how many cells ran.)"""
    cell_ids, hex_ids = series_checks.per_cell_values(run.store for run in runs.values())
    orphans = series_checks.without_box(prom, start, end)
    assert not orphans, f"series without {series_checks.BOX_LABEL}: {orphans[:5]}"
    for box, run in runs.items():
        got = series_checks.box_series(prom, box, start, end)
        with Store(run.store, read_only=True) as store:
            cells = len(store.cells())
        assert cells > 3 * SERIES_LABEL_BOUND, (box, cells)
        named = series_checks.per_cell_labels(got, cell_ids, hex_ids)
        assert not named, f"{box}: labels that name a cell or request: {named[:10]}"
        over = series_checks.unbucketed_over(got, SERIES_LABEL_BOUND)
        assert not over, f"{box}: labels over {SERIES_LABEL_BOUND} values: {over}; {got.cardinality()}"
    ingested = f'count({{{series_checks.BOX_LABEL}="{BOX_A}", __name__!~".+:.+"}})'
    [before] = prom.query(ingested, at=a_settled)
    [after] = prom.query(ingested, at=end)
    ran_since = sum(t > a_settled for t in _real_ends(runs[BOX_A], serial_eval).values())
    assert ran_since >= 10, f"box A ran {ran_since} cells after its series settled"
    assert before["value"][1] == after["value"][1], (before, after, ran_since)


def _datasource_defaults(model: dict[str, Any]) -> dict[str, str]:
    return {
        v["name"]: v["current"]["value"] for v in model["templating"]["list"] if v["type"] == "datasource"
    }


def _includes_all(model: dict[str, Any], name: str) -> bool:
    return any(v["name"] == name and v.get("includeAll") for v in model["templating"]["list"])


Series = dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]


def _range(
    prom: Prometheus, target: dict[str, Any], values: dict[str, str], start: float, end: float
) -> Series:
    """A panel target over [start, end] at a 1 s step, as Grafana sends it for that time range."""
    range_ = f"{int(end - start)}s"
    expr = grafana_expr(target, values, rate_interval=RATE_INTERVAL, range_=range_, interval="1s")
    out: Series = {}
    for series in prom.query_range(expr, start, end, 1.0):
        points = [(float(t), float(v)) for t, v in series["values"]]
        out[tuple(sorted(series["metric"].items()))] = [(t, v) for t, v in points if v == v]  # no NaN
    return out


def _check_every_panel(prom: Prometheus, start: float, end: float, serial_eval: str) -> None:
    """(a): no panel's series mixes the boxes, and picking a box shows that box's series only."""
    problems: list[str] = []
    for stem, model in build.dashboards().items():
        defaults = _datasource_defaults(model)
        for panel, target in lint.targets(model):
            key = f"{model['title']} / {panel['title']} / {target['refId']}"
            if _includes_all(model, "box"):
                every = _range(prom, target, variable_values(model, defaults), start, end)
                boxes = {dict(k).get("host_name") for k in every}
                if not boxes <= set(BOXES):
                    problems.append(f"{key}: series of boxes {boxes} under All")
                if boxes != set(BOXES):
                    problems.append(f"{key}: no series for {set(BOXES) - boxes} under All")
                for box in BOXES:
                    picked = _range(
                        prom, target, variable_values(model, {**defaults, "box": box}), start, end
                    )
                    mine = {k: v for k, v in every.items() if dict(k).get("host_name") == box}
                    if picked.keys() != mine.keys():
                        problems.append(f"{key}: box {box} picked gives {set(picked) ^ set(mine)} beside All")
                    for k, points in picked.items():
                        if k in mine and not _same_points(points, mine[k]):
                            problems.append(f"{key}: {dict(k)} differs picked and under All")
            else:  # Neighbour cost: one box, one engine, its results summed over the box
                assert stem == "neighbour-cost", stem
                results = {}
                for box in BOXES:
                    values = variable_values(
                        model, {**defaults, "box": box, "engine": "qwen", "eval": serial_eval}
                    )
                    results[box] = _range(prom, target, values, start, end)
                    if not results[box]:
                        problems.append(f"{key}: no series for box {box}")
                    for k in results[box]:
                        labels = dict(k)
                        if labels.get("host_name", box) != box or any(
                            labels.get("instance", "").startswith(other) for other in BOXES if other != box
                        ):
                            problems.append(f"{key}: box {box} picked gives {labels}")
                # The same evals and engines on both boxes: a query that ignored the box would
                # answer both alike.
                if results[BOX_A] and results[BOX_A] == results[BOX_B]:
                    problems.append(f"{key}: the same answer for both boxes")
    assert not problems, "\n".join(problems)


def _same_points(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    return len(a) == len(b) and all(
        ta == tb and (va == vb or abs(va - vb) <= 1e-9 * max(abs(va), abs(vb)))
        for (ta, va), (tb, vb) in zip(a, b, strict=True)
    )


def _panel(
    prom: Prometheus, expr: str, values: dict[str, str], start: float, end: float, range_: str
) -> list[float]:
    """One Neighbour cost query's one series over [start, end] (1 s steps), NaN dropped."""
    expr = grafana_expr({"expr": expr}, values, rate_interval=RATE_INTERVAL, range_=range_, interval="1s")
    result = prom.query_range(expr, start, end, 1.0)
    assert len(result) == 1, (expr, result)
    return [v for _, raw in result[0]["values"] if (v := float(raw)) == v]


def _compare_neighbour_cost(
    prom: Prometheus, run: BoxRun, serial_eval: str, load_eval: str, run_start: float
) -> None:
    """(b): as test_e2e's comparison, for the one box picked, against the CLI on its own store."""
    report = _cli(run.store, "neighbour-cost", "--eval", serial_eval)
    windows = [w for w in report["windows"] if load_eval in w["name"] or w.get("engine") == "nemotron"]
    assert windows, f"{run.name}: no window for {load_eval}: {[w['name'] for w in report['windows']]}"
    window = max(windows, key=lambda w: w["n_cells"])
    cli_cost = window["cost"] * 100
    load_start, load_end = run.marks["load-start"], run.marks["load-stop"]
    inside_start, inside_end = load_start + 6, load_end - 1
    range_ = f"{int(inside_end - run_start) + 5}s"
    model = build.dashboards()["neighbour-cost"]
    values = variable_values(
        model, {**_datasource_defaults(model), "box": run.name, "engine": "qwen", "eval": serial_eval}
    )
    panel_cost = statistics.mean(
        _panel(prom, neighbour_cost.COST_PERCENT.expr, values, inside_start, inside_end, range_)
    )
    [stat_cost] = _panel(prom, neighbour_cost.COST_UNDER_LOAD.expr, values, inside_end, inside_end, range_)
    [baseline] = _panel(prom, neighbour_cost.BASELINE_P50.expr, values, inside_end, inside_end, range_)
    [baseline_1m] = _panel(prom, neighbour_cost.BASELINE_MEDIAN.expr, values, inside_end, inside_end, range_)
    cli_baseline = report["baseline"]["median"]
    found = (run.name, panel_cost, stat_cost, cli_cost, baseline, baseline_1m, cli_baseline, window)
    assert panel_cost == pytest.approx(cli_cost, abs=5.0), found
    assert stat_cost == pytest.approx(cli_cost, abs=5.0), found
    assert baseline == pytest.approx(cli_baseline, rel=0.05), found
    # The 1-minute means are means of cells, the CLI's a median of them: the idle cells' rates lie
    # within about 1% of each other here.
    assert baseline_1m == pytest.approx(cli_baseline, rel=0.03), found
    # Over the load window alone every minute had a busy neighbour: no 1-minute baseline at all
    # (the 1-minute mean lags a load this short, so only this tells that the stat drops them).
    loaded = grafana_expr(
        {"expr": neighbour_cost.BASELINE_MEDIAN.expr},
        values,
        rate_interval=RATE_INTERVAL,
        range_=f"{int(inside_end - inside_start)}s",
        interval="1s",
    )
    assert prom.query(loaded, at=inside_end) == [], (run.name, loaded)
    assert cli_cost > 20, found  # a real neighbour cost, which mixing in the other box would move


def _check_traces(fleet: Fleet, runs: dict[str, BoxRun], evals: list[str], stopped_at: float) -> None:
    """(c) and (d) in Jaeger."""
    jaeger = fleet.jaeger
    expected: dict[str, trace_checks.Expected] = {}
    for box, run in runs.items():
        exp = trace_checks.expected_from_store(run.store, evals)
        if box == BOX_B:  # on their way when its collector stopped, or after
            with Store(run.store, read_only=True) as store:
                ends = {c.uid: run.real_s(c.end_unix_ns) for e in evals for c in store.cells(eval_name=e)}
            exp = exp.may_lose(uid for uid, end in ends.items() if end > stopped_at - IN_FLIGHT_S)
        expected[box] = exp
    assert not expected[BOX_A].maybe_lost
    assert expected[BOX_B].maybe_lost, "box B ran no cell while its collector was down"
    found: dict[str, dict[str, JaegerSpan]] = {}
    for box, exp in expected.items():
        found[box] = {}
        for eval_name in evals:
            spans = _find_cells(jaeger, exp, eval_name, {sc.EVAL_NAME: eval_name, "host.name": box})
            for span in spans.values():
                assert span.resource.get("host.name") == box, (box, span)
                assert span.resource.get("service.instance.id") == f"{box}-runner", span
            found[box].update(spans)
        for uid, cell in exp.cells.items():
            if uid in found[box] or uid not in exp.maybe_lost:
                trace_checks.check_cell(jaeger, SERVICE, cell, exp.requests[uid])
    assert set(found[BOX_A]) == set(expected[BOX_A].cells)  # every cell of A: nothing lost to B's stop
    b_cells = set(expected[BOX_B].cells)
    assert b_cells - expected[BOX_B].maybe_lost <= set(found[BOX_B]) <= b_cells
    # Found by eval alone (both boxes ran it), the spans split by host.name into the two stores.
    start = min(e.start_ns for e in expected.values())
    end = max(e.end_ns for e in expected.values())
    for eval_name in evals:
        traces = jaeger.find_traces(
            SERVICE, start_ns=start, end_ns=end, tags={sc.EVAL_NAME: eval_name}, limit=2000
        )
        spans = _cell_spans(traces)
        by_box = {box: {u for u, s in spans.items() if s.resource.get("host.name") == box} for box in BOXES}
        assert set(spans) == by_box[BOX_A] | by_box[BOX_B], eval_name
        for box in BOXES:
            assert by_box[box] == {
                u for u in found[box] if found[box][u].attributes[sc.EVAL_NAME] == eval_name
            }


def _cell_spans(traces: list[list[JaegerSpan]]) -> dict[str, JaegerSpan]:
    return {
        span.span_id: span
        for trace in traces
        for span in trace
        if span.attributes.get(sc.SPAN_KIND_ATTR) == sc.SPAN_KIND_CELL
    }


def _find_cells(
    jaeger: Any, expected: trace_checks.Expected, eval_name: str, tags: dict[str, str]
) -> dict[str, JaegerSpan]:
    """The eval's cell spans Jaeger finds by ``tags``, once every expected one is there."""
    every = expected.of_eval(eval_name)
    want = every - expected.maybe_lost

    def got() -> dict[str, JaegerSpan] | None:
        traces = jaeger.find_traces(
            SERVICE,
            start_ns=expected.start_ns,
            end_ns=expected.end_ns,
            tags=tags,
            limit=max(100, 4 * len(every)),
        )
        spans = _cell_spans(traces)
        return spans if want <= set(spans) else None

    spans = wait_for(got, f"Jaeger to hold the {len(want)} cell spans with {tags}", 60, 0.5)
    assert set(spans) <= every, sorted(set(spans) - every)
    return spans
