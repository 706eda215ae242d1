"""One-line answers from hand-built records with known figures: concurrency bought, a neighbour's
cost, the rules; and what each says when the records cannot answer."""

from __future__ import annotations

from spark_otel.analysis.neighbour import neighbour_cost
from spark_otel.analysis.overview import overview
from spark_otel.model import Cell, LoadWindow
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.views.answers import answers, curve_answer, neighbour_answer, speedup_answers

S = 1_000_000_000
T0 = 1_790_000_000 * S


def _cell(eval_name: str, i: int, start_s: float, elapsed_s: float, tokens: int, workers: int) -> Cell:
    return Cell(
        uid=f"{eval_name}-{workers}-{i}",
        eval_name=eval_name,
        cell_id=f"c{i}",
        engine="qwen",
        start_unix_ns=T0 + int(start_s * S),
        end_unix_ns=T0 + int((start_s + elapsed_s) * S),
        prompt_tokens=400,
        completion_tokens=tokens,
        workers=workers,
    )


def _serial_and_batched() -> list[Cell]:
    """Eight cells one at a time at 10 tok/s (800 s), then the same eight four at a time at
    8 tok/s (two waves of 125 s: 250 s): 3.2x the wall for 20% slower cells."""
    serial = [_cell("golden", i, i * 100.0, 100.0, 1000, 1) for i in range(8)]
    start = 800.0 + 600.0  # an idle gap ends the serial run
    batched = [_cell("golden", i, start + (i // 4) * 125.0, 125.0, 1000, 4) for i in range(8)]
    return serial + batched


def test_an_eval_at_two_worker_counts_answers_what_concurrency_buys() -> None:
    [answer] = speedup_answers(overview(_serial_and_batched()))
    assert answer.measured
    assert answer.text == (
        "golden at 4 workers on qwen: 3.2x wall for 20% slower cells "
        "(n=8 cells, against 8 at 1 worker; the same cells)"
    )


def test_an_eval_at_one_worker_count_says_what_would_measure_it() -> None:
    serial = [_cell("golden", i, i * 100.0, 100.0, 1000, 1) for i in range(8)]
    [answer] = speedup_answers(overview(serial))
    assert not answer.measured
    assert answer.text == (
        "what more workers buy is not measured: no eval ran at two worker counts (golden); "
        "run one at 1 and at N workers"
    )


def _load(start_s: float, end_s: float) -> LoadWindow:
    return LoadWindow(
        uid="load", name="nemotron load", kind="load", engine="nemotron",
        start_unix_ns=T0 + int(start_s * S), end_unix_ns=T0 + int(end_s * S), streams=4,
    )  # fmt: skip


def test_the_costliest_neighbour_is_the_answer_with_its_n_and_both_rates() -> None:
    cells = [_cell("serial", i, i * 100.0, 100.0, 1000, 1) for i in range(5)]
    cells += [_cell("serial", 5 + i, 500.0 + i * 100.0, 100.0, 450, 1) for i in range(3)]
    report = neighbour_cost("serial", cells, [_load(500.0, 800.0)])
    answer = neighbour_answer(report, threshold=0.2)
    assert answer is not None
    assert answer.measured
    assert answer.text == (
        "nemotron load on another engine cost serial 55% per cell, past the 20% threshold: "
        "4.50 against 10.00 tok/s alone (n=3 cells beside it, 5 alone)"
    )
    below = neighbour_answer(report, threshold=0.6)
    assert below is not None
    assert "past the" not in below.text


def test_a_neighbour_answer_without_a_baseline_says_why() -> None:
    cells = [_cell("serial", i, i * 100.0, 100.0, 450, 1) for i in range(3)]
    answer = neighbour_answer(neighbour_cost("serial", cells, [_load(0.0, 300.0)]), threshold=0.2)
    assert answer is not None
    assert not answer.measured
    assert answer.text.startswith(
        "serial: no baseline: every one of the 3 cells of serial ran beside other load"
    )
    alone = [_cell("serial", i, i * 100.0, 100.0, 1000, 1) for i in range(3)]
    assert neighbour_answer(neighbour_cost("serial", alone, []), threshold=0.2) is None  # nothing to price


def _curve(*levels: tuple[int, float]) -> RateCurve:
    points = [CurvePoint(streams=n, per_stream_rate=r, aggregate_rate=n * r, n=n) for n, r in levels]
    return RateCurve(engine="e", points=points, run="p", measured_unix_ns=T0)


def test_a_curve_answers_what_the_most_streams_bought_and_where_the_lane_stops() -> None:
    rising = curve_answer(_curve((1, 11.1), (8, 10.1)))
    assert rising.measured
    assert rising.text == (
        "e: 8 streams bought 7.3x the aggregate of one stream for 9% per stream, still rising at the "
        "most measured (probe 'p' of 2026-09-21 14:13 UTC, idle, at 1, 8 streams)"
    )
    falls = curve_answer(_curve((1, 82.0), (8, 32.75), (16, 11.3125)))
    assert falls.text.startswith(
        "e: 8 streams bought 3.2x the aggregate of one stream for 60% per stream, then no more: "
        "aggregate peaks at 262 tok/s at 8 streams and falls to 181 at 16"
    )
    single = curve_answer(_curve((4, 9.8)))
    assert not single.measured
    assert single.text.startswith("e: one level measured, a curve needs two (probe 'p'")
    unanchored = curve_answer(_curve((2, 10.0), (4, 9.0)))
    assert not unanchored.measured
    assert unanchored.text.startswith("e: no single stream measured to compare the levels with")


def test_answers_come_curves_first_then_workers_then_neighbours_then_the_rules() -> None:
    found = overview(_serial_and_batched())
    topics = [a.topic for a in answers(found)]
    order = ["curve", "concurrency", "neighbour", "rules"]
    assert topics == sorted(topics, key=order.index)
    assert {"curve", "concurrency", "rules"} <= set(topics)
    assert found.advice is not None
    [rules] = [a for a in answers(found) if a.topic == "rules"]
    measure = sum(1 for r in found.advice.rules if r.kind == "measure")
    firm = len(found.advice.rules) - measure
    assert rules.text.startswith(f"{firm} queue rule")
    verb = "says" if measure == 1 else "say"
    assert (f"{measure} {verb} what to measure first" in rules.text) == bool(measure)
