"""The general forms `advise --write-rules` writes (version 2), figure by figure: the slowdown per
engine, which classes are ceiling-bound at admission, the strictest cross-engine limit, each
family's history, the file's source, and which keys the written file leaves out. Facts on
`RulesFile`, and on the file read back as TOML, not its wording."""

from __future__ import annotations

import tomllib

from tests.support.queue_rules import batched_rule, class_advice, yields_rule

from spark_otel.analysis.advisor import Advice, AdvisorConfig, CellClass, Evidence, QueueRule
from spark_otel.records.rules_file import CrossEngineRule, RulesFile
from spark_otel.views.requests import requests_as_cells_phrase
from spark_otel.views.rules_file import dump_rules, rules_from_advice


def _advice(*rules: QueueRule, **kw: object) -> Advice:
    classes = [r.advice for r in rules if r.advice is not None]
    return Advice(config=AdvisorConfig(ceiling_s=1800.0), classes=classes, rules=list(rules), **kw)  # type: ignore[arg-type]


def _no_cost(rule: QueueRule) -> QueueRule:
    return rule.model_copy(update={"figures": Evidence(n_cells=5)})


def test_the_slowdown_is_the_costliest_neighbour_measured_and_a_free_one_none() -> None:
    """Per engine, 1 / (1 - the costliest cost) whatever order the rules come in; a neighbour
    measured without a cost, or at no cost, slows nothing."""
    rules = rules_from_advice(
        _advice(
            _no_cost(yields_rule("nemotron", "serial-a", "qwen", cost=0.2, cost_at_one=0.1)),
            yields_rule("nemotron", "serial-b", "qwen", cost=0.54, cost_at_one=0.1),
            yields_rule("nemotron", "serial-c", "qwen", cost=0.3, cost_at_one=0.1),
            yields_rule("llama", "cards", "nemotron", cost=0.0, cost_at_one=0.1),
        )
    )
    assert rules.slowdown == {"qwen": round(1 / 0.46, 3)}


def test_one_cross_engine_rule_per_pair_at_the_fewest_cells_with_the_costliest_evidence() -> None:
    rules = rules_from_advice(
        _advice(
            _no_cost(yields_rule("nemotron", "serial-a", "qwen", cost=0.2, cost_at_one=0.1)),
            yields_rule("nemotron", "serial-b", "qwen", cost=0.54, cost_at_one=0.1),
            yields_rule("nemotron", "serial-c", "qwen", cost=0.3, cost_at_one=0.1),
        )
    )
    [cross] = rules.cross_engine
    assert (cross.engine, cross.while_engine, cross.while_ceiling_bound) == ("nemotron", "qwen", True)
    assert cross.cells == 1
    evals = ["serial-a", "serial-b", "serial-c"]
    assert cross.figures == {"n_cells": 5, "neighbour_cost": 0.54, "evals": evals}


def test_a_class_is_ceiling_bound_as_the_governor_judges_it_at_admission() -> None:
    """1,000 s alone is inside 75% of 1,800 s, but beside qwen's neighbour (2.17x) it is past it,
    whatever the advisor said of the eval; on llama, with no neighbour measured, 800 s stays
    inside it, so llama's one side holds the whole class."""
    long_q = batched_rule("qwen", "proofs-1", 1, serial_p90_s=1000.0, n_cells=20)
    short_q = batched_rule("qwen", "quick-1", 8, serial_p90_s=60.0, n_cells=20)
    assert (long_q.ceiling_bound, short_q.ceiling_bound) == (False, False)
    rules = rules_from_advice(
        _advice(
            long_q,
            short_q,
            batched_rule("llama", "proofs-2", 2, serial_p90_s=800.0, n_cells=20),
            batched_rule("llama", "quick-2", 4, serial_p90_s=60.0, n_cells=20),
            yields_rule("nemotron", "proofs-1", "qwen", cost=0.54),
        )
    )
    assert [(r.engine, r.ceiling_bound, r.cells, r.figures["evals"]) for r in rules.limit] == [
        ("qwen", False, 8, ["quick-1"]),
        ("qwen", True, 1, ["proofs-1"]),
        ("llama", None, 2, ["proofs-2", "quick-2"]),
    ]


def test_a_rule_of_no_known_class_keeps_its_eval_and_the_rules_after_it_stay() -> None:
    unclassed = batched_rule("qwen", "odd-1", 4).model_copy(update={"cell_class": None})
    rules = rules_from_advice(_advice(unclassed, batched_rule("qwen", "quick-1", 8, serial_p90_s=60.0)))
    assert [(r.eval, r.cell_class, r.cells) for r in rules.limit] == [
        ("odd-1", None, 4),
        (None, "generation-heavy", 8),
    ]


def test_each_family_s_history_shares_its_cells_among_its_classes() -> None:
    """Shares to 4 places and p90s to 3; a class of one cell counts; one with no p90 alone (not
    predicted) has no history, and the families after it keep theirs."""
    classes = [
        class_advice(engine="a", eval_name="aaa-20261206", serial_p90_s=None, n_cells=9),
        class_advice(engine="q", eval_name="review-20261206", serial_p90_s=100.12345, n_cells=30),
        class_advice(
            engine="q", eval_name="review-20261206", cell_class=CellClass.PROMPT_HEAVY, serial_p90_s=50.0,
            n_cells=10,
        ),
        class_advice(engine="q", eval_name="nightly-20261206", serial_p90_s=20.0, n_cells=10),
        class_advice(
            engine="q", eval_name="nightly-20261206", cell_class=CellClass.PROMPT_HEAVY, serial_p90_s=20.0,
            n_cells=20,
        ),
        class_advice(engine="q", eval_name="single-20261206", serial_p90_s=10.0, n_cells=1),
    ]  # fmt: skip
    rules = rules_from_advice(Advice(config=AdvisorConfig(), classes=classes, rules=[]))
    assert [(h.engine, h.family, h.cell_class, h.n_cells, h.share, h.p90_alone_s) for h in rules.history] == [
        ("q", "nightly", "generation-heavy", 10, 0.3333, 20.0),
        ("q", "nightly", "prompt-heavy", 20, 0.6667, 20.0),
        ("q", "review", "generation-heavy", 30, 0.75, 100.123),
        ("q", "review", "prompt-heavy", 10, 0.25, 50.0),
        ("q", "single", "generation-heavy", 1, 1.0, 10.0),
    ]


def test_the_source_says_how_many_cells_are_requests_as_every_output_does() -> None:
    advice = _advice(batched_rule("qwen", "quick-1", 8), n_cells=8, requests_as_cells=3)
    source = rules_from_advice(advice, source="store.db").source
    assert source is not None
    assert source.startswith("store.db (")
    assert requests_as_cells_phrase(3, 8) in source
    assert rules_from_advice(advice).source is None


def test_a_cross_engine_rule_holding_while_any_cell_with_a_ceiling_runs_is_written_without_the_key() -> None:
    """Version 2: `while_ceiling_bound` is written where it is true, left out where it is false
    (its default); the file reads back as the same rules."""
    rules = RulesFile(
        cross_engine=[
            CrossEngineRule(engine="a", cells=0, while_engine="b"),
            CrossEngineRule(engine="c", cells=1, while_engine="b", while_ceiling_bound=True),
        ]
    )
    text = dump_rules(rules)
    written = tomllib.loads(text)["cross_engine"]
    assert ["while_ceiling_bound" in r for r in written] == [False, True]
    assert written[1]["while_ceiling_bound"] is True
    assert RulesFile.model_validate(tomllib.loads(text)) == rules
