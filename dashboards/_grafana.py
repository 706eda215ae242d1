"""Small builders over grafana-foundation-sdk, so every panel gets a unit, a description,
thresholds that mean something and the dashboard's Prometheus datasource variable, and every
dashboard the datasource, engine and eval variables, shared tooltips and links to the others."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from grafana_foundation_sdk.builders import bargauge as gbar
from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import stat as gstat
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm

from . import series as s

# The Prometheus datasource provisioned in collector/grafana/provisioning/datasources/spark_otel.yaml:
# the datasource variable's default, so the provisioned dashboards read it unchanged.
PROVISIONED_PROMETHEUS_UID = "prometheus"
PROVISIONED_PROMETHEUS_NAME = "Prometheus"
# Every panel, query, query variable and annotation names the datasource through this variable,
# so a user importing the JSON into their own Grafana picks their Prometheus from a list.
DATASOURCE_VARIABLE = "datasource"
PROMETHEUS = common.DataSourceRef(type_val="prometheus", uid="${" + DATASOURCE_VARIABLE + "}")
TAGS = ["spark-otel"]
TOKENS_PER_S = "suffix: tok/s"

# Selectors every query applies; `$engine`, `$eval` and `$box` are the dashboards' variables.
ENGINE_SEL = f'{s.ENGINE}=~"$engine"'
EVAL_SEL = f'{s.EVAL}=~"$eval"'
BOX_VARIABLE = "box"
# The box filter: a multi-select box (every dashboard but Neighbour cost, whose results keep the
# box label so boxes never mix) and a single-select one (Neighbour cost: one box's neighbours).
BOX_SEL = f'{s.BOX}=~"${BOX_VARIABLE}"'
BOX_ONE = f'{s.BOX}="${BOX_VARIABLE}"'
# What Grafana sends for "All" on a multi-select variable.
ALL_VALUE = ".*"

# Threshold colours. A panel never keeps Grafana's default (green, red from 80): a number is
# coloured red only where the article says it is bad.
NEUTRAL = "blue"
GOOD = "green"
WARN = "orange"
BAD = "red"


# What a probe-level annotation (span metrics of the probe's load-window spans) marks.
PROBE_LEVELS_TEXT = (
    "A probe level's load-window span reached the collector's span metrics in this interval: the "
    "level ended up to one span-metrics flush (plus the exporters' batching) before it."
)


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


def thresholds(base: str, *steps: tuple[float, str]) -> gd.ThresholdsConfig:
    """Absolute thresholds: ``base`` below the first step, then each (value, colour) from there."""
    return (
        gd.ThresholdsConfig()
        .mode(dm.ThresholdsMode.ABSOLUTE)
        .steps([dm.Threshold(value=None, color=base), *(dm.Threshold(value=v, color=c) for v, c in steps)])
    )


def neutral() -> gd.ThresholdsConfig:
    """One colour whatever the value: for a number that is neither good nor bad when high."""
    return thresholds(NEUTRAL)


def _target(query: Query, ref: str, *, instant: bool = False) -> gp.Dataquery:
    target = gp.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(ref).datasource(PROMETHEUS)
    return target.instant() if instant else target.range()


def _ref(i: int) -> str:
    return chr(ord("A") + i)


def timeseries(
    title: str,
    description: str,
    unit: str,
    queries: list[Query],
    *,
    width: int = 12,
    height: int = 8,
    steps: gd.ThresholdsConfig | None = None,
    threshold_line: bool = False,
    fill_opacity: float = 10,
    overrides: Sequence[tuple[str, list[dm.DynamicConfigValue]]] = (),
    repeat: str | None = None,
) -> gts.Panel:
    """A time series panel; ``overrides`` are (query refId, properties) for that query's series.

    ``steps`` default to one neutral colour; with ``threshold_line`` each step is drawn as a line.
    ``repeat`` repeats the panel, stacked vertically, for each value of that variable.
    """
    panel = (
        gts.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(PROMETHEUS)
        .span(width)
        .height(height)
        .line_width(1)
        .fill_opacity(fill_opacity)
        .thresholds(steps or neutral())
        .legend(
            gc.VizLegendOptions()
            .show_legend(True)
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
        )
        # Every series at the hovered time (the dashboard shares the tooltip across panels).
        .tooltip(
            gc.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING)
        )
    )
    if threshold_line:
        panel = panel.thresholds_style(
            gc.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.LINE)
        )
    for ref, properties in overrides:
        panel = panel.override_by_query(ref, properties)
    if repeat is not None:
        panel = panel.repeat(repeat).repeat_direction("v")
    for i, query in enumerate(queries):
        panel = panel.with_target(_target(query, _ref(i)))
    return panel


def stat(
    title: str,
    description: str,
    unit: str,
    queries: list[Query],
    steps: gd.ThresholdsConfig,
    *,
    width: int = 6,
    regex_colours: Sequence[tuple[str, str]] = (),
) -> gstat.Panel:
    """A stat panel over instant queries, coloured by ``steps`` (its thresholds); series whose
    name matches a regex of ``regex_colours`` take that fixed colour instead."""
    panel = (
        gstat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(PROMETHEUS)
        .span(width)
        .height(6)
        .thresholds(steps)
        .color_mode(common.BigValueColorMode.VALUE)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(gc.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    for regex, colour in regex_colours:
        panel = panel.override_by_regexp(
            regex, [dm.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": colour})]
        )
    for i, query in enumerate(queries):
        panel = panel.with_target(_target(query, _ref(i), instant=True))
    return panel


def bar_gauge(
    title: str,
    description: str,
    unit: str,
    queries: list[Query],
    steps: gd.ThresholdsConfig,
    *,
    width: int = 12,
    height: int = 8,
) -> gbar.Panel:
    """Horizontal bars, one per series of instant queries (e.g. one per worker count)."""
    panel = (
        gbar.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(PROMETHEUS)
        .span(width)
        .height(height)
        .min(0)
        .thresholds(steps)
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.BASIC)
        .reduce_options(gc.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    for i, query in enumerate(queries):
        panel = panel.with_target(_target(query, _ref(i), instant=True))
    return panel


def annotation(name: str, query: Query, colour: str, *, text: str = "") -> gd.AnnotationQuery:
    """A Prometheus annotation: each series becomes regions where its value is above zero
    (Grafana joins active steps no more than one step apart); ``query.legend`` is the title."""
    return (
        gd.AnnotationQuery()
        .name(name)
        .datasource(PROMETHEUS)
        .enable(True)
        .hide(False)
        .icon_color(colour)
        .target(gp.Dataquery().expr(query.expr).legend_format(query.legend).ref_id("Anno").range())
        .title_format(query.legend)
        .text_format(text)
        .tag_keys(",".join(sorted(_legend_labels(query.legend))))
    )


def _legend_labels(legend_text: str) -> set[str]:
    return set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend_text))


def datasource_variable() -> gd.DatasourceVariable:
    """Which Prometheus the dashboard reads: the provisioned one by default, any other on import."""
    return (
        gd.DatasourceVariable(DATASOURCE_VARIABLE)
        .label("Prometheus")
        .description(
            "The Prometheus the dashboard reads (the collector remote-writes to it). Provisioned: "
            f"{PROVISIONED_PROMETHEUS_NAME} (uid {PROVISIONED_PROMETHEUS_UID})."
        )
        .type("prometheus")
        .current(
            dm.VariableOption(
                selected=True, text=PROVISIONED_PROMETHEUS_NAME, value=PROVISIONED_PROMETHEUS_UID
            )
        )
    )


def variable(
    name: str, label: str, source: str, description: str, *, multi: bool = True, values_of: str | None = None
) -> gd.QueryVariable:
    """A Prometheus query variable over ``label_values(source)`` (``label_values(source,
    values_of)`` when given: the label's values among the series ``source`` selects).

    Multi-select variables offer "All", sent as ``.*`` (so only ``=~`` may use them), and start
    on it; a single-select one is sent as the one value picked, so negative matchers on it keep
    meaning, and starts on the first value (Grafana picks it when no value is saved).
    """
    query = f"label_values({source}, {values_of})" if values_of else f"label_values({source})"
    var = (
        gd.QueryVariable(name)
        .label(label)
        .description(description)
        .datasource(PROMETHEUS)
        .query({"query": query, "refId": "VariableQuery"})
        .definition(query)
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


def box_variable(*, multi: bool = True) -> gd.QueryVariable:
    """The boxes (``host_name``: each box's collector stamps its SPARK_OTEL_BOX on every series)."""
    if multi:
        return variable(
            BOX_VARIABLE,
            "Box",
            s.BOX,
            "The boxes to show (host_name: the SPARK_OTEL_BOX of each box's collector). Every "
            "series keeps its box, so two boxes' engines and evals never mix.",
        )
    return variable(
        BOX_VARIABLE,
        "Box",
        s.BOX,
        "The box the eval ran on (host_name: the SPARK_OTEL_BOX of its collector); its "
        "neighbours are the other engines of that box only.",
        multi=False,
    )


def links() -> gd.DashboardLink:
    """The other spark-otel dashboards (by tag), keeping the time range and the variables."""
    return (
        gd.DashboardLink("spark-otel dashboards")
        .type(dm.DashboardLinkType.DASHBOARDS)
        .tags(TAGS)
        .as_dropdown(False)
        .keep_time(True)
        .include_vars(True)
        .target_blank(False)
        .tooltip("The other spark-otel dashboards, at this time range and these variables")
    )


def new_dashboard(
    uid: str,
    title: str,
    description: str,
    *,
    eval_variable: bool = True,
    box: gd.QueryVariable | None = None,
    engine: gd.QueryVariable | None = None,
    eval_: gd.QueryVariable | None = None,
    extra: list[gd.QueryVariable] | None = None,
    annotations: Sequence[gd.AnnotationQuery] = (),
) -> gd.Dashboard:
    """A dashboard with the datasource variable, the box and engine variables (multi-select
    unless ``box`` or ``engine`` is given) and, unless it shows box-wide gauges only, eval
    (``eval_`` if given)."""
    dash = (
        gd.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .editable()
        .time("now-6h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(dm.DashboardCursorSync.TOOLTIP)
        .link(links())
        .with_variable(datasource_variable())
        .with_variable(box or box_variable())
        .with_variable(engine or engine_variable())
    )
    for var in extra or []:
        dash = dash.with_variable(var)
    if eval_variable:
        dash = dash.with_variable(
            eval_ or variable("eval", "Eval", s.EVAL, "The evals (spark_otel.eval) to show.")
        )
    for item in annotations:
        dash = dash.annotation(item)
    return dash


def legend(text: str, *labels: str) -> str:
    """A Grafana legend: ``{0}``, ``{1}``... in ``text`` become ``{{label}}`` of ``labels``."""
    return text.format(*("{{" + name + "}}" for name in labels))
