"""The advisor: classes, the timeout/speedup model, and the computed queue rules."""

from __future__ import annotations

import json

import pytest
from tests.support.article import (
    D_EVAL,
    NEMOTRON_CURVE,
    QWEN_CURVE,
    S,
    appendix_c_cells,
    appendix_d_cells,
    appendix_d_loads,
)

from spark_otel.analysis import (
    AdvisorConfig,
    CellClass,
    CurvePoint,
    RateCurve,
    advise,
    classify,
    fit_prefill_contention,
    neighbour_cost,
)
from spark_otel.model import Cell, CellStatus
from spark_otel.views.rules import rule_evidence, rule_text

CURVE = RateCurve(
    engine="q",
    points=[
        CurvePoint(streams=1, per_stream_rate=10, aggregate_rate=10),
        CurvePoint(streams=2, per_stream_rate=9, aggregate_rate=18),
        CurvePoint(streams=4, per_stream_rate=6, aggregate_rate=24),
        CurvePoint(streams=8, per_stream_rate=2, aggregate_rate=16),
    ],
)


def serial_cells(
    outputs: list[int], *, rate: float = 10.0, prompt: int = 100, eval_name: str = "g"
) -> list[Cell]:
    cells, t = [], 0
    for k, tokens in enumerate(outputs):
        elapsed = round(tokens / rate * S)
        cells.append(
            Cell(
                uid=f"{eval_name}{k}",
                eval_name=eval_name,
                cell_id=f"{eval_name}{k}",
                engine="q",
                start_unix_ns=t,
                end_unix_ns=t + elapsed,
                prompt_tokens=prompt,
                completion_tokens=tokens,
                workers=1,
            )
        )
        t += elapsed + S
    return cells


def test_classify_by_token_counts() -> None:
    config = AdvisorConfig()

    def c(prompt: int | None, out: int | None, status: CellStatus = CellStatus.OK) -> Cell:
        return Cell(
            uid="x",
            eval_name="e",
            cell_id="x",
            start_unix_ns=0,
            end_unix_ns=S,
            prompt_tokens=prompt,
            completion_tokens=out,
            status=status,
        )

    assert classify(c(9_857, 5_885), config) is CellClass.GENERATION_HEAVY  # Appendix C B #265
    assert classify(c(16_262, 300), config) is CellClass.PROMPT_HEAVY  # a Nemotron card cell, 98% prompt
    assert classify(c(42_000, 9_000), config) is CellClass.LONG_CONTEXT  # F #88, 40K to 44K prompts
    assert classify(c(42_000, None, CellStatus.DEADLINE), config) is CellClass.LONG_CONTEXT
    assert classify(c(5_000, None, CellStatus.DEADLINE), config) is None  # output unknown
    assert classify(c(900, 100), AdvisorConfig(prompt_heavy_fraction=0.95)) is CellClass.GENERATION_HEAVY
    assert classify(c(900, 100), config) is CellClass.PROMPT_HEAVY


def test_fit_prefill_contention_from_the_article_card_cells() -> None:
    # Appendix C, Nemotron card reviewer: per-cell mean 10.1 s at 1 worker, 21.7 at 4, 35.5 at 8.
    c = fit_prefill_contention({1: [10.1], 4: [21.7], 8: [35.5]})
    expected = ((21.7 / 10.1 - 1) * 3 + (35.5 / 10.1 - 1) * 7) / (3**2 + 7**2)
    assert c == pytest.approx(expected)
    assert c == pytest.approx(0.363, abs=0.001)
    assert fit_prefill_contention({4: [21.7], 8: [35.5]}) is None
    assert fit_prefill_contention({1: [10.1]}) is None


def test_advisor_picks_the_best_speedup_that_adds_no_timeouts() -> None:
    # Six 1,000-token cells at 10 tok/s (100 s serially) under a 300 s ceiling (270 s usable).
    advice = advise(serial_cells([1000] * 6), [CURVE], config=AdvisorConfig(ceiling_s=300))
    (a,) = advice.classes
    by_n = {c.workers: c for c in a.candidates}
    # Aggregate peaks at 4 streams, so 8 is never a candidate.
    assert sorted(by_n) == [1, 2, 4]
    assert by_n[1].wall_s == pytest.approx(600)
    assert by_n[2].wall_s == pytest.approx(6 * (1000 / 9) / 2)
    assert by_n[4].wall_s == pytest.approx(6 * (1000 / 6) / 4)
    assert by_n[4].speedup == pytest.approx(600 / 250)
    assert a.recommended_workers == 4
    assert a.timeout_fraction == 0.0
    assert not a.ceiling_bound


def test_advisor_backs_off_when_more_workers_would_push_a_cell_past_the_ceiling() -> None:
    # A 1,700-token cell: 170 s alone, 283 s at 4 streams (> 270 s usable of 300).
    advice = advise(serial_cells([1000] * 6 + [1700]), [CURVE], config=AdvisorConfig(ceiling_s=300))
    (a,) = advice.classes
    by_n = {c.workers: c for c in a.candidates}
    assert by_n[4].timeout_fraction == pytest.approx(1 / 7)
    assert by_n[2].timeout_fraction == 0.0
    assert a.recommended_workers == 2
    assert a.speedup == pytest.approx(by_n[1].wall_s / by_n[2].wall_s)
    rule = next(r for r in advice.rules if r.kind == "batch")
    assert rule.workers == 2
    assert "batch to 2" in rule_text(rule)
    assert "4 would predict 14% timeouts" in rule_evidence(rule)


def test_advisor_prefers_fewer_workers_when_speedups_tie() -> None:
    # Two cells: at 2 and 4 workers the wall is the longest cell either way.
    curve = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=10, aggregate_rate=10),
            CurvePoint(streams=2, per_stream_rate=10, aggregate_rate=20),
            CurvePoint(streams=4, per_stream_rate=10, aggregate_rate=40),
        ],
    )
    (a,) = advise(serial_cells([1000, 1000]), [curve]).classes
    assert a.recommended_workers == 2


def test_advisor_reproduces_the_article_rule_for_the_thinking_reviewer() -> None:
    advice = advise(appendix_c_cells(), [QWEN_CURVE, NEMOTRON_CURVE])
    (a,) = advice.classes
    assert a.cell_class is CellClass.GENERATION_HEAVY
    # Act 3 / decision: generation-heavy Qwen3.8 cells batch to eight; the article measured 4.7x.
    assert a.recommended_workers == 8
    assert a.speedup == pytest.approx(4.7, abs=0.3)
    # 16 streams would push the longest cells into the ceiling's last 10%.
    sixteen = next(c for c in a.candidates if c.workers == 16)
    assert sixteen.timeout_fraction > a.timeout_fraction


def test_advisor_caps_each_lane_where_the_aggregate_peaks() -> None:
    advice = advise(appendix_c_cells(), [QWEN_CURVE, NEMOTRON_CURVE])
    caps = {r.engine: r for r in advice.rules if r.kind == "cap"}
    assert set(caps) == {"nemotron"}
    assert caps["nemotron"].workers == 8  # Act 2: 262 tok/s at 8, 181 at 16
    assert "262" in rule_evidence(caps["nemotron"])
    assert "181" in rule_evidence(caps["nemotron"])
    # Qwen3.8 still gained at 32 streams, the most measured: no cap, a reason to measure higher.
    (higher,) = [r for r in advice.rules if r.kind == "measure" and r.engine == "qwen"]
    assert "still rising at 32 streams" in rule_evidence(higher)
    assert higher.command == "spark-otel probe --engine qwen=URL --streams 32,64,128"


def _card_cells() -> list[Cell]:
    """Nemotron card reviewer (Appendix C): 8 cells at 1, 4 and 8 workers, 200 output tokens each,
    mean elapsed 10.1, 21.7 and 35.5 s."""
    cells, t = [], 0
    for workers, elapsed_s in ((1, 10.1), (4, 21.7), (8, 35.5)):
        for wave in range(8 // workers):
            for k in range(workers):
                uid = f"card{workers}-{wave}-{k}"
                cells.append(
                    Cell(
                        uid=uid,
                        eval_name="cards",
                        cell_id=f"pr{wave * workers + k}",
                        engine="nemotron",
                        start_unix_ns=t,
                        end_unix_ns=t + round(elapsed_s * S),
                        prompt_tokens=10_000,
                        completion_tokens=200,
                        workers=workers,
                    )
                )
            t += round(elapsed_s * S) + S
        t += 100 * S
    return cells


def test_prompt_heavy_cells_cap_near_two_times() -> None:
    advice = advise(_card_cells(), [NEMOTRON_CURVE])
    (a,) = advice.classes
    assert a.cell_class is CellClass.PROMPT_HEAVY
    assert a.prefill_contention_fitted
    assert a.prefill_contention == pytest.approx(0.363, abs=0.001)
    # "Eight workers bought 1.9 times ... Nemotron batching is worth about 2x on prompt-heavy work."
    assert 1.5 <= a.speedup <= 2.5
    by_n = {c.workers: c for c in a.candidates}
    assert by_n[8].speedup < 2.5
    (rule,) = [r for r in advice.rules if r.kind == "batch"]
    assert f"prefill-bound, the gain caps near {a.speedup:.1f}x" in rule_text(rule)


def test_cross_engine_load_past_the_threshold_is_flagged() -> None:
    probes, others = appendix_d_loads()
    cells = appendix_d_cells() + others
    report = neighbour_cost(D_EVAL, cells, probes)
    advice = advise(cells, [QWEN_CURVE, NEMOTRON_CURVE], neighbour=[report])
    flags = [r for r in advice.rules if r.kind == "cross-engine"]
    assert len(flags) == 1
    # "The Nemotron lane yields while any Qwen3.8 eval with a per-cell ceiling is in flight":
    # nemotron never ran at one worker beside it, so nothing says one cell would be harmless.
    assert rule_text(flags[0]) == f"nemotron yields while {D_EVAL} runs on qwen"
    assert (flags[0].engine, flags[0].while_engine, flags[0].workers) == ("nemotron", "qwen", 0)
    assert "5.25 tok/s (n=1) against its 11.51 baseline (n=113)" in rule_evidence(flags[0])
    assert "cost 54%" in rule_evidence(flags[0])
    assert "3 of 4 cells in the window timed out" in rule_evidence(flags[0])
    assert flags[0].figures.neighbour_cost == pytest.approx(0.54, abs=0.01)
    # Same-engine loads (the probes cost 17 to 27%) are batching, not cross-engine neighbours.
    none = advise(cells, [QWEN_CURVE], neighbour=[report], config=AdvisorConfig(threshold=0.6))
    assert not [r for r in none.rules if r.kind == "cross-engine"]


def test_gauge_rule_needs_a_pinned_gauge_and_varying_token_rates() -> None:
    cells = serial_cells([1000] * 3)
    pinned = [96.0, 96.2, 95.9, 96.1, 96.0]
    advice = advise(cells, [CURVE], gpu_utilization=pinned, token_rates=[11.1, 80.5, 184.4])
    (gauge,) = [r for r in advice.rules if r.kind == "gauge"]
    assert rule_text(gauge) == "Read load from token counts, never from the GPU utilization gauge"
    assert "utilization median 96%" in rule_evidence(gauge)
    assert "11.1 to 184.4 tok/s (16.6x)" in rule_evidence(gauge)
    moving = advise(cells, [CURVE], gpu_utilization=[0.2, 0.5, 0.9, 0.95], token_rates=[11.1, 184.4])
    assert not [r for r in moving.rules if r.kind == "gauge"]
    flat_rates = advise(cells, [CURVE], gpu_utilization=pinned, token_rates=[11.0, 12.0])
    assert not [r for r in flat_rates.rules if r.kind == "gauge"]
    assert not [r for r in advise(cells, [CURVE]).rules if r.kind == "gauge"]


def test_an_engine_without_a_curve_gets_a_measure_first_rule() -> None:
    advice = advise(serial_cells([1000]), [], engine_urls={"q": "http://127.0.0.1:8011"})
    assert advice.classes == []
    (rule,) = advice.rules
    assert rule.kind == "measure"
    assert "no rate curve" in rule_evidence(rule)
    assert rule.command == "spark-otel probe --engine q=http://127.0.0.1:8011 --streams 1,2,4,8"
    assert rule.command in rule_evidence(rule)


def test_timeouts_join_their_eval_class_and_count_at_every_depth() -> None:
    cells = serial_cells([1000] * 3)
    last = cells[-1].end_unix_ns + S
    cells.append(
        Cell(
            uid="t",
            eval_name="g",
            cell_id="t",
            engine="q",
            start_unix_ns=last,
            end_unix_ns=last + 300 * S,
            prompt_tokens=100,
            status=CellStatus.DEADLINE,
            workers=1,
        )
    )
    (a,) = advise(cells, [CURVE], config=AdvisorConfig(ceiling_s=300)).classes
    assert a.n_cells == 4
    assert a.historical_timeouts == 1
    assert all(c.timeout_fraction == pytest.approx(0.25) for c in a.candidates)


def test_advice_is_json_serializable() -> None:
    advice = advise(appendix_c_cells(), [QWEN_CURVE])
    dumped = json.loads(json.dumps(advice.model_dump(mode="json")))
    assert dumped["config"]["ceiling_s"] == 1800.0
    assert dumped["classes"][0]["cell_class"] == "generation-heavy"


def _serial_beside_two_nemotron_runs() -> list[Cell]:
    """Serial cells at 10 tok/s on q, slowed to 4 and 5 tok/s during two separate nemotron runs."""
    cells = []
    for i in range(30):
        t = 100 * i
        rate = 4.0 if 1000 <= t < 1300 else 5.0 if 2000 <= t < 2300 else 10.0
        cells.append(
            Cell(
                uid=f"s{i}",
                eval_name="g",
                cell_id=f"s{i}",
                engine="q",
                start_unix_ns=t * S,
                end_unix_ns=(t + 100) * S,
                prompt_tokens=100,
                completion_tokens=int(rate * 100),
                workers=1,
            )
        )
    for start in (1000, 2000):
        cells += [
            Cell(
                uid=f"n{start}-{k}",
                eval_name="cards",
                cell_id=f"n{k}",
                engine="nemotron",
                start_unix_ns=start * S,
                end_unix_ns=(start + 300) * S,
                prompt_tokens=10_000,
                completion_tokens=200,
                workers=4,
            )
            for k in range(4)
        ]
    return cells


def test_cross_engine_rules_are_one_per_engine_and_eval() -> None:
    cells = _serial_beside_two_nemotron_runs()
    report = neighbour_cost("g", cells)
    costly = [w for w in report.windows if w.cost is not None and w.cost > 0.2]
    assert len(costly) == 2  # the two nemotron runs, 60% and 50%
    # The same report twice (as two worker-count reports of one eval would be) changes nothing.
    advice = advise(cells, [CURVE], neighbour=[report, report])
    (flag,) = [r for r in advice.rules if r.kind == "cross-engine"]
    assert rule_text(flag) == "nemotron yields while g runs on q"
    assert "cost 60%" in rule_evidence(flag)  # the costliest window is the evidence
    assert "1 more window on nemotron past the threshold" in rule_evidence(flag)


def test_advice_narrowed_to_an_eval_or_engine_still_sees_all_the_load() -> None:
    cells = _serial_beside_two_nemotron_runs()
    report = neighbour_cost("g", cells)
    only_cards = advise(cells, [CURVE, NEMOTRON_CURVE], neighbour=[report], eval_name="cards")
    assert {a.eval_name for a in only_cards.classes} == {"cards"}
    assert not [r for r in only_cards.rules if r.kind == "cross-engine"]
    only_q = advise(cells, [CURVE, NEMOTRON_CURVE], neighbour=[report], engine="q")
    assert {a.engine for a in only_q.classes} == {"q"}
    assert {r.engine for r in only_q.rules if r.kind == "cap"} == {"q"}
    # The rule names q as the eval's engine, so it stays.
    assert [r.engine for r in only_q.rules if r.kind == "cross-engine"] == ["nemotron"]
    # Cards ran four at a time: narrowed or not, its cells read the same levels.
    whole = advise(cells, [CURVE, NEMOTRON_CURVE])
    cards = next(a for a in whole.classes if a.eval_name == "cards")
    assert cards == only_cards.classes[0]
