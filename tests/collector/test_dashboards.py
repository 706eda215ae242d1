"""The dashboards as code: the committed JSON is what the code generates, the SDK round-trips
it, the lint rules pass (and catch what they should), every PromQL expression parses, and every
metric a panel queries is a name defined in ``_semconv.py``."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from collector_stack import COLLECTOR_DIR, ROOT, grafana_expr
from dashboards import build, lint, series
from dashboards.prometheus_names import Kind, base_names, prometheus_name
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

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
    ],
)
def test_lint_catches_each_rule(models: dict[str, dict[str, Any]], breakage: Any, expected: str) -> None:
    model = copy.deepcopy(models["deadlines"])
    breakage(model)
    problems = lint.lint_dashboard(model, provisioned_uids())
    assert any(expected in p for p in problems), problems


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
        for i, (_, target) in enumerate(lint.targets(model)):
            rules.append(
                {"record": f"check:{model['uid'].replace('-', '_')}:{i}", "expr": grafana_expr(target)}
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
