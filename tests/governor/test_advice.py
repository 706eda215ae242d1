"""The advisor's advice as a rules file: which rules become enforceable rules, with exactly the
evidence, figures, times, models and URLs they came with, and the TOML `dump_rules` writes."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest
from tests.support.queue_rules import batched_rule, cap_rule, gauge_rule, measure_rule, yields_rule

from spark_otel import ConfigError, _clock
from spark_otel.analysis.advisor.advice_model import (
    Advice,
    AdvisorConfig,
    Evidence,
)
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.records.rules_file import CrossEngineRule, EngineInfo, LaneRule, LimitRule, parse_rules
from spark_otel.views.rules import rule_evidence
from spark_otel.views.rules_file import dump_rules, rules_from_advice

MEASURED_NS = 1_790_000_000_500_000_000
MEASURED = datetime(2026, 9, 21, 14, 13, 20, 500_000, tzinfo=UTC)
FIGURES = Evidence(n_cells=40, levels=[1, 2, 4, 8], speedup=5.5, speedup_interval=(4.1, 6.0))


def _advice() -> Advice:
    """Every kind of rule the advisor writes, and the ones with nothing to enforce."""
    figures = FIGURES.model_copy(update={"measured_unix_ns": MEASURED_NS})
    review = batched_rule("qwen", "review", 8)
    cap = cap_rule("nemotron", 8, peak=40.0, after=30.0)
    yields = yields_rule("nemotron", "review", "qwen", cost=0.5)
    at_most_one = yields_rule("llama", "finder", "qwen", cost=0.4, cost_at_one=0.1)
    rules = [
        review.model_copy(update={"figures": figures}),
        batched_rule("qwen", "finder", 2).model_copy(update={"cell_class": None}),  # the eval's cells
        review.model_copy(update={"workers": None}),  # nothing to enforce
        cap.model_copy(update={"figures": figures}),
        cap.model_copy(update={"engine": None}),  # no engine: nothing to enforce
        gauge_rule("qwen"),  # gauge advice is not a queue rule
        yields,
        at_most_one,
        yields.model_copy(update={"while_engine": None}),
        yields.model_copy(update={"workers": None}),  # no limit
        measure_rule("gemma"),
        measure_rule("gemma").model_copy(update={"command": None}),
    ]
    return Advice(config=AdvisorConfig(ceiling_s=900.0), classes=[], rules=rules)


def _curve(engine: str, model: str | None) -> RateCurve:
    return RateCurve(
        engine=engine, model=model, points=[CurvePoint(streams=1, per_stream_rate=30.0, aggregate_rate=30.0)]
    )


def test_only_enforceable_rules_become_rules_with_their_evidence_and_engines() -> None:
    """By eval (version 1's forms): each rule names the eval it was measured on."""
    advice = _advice()
    before = _clock.real_wall_ns()
    rules = rules_from_advice(
        advice,
        [_curve("qwen", "qwen3.8-27b"), _curve("nemotron", None), _curve("gemma", "gemma-4")],
        engine_urls={"qwen": "http://127.0.0.1:8011", "gemma": "http://127.0.0.1:8013"},
        source="store.sqlite",
        by_eval=True,
    )
    after = _clock.real_wall_ns()
    review, finder, _, _, _, _, yields, at_most_one, *_ = advice.rules
    figures = {"n_cells": 40, "levels": [1, 2, 4, 8], "measured_unix_ns": MEASURED_NS, "speedup": 5.5}
    figures["speedup_interval"] = [4.1, 6.0]  # JSON's list, as a TOML array reads back
    assert rules.limit == [
        LimitRule(
            engine="qwen",
            eval="review",
            cell_class="generation-heavy",
            cells=8,
            evidence=rule_evidence(review),
            measured_at=MEASURED,
            figures=figures | {"curve": "probe, idle, at 1, 2, 4 streams"},
        ),
        LimitRule(
            engine="qwen",
            eval="finder",
            cells=2,
            evidence=rule_evidence(finder),
            figures=finder.figures.model_dump(mode="json", exclude_defaults=True)
            | {"curve": "probe, idle, at 1, 2, 4 streams"},
        ),
    ]
    assert rules.lane == [
        LaneRule(
            engine="nemotron",
            cells=8,
            evidence="aggregate peaks at 40 tok/s at 8 streams and falls to 30 at 16 (probe, idle, at 1, 8, "
            "16 streams)",
            measured_at=MEASURED,
            figures=figures | {"curve": "probe, idle, at 1, 8, 16 streams"},
        )
    ]
    assert rules.cross_engine == [
        CrossEngineRule(
            engine="nemotron",
            cells=0,
            while_engine="qwen",
            while_eval="review",
            evidence=rule_evidence(yields),
            figures={"n_cells": 5, "neighbour_cost": 0.5},
        ),
        CrossEngineRule(
            engine="llama",
            cells=1,
            while_engine="qwen",
            while_eval="finder",
            evidence=rule_evidence(at_most_one),
            figures={"n_cells": 5, "neighbour_cost": 0.4},
        ),
    ]
    assert rules.unmeasured == [
        "Measure gemma first: no worker count for gemma yet: spark-otel probe --engine gemma=URL "
        "--streams 1,2,4,8",
        "Measure gemma first: no worker count for gemma yet",
    ]
    # The engines the rules name (gemma is in no rule), with the model each curve recorded.
    assert rules.engines == {
        "llama": EngineInfo(),
        "nemotron": EngineInfo(),
        "qwen": EngineInfo(model="qwen3.8-27b", url="http://127.0.0.1:8011"),
    }
    assert list(rules.engines) == ["llama", "nemotron", "qwen"]
    assert (rules.source, rules.ceiling_s, rules.version, rules.form) == ("store.sqlite", 900.0, 1, "by eval")
    assert (rules.history, rules.slowdown) == ([], {})
    assert rules.computed_at is not None
    assert rules.computed_at.tzinfo is UTC
    assert before // 1000 <= rules.computed_at.timestamp() * 1e6 <= after // 1000 + 1


def test_without_urls_or_curves_the_engines_are_named_bare() -> None:
    rules = rules_from_advice(_advice())
    assert rules.engines == {"llama": EngineInfo(), "nemotron": EngineInfo(), "qwen": EngineInfo()}
    assert rules.source is None


@pytest.mark.parametrize("by_eval", [True, False])
def test_the_written_file_reads_back_as_the_same_rules_without_kinds_or_empty_figures(by_eval: bool) -> None:
    rules = rules_from_advice(
        _advice(), [_curve("qwen", "qwen3.8-27b")], source="store.sqlite", by_eval=by_eval
    )
    bare = rules.cross_engine[0].model_copy(update={"figures": {}})  # as a hand-written rule has them
    rules = rules.model_copy(update={"cross_engine": [bare, *rules.cross_engine[1:]]})
    text = dump_rules(rules)
    assert text.startswith("# Queue rules for spark-otel's governor: spark_otel.govern(FILE)")
    assert "kind" not in text
    assert text.count("figures") == 4  # every rule's but the bare one's
    assert text.count("[limit.figures]") == 2
    assert text.count("[lane.figures]") == 1
    assert text.count("[cross_engine.figures]") == 1
    assert f"version = {1 if by_eval else 2}" in text
    assert ("while_ceiling_bound = true" in text) is not by_eval
    assert parse_rules(text, where="written") == rules


def test_writing_rules_without_the_cli_extra_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tomli_w", None)  # what an install without the extra gives
    with pytest.raises(ConfigError) as raised:
        dump_rules(rules_from_advice(_advice()))
    assert str(raised.value) == "writing a rules file needs the cli extra: pip install 'spark-otel[cli]'"
