"""Small builders over grafana-foundation-sdk, so every panel gets a unit, a description and
the provisioned Prometheus datasource, and every dashboard the engine and eval variables."""

from __future__ import annotations

from dataclasses import dataclass

from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import stat as gstat
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm

from . import series as s

# The uids provisioned in collector/grafana/provisioning/datasources/spark_otel.yaml.
PROMETHEUS = common.DataSourceRef(type_val="prometheus", uid="prometheus")
TAGS = ["spark-otel"]
TOKENS_PER_S = "suffix: tok/s"

# Selectors every query applies; `$engine` and `$eval` are the dashboards' variables.
ENGINE_SEL = f'{s.ENGINE}=~"$engine"'
EVAL_SEL = f'{s.EVAL}=~"$eval"'
# What Grafana sends for "All" on a multi-select variable.
ALL_VALUE = ".*"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


def _target(query: Query, ref: str, *, instant: bool = False) -> gp.Dataquery:
    target = gp.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(ref).datasource(PROMETHEUS)
    return target.instant() if instant else target.range()


def timeseries(
    title: str, description: str, unit: str, queries: list[Query], *, width: int = 12, height: int = 8
) -> gts.Panel:
    panel = (
        gts.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(PROMETHEUS)
        .span(width)
        .height(height)
        .line_width(1)
        .fill_opacity(10)
        .legend(
            gc.VizLegendOptions()
            .show_legend(True)
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
        )
    )
    for i, query in enumerate(queries):
        panel = panel.with_target(_target(query, chr(ord("A") + i)))
    return panel


def stat(title: str, description: str, unit: str, queries: list[Query], *, width: int = 6) -> gstat.Panel:
    panel = (
        gstat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(PROMETHEUS)
        .span(width)
        .height(6)
    )
    for i, query in enumerate(queries):
        panel = panel.with_target(_target(query, chr(ord("A") + i), instant=True))
    return panel


def variable(name: str, label: str, source: str, description: str, *, multi: bool = True) -> gd.QueryVariable:
    """A Prometheus query variable over ``label_values(source)``.

    Multi-select variables offer "All", sent as ``.*`` (so only ``=~`` may use them); a
    single-select one is sent as the one value picked, so negative matchers on it keep meaning.
    """
    var = (
        gd.QueryVariable(name)
        .label(label)
        .description(description)
        .datasource(PROMETHEUS)
        .query({"query": f"label_values({source})", "refId": "VariableQuery"})
        .definition(f"label_values({source})")
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
        .include_all(multi)
    )
    if multi:
        everything = dm.VariableOption(selected=True, text=["All"], value=["$__all"])
        var = var.all_value(ALL_VALUE).current(everything)
    return var


def engine_variable(*, multi: bool = True) -> gd.QueryVariable:
    if multi:
        return variable("engine", "Engine", s.ENGINE, "The engines (spark_otel.engine) to show.")
    return variable(
        "engine",
        "Engine",
        s.ENGINE,
        "The engine (spark_otel.engine) the eval runs on; every other engine is its neighbour.",
        multi=False,
    )


def new_dashboard(
    uid: str,
    title: str,
    description: str,
    *,
    eval_variable: bool = True,
    engine: gd.QueryVariable | None = None,
    extra: list[gd.QueryVariable] | None = None,
) -> gd.Dashboard:
    """A dashboard with the engine variable (multi-select unless ``engine`` is given) and,
    unless it shows box-wide gauges only, eval."""
    dash = (
        gd.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .editable()
        .time("now-6h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .with_variable(engine or engine_variable())
    )
    for var in extra or []:
        dash = dash.with_variable(var)
    if eval_variable:
        dash = dash.with_variable(variable("eval", "Eval", s.EVAL, "The evals (spark_otel.eval) to show."))
    return dash


def legend(text: str, *labels: str) -> str:
    """A Grafana legend: ``{0}``, ``{1}``... in ``text`` become ``{{label}}`` of ``labels``."""
    return text.format(*("{{" + name + "}}" for name in labels))
