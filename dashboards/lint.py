"""Lint rules for the generated dashboards, modelled on grafana/dashboard-linter v0.2.0.

dashboard-linter cannot be installed here (its go.mod has replace directives and it pulls
AGPL modules), so its rules that apply to OpenTelemetry-derived series are re-implemented:
panel-datasource, template-datasource, panel-title-description, panel-units,
panel-no-targets, target-rate-interval, target-counter-agg; plus unique uids and panel ids,
every template variable used by some query, and matchers that fit their variable: a
multi-select or "All" variable is sent as a regex (``.*`` for All), so only ``=~`` may use
it. All functions are pure: JSON in, problems out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["counters_not_aggregated", "lint_dashboard", "lint_dashboards", "metric_names", "targets"]

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


def lint_dashboard(model: dict[str, Any], datasource_uids: Iterable[str]) -> list[str]:
    """Every problem found in one dashboard, each naming the dashboard and panel."""
    uids = set(datasource_uids)
    title = model.get("title", "?")
    problems: list[str] = []

    def add(where: str, problem: str) -> None:
        problems.append(f"{title}: {where}: {problem}")

    if not model.get("uid"):
        add("dashboard", "no uid")
    ids: set[object] = set()
    exprs: list[str] = []
    for panel in _panels(model):
        where = f"panel {panel.get('title', '?')!r}"
        if panel.get("id") in ids:
            add(where, f"duplicate panel id {panel.get('id')}")
        ids.add(panel.get("id"))
        if panel.get("type") == "row":
            continue
        if not panel.get("title"):
            add(where, "no title")
        if not panel.get("description"):
            add(where, "no description")
        if not panel.get("fieldConfig", {}).get("defaults", {}).get("unit"):
            add(where, "no unit")
        ds = (panel.get("datasource") or {}).get("uid")
        if ds not in uids:
            add(where, f"datasource uid {ds!r} is not provisioned")
        panel_targets = [t for t in panel.get("targets", []) if t.get("expr")]
        if not panel_targets:
            add(where, "no queries")
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            exprs.append(expr)
            tds = (target.get("datasource") or {}).get("uid", ds)
            if tds not in uids:
                add(where, f"query {target.get('refId')}: datasource uid {tds!r} is not provisioned")
            for problem in _range_problems(expr):
                add(where, f"query {target.get('refId')}: {problem}")
            for name in counters_not_aggregated(expr):
                add(where, f"query {target.get('refId')}: counter {name} not wrapped in rate/increase")
    used = {a or b for expr in exprs for a, b in _VAR.findall(expr)}
    matchers = {(op, name) for expr in exprs for op, name in _MATCHER_ON_VAR.findall(expr)}
    for variable in model.get("templating", {}).get("list", []):
        name = variable.get("name")
        if name not in used:
            add(f"variable {name!r}", "not used by any query")
        if variable.get("multi") or variable.get("includeAll"):
            for op in sorted(op for op, var in matchers if var == name and op != "=~"):
                add(
                    f"variable {name!r}",
                    f'{op}"${name}" on a multi-value or All variable (sent as a regex, .* for All): '
                    "use =~ or make it single-select",
                )
        vds = (variable.get("datasource") or {}).get("uid")
        if variable.get("type") == "query" and vds not in uids:
            add(f"variable {name!r}", f"datasource uid {vds!r} is not provisioned")
    return problems


def lint_dashboards(models: Iterable[dict[str, Any]], datasource_uids: Iterable[str]) -> list[str]:
    """Problems of each dashboard, plus uids shared between dashboards."""
    uids = list(datasource_uids)
    problems: list[str] = []
    seen: dict[str, str] = {}
    for model in models:
        problems.extend(lint_dashboard(model, uids))
        uid = model.get("uid", "")
        if uid in seen:
            problems.append(f"{model.get('title')}: uid {uid!r} also used by {seen[uid]!r}")
        seen[uid] = str(model.get("title"))
    return problems
