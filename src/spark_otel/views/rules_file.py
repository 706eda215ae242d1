"""The advisor's rules as a rules file: what `spark-otel advise --write-rules FILE` writes.

Only the rules the governor can enforce become rules: worker counts (``[[limit]]``), lane caps
(``[[lane]]``) and cross-engine limits (``[[cross_engine]]``). What the advisor could not
answer yet ("measure first", with its command) is kept in ``unmeasured`` so the file says what
it does not cover. Each rule keeps its evidence text, its figures and when they were measured;
``[engines]`` records the model each engine served then, and its URL.

By default the rules take the article's general forms (version 2), so they govern the next run
of an eval whatever it is called: a worker count per (engine, cell class, ceiling-bound or not),
the fewest any measured eval of that class was given, and a cross-engine limit that holds while
any ceiling-bound cell runs on the engine, the strictest measured; with ``[[history]]`` and
``slowdown`` for the governor to class a cell at admission (`spark_otel.governor.classing`).
``by_eval=True`` (``advise --write-rules FILE --by-eval``) writes version 1's forms instead,
each rule naming the eval it was measured on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .._clock import NS_PER_S, real_wall_ns
from .._exceptions import ConfigError
from ..analysis.advisor import Advice, AdvisorConfig, ClassAdvice, QueueRule, RuleKind
from ..governor.classing import near_ceiling
from ..records.eval_family import eval_family
from ..records.rate_curve import RateCurve
from ..records.rules_file import CrossEngineRule, EngineInfo, History, LaneRule, LimitRule, RulesFile
from .curves import describe_curve
from .requests import requests_as_cells_phrase
from .rules import rule_evidence, rule_text

__all__ = ["dump_rules", "rules_from_advice"]

_HEADER = """\
# Queue rules for spark-otel's governor: spark_otel.govern(FILE), or SPARK_OTEL_RULES=FILE.
# Written by spark-otel advise from measured evidence; edit freely, then check with
#   spark-otel rules check FILE
# [[lane]]          at most `cells` cells in flight on `engine`
# [[limit]]         at most `cells` cells of `cell_class` (the ceiling-bound ones, or the
#                   others, where `ceiling_bound` is set), or of `eval`, in flight on `engine`
# [[cross_engine]]  while a ceiling-bound cell (`while_ceiling_bound`), a cell of `while_eval`,
#                   or else any cell with a ceiling runs on `while_engine`, `engine` admits at
#                   most `cells` cells (0: it yields)
# [[history]]       how each eval family's cells ran alone: how a cell of the next run is
#                   classed, and found ceiling-bound, at admission (docs/governor.md)
# eval_gap_s: an eval counts as running until this long after its last cell ended.
"""
_MAX_COST = 0.95
"""A neighbour cost above this is read as this (a slowdown of 20x at most): a cost near 1 would
make every cell with a ceiling ceiling-bound, which the cross-engine rule already protects."""


def _when(unix_ns: int | None) -> datetime | None:
    return None if unix_ns is None else datetime.fromtimestamp(unix_ns / NS_PER_S, UTC)


def _figures(rule: QueueRule) -> dict[str, Any]:
    """The figures a rule rests on, for scripts; the curve in words, where the rule rests on one."""
    figures = rule.figures.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    if rule.curve is not None:
        figures["curve"] = describe_curve(rule.curve)
    return figures


def _common(r: QueueRule, evals: Sequence[str] = ()) -> dict[str, Any]:
    figures = _figures(r)
    if evals:
        figures["evals"] = sorted(set(evals))
    return {
        "evidence": rule_evidence(r),
        "measured_at": _when(r.figures.measured_unix_ns),
        "figures": figures,
    }


def rules_from_advice(
    advice: Advice,
    curves: Iterable[RateCurve] = (),
    *,
    engine_urls: Mapping[str, str] | None = None,
    source: str | None = None,
    by_eval: bool = False,
) -> RulesFile:
    """The enforceable rules of ``advice``, with the model and URL of each engine they name: in
    the general forms (version 2), or with ``by_eval`` naming the measured evals (version 1)."""
    lanes: list[LaneRule] = []
    batch: list[QueueRule] = []
    crossing: list[QueueRule] = []
    unmeasured: list[str] = []
    for r in advice.rules:
        if r.kind is RuleKind.BATCH and r.engine and r.workers:
            batch.append(r)
        elif r.kind is RuleKind.CAP and r.engine and r.workers:
            lanes.append(LaneRule(engine=r.engine, cells=r.workers, **_common(r)))
        elif r.kind is RuleKind.CROSS_ENGINE and r.engine and r.while_engine and r.workers is not None:
            crossing.append(r)
        elif r.kind is RuleKind.MEASURE:
            unmeasured.append(f"{rule_text(r)}: {r.command}" if r.command else rule_text(r))
    slowdown = {} if by_eval else _slowdown(crossing)
    if by_eval:
        limits = [_eval_limit(r) for r in batch]
        cross = [_eval_cross(r) for r in crossing]
    else:
        limits = _class_limits(batch, slowdown, advice.config)
        cross = _general_cross(crossing)
    urls = dict(engine_urls or {})
    models = {c.engine: c.model for c in curves if c.model}
    named = {x.engine for x in (*lanes, *limits, *cross)} | {x.while_engine for x in cross}
    engines = {e: EngineInfo(model=models.get(e), url=urls.get(e)) for e in sorted(named)}
    if source is not None and advice.requests_as_cells:  # the file says so too, as every output does
        source += (
            f" ({requests_as_cells_phrase(advice.requests_as_cells, advice.n_cells)}, standing in for cells)"
        )
    general: dict[str, Any] = {}
    if not by_eval:
        general = {
            "ceiling_bound_fraction": advice.config.ceiling_bound_fraction,
            "long_context_prompt_tokens": advice.config.long_context_prompt_tokens,
            "slowdown": slowdown,
            "history": _history(advice.classes),
        }
    return RulesFile(
        version=1 if by_eval else 2,
        computed_at=_when(real_wall_ns()),
        source=source,
        ceiling_s=advice.config.ceiling_s,
        engines=engines,
        lane=lanes,
        limit=limits,
        cross_engine=cross,
        unmeasured=unmeasured,
        **general,
    )


def _eval_limit(r: QueueRule) -> LimitRule:
    assert r.engine is not None
    assert r.workers is not None
    cell_class = r.cell_class.value if r.cell_class is not None else None
    return LimitRule(engine=r.engine, eval=r.eval_name, cell_class=cell_class, cells=r.workers, **_common(r))


def _eval_cross(r: QueueRule) -> CrossEngineRule:
    assert r.engine is not None
    assert r.while_engine is not None
    assert r.workers is not None
    return CrossEngineRule(
        engine=r.engine, cells=r.workers, while_engine=r.while_engine, while_eval=r.eval_name, **_common(r)
    )


def _slowdown(crossing: Sequence[QueueRule]) -> dict[str, float]:
    """Per engine, how much longer its cells ran beside the costliest neighbour measured:
    ``1 / (1 - cost)``."""
    worst: dict[str, float] = {}
    for r in crossing:
        cost = r.figures.neighbour_cost
        if r.while_engine is not None and cost is not None and cost > 0:
            worst[r.while_engine] = max(worst.get(r.while_engine, 0.0), min(cost, _MAX_COST))
    return {e: round(1 / (1 - cost), 3) for e, cost in sorted(worst.items())}


def _bound(r: QueueRule, slowdown: Mapping[str, float], config: AdvisorConfig) -> bool:
    """The class ceiling-bound as the governor will judge its cells at admission."""
    a = r.advice
    if a is None or a.serial_p90_s is None:
        return r.ceiling_bound
    assert r.engine is not None
    return near_ceiling(
        a.serial_p90_s, slowdown.get(r.engine, 1.0), config.ceiling_bound_fraction, config.ceiling_s
    )


def _class_limits(
    batch: Sequence[QueueRule], slowdown: Mapping[str, float], config: AdvisorConfig
) -> list[LimitRule]:
    """One limit per (engine, class, ceiling-bound or not), the fewest workers any measured eval
    of it was given, with that eval's evidence and the evals it rests on; without the
    ceiling-bound key where only one side was measured (it then holds both). A rule whose class
    is unknown keeps its eval."""
    groups: dict[tuple[str, str], dict[bool, list[QueueRule]]] = defaultdict(lambda: defaultdict(list))
    limits = []
    for r in batch:
        if r.cell_class is None:
            limits.append(_eval_limit(r))
            continue
        assert r.engine is not None
        groups[(r.engine, r.cell_class.value)][_bound(r, slowdown, config)].append(r)
    for (engine, cell_class), sides in groups.items():
        for bound, rules in sorted(sides.items()):
            binding = min(rules, key=lambda x: x.workers or 0)
            assert binding.workers is not None
            limits.append(
                LimitRule(
                    engine=engine,
                    cell_class=cell_class,
                    ceiling_bound=bound if len(sides) > 1 else None,
                    cells=binding.workers,
                    **_common(binding, [r.eval_name for r in rules if r.eval_name]),
                )
            )
    return limits


def _general_cross(crossing: Sequence[QueueRule]) -> list[CrossEngineRule]:
    """One rule per (engine, while_engine): it holds while any ceiling-bound cell runs there, at
    the fewest cells any measured eval allowed, with the costliest evidence."""
    groups: dict[tuple[str, str], list[QueueRule]] = defaultdict(list)
    for r in crossing:
        assert r.engine is not None
        assert r.while_engine is not None
        groups[(r.engine, r.while_engine)].append(r)
    out = []
    for (engine, while_engine), rules in groups.items():
        worst = max(rules, key=lambda x: x.figures.neighbour_cost or 0.0)
        out.append(
            CrossEngineRule(
                engine=engine,
                cells=min(r.workers or 0 for r in rules),
                while_engine=while_engine,
                while_ceiling_bound=True,
                **_common(worst, [r.eval_name for r in rules if r.eval_name]),
            )
        )
    return out


def _history(classes: Iterable[ClassAdvice]) -> list[History]:
    """Per (engine, eval family, class): the cells measured, their share of the family's, and the
    p90 length alone (the longest of the family's evals: the safe side)."""
    groups: dict[tuple[str, str, str], list[ClassAdvice]] = defaultdict(list)
    for a in classes:
        groups[(a.engine, eval_family(a.eval_name), a.cell_class.value)].append(a)
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for (engine, family, _), group in groups.items():
        totals[(engine, family)] += sum(a.n_cells for a in group)
    out = []
    for (engine, family, cell_class), group in sorted(groups.items()):
        lengths = [a.serial_p90_s for a in group if a.serial_p90_s is not None]
        n = sum(a.n_cells for a in group)
        if not lengths or n < 1:
            continue
        out.append(
            History(
                engine=engine,
                family=family,
                cell_class=cell_class,
                n_cells=n,
                share=round(n / totals[(engine, family)], 4),
                p90_alone_s=round(max(lengths), 3),
                evals=sorted({a.eval_name for a in group}),
            )
        )
    return out


def dump_rules(rules: RulesFile) -> str:
    """``rules`` as TOML with a header saying what each table means (needs the ``cli`` extra)."""
    try:
        import tomli_w
    except ImportError as exc:
        raise ConfigError("writing a rules file needs the cli extra: pip install 'spark-otel[cli]'") from exc
    data = rules.model_dump(mode="python", exclude_none=True)
    for key in ("slowdown", "history"):
        if not data.get(key):
            data.pop(key, None)
    if rules.version < 2:  # version 1 has none of version 2's keys
        data.pop("ceiling_bound_fraction", None)
        data.pop("long_context_prompt_tokens", None)
    for table in ("lane", "limit", "cross_engine"):
        for rule in data.get(table, []):
            rule.pop("kind", None)
            if not rule.get("figures"):
                rule.pop("figures", None)
            if rules.version < 2 or not rule.get("while_ceiling_bound", True):
                rule.pop("while_ceiling_bound", None)
    return _HEADER + "\n" + tomli_w.dumps(data)
