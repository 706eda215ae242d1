"""The dashboards as code: the committed JSON is what the code generates, the SDK round-trips
it, the lint rules pass (and catch what they should), every PromQL expression parses, and every
metric a panel queries is a name defined in ``_semconv.py``."""

from __future__ import annotations

import copy
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from collector_stack import (
    COLLECTOR_DIR,
    ROOT,
    Prometheus,
    free_ports,
    grafana_expr,
    prometheus_service,
    variable_values,
)
from dashboards import build, lint, series
from dashboards.prometheus_names import Kind, base_names, prometheus_name
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard
from tests.conftest import wait_for

from spark_otel import _semconv as sc

PROVISIONING = COLLECTOR_DIR / "grafana" / "provisioning" / "datasources" / "spark_otel.yaml"


def provisioned_uids() -> set[str]:
    return {d["uid"] for d in yaml.safe_load(PROVISIONING.read_text())["datasources"]}


@pytest.fixture(scope="module")
def models() -> dict[str, dict[str, Any]]:
    return build.dashboards()


def test_grafana_foundation_sdk_is_the_pinned_release() -> None:
    from importlib.metadata import version

    assert version("grafana-foundation-sdk").lstrip("v") == "0.0.21"


def test_committed_json_and_rules_are_what_the_code_generates() -> None:
    for path, text in build.outputs().items():
        assert path.exists(), f"{path.relative_to(ROOT)} missing: run python -m dashboards.build"
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run python -m dashboards.build"


def test_build_check_mode_reports_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "json"
    stale.mkdir()
    (stale / "concurrency.json").write_text("{}\n")
    monkeypatch.setattr(build, "JSON_DIR", stale)
    monkeypatch.setattr(build, "RULES_PATH", tmp_path / "rules.yml")
    assert build.main(["--check"]) == 1
    assert build.main([]) == 0
    assert build.main(["--check"]) == 0
    assert json.loads((stale / "concurrency.json").read_text())["uid"] == "spark-otel-concurrency"


def test_four_dashboards_with_engine_and_eval_variables(models: dict[str, dict[str, Any]]) -> None:
    assert set(models) == {"concurrency", "neighbour-cost", "instruments", "deadlines"}
    for stem, model in models.items():
        names = {v["name"] for v in model["templating"]["list"]}
        assert "engine" in names
        if stem != "instruments":  # box-wide gauges: no eval dimension
            assert "eval" in names


def test_sdk_round_trip_loses_nothing(models: dict[str, dict[str, Any]]) -> None:
    register_default_plugins()
    for stem, model in models.items():
        again = json.loads(json.dumps(Dashboard.from_json(model).to_json(), default=lambda o: o.to_json()))
        assert again == model, stem


def test_dashboards_pass_the_lint_rules(models: dict[str, dict[str, Any]]) -> None:
    assert lint.lint_dashboards(models.values(), provisioned_uids()) == []


def _first_panel(model: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in model["panels"] if p["type"] != "row")


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda m: _first_panel(m)["fieldConfig"]["defaults"].pop("unit"), "no unit"),
        (lambda m: _first_panel(m).__setitem__("description", ""), "no description"),
        (lambda m: _first_panel(m)["datasource"].__setitem__("uid", "mimir"), "'mimir' is not provisioned"),
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__(
                "expr", 'sum(rate(spark_otel_cells_total{spark_otel_eval=~"$eval"}[5m]))'
            ),
            "use one of ['$__rate_interval']",
        ),
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__(
                "expr", 'sum(spark_otel_cells_total{spark_otel_eval=~"$eval"})'
            ),
            "counter spark_otel_cells_total not wrapped",
        ),
        (lambda m: _first_panel(m).__setitem__("targets", []), "no queries"),
        (lambda m: m["panels"][2].__setitem__("id", m["panels"][1]["id"]), "duplicate panel id"),
        (lambda m: m["templating"]["list"].append({"name": "unused", "type": "custom"}), "not used"),
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__(
                "expr", 'sum(spark_otel_engine_requests_running{spark_otel_engine!~"$engine"})'
            ),
            '!~"$engine" on a multi-value or All variable',
        ),
    ],
)
def test_lint_catches_each_rule(models: dict[str, dict[str, Any]], breakage: Any, expected: str) -> None:
    model = copy.deepcopy(models["deadlines"])
    breakage(model)
    problems = lint.lint_dashboard(model, provisioned_uids())
    assert any(expected in p for p in problems), problems


def test_neighbour_cost_engine_is_single_select_so_other_engines_mean_something(
    models: dict[str, dict[str, Any]],
) -> None:
    """With "All" (sent as .*) the other-engine load, spark_otel_engine!="$engine", read nothing."""
    model = models["neighbour-cost"]
    engine = next(v for v in model["templating"]["list"] if v["name"] == "engine")
    assert not engine.get("multi")
    assert not engine.get("includeAll")
    exprs = [target["expr"] for _, target in lint.targets(model)]
    assert any('spark_otel_engine!="$engine"' in e for e in exprs)
    # The lint rule holds the line: the same dashboard with a multi/All engine fails it.
    broken = copy.deepcopy(model)
    next(v for v in broken["templating"]["list"] if v["name"] == "engine").update(
        multi=True, includeAll=True, allValue=".*"
    )
    problems = lint.lint_dashboard(broken, provisioned_uids())
    assert any('!="$engine" on a multi-value or All variable' in p for p in problems), problems


def test_neighbour_cost_baseline_leaves_out_loaded_intervals() -> None:
    """The baseline band and stat drop every interval in which another engine ran a request."""
    from dashboards import neighbour_cost

    for query in (neighbour_cost.BASELINE_P10, neighbour_cost.BASELINE_P50, neighbour_cost.BASELINE_P90):
        assert "unless on ()" in query.expr
        assert 'spark_otel_engine_requests_running{spark_otel_engine!="$engine"}' in query.expr
    assert "unless on ()" in neighbour_cost.BASELINE_MEDIAN.expr
    assert neighbour_cost.BASELINE_P50.expr in neighbour_cost.COST_PERCENT.expr


def test_grafana_expr_substitutes_what_grafana_sends(models: dict[str, dict[str, Any]]) -> None:
    model = models["neighbour-cost"]
    with pytest.raises(AssertionError, match="single-select variable 'engine' needs a value"):
        variable_values(model)
    values = variable_values(model, {"engine": "qwen"})
    assert values == {"engine": "qwen", "eval": ".*"}
    expr = grafana_expr({"expr": 'x{spark_otel_engine!="$engine", e=~"${eval}"}[$__rate_interval]'}, values)
    assert expr == 'x{spark_otel_engine!="qwen", e=~".*"}[30s]'
    with pytest.raises(AssertionError, match="left unsubstituted"):
        grafana_expr({"expr": 'x{instance=~"$box"}'}, values)


def test_instruments_tell_boxes_apart(models: dict[str, dict[str, Any]]) -> None:
    """Every box has a GPU 0: GPU panels group by box and GPU id, and a box variable picks boxes."""
    from dashboards import instruments

    model = models["instruments"]
    box = next(v for v in model["templating"]["list"] if v["name"] == "box")
    assert box["query"]["query"] == "label_values(spark_otel_gpu_power_watts, instance)"
    for query in (instruments.GPU_UTILIZATION, instruments.GPU_POWER):
        assert query.expr.startswith("max by (instance, spark_otel_gpu_id)")
    assert "/ on (instance) sum by (instance) (spark_otel_gpu_power_watts" in instruments.TOKENS_PER_WATT.expr


def test_lint_catches_a_shared_uid(models: dict[str, dict[str, Any]]) -> None:
    twin = copy.deepcopy(models["concurrency"])
    twin["title"] = "twin"
    problems = lint.lint_dashboards([models["concurrency"], twin], provisioned_uids())
    assert any("also used by" in p for p in problems)


def test_metric_name_extraction_ignores_functions_labels_and_numbers() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, spark_otel_eval) (rate(a_bucket{x="rate(b)"}[5m])))'
        " / on (spark_otel_engine) group_left c_total > 1e3 or vector(0)"
    )
    assert lint.metric_names(expr) == {"a_bucket", "c_total"}
    assert lint.counters_not_aggregated(expr) == ["c_total"]


def _semconv_names() -> set[str]:
    return {v.replace(".", "_") for k, v in vars(sc).items() if k.isupper() and isinstance(v, str)}


def _queried_names(expr: str) -> set[str]:
    """Metric names an expression reads, with recording rules expanded to their sources."""
    names: set[str] = set()
    for name in lint.metric_names(expr):
        if name in series.RULES:
            names |= _queried_names(series.RULES[name])
        else:
            names.add(name)
    return names


def test_every_queried_metric_is_defined_in_semconv(models: dict[str, dict[str, Any]]) -> None:
    known = _semconv_names()
    queried: set[str] = set()
    for model in models.values():
        for _, target in lint.targets(model):
            queried |= _queried_names(target["expr"])
    assert queried, "no metric names found in the dashboards"
    unknown = {name for name in queried if not base_names(name) & known}
    assert unknown == set()


def test_semconv_check_rejects_a_name_not_in_semconv() -> None:
    known = _semconv_names()
    assert base_names("spark_otel_cell_decode_rate_per_second_sum") & known
    assert not base_names("spark_otel_cell_decode_speed_per_second_sum") & known
    assert not base_names("node_cpu_seconds_total") & known


@pytest.mark.parametrize(
    ("name", "unit", "kind", "expected"),
    [
        (sc.CELL_DECODE_RATE_METRIC, "{token}/s", Kind.HISTOGRAM, "spark_otel_cell_decode_rate_per_second"),
        (sc.CELL_DURATION, "s", Kind.HISTOGRAM, "spark_otel_cell_duration_seconds"),
        (sc.CELL_COUNT, "{cell}", Kind.COUNTER, "spark_otel_cells_total"),
        (sc.CELLS_IN_FLIGHT, "{cell}", Kind.UP_DOWN, "spark_otel_cells_in_flight"),
        (sc.GPU_UTILIZATION, "1", Kind.GAUGE, "spark_otel_gpu_utilization_ratio"),
        (sc.GPU_POWER, "W", Kind.GAUGE, "spark_otel_gpu_power_watts"),
        (sc.GPU_ENERGY, "J", Kind.COUNTER, "spark_otel_gpu_energy_joules_total"),
        (sc.GPU_MEMORY_USED, "By", Kind.GAUGE, "spark_otel_gpu_memory_used_bytes"),
        (sc.GPU_CLOCK_SM, "MHz", Kind.GAUGE, "spark_otel_gpu_clock_sm_MHz"),
        (sc.ENGINE_REQUESTS_RUNNING, "{request}", Kind.GAUGE, "spark_otel_engine_requests_running"),
    ],
)
def test_prometheus_name_translation(name: str, unit: str, kind: Kind, expected: str) -> None:
    """The table read off the real collector and Prometheus (see prometheus_names.py)."""
    assert prometheus_name(name, unit, kind) == expected


def test_every_expression_parses_with_promtool(
    models: dict[str, dict[str, Any]], promtool_bin: Path, tmp_path: Path
) -> None:
    """promtool parses PromQL offline: each panel query, macros substituted, as a rule."""
    rules = []
    for model in models.values():
        values = variable_values(model, {"engine": "qwen"} if model["uid"].endswith("neighbour-cost") else {})
        for i, (_, target) in enumerate(lint.targets(model)):
            rules.append(
                {
                    "record": f"check:{model['uid'].replace('-', '_')}:{i}",
                    "expr": grafana_expr(target, values),
                }
            )
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    proc = subprocess.run(
        [str(promtool_bin), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


class _Box(BaseHTTPRequestHandler):
    """One box's receiver as Prometheus sees it: GPU 0's power and a qwen engine's counter."""

    power_w = 0.0
    tokens_per_s = 0.0

    def do_GET(self) -> None:
        body = (
            "# TYPE spark_otel_gpu_power_watts gauge\n"
            f'spark_otel_gpu_power_watts{{spark_otel_gpu_id="0"}} {self.power_w}\n'
            "# TYPE spark_otel_gpu_utilization_ratio gauge\n"
            'spark_otel_gpu_utilization_ratio{spark_otel_gpu_id="0"} 0.96\n'
            "# TYPE spark_otel_engine_generation_tokens_total counter\n"
            f'spark_otel_engine_generation_tokens_total{{spark_otel_engine="qwen"}} '
            f"{self.tokens_per_s * time.time():.3f}\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def two_boxes() -> Iterator[dict[str, float]]:
    """Two boxes on 127.0.0.1, each with its own GPU 0: address -> power in watts."""
    servers = []
    try:
        for power, rate in ((40.0, 100.0), (10.0, 50.0)):
            handler = type("Handler", (_Box,), {"power_w": power, "tokens_per_s": rate})
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append((server, power))
        yield {f"127.0.0.1:{server.server_address[1]}": power for server, power in servers}
    finally:
        for server, _ in servers:
            server.shutdown()
            server.server_close()


def test_instruments_panels_keep_each_box_gpu_apart_in_prometheus(
    models: dict[str, dict[str, Any]], prometheus_bin: Path, tmp_path: Path, two_boxes: dict[str, float]
) -> None:
    """Two boxes' GPU 0 stay two series, and each box's tokens per joule uses its own power."""
    from dashboards import instruments

    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [{"job_name": "boxes", "static_configs": [{"targets": list(two_boxes)}]}],
            }
        )
    )
    (port,) = free_ports(1)
    prom = prometheus_service(prometheus_bin, config, tmp_path, port)
    api = Prometheus(prom, f"http://127.0.0.1:{port}", config)
    all_boxes = variable_values(models["instruments"])
    assert all_boxes["box"] == ".*"

    def panel(query: Any, values: dict[str, str]) -> dict[str, float]:
        expr = grafana_expr({"expr": query.expr}, values, rate_interval="5s")
        return {r["metric"]["instance"]: float(r["value"][1]) for r in api.query(expr)}

    def full_interval() -> bool:
        """Both boxes have a full rate interval of samples (rate extrapolates less before)."""
        counts = api.query("count_over_time(spark_otel_gpu_power_watts[6s])")
        return len(counts) == 2 and min(float(c["value"][1]) for c in counts) >= 6

    try:
        prom.start()
        wait_for(full_interval, "6 s of GPU power samples from both boxes", 30, interval_s=0.5)
        assert panel(instruments.GPU_POWER, all_boxes) == two_boxes
        assert set(panel(instruments.GPU_UTILIZATION, all_boxes)) == set(two_boxes)
        per_joule = panel(instruments.TOKENS_PER_WATT, all_boxes)
        box_a, box_b = two_boxes
        assert per_joule[box_a] == pytest.approx(100.0 / 40.0, rel=0.1)
        assert per_joule[box_b] == pytest.approx(50.0 / 10.0, rel=0.1)
        one_box = {**all_boxes, "box": box_b}
        assert panel(instruments.GPU_POWER, one_box) == {box_b: 10.0}
        assert set(panel(instruments.TOKENS_RATE, one_box)) == {box_b}
    finally:
        prom.stop()
