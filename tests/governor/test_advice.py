"""The advisor's advice as a rules file: which rules become enforceable rules, with exactly the
evidence, figures, times, models and URLs they came with, and the TOML `dump_rules` writes."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest

from spark_otel import ConfigError, _clock
from spark_otel.analysis.advisor.advice_model import (
    Advice,
    AdvisorConfig,
    CellClass,
    Evidence,
    QueueRule,
    RuleKind,
)
from spark_otel.analysis.advisor.rules_file import dump_rules, rules_from_advice
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.records.rules_file import CrossEngineRule, EngineInfo, LaneRule, LimitRule, parse_rules

MEASURED_NS = 1_790_000_000_500_000_000
MEASURED = datetime(2026, 9, 21, 14, 13, 20, 500_000, tzinfo=UTC)
FIGURES = Evidence(n_cells=40, levels=[1, 2, 4, 8], speedup=5.5, speedup_interval=(4.1, 6.0))


def _rule(kind: RuleKind, **fields: object) -> QueueRule:
    return QueueRule.model_validate(
        {"rule": f"a {kind} rule", "evidence": f"{kind} evidence", "kind": kind, **fields}
    )


def _advice() -> Advice:
    figures = FIGURES.model_copy(update={"measured_unix_ns": MEASURED_NS})
    rules = [
        _rule(
            RuleKind.BATCH,
            engine="qwen",
            eval_name="review",
            cell_class=CellClass.GENERATION_HEAVY,
            workers=8,
            figures=figures,
        ),
        _rule(RuleKind.BATCH, engine="qwen", eval_name="finder", workers=2),  # no class: the eval's cells
        _rule(RuleKind.BATCH, engine="qwen", eval_name="no-workers"),  # nothing to enforce
        _rule(RuleKind.CAP, engine="nemotron", workers=8, figures=figures),
        _rule(RuleKind.CAP, workers=8),  # no engine: nothing to enforce
        _rule(RuleKind.GAUGE, engine="qwen", workers=3),  # gauge advice is not a queue rule
        _rule(RuleKind.CROSS_ENGINE, engine="nemotron", while_engine="qwen", workers=0),
        _rule(RuleKind.CROSS_ENGINE, engine="llama", while_engine="qwen", eval_name="finder", workers=1),
        _rule(RuleKind.CROSS_ENGINE, engine="nemotron", workers=0),  # no while_engine
        _rule(RuleKind.CROSS_ENGINE, engine="nemotron", while_engine="qwen"),  # no limit
        _rule(RuleKind.MEASURE, command="spark-otel probe --engine gemma=URL --streams 1,2,4,8"),
        _rule(RuleKind.MEASURE),
    ]
    return Advice(config=AdvisorConfig(ceiling_s=900.0), classes=[], rules=rules)


def _curve(engine: str, model: str | None) -> RateCurve:
    return RateCurve(
        engine=engine, model=model, points=[CurvePoint(streams=1, per_stream_rate=30.0, aggregate_rate=30.0)]
    )


def test_only_enforceable_rules_become_rules_with_their_evidence_and_engines() -> None:
    before = _clock.real_wall_ns()
    rules = rules_from_advice(
        _advice(),
        [_curve("qwen", "qwen3.8-27b"), _curve("nemotron", None), _curve("gemma", "gemma-4")],
        engine_urls={"qwen": "http://127.0.0.1:8011", "gemma": "http://127.0.0.1:8013"},
        source="store.sqlite",
    )
    after = _clock.real_wall_ns()
    figures = {"n_cells": 40, "levels": [1, 2, 4, 8], "measured_unix_ns": MEASURED_NS, "speedup": 5.5}
    figures["speedup_interval"] = [4.1, 6.0]  # JSON's list, as a TOML array reads back
    assert rules.limit == [
        LimitRule(
            engine="qwen",
            eval="review",
            cell_class="generation-heavy",
            cells=8,
            evidence="batch evidence",
            measured_at=MEASURED,
            figures=figures,
        ),
        LimitRule(engine="qwen", eval="finder", cells=2, evidence="batch evidence"),
    ]
    assert rules.lane == [
        LaneRule(engine="nemotron", cells=8, evidence="cap evidence", measured_at=MEASURED, figures=figures)
    ]
    assert rules.cross_engine == [
        CrossEngineRule(engine="nemotron", cells=0, while_engine="qwen", evidence="cross-engine evidence"),
        CrossEngineRule(
            engine="llama",
            cells=1,
            while_engine="qwen",
            while_eval="finder",
            evidence="cross-engine evidence",
        ),
    ]
    assert rules.unmeasured == [
        "a measure rule: spark-otel probe --engine gemma=URL --streams 1,2,4,8",
        "a measure rule",
    ]
    # The engines the rules name (gemma is in no rule), with the model each curve recorded.
    assert rules.engines == {
        "llama": EngineInfo(),
        "nemotron": EngineInfo(),
        "qwen": EngineInfo(model="qwen3.8-27b", url="http://127.0.0.1:8011"),
    }
    assert list(rules.engines) == ["llama", "nemotron", "qwen"]
    assert (rules.source, rules.ceiling_s) == ("store.sqlite", 900.0)
    assert rules.computed_at is not None
    assert rules.computed_at.tzinfo is UTC
    assert before // 1000 <= rules.computed_at.timestamp() * 1e6 <= after // 1000 + 1


def test_without_urls_or_curves_the_engines_are_named_bare() -> None:
    rules = rules_from_advice(_advice())
    assert rules.engines == {"llama": EngineInfo(), "nemotron": EngineInfo(), "qwen": EngineInfo()}
    assert rules.source is None


def test_the_written_file_reads_back_as_the_same_rules_without_kinds_or_empty_figures() -> None:
    rules = rules_from_advice(_advice(), [_curve("qwen", "qwen3.8-27b")], source="store.sqlite")
    text = dump_rules(rules)
    assert text.startswith("# Queue rules for spark-otel's governor: spark_otel.govern(FILE)")
    assert "kind" not in text
    assert text.count("figures") == 2  # the review limit's and the nemotron lane's; the others have none
    assert "[lane.figures]" in text
    assert "[limit.figures]" in text
    assert parse_rules(text, where="written") == rules


def test_writing_rules_without_the_cli_extra_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tomli_w", None)  # what an install without the extra gives
    with pytest.raises(ConfigError) as raised:
        dump_rules(rules_from_advice(_advice()))
    assert str(raised.value) == "writing a rules file needs the cli extra: pip install 'spark-otel[cli]'"
