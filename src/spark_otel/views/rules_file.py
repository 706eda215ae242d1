"""The advisor's rules as a rules file: what `spark-otel advise --write-rules FILE` writes.

Only the rules the governor can enforce become rules: worker counts (``[[limit]]``), lane caps
(``[[lane]]``) and cross-engine limits (``[[cross_engine]]``). What the advisor could not
answer yet ("measure first", with its command) is kept in ``unmeasured`` so the file says what
it does not cover. Each rule keeps its evidence text, its figures and when they were measured;
``[engines]`` records the model each engine served then, and its URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .._clock import NS_PER_S, real_wall_ns
from .._exceptions import ConfigError
from ..analysis.advisor import Advice, QueueRule, RuleKind
from ..records.rate_curve import RateCurve
from ..records.rules_file import CrossEngineRule, EngineInfo, LaneRule, LimitRule, RulesFile
from .curves import describe_curve
from .requests import requests_as_cells_phrase
from .rules import rule_evidence, rule_text

__all__ = ["dump_rules", "rules_from_advice"]

_HEADER = """\
# Queue rules for spark-otel's governor: spark_otel.govern(FILE), or SPARK_OTEL_RULES=FILE.
# Written by spark-otel advise from measured evidence; edit freely, then check with
#   spark-otel rules check FILE
# [[lane]]          at most `cells` cells in flight on `engine`
# [[limit]]         at most `cells` cells of `eval` (or `cell_class`) in flight on `engine`
# [[cross_engine]]  while `while_eval` (or any cell with a ceiling) runs on `while_engine`,
#                   `engine` admits at most `cells` cells (0: it yields)
# eval_gap_s: an eval counts as running until this long after its last cell ended.
"""


def _when(unix_ns: int | None) -> datetime | None:
    return None if unix_ns is None else datetime.fromtimestamp(unix_ns / NS_PER_S, UTC)


def _figures(rule: QueueRule) -> dict[str, Any]:
    """The figures a rule rests on, for scripts; the curve in words, where the rule rests on one."""
    figures = rule.figures.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    if rule.curve is not None:
        figures["curve"] = describe_curve(rule.curve)
    return figures


def rules_from_advice(
    advice: Advice,
    curves: Iterable[RateCurve] = (),
    *,
    engine_urls: Mapping[str, str] | None = None,
    source: str | None = None,
) -> RulesFile:
    """The enforceable rules of ``advice``, with the model and URL of each engine they name."""
    lanes: list[LaneRule] = []
    limits: list[LimitRule] = []
    cross: list[CrossEngineRule] = []
    unmeasured: list[str] = []
    for r in advice.rules:
        common: dict[str, Any] = {
            "evidence": rule_evidence(r),
            "measured_at": _when(r.figures.measured_unix_ns),
            "figures": _figures(r),
        }
        if r.kind is RuleKind.BATCH and r.engine and r.workers:
            cell_class = r.cell_class.value if r.cell_class is not None else None
            limits.append(
                LimitRule(engine=r.engine, eval=r.eval_name, cell_class=cell_class, cells=r.workers, **common)
            )
        elif r.kind is RuleKind.CAP and r.engine and r.workers:
            lanes.append(LaneRule(engine=r.engine, cells=r.workers, **common))
        elif r.kind is RuleKind.CROSS_ENGINE and r.engine and r.while_engine and r.workers is not None:
            cross.append(
                CrossEngineRule(
                    engine=r.engine,
                    cells=r.workers,
                    while_engine=r.while_engine,
                    while_eval=r.eval_name,
                    **common,
                )
            )
        elif r.kind is RuleKind.MEASURE:
            unmeasured.append(f"{rule_text(r)}: {r.command}" if r.command else rule_text(r))
    urls = dict(engine_urls or {})
    models = {c.engine: c.model for c in curves if c.model}
    named = {x.engine for x in (*lanes, *limits, *cross)} | {x.while_engine for x in cross}
    engines = {e: EngineInfo(model=models.get(e), url=urls.get(e)) for e in sorted(named)}
    if source is not None and advice.requests_as_cells:  # the file says so too, as every output does
        source += (
            f" ({requests_as_cells_phrase(advice.requests_as_cells, advice.n_cells)}, standing in for cells)"
        )
    return RulesFile(
        computed_at=_when(real_wall_ns()),
        source=source,
        ceiling_s=advice.config.ceiling_s,
        engines=engines,
        lane=lanes,
        limit=limits,
        cross_engine=cross,
        unmeasured=unmeasured,
    )


def dump_rules(rules: RulesFile) -> str:
    """``rules`` as TOML with a header saying what each table means (needs the ``cli`` extra)."""
    try:
        import tomli_w
    except ImportError as exc:
        raise ConfigError("writing a rules file needs the cli extra: pip install 'spark-otel[cli]'") from exc
    data = rules.model_dump(mode="python", exclude_none=True)
    for table in ("lane", "limit", "cross_engine"):
        for rule in data.get(table, []):
            rule.pop("kind", None)
            if not rule.get("figures"):
                rule.pop("figures", None)
    return _HEADER + "\n" + tomli_w.dumps(data)
