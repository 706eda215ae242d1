"""Lint rules for the generated dashboards, modelled on grafana/dashboard-linter v0.2.0.

dashboard-linter cannot be installed here (its go.mod has replace directives and it pulls
AGPL modules), so its rules that apply to OpenTelemetry-derived series are re-implemented:
panel-datasource, template-datasource, panel-title-description, panel-units,
panel-no-targets, target-rate-interval, target-counter-agg; plus unique uids and panel ids,
every template variable used by some query, and matchers that fit their variable: a
multi-select or "All" variable is sent as a regex (``.*`` for All), so only ``=~`` may use
it.

And the rules that make a dashboard importable and readable: datasources named through a
datasource variable whose default is provisioned (never a fixed uid); explicit thresholds that
are not Grafana's default red-from-80; legends that name every label a query keeps (never a raw
label set); a fill-below-to that names a series of its panel; a multi-select variable that
starts on All; a shared tooltip; links to the other dashboards by tag, keeping the time range
and variables; panels inside the 24-column grid. And the fleet's rule: a box variable, every
selector filtered by it, and on a multi-select box every result keeping the box label, so no
series sums two boxes. Annotations follow the query rules too. All functions are pure: JSON in,
problems out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "annotation_queries",
    "box_problems",
    "counters_not_aggregated",
    "legend_problems",
    "lint_dashboard",
    "lint_dashboards",
    "metric_names",
    "result_labels",
    "targets",
]

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_LABEL_LISTS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "inf",
        "nan",
    }
)
_COUNTER_SUFFIXES = ("_total", "_sum", "_count", "_bucket")
_RANGE_FUNCS = re.compile(r"\b(rate|irate|increase)\s*\(")
_VAR = re.compile(r"\$(?:\{(\w+)[^}]*\}|(\w+))")
_MATCHER_ON_VAR = re.compile(r'(=~|!~|!=|=)\s*"\$\{?(\w+)')
_LABEL_ON_VAR = re.compile(r'(\w+)\s*(=~|=)\s*"\$\{?(\w+)\}?"')
_DATASOURCE_VAR = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
# count_values("label", ...) keeps a label of its own: the value counted.
_COUNT_VALUES = re.compile(r'\bcount_values\s*(?:by\s*\([^)]*\)\s*)?\(\s*"(\w+)"')
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
# What Grafana gives a panel that sets no thresholds: green, then red from 80.
_GRAFANA_DEFAULT_STEPS = [{"color": "green", "value": None}, {"color": "red", "value": 80}]
SHARED_TOOLTIP = 2  # graphTooltip: shared crosshair and shared tooltip
GRID_WIDTH = 24
# The label every series carries naming its box, and the variable that filters by it
# (dashboards/series.py BOX, dashboards/_grafana.py BOX_VARIABLE).
BOX_LABEL = "host_name"
BOX_VARIABLE = "box"


def _skeleton(expr: str) -> str:
    """The expression with strings, matchers, ranges and label lists blanked (same length)."""

    def blank(m: re.Match[str]) -> str:
        return " " * len(m.group(0))

    out = _STRING.sub(blank, expr)
    out = _MATCHERS.sub(blank, out)
    out = _RANGES.sub(blank, out)
    return _LABEL_LISTS.sub(blank, out)


def _selectors(expr: str) -> Iterator[tuple[int, str]]:
    skeleton = _skeleton(expr)
    for m in _IDENT.finditer(skeleton):
        name = m.group(0)
        rest = skeleton[m.end() :].lstrip()
        if rest.startswith("(") or name.lower() in _KEYWORDS:
            continue
        before = skeleton[: m.start()]
        if before and (before[-1].isdigit() or before[-1] == "."):
            continue  # the exponent or fraction of a number
        yield m.start(), name


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (functions, keywords and labels excluded)."""
    return {name for _, name in _selectors(expr)}


def counters_not_aggregated(expr: str) -> list[str]:
    """Counter series (``_total``, ``_sum``, ``_count``, ``_bucket``) not inside rate/irate/increase."""
    skeleton = _skeleton(expr)
    bad = []
    for start, name in _selectors(expr):
        if not name.endswith(_COUNTER_SUFFIXES):
            continue
        before = skeleton[:start].rstrip()
        if not re.search(r"\b(rate|irate|increase)\s*\($", before):
            bad.append(name)
    return bad


def _range_problems(expr: str) -> list[str]:
    problems = []
    expr = _STRING.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', expr)  # "[0-9]" is no range
    for m in _RANGE_FUNCS.finditer(expr):
        window = re.search(r"\[([^\]]*)\]", expr[m.end() :])
        if window is None:
            problems.append(f"{m.group(1)}() without a range")
            continue
        allowed = {"$__rate_interval"} if m.group(1) != "increase" else {"$__rate_interval", "$__range"}
        if window.group(1) not in allowed:
            problems.append(f"{m.group(1)}() over [{window.group(1)}]: use one of {sorted(allowed)}")
    return problems


def _panels(model: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in model.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def targets(model: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, target) for every query of every panel."""
    for panel in _panels(model):
        for target in panel.get("targets", []):
            yield panel, target


def annotation_queries(model: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every annotation query the dashboard defines (Grafana's built-in one has no target)."""
    for item in model.get("annotations", {}).get("list", []):
        if not item.get("builtIn"):
            yield item


def result_labels(expr: str, rules: Mapping[str, str] | None = None) -> set[str] | None:
    """The labels an expression's result keeps, where that can be read off its text: the
    first ``by (...)`` list (``le`` aside), or a recording rule's when it aggregates none
    itself; None when neither says (a bare selector keeps every label of its series)."""
    m = _BY.search(_STRING.sub(lambda s: " " * len(s.group(0)), expr))
    if m is not None:
        kept = {name.strip() for name in m.group(1).split(",") if name.strip() and name.strip() != "le"}
        return kept | set(_COUNT_VALUES.findall(expr))
    for name in metric_names(expr):
        if rules and name in rules:
            return result_labels(rules[name], rules)
    return None


def _pinned(expr: str, single: set[str], repeated: str | None) -> set[str]:
    """Labels an expression fixes to one value: matched, in its first selector (the series its
    result comes from), with ``=`` to a single-select variable or to the variable the panel
    repeats over (each copy gets one value)."""
    first = next(_selectors(expr), None)
    if first is None:
        return set()
    start, name = first
    rest = expr[start + len(name) :].lstrip()
    matchers = _MATCHERS.match(rest)
    if matchers is None:
        return set()
    return {
        label
        for label, op, var in _LABEL_ON_VAR.findall(matchers.group(0))
        if (op == "=" and var in single) or var == repeated
    }


def box_problems(expr: str, *, multi: bool, rules: Mapping[str, str] | None = None) -> list[str]:
    """Every selector filters by the box variable (a rule it reads keeps the box label), and
    with a multi-select box the result keeps the box label: no series sums two boxes."""
    problems = []
    for start, name in _selectors(expr):
        matchers = _MATCHERS.match(expr[start + len(name) :].lstrip())
        on_box = {
            label
            for label, _, var in _LABEL_ON_VAR.findall(matchers.group(0) if matchers else "")
            if var == BOX_VARIABLE
        }
        if BOX_LABEL not in on_box:
            problems.append(f'{name} is not filtered by box ({BOX_LABEL}=~"${BOX_VARIABLE}")')
        if rules and name in rules:
            kept = result_labels(rules[name], rules)
            if kept is not None and BOX_LABEL not in kept:
                problems.append(f"recording rule {name} drops {BOX_LABEL}: the box filter finds nothing")
    if multi:
        kept = result_labels(expr, rules)
        if kept is not None and BOX_LABEL not in kept:
            problems.append(f"sums over boxes: keep {BOX_LABEL} in by ({', '.join(sorted(kept))})")
    return problems


def legend_problems(
    expr: str,
    legend: str,
    rules: Mapping[str, str] | None = None,
    *,
    single: set[str] | None = None,
    repeated: str | None = None,
) -> list[str]:
    """A legend must exist and name every label the query keeps but does not pin, and only those."""
    if not legend or legend.strip() == "__auto":
        return ["no legend: Grafana would show the raw label set"]
    kept = result_labels(expr, rules)
    if kept is None:
        return []
    named = set(_LEGEND_LABEL.findall(legend))
    problems = []
    missing = kept - named - _pinned(expr, single or set(), repeated)
    if missing:
        problems.append(f"legend {legend!r} does not name {sorted(missing)}: series would share a name")
    unknown = named - kept
    if unknown:
        problems.append(f"legend {legend!r} names {sorted(unknown)}, which the query does not keep")
    return problems


def _datasource_problem(ref: Any, uids: set[str], ds_vars: dict[str, str]) -> str | None:
    """None when ``ref`` names a datasource variable of its type; else what is wrong."""
    ref = ref or {}
    uid = ref.get("uid")
    m = _DATASOURCE_VAR.match(uid) if isinstance(uid, str) else None
    if m is not None:
        name = m.group(1) or m.group(2)
        if name not in ds_vars:
            return f"datasource ${{{name}}} is not a datasource variable of this dashboard"
        if ref.get("type") and ds_vars[name] != ref.get("type"):
            return f"datasource ${{{name}}} is a {ds_vars[name]} variable, not {ref.get('type')}"
        return None
    if uid not in uids:
        return f"datasource uid {uid!r} is not provisioned"
    return (
        f"datasource uid {uid!r} is fixed: name it through a datasource variable, so an import "
        "can pick its own"
    )


def _is_default_steps(steps: list[dict[str, Any]]) -> bool:
    return [{"color": s.get("color"), "value": s.get("value")} for s in steps] == _GRAFANA_DEFAULT_STEPS


def lint_dashboard(
    model: dict[str, Any], datasource_uids: Iterable[str], rules: Mapping[str, str] | None = None
) -> list[str]:
    """Every problem found in one dashboard, each naming the dashboard and panel.

    ``rules`` (recording rule -> expression) tell the labels a query on a rule keeps.
    """
    uids = set(datasource_uids)
    title = model.get("title", "?")
    problems: list[str] = []

    def add(where: str, problem: str) -> None:
        problems.append(f"{title}: {where}: {problem}")

    variables = model.get("templating", {}).get("list", [])
    ds_vars = {v.get("name"): v.get("query") for v in variables if v.get("type") == "datasource"}
    single = {
        v.get("name")
        for v in variables
        if v.get("type") == "query" and not (v.get("multi") or v.get("includeAll"))
    }
    multi = {v.get("name") for v in variables if v.get("multi") or v.get("includeAll")}
    if not any(v.get("name") == BOX_VARIABLE for v in variables):
        add("dashboard", f"no {BOX_VARIABLE!r} variable: a fleet's boxes would mix in every panel")

    if not model.get("uid"):
        add("dashboard", "no uid")
    if model.get("graphTooltip") != SHARED_TOOLTIP:
        add("dashboard", f"graphTooltip {model.get('graphTooltip')!r}: share the tooltip ({SHARED_TOOLTIP})")
    tag_links = [
        link
        for link in model.get("links", [])
        if link.get("type") == "dashboards" and link.get("keepTime") and link.get("includeVars")
    ]
    if not any(set(link.get("tags") or []) & set(model.get("tags") or []) for link in tag_links):
        add(
            "dashboard",
            "no link to the other dashboards (type dashboards, by one of its own tags, keeping the "
            "time range and variables)",
        )
    ids: set[object] = set()
    exprs: list[str] = []
    used_datasources: set[str] = set()

    def check_datasource(where: str, ref: Any) -> None:
        problem = _datasource_problem(ref, uids, ds_vars)
        if problem:
            add(where, problem)
        m = _DATASOURCE_VAR.match(str((ref or {}).get("uid", "")))
        if m is not None:
            used_datasources.add(m.group(1) or m.group(2))

    def check_query(where: str, expr: str) -> None:
        exprs.append(expr)
        for problem in _range_problems(expr):
            add(where, problem)
        for problem in box_problems(expr, multi=BOX_VARIABLE in multi, rules=rules):
            add(where, problem)
        for name in counters_not_aggregated(expr):
            add(where, f"counter {name} not wrapped in rate/increase")

    for panel in _panels(model):
        where = f"panel {panel.get('title', '?')!r}"
        if panel.get("id") in ids:
            add(where, f"duplicate panel id {panel.get('id')}")
        ids.add(panel.get("id"))
        grid = panel.get("gridPos") or {}
        if grid.get("x", 0) + grid.get("w", 0) > GRID_WIDTH:
            add(
                where, f"gridPos x {grid.get('x')} + w {grid.get('w')} overflows the {GRID_WIDTH}-column grid"
            )
        if panel.get("type") == "row":
            continue
        if not panel.get("title"):
            add(where, "no title")
        if not panel.get("description"):
            add(where, "no description")
        defaults = panel.get("fieldConfig", {}).get("defaults", {})
        if not defaults.get("unit"):
            add(where, "no unit")
        steps = (defaults.get("thresholds") or {}).get("steps") or []
        if not steps or _is_default_steps(steps):
            add(where, "thresholds left to Grafana's default (red from 80): set ones that mean something")
        repeated = panel.get("repeat") or None
        if repeated is not None and repeated not in multi:
            add(where, f"repeats over {repeated!r}, not a multi-value variable of this dashboard")
        check_datasource(where, panel.get("datasource"))
        panel_targets = [t for t in panel.get("targets", []) if t.get("expr")]
        if not panel_targets:
            add(where, "no queries")
        legends = {t.get("legendFormat") for t in panel.get("targets", [])}
        for override in panel.get("fieldConfig", {}).get("overrides", []):
            for prop in override.get("properties", []):
                if prop.get("id") == "custom.fillBelowTo" and prop.get("value") not in legends:
                    add(where, f"fillBelowTo {prop.get('value')!r} names no series of the panel")
        for target in panel.get("targets", []):
            ref = target.get("refId")
            expr = target.get("expr", "")
            check_datasource(f"{where}: query {ref}", target.get("datasource") or panel.get("datasource"))
            check_query(f"{where}: query {ref}", expr)
            for problem in legend_problems(
                expr, target.get("legendFormat", ""), rules, single=single, repeated=repeated
            ):
                add(f"{where}: query {ref}", problem)
    for item in annotation_queries(model):
        where = f"annotation {item.get('name', '?')!r}"
        check_datasource(where, item.get("datasource"))
        expr = (item.get("target") or {}).get("expr") or item.get("expr") or ""
        if not expr:
            add(where, "no query")
        check_query(where, expr)
        for problem in legend_problems(expr, item.get("titleFormat", ""), rules, single=single):
            add(where, problem.replace("legend", "title", 1))
    used = {a or b for expr in exprs for a, b in _VAR.findall(expr)}
    used |= used_datasources
    for variable in variables:
        query = variable.get("query")
        if isinstance(query, dict):
            used |= {a or b for a, b in _VAR.findall(str(query.get("query", "")))}
    matchers = {(op, name) for expr in exprs for op, name in _MATCHER_ON_VAR.findall(expr)}
    for variable in variables:
        name = variable.get("name")
        where = f"variable {name!r}"
        if name not in used:
            add(where, "not used by any query")
        if variable.get("multi") or variable.get("includeAll"):
            for op in sorted(op for op, var in matchers if var == name and op != "=~"):
                add(
                    where,
                    f'{op}"${name}" on a multi-value or All variable (sent as a regex, .* for All): '
                    "use =~ or make it single-select",
                )
            current = (variable.get("current") or {}).get("value")
            if current not in (["$__all"], "$__all") or variable.get("allValue") != ".*":
                add(where, f"multi-select starts on {current!r}, not All (.*)")
        if variable.get("type") == "query":
            check_datasource(where, variable.get("datasource"))
        if variable.get("type") == "datasource":
            default = (variable.get("current") or {}).get("value")
            if default not in uids:
                add(where, f"defaults to {default!r}, not a provisioned datasource uid")
    return problems


def lint_dashboards(
    models: Iterable[dict[str, Any]], datasource_uids: Iterable[str], rules: Mapping[str, str] | None = None
) -> list[str]:
    """Problems of each dashboard, plus uids shared between dashboards and links by a tag that
    no other dashboard carries."""
    uids = list(datasource_uids)
    models = list(models)
    problems: list[str] = []
    seen: dict[str, str] = {}
    for model in models:
        problems.extend(lint_dashboard(model, uids, rules))
        uid = model.get("uid", "")
        if uid in seen:
            problems.append(f"{model.get('title')}: uid {uid!r} also used by {seen[uid]!r}")
        seen[uid] = str(model.get("title"))
    for model in models:
        others = [m for m in models if m is not model]
        for link in model.get("links", []):
            if link.get("type") != "dashboards":
                continue
            for tag in link.get("tags") or []:
                if not any(tag in (m.get("tags") or []) for m in others):
                    problems.append(f"{model.get('title')}: link by tag {tag!r} finds no other dashboard")
    return problems
