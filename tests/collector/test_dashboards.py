"""The dashboards as code: the committed JSON is what the code generates, the SDK round-trips
it, the lint rules pass (and catch what they should), every PromQL expression parses, every
metric a panel queries is a name defined in ``_semconv.py``, and what makes them importable and
readable holds: the datasource variable, All defaults, shared tooltips, links, the baseline
band, the advisor's threshold, stat thresholds, legends and annotations."""

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
from dashboards import build, lint, neighbour_cost, series
from dashboards.prometheus_names import Kind, base_names, prometheus_name
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard
from tests.support.collector_stack import (
    COLLECTOR_DIR,
    ROOT,
    Prometheus,
    free_ports,
    grafana_expr,
    prometheus_service,
    variable_values,
)
from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel.analysis.advisor import AdvisorConfig

PROVISIONING = COLLECTOR_DIR / "grafana" / "provisioning" / "datasources" / "spark_otel.yaml"


def provisioned_uids() -> set[str]:
    return {d["uid"] for d in yaml.safe_load(PROVISIONING.read_text())["datasources"]}


def grafana_values(model: dict[str, Any], picked: dict[str, str] | None = None) -> dict[str, str]:
    """`variable_values`, with each datasource variable at its default (the provisioned uid)."""
    defaults = {
        v["name"]: v["current"]["value"] for v in model["templating"]["list"] if v["type"] == "datasource"
    }
    return variable_values(model, {**defaults, **(picked or {})})


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
    assert lint.lint_dashboards(models.values(), provisioned_uids(), series.RULES) == []


def _first_panel(model: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in model["panels"] if p["type"] != "row")


def _panel(model: dict[str, Any], title: str) -> dict[str, Any]:
    return next(p for p in model["panels"] if p.get("title") == title)


def _variable(model: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in model["templating"]["list"] if v["name"] == name)


def _annotation(model: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in lint.annotation_queries(model) if a["name"] == name)


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
        # Datasources: through the dashboard's datasource variable, whose default is provisioned.
        (lambda m: _first_panel(m)["datasource"].__setitem__("uid", "prometheus"), "'prometheus' is fixed"),
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__(
                "datasource", {"type": "prometheus", "uid": "${elsewhere}"}
            ),
            "${elsewhere} is not a datasource variable",
        ),
        (
            lambda m: _variable(m, "datasource")["current"].__setitem__("value", "mimir"),
            "defaults to 'mimir', not a provisioned datasource uid",
        ),
        (
            lambda m: _variable(m, "engine")["datasource"].__setitem__("uid", "prometheus"),
            "variable 'engine': datasource uid 'prometheus' is fixed",
        ),
        # Thresholds: set, and not Grafana's default red from 80.
        (
            lambda m: _first_panel(m)["fieldConfig"]["defaults"].pop("thresholds"),
            "thresholds left to Grafana",
        ),
        (
            lambda m: _first_panel(m)["fieldConfig"]["defaults"]["thresholds"].__setitem__(
                "steps", [{"color": "green", "value": None}, {"color": "red", "value": 80}]
            ),
            "thresholds left to Grafana",
        ),
        # Legends: present, naming every label the query keeps and only those.
        (lambda m: _first_panel(m)["targets"][0].__setitem__("legendFormat", ""), "no legend"),
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__("legendFormat", "{{spark_otel_eval}}"),
            "does not name ['host_name', 'spark_otel_cell_workers']",
        ),
        # The box: a variable, on every selector, and kept by every result of a multi-select box.
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__(
                "expr", _first_panel(m)["targets"][0]["expr"].replace(', host_name=~"$box"', "", 1)
            ),
            'spark_otel_cell_deadline_hits_total is not filtered by box (host_name=~"$box")',
        ),
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__(
                "expr", _first_panel(m)["targets"][0]["expr"].replace("by (host_name, ", "by (", 1)
            ),
            "sums over boxes: keep host_name in by (spark_otel_cell_workers, spark_otel_eval)",
        ),
        (
            lambda m: m["templating"].__setitem__(
                "list", [v for v in m["templating"]["list"] if v["name"] != "box"]
            ),
            "no 'box' variable",
        ),
        (
            lambda m: _first_panel(m)["targets"][0].__setitem__(
                "legendFormat", "{{spark_otel_eval}} at {{spark_otel_cell_workers}} on {{spark_otel_engine}}"
            ),
            "names ['spark_otel_engine'], which the query does not keep",
        ),
        # A multi-select variable starts on All.
        (
            lambda m: _variable(m, "eval").__setitem__("current", {"text": "x", "value": ["x"]}),
            "multi-select starts on ['x'], not All",
        ),
        # Shared tooltips and links to the other dashboards.
        (lambda m: m.__setitem__("graphTooltip", 1), "graphTooltip 1: share the tooltip"),
        (lambda m: m.__setitem__("links", []), "no link to the other dashboards"),
        (lambda m: m["links"][0].__setitem__("keepTime", False), "no link to the other dashboards"),
        (lambda m: _first_panel(m).__setitem__("repeat", "nope"), "repeats over 'nope'"),
        (lambda m: _first_panel(m)["gridPos"].__setitem__("x", 20), "overflows the 24-column grid"),
        # Annotations follow the query rules.
        (
            lambda m: (
                m.setdefault("annotations", {})
                .setdefault("list", [])
                .append(
                    {
                        "name": "broken",
                        "datasource": {"type": "prometheus", "uid": "mimir"},
                        "target": {"expr": "sum(rate(spark_otel_cells_total[5m])) > 0", "refId": "Anno"},
                        "titleFormat": "cells",
                    }
                )
            ),
            "annotation 'broken': rate() over [5m]",
        ),
        (
            lambda m: (
                m.setdefault("annotations", {})
                .setdefault("list", [])
                .append(
                    {
                        "name": "broken",
                        "datasource": {"type": "prometheus", "uid": "mimir"},
                        "target": {"expr": "sum(spark_otel_cells_in_flight) > 0", "refId": "Anno"},
                        "titleFormat": "cells",
                    }
                )
            ),
            "annotation 'broken': datasource uid 'mimir' is not provisioned",
        ),
    ],
)
def test_lint_catches_each_rule(models: dict[str, dict[str, Any]], breakage: Any, expected: str) -> None:
    model = copy.deepcopy(models["deadlines"])
    assert lint.lint_dashboard(model, provisioned_uids(), series.RULES) == []
    breakage(model)
    problems = lint.lint_dashboard(model, provisioned_uids(), series.RULES)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (
            lambda m: _annotation(m, "Load windows (other evals)").__setitem__("titleFormat", "load"),
            "title 'load' does not name ['spark_otel_engine', 'spark_otel_eval']",
        ),
        (
            # The band's p90 fills towards a series the panel does not have.
            lambda m: next(
                prop
                for o in m["panels"][0]["fieldConfig"]["overrides"]
                for prop in o["properties"]
                if prop["id"] == "custom.fillBelowTo"
            ).__setitem__("value", "p10"),
            "fillBelowTo 'p10' names no series of the panel",
        ),
        (
            # Outside the per-eval repeat, the band's legends would not tell evals apart.
            lambda m: m["panels"][0].pop("repeat"),
            "legend 'baseline p10' does not name ['spark_otel_eval']",
        ),
        (
            # Neighbours on any box: another box's load would pause this box's baseline.
            lambda m: [
                target.__setitem__(
                    "expr",
                    target["expr"].replace(
                        'spark_otel_engine!="$engine", host_name="$box"', 'spark_otel_engine!="$engine"'
                    ),
                )
                for _, target in lint.targets(m)
            ],
            'spark_otel_engine_requests_running is not filtered by box (host_name=~"$box")',
        ),
    ],
)
def test_lint_catches_each_rule_on_neighbour_cost(
    models: dict[str, dict[str, Any]], breakage: Any, expected: str
) -> None:
    model = copy.deepcopy(models["neighbour-cost"])
    assert lint.lint_dashboard(model, provisioned_uids(), series.RULES) == []
    breakage(model)
    problems = lint.lint_dashboard(model, provisioned_uids(), series.RULES)
    assert any(expected in p for p in problems), problems


def test_lint_catches_a_recording_rule_that_drops_the_box(models: dict[str, dict[str, Any]]) -> None:
    rule = "spark_otel:cell_duration_seconds:p95_rate5m"
    rules = {**series.RULES, rule: series.RULES[rule].replace("le, host_name, ", "le, ")}
    assert rules != series.RULES
    problems = lint.lint_dashboard(models["deadlines"], provisioned_uids(), rules)
    assert any(f"recording rule {rule} drops host_name" in p for p in problems), problems


def test_lint_catches_a_link_tag_no_other_dashboard_carries(models: dict[str, dict[str, Any]]) -> None:
    broken = [copy.deepcopy(m) for m in models.values()]
    broken[0]["links"][0]["tags"] = [*broken[0]["tags"], "elsewhere"]
    broken[0]["tags"] = [*broken[0]["tags"], "elsewhere"]  # its own tag, carried by no other one
    problems = lint.lint_dashboards(broken, provisioned_uids(), series.RULES)
    assert any("link by tag 'elsewhere' finds no other dashboard" in p for p in problems), problems


def test_every_query_reads_the_datasource_variable_whose_default_is_the_provisioned_prometheus(
    models: dict[str, dict[str, Any]],
) -> None:
    """Importable: panels, queries, query variables and annotations name ${datasource}, a
    Prometheus datasource variable; provisioned, it defaults to the provisioned default datasource."""
    provisioned = {d["uid"]: d for d in yaml.safe_load(PROVISIONING.read_text())["datasources"]}
    for stem, model in models.items():
        var = _variable(model, "datasource")
        assert var["type"] == "datasource", stem
        assert var["query"] == "prometheus", stem
        default = provisioned[var["current"]["value"]]
        assert default["type"] == "prometheus", stem
        assert default["isDefault"], stem
        assert var["current"]["text"] == default["name"], stem
        refs = [p["datasource"] for p in model["panels"] if p["type"] != "row"]
        refs += [t["datasource"] for _, t in lint.targets(model)]
        refs += [v["datasource"] for v in model["templating"]["list"] if v["type"] == "query"]
        refs += [a["datasource"] for a in lint.annotation_queries(model)]
        assert refs
        assert all(r == {"type": "prometheus", "uid": "${datasource}"} for r in refs), stem


def test_multi_select_variables_start_on_all_and_the_single_select_engine_on_its_first_value(
    models: dict[str, dict[str, Any]],
) -> None:
    for stem, model in models.items():
        for var in model["templating"]["list"]:
            if var.get("multi"):
                assert var["includeAll"], (stem, var["name"])
                assert var["allValue"] == ".*", (stem, var["name"])
                assert var["current"]["value"] == ["$__all"], (stem, var["name"])
        engine = _variable(model, "engine")
        if stem == "neighbour-cost":
            # No saved value: Grafana starts on the first engine (alphabetical, sort 1).
            assert not engine["multi"]
            assert "current" not in engine
            assert engine["sort"] == 1
        else:
            assert engine["multi"], stem
            assert engine["current"]["text"] == ["All"], stem


def test_shared_tooltips_and_links_between_the_four_dashboards(models: dict[str, dict[str, Any]]) -> None:
    for stem, model in models.items():
        assert model["graphTooltip"] == 2, stem  # shared crosshair and tooltip
        (link,) = model["links"]
        assert link["type"] == "dashboards", stem
        assert link["keepTime"], stem
        assert link["includeVars"], stem
        found = [m["title"] for m in models.values() if set(link["tags"]) & set(m["tags"]) and m is not model]
        assert len(found) == 3, (stem, found)


def test_neighbour_cost_band_is_filled_between_p10_and_p90_with_the_median_a_line(
    models: dict[str, dict[str, Any]],
) -> None:
    band = models["neighbour-cost"]["panels"][0]
    assert band["repeat"] == "eval"  # one panel per eval: its p90 fills down to its own p10
    by_ref = {t["refId"]: t for t in band["targets"]}
    assert by_ref["B"]["expr"] == neighbour_cost.BASELINE_P10.expr
    assert by_ref["C"]["expr"] == neighbour_cost.BASELINE_P50.expr
    assert by_ref["D"]["expr"] == neighbour_cost.BASELINE_P90.expr
    props = {
        o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
        for o in band["fieldConfig"]["overrides"]
        if o["matcher"]["id"] == "byFrameRefID"
    }
    assert props["D"]["custom.fillBelowTo"] == by_ref["B"]["legendFormat"]
    assert props["D"]["custom.fillOpacity"] > 0
    assert props["B"]["custom.fillOpacity"] == 0
    assert props["C"]["custom.fillOpacity"] == 0
    assert props["C"]["custom.lineWidth"] > 0
    assert band["fieldConfig"]["defaults"]["custom"]["fillOpacity"] == 0  # the eval's rate: a line


def test_cost_panels_use_the_advisors_threshold(models: dict[str, dict[str, Any]]) -> None:
    """The line at the advisor's default threshold (0.2), read from AdvisorConfig."""
    expected = 100 * AdvisorConfig().threshold
    assert abs(neighbour_cost.COST_THRESHOLD_PERCENT - expected) < 1e-9
    model = models["neighbour-cost"]
    for title in ("Cost against baseline", "Cost under neighbour load"):
        steps = _panel(model, title)["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [s["color"] for s in steps] == ["green", "red"], title
        assert steps[1]["value"] == pytest.approx(expected), title
    custom = _panel(model, "Cost against baseline")["fieldConfig"]["defaults"]["custom"]
    assert custom["thresholdsStyle"] == {"mode": "line"}


def test_stat_thresholds_mean_something(models: dict[str, dict[str, Any]]) -> None:
    def steps(stem: str, title: str) -> list[tuple[object, str]]:
        found = _panel(models[stem], title)["fieldConfig"]["defaults"]["thresholds"]["steps"]
        return [(s["value"], s["color"]) for s in found]

    assert steps("deadlines", "Ceiling hits") == [(None, "green"), (1, "red")]
    assert steps("deadlines", "Degraded cells") == [(None, "green"), (1, "orange")]
    assert steps("deadlines", "Salvaged findings") == [(None, "blue")]
    # The busy gauge reads high whatever the load: never coloured as a warning.
    assert steps("instruments", "Busy gauge over the range") == [(None, "blue")]
    assert steps("neighbour-cost", "Baseline (1-minute mean, median over range)") == [(None, "blue")]
    by_status = _panel(models["deadlines"], "Cells by status")["fieldConfig"]["overrides"]
    colours = {o["matcher"]["options"]: o["properties"][0]["value"]["fixedColor"] for o in by_status}
    assert colours == {".*: ok$": "green", ".*: (deadline|error)$": "red", ".*: length_cap$": "orange"}


def test_per_stream_rate_by_worker_count_names_each_series_by_it(models: dict[str, dict[str, Any]]) -> None:
    from dashboards import concurrency

    panel = _panel(models["concurrency"], "What concurrency buys: per-stream rate by workers")
    (target,) = panel["targets"]
    assert target["expr"] == concurrency.PER_STREAM_RATE_BY_WORKERS.expr
    assert target["instant"]
    assert "spark_otel_cell_workers" in lint.result_labels(target["expr"])
    assert target["legendFormat"].startswith("{{spark_otel_cell_workers}} workers")


def test_probe_levels_and_load_windows_are_annotations(models: dict[str, dict[str, Any]]) -> None:
    from dashboards import concurrency

    for stem in ("concurrency", "neighbour-cost"):
        names = {a["name"] for a in lint.annotation_queries(models[stem])}
        assert "Probe levels (span metrics)" in names, stem
        probe = _annotation(models[stem], "Probe levels (span metrics)")
        assert f'span_name=~"{series.PROBE_LEVEL_SPAN_NAMES}"' in probe["target"]["expr"]
    assert {a["name"] for a in lint.annotation_queries(models["neighbour-cost"])} >= {
        "Baseline paused (other engines busy)",
        "Load windows (other evals)",
    }
    levels = _annotation(models["concurrency"], "Requests running (levels)")
    assert levels["target"]["expr"] == concurrency.REQUEST_LEVELS.expr
    assert "{{streams}}" in levels["titleFormat"]


def test_neighbour_cost_engine_is_single_select_so_other_engines_mean_something(
    models: dict[str, dict[str, Any]],
) -> None:
    """With "All" (sent as .*) the other-engine load, spark_otel_engine!="$engine", read nothing."""
    model = models["neighbour-cost"]
    engine = _variable(model, "engine")
    assert not engine.get("multi")
    assert not engine.get("includeAll")
    exprs = [target["expr"] for _, target in lint.targets(model)]
    assert any('spark_otel_engine!="$engine"' in e for e in exprs)
    # The lint rule holds the line: the same dashboard with a multi/All engine fails it.
    broken = copy.deepcopy(model)
    next(v for v in broken["templating"]["list"] if v["name"] == "engine").update(
        multi=True, includeAll=True, allValue=".*"
    )
    problems = lint.lint_dashboard(broken, provisioned_uids(), series.RULES)
    assert any('!="$engine" on a multi-value or All variable' in p for p in problems), problems


def test_neighbour_cost_baseline_leaves_out_loaded_intervals() -> None:
    """The baseline band and stat drop every interval in which another engine ran a request."""
    from dashboards import neighbour_cost

    for query in (neighbour_cost.BASELINE_P10, neighbour_cost.BASELINE_P50, neighbour_cost.BASELINE_P90):
        assert "unless on ()" in query.expr
        assert (
            'spark_otel_engine_requests_running{spark_otel_engine!="$engine", host_name="$box"}' in query.expr
        )
    assert "unless on ()" in neighbour_cost.BASELINE_MEDIAN.expr
    assert neighbour_cost.BASELINE_P50.expr in neighbour_cost.COST_PERCENT.expr


def test_grafana_expr_substitutes_what_grafana_sends(models: dict[str, dict[str, Any]]) -> None:
    model = models["neighbour-cost"]
    with pytest.raises(AssertionError, match="single-select variable 'box' needs a value"):
        grafana_values(model, {"engine": "qwen"})
    with pytest.raises(AssertionError, match="single-select variable 'engine' needs a value"):
        grafana_values(model, {"box": "spark-07"})
    values = grafana_values(model, {"engine": "qwen", "box": "spark-07"})
    assert values == {"datasource": "prometheus", "box": "spark-07", "engine": "qwen", "eval": ".*"}
    expr = grafana_expr(
        {"expr": 'x{spark_otel_engine!="$engine", host_name="$box", e=~"${eval}"}[$__rate_interval]'}, values
    )
    assert expr == 'x{spark_otel_engine!="qwen", host_name="spark-07", e=~".*"}[30s]'
    with pytest.raises(AssertionError, match="left unsubstituted"):
        grafana_expr({"expr": 'x{instance=~"$nobox"}'}, values)


def test_instruments_tell_boxes_apart(models: dict[str, dict[str, Any]]) -> None:
    """Every box has a GPU 0: GPU panels group by box and GPU id, and a box variable picks boxes."""
    from dashboards import instruments

    model = models["instruments"]
    box = next(v for v in model["templating"]["list"] if v["name"] == "box")
    assert box["query"]["query"] == "label_values(host_name)"
    for query in (instruments.GPU_UTILIZATION, instruments.GPU_POWER):
        assert query.expr.startswith("max by (host_name, spark_otel_gpu_id)")
    assert (
        "/ on (host_name) sum by (host_name) (spark_otel_gpu_power_watts" in instruments.TOKENS_PER_WATT.expr
    )


def test_every_dashboard_filters_by_box(models: dict[str, dict[str, Any]]) -> None:
    """A box variable everywhere: multi-select starting on All, single-select on Neighbour cost
    (an eval's neighbours are its own box's engines), every selector filtered by it."""
    for stem, model in models.items():
        box = next(v for v in model["templating"]["list"] if v["name"] == "box")
        assert box["query"]["query"] == f"label_values({series.BOX})"
        assert bool(box.get("multi")) == (stem != "neighbour-cost"), stem
        exprs = [target["expr"] for _, target in lint.targets(model)]
        exprs += [item["target"]["expr"] for item in lint.annotation_queries(model)]
        for expr in exprs:
            assert lint.box_problems(expr, multi=bool(box.get("multi")), rules=series.RULES) == [], expr


def test_lint_catches_a_shared_uid(models: dict[str, dict[str, Any]]) -> None:
    twin = copy.deepcopy(models["concurrency"])
    twin["title"] = "twin"
    problems = lint.lint_dashboards([models["concurrency"], twin], provisioned_uids(), series.RULES)
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
        picked = {"engine": "qwen", "box": "spark-07"} if model["uid"].endswith("neighbour-cost") else {}
        values = grafana_values(model, picked)
        exprs = [target for _, target in lint.targets(model)]
        exprs += [item["target"] for item in lint.annotation_queries(model)]
        for i, target in enumerate(exprs):
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
    """One box's series as Prometheus holds them: GPU 0's power and a qwen engine's counter, each
    with the box's name as every box's collector stamps it (host_name)."""

    box = ""
    power_w = 0.0
    tokens_per_s = 0.0

    def do_GET(self) -> None:
        box = f'host_name="{self.box}"'
        body = (
            "# TYPE spark_otel_gpu_power_watts gauge\n"
            f'spark_otel_gpu_power_watts{{spark_otel_gpu_id="0", {box}}} {self.power_w}\n'
            "# TYPE spark_otel_gpu_utilization_ratio gauge\n"
            f'spark_otel_gpu_utilization_ratio{{spark_otel_gpu_id="0", {box}}} 0.96\n'
            "# TYPE spark_otel_engine_generation_tokens_total counter\n"
            f'spark_otel_engine_generation_tokens_total{{spark_otel_engine="qwen", {box}}} '
            f"{self.tokens_per_s * time.time():.3f}\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def two_boxes() -> Iterator[dict[str, tuple[str, float]]]:
    """Two boxes on 127.0.0.1, each with its own GPU 0: box -> (address, power in watts)."""
    servers = []
    try:
        for box, power, rate in (("spark-01", 40.0, 100.0), ("spark-02", 10.0, 50.0)):
            handler = type("Handler", (_Box,), {"box": box, "power_w": power, "tokens_per_s": rate})
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append((server, box, power))
        yield {box: (f"127.0.0.1:{server.server_address[1]}", power) for server, box, power in servers}
    finally:
        for server, _, _ in servers:
            server.shutdown()
            server.server_close()


def test_instruments_panels_keep_each_box_gpu_apart_in_prometheus(
    models: dict[str, dict[str, Any]],
    prometheus_bin: Path,
    tmp_path: Path,
    two_boxes: dict[str, tuple[str, float]],
) -> None:
    """Two boxes' GPU 0 stay two series, and each box's tokens per joule uses its own power."""
    from dashboards import instruments

    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [
                    {"job_name": "boxes", "static_configs": [{"targets": [a for a, _ in two_boxes.values()]}]}
                ],
            }
        )
    )
    (port,) = free_ports(1)
    prom = prometheus_service(prometheus_bin, config, tmp_path, port)
    api = Prometheus(prom, f"http://127.0.0.1:{port}", config)
    all_boxes = grafana_values(models["instruments"])
    assert all_boxes["box"] == ".*"

    def panel(query: Any, values: dict[str, str]) -> dict[str, float]:
        expr = grafana_expr({"expr": query.expr}, values, rate_interval="5s")
        return {r["metric"]["host_name"]: float(r["value"][1]) for r in api.query(expr)}

    def full_interval() -> bool:
        """Both boxes have a full rate interval of samples (rate extrapolates less before)."""
        counts = api.query("count_over_time(spark_otel_gpu_power_watts[6s])")
        return len(counts) == 2 and min(float(c["value"][1]) for c in counts) >= 6

    try:
        prom.start()
        wait_for(full_interval, "6 s of GPU power samples from both boxes", 30, interval_s=0.5)
        assert panel(instruments.GPU_POWER, all_boxes) == {
            box: power for box, (_, power) in two_boxes.items()
        }
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
