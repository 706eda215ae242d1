"""Which rules `advise` writes for which engines and evals, on plain cells: what it narrows to,
what it says for an engine it cannot advise, and the class a cell without an output joins."""

from __future__ import annotations

from tests.support.neighbour_reports import neighbour_report, window_cost

from spark_otel.analysis.advisor import AdvisorConfig, CellClass, QueueRule, RuleKind, advise
from spark_otel.model import Cell, CellStatus
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.views.rules import rule_evidence, rule_text

S = 1_000_000_000


def _curve(engine: str) -> RateCurve:
    return RateCurve(
        engine=engine,
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
            CurvePoint(streams=2, per_stream_rate=9.0, aggregate_rate=18.0),
        ],
    )


def _cells(engine: str, eval_name: str = "g", *, n: int = 3, prompt: int = 100, t0: int = 0) -> list[Cell]:
    return [
        Cell(
            uid=f"{engine}-{eval_name}-{k}",
            eval_name=eval_name,
            cell_id=f"c{k}",
            engine=engine,
            start_unix_ns=(t0 + 200 * k) * S,
            end_unix_ns=(t0 + 200 * k + 100) * S,
            prompt_tokens=prompt,
            completion_tokens=1_000,
            workers=1,
        )
        for k in range(n)
    ]


def _failed(engine: str, n: int) -> list[Cell]:
    return [
        Cell(
            uid=f"{engine}-f{k}",
            eval_name="broken",
            cell_id=f"f{k}",
            engine=engine,
            start_unix_ns=(5_000 + 10 * k) * S,
            end_unix_ns=(5_000 + 10 * k + 5) * S,
            status=CellStatus.ERROR,
        )
        for k in range(n)
    ]


def _rules(advice: object, kind: RuleKind) -> list[tuple[str | None, str | None]]:
    return [(r.engine, r.eval_name) for r in advice.rules if r.kind is kind]  # type: ignore[attr-defined]


def _measure_first(advice: object) -> list[QueueRule]:
    """The rules saying what to measure before a worker count (not a lane's "measure past")."""
    return [r for r in advice.rules if rule_text(r).startswith("Measure ")]


def test_an_engine_whose_cells_say_nothing_about_length_gets_one_measure_first_rule() -> None:
    advice = advise(_failed("n", 4) + _cells("q"), [_curve("q")], engine_urls={"n": "http://127.0.0.1:8012"})
    (measure,) = _measure_first(advice)
    assert (measure.engine, measure.eval_name, measure.figures.n_cells) == ("n", None, 4)
    assert rule_text(measure) == "Measure n first: no worker count for n yet"
    assert rule_evidence(measure) == (
        "4 cells recorded, no rate curve; run: spark-otel probe --engine n=http://127.0.0.1:8012 "
        "--streams 1,2,4,8, or run the eval at 1 and N workers"
    )
    # The engine after it, which has a curve, is still advised.
    assert _rules(advice, RuleKind.BATCH) == [("q", "g")]


def test_each_eval_on_an_engine_without_a_curve_gets_its_own_measure_first_rule() -> None:
    advice = advise(_cells("a", "g") + _cells("a", "h", n=2, t0=10_000) + _cells("q"), [_curve("q")])
    measures = [(r.engine, r.eval_name, r.figures.n_cells) for r in _measure_first(advice)]
    assert measures == [("a", "g", 3), ("a", "h", 2)]
    assert _rules(advice, RuleKind.BATCH) == [("q", "g")]


def test_narrowed_to_an_engine_or_eval_the_others_get_no_rules() -> None:
    cells = _cells("a") + _cells("q") + _cells("q", "h", t0=10_000)
    curves = [_curve("a"), _curve("q")]
    by_engine = advise(cells, curves, engine="q")
    assert _rules(by_engine, RuleKind.BATCH) == [("q", "g"), ("q", "h")]
    assert _rules(by_engine, RuleKind.MEASURE) == [("q", None)]  # its lane, still rising
    by_eval = advise(cells, curves, eval_name="h")
    assert _rules(by_eval, RuleKind.BATCH) == [("q", "h")]  # a has no cells of h
    assert advise(_cells("a"), [], engine="q").rules == []


def test_the_cross_engine_rules_follow_the_engine_advised() -> None:
    report = neighbour_report([window_cost("w", 0.6)])  # g on q, slowed by nemotron
    cells = _cells("q")
    assert _rules(advise(cells, [_curve("q")], neighbour=[report]), RuleKind.CROSS_ENGINE) == [
        ("nemotron", "g")
    ]
    assert _rules(advise(cells, [_curve("q")], neighbour=[report], engine="q"), RuleKind.CROSS_ENGINE) == [
        ("nemotron", "g")
    ]
    assert (
        _rules(advise(cells, [_curve("q")], neighbour=[report], engine="other"), RuleKind.CROSS_ENGINE) == []
    )


def test_a_timeout_joins_its_evals_dominant_class_and_a_class_of_timeouts_is_generation_heavy() -> None:
    heavy = _cells("q", prompt=20_000)  # 95% prompt: prompt-heavy
    cut = Cell(
        uid="cut",
        eval_name="g",
        cell_id="cut",
        engine="q",
        start_unix_ns=10_000 * S,
        end_unix_ns=11_800 * S,
        status=CellStatus.DEADLINE,
        workers=1,
    )
    (a,) = advise([*heavy, cut], [_curve("q")], config=AdvisorConfig(ceiling_s=1800)).classes
    assert (a.cell_class, a.n_cells, a.historical_timeouts) == (CellClass.PROMPT_HEAVY, 4, 1)
    (only,) = advise([cut], [_curve("q")]).classes
    assert (only.cell_class, only.n_cells) == (CellClass.GENERATION_HEAVY, 1)


def test_the_config_given_sets_each_cells_class() -> None:
    cells = _cells("q", prompt=9_000)  # 90% prompt
    (default,) = advise(cells, [_curve("q")]).classes
    (long,) = advise(cells, [_curve("q")], config=AdvisorConfig(long_context_prompt_tokens=9_000)).classes
    assert (default.cell_class, long.cell_class) == (CellClass.PROMPT_HEAVY, CellClass.LONG_CONTEXT)


def test_a_zero_length_cell_counts_as_serial_load() -> None:
    instant = Cell(
        uid="z", eval_name="g", cell_id="z", engine="q", start_unix_ns=0, end_unix_ns=0, completion_tokens=5
    )
    advice = advise([*_cells("q"), instant], [_curve("q")])
    (a,) = advice.classes
    assert a.n_cells == 3  # no duration: no rate, so no length to learn from
