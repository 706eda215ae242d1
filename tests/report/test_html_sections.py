"""Each section of the HTML page, rendered from hand-built analysis results with known answers and
compared whole: the headers, notes and table rows, the warn cells (``class="num warn"``), the empty
notes and the embedded plots. A changed word, format, condition or column reads as a failure."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.queue_rules import cap_rule, measure_rule
from tests.support.report_content import T0, S, engine_concurrency, probe_curve, report_content, speedup_of

from spark_otel.analysis.advisor import Advice, AdvisorConfig, QueueRule
from spark_otel.analysis.concurrency import ConcurrencyReport, LevelSummary
from spark_otel.analysis.energy import EnergyReport, EvalEnergy
from spark_otel.analysis.neighbour import NeighbourReport, WindowCost
from spark_otel.analysis.outcomes import DeadlineOutcome
from spark_otel.analysis.stats import RateSummary, summarize
from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.report import html as page
from spark_otel.views.answers import Answer


def _advice(*rules: QueueRule, threshold: float = 0.2, ceiling_s: float = 1800.0) -> Advice:
    return Advice(
        config=AdvisorConfig(threshold=threshold, ceiling_s=ceiling_s), classes=[], rules=list(rules)
    )


CAP = cap_rule("qwen", 8, peak=40.0, after=30.0)
MEASURE = measure_rule("qwen", "<review>")
CAP_TEXT = "qwen lane at most 8 streams"
CAP_EVIDENCE = (
    "aggregate peaks at 40 tok/s at 8 streams and falls to 30 at 16 (probe, idle, at 1, 8, 16 streams)"
)
MEASURE_TEXT = "Measure qwen first: no worker count for <review> cells on qwen yet"
MEASURE_EVIDENCE = (
    "12 cells recorded, no rate curve; run: spark-otel probe --engine qwen=URL --streams 1,2,4,8, "
    "or run the eval at 1 and N workers"
)


def _window(name: str, kind: str, engine: str | None, same: bool | None, cells: int, **kw: Any) -> WindowCost:
    fields: dict[str, Any] = {
        "uid": f"w-{name}",
        "name": name,
        "kind": kind,
        "engine": engine,
        "streams": None,
        "start_unix_ns": T0,
        "end_unix_ns": T0 + 100 * S,
        "same_engine": same,
        "n_cells": cells,
        "timeouts": 0,
        "failures": 0,
        "rate": RateSummary(n=0),
        "min_rate": None,
        "max_rate": None,
        "cost": None,
    }
    fields.update(kw)
    return WindowCost.model_validate(fields)


def _neighbour(eval_name: str, windows: list[WindowCost], **kw: Any) -> NeighbourReport:
    fields: dict[str, Any] = {
        "eval_name": eval_name,
        "engine": "qwen",
        "workers": None,
        "min_overlap_fraction": 0.5,
        "n_cells": 10,
        "timeouts": 1,
        "failures": 2,
        "baseline": RateSummary(n=6, median=11.5, p10=10.25, p90=1234.5),
        "baseline_timeouts": 0,
        "windows": windows,
        "cells": [],
        "warnings": [],
    }
    fields.update(kw)
    return NeighbourReport.model_validate(fields)


_NEIGHBOUR_HEAD = (
    "<table><thead><tr><th>load elsewhere on the box</th><th>kind</th><th>engine</th>"
    '<th class="num">cells</th><th class="num">timeouts</th><th class="num">failed</th>'
    '<th class="num">median tok/s</th><th class="num">range tok/s</th>'
    '<th class="num">cost %</th></tr></thead>'
)


def test_the_neighbour_table_prices_each_touched_window_and_marks_a_cost_past_the_threshold() -> None:
    """One row per window a cell touched (the untouched one left out): the engine with "(same)" or a
    dash, the range only from two rates, the cost marked "!" only strictly past the advisor's 25%,
    a timeout as a warn cell; the baseline line in the eval's model time; the cost term explained
    with the threshold; both plots embedded with their names and alt texts."""
    windows = [
        _window(
            "probe 8 streams", "probe", "qwen", True, 3, timeouts=1,
            rate=RateSummary(n=2, median=5.25), min_rate=5.0, max_rate=5.5, cost=0.5,
        ),
        _window(
            "cards", "eval", "nemo", False, 2, failures=1,
            rate=RateSummary(n=1, median=8.75), min_rate=8.75, max_rate=8.75, cost=0.25,
        ),
        _window("untouched", "eval", "nemo", False, 0, cost=0.9),
        _window("other", "load", None, None, 1),
    ]  # fmt: skip
    content = report_content(
        neighbours=[_neighbour("review", windows, workers=2)],
        advice=_advice(threshold=0.25),
        time_scales={"review": 100.0, "cards": 10.0},
    )
    images = {"neighbour-review-2-workers.png": b"nb", "timeline-review-2-workers.png": b"tl"}
    assert page._neighbour_section(content, images, page._Glossary()) == (
        "<h2>Neighbour cost: what other load cost an eval</h2><h3>review at 2 workers</h3>"
        "<p>Baseline over 6 cells overlapping no other load: median 11.50 tok/s, p10 10.25 tok/s, "
        "p90 1,234.50 tok/s (model time, 100x). 1 of 10 cells timed out and 2 failed "
        "(listed, kept out of rates).</p>" + _NEIGHBOUR_HEAD + "<tbody>"
        '<tr><td>probe 8 streams</td><td>probe</td><td>qwen (same)</td><td class="num">3</td>'
        '<td class="num warn">1</td><td class="num">0</td><td class="num">5.25</td>'
        '<td class="num">5.00 to 5.50</td><td class="num">50 !</td></tr>'
        '<tr><td>cards</td><td>eval</td><td>nemo</td><td class="num">2</td><td class="num">0</td>'
        '<td class="num">1</td><td class="num">8.75</td><td class="num">-</td><td class="num">25</td></tr>'
        '<tr><td>other</td><td>load</td><td>-</td><td class="num">1</td><td class="num">0</td>'
        '<td class="num">0</td><td class="num">-</td><td class="num">-</td><td class="num">-</td></tr>'
        "</tbody></table>"
        '<ul class="terms"><li><b>cost %</b>: 1 - that median over the baseline median; '
        "! past the advisor&#x27;s threshold (25%)</li></ul>"
        '<img src="data:image/png;base64,bmI=" alt="neighbour cost" '
        'data-file="neighbour-review-2-workers.png">'
        '<img src="data:image/png;base64,dGw=" alt="review at 2 workers over time" '
        'data-file="timeline-review-2-workers.png">'
    )


def test_without_advice_a_cost_is_unmarked_and_an_eval_off_the_model_clock_reads_in_real_time() -> None:
    """No advisor, so no threshold: the cost shows bare and its term has no threshold clause; an
    eval missing from the time scales is real time (no label). A second eval's table does not
    explain the cost term again, and an eval none of whose cells overlapped a load says so."""
    priced = _window(
        "probe",
        "probe",
        "qwen",
        True,
        2,
        rate=RateSummary(n=2, median=9.0),
        min_rate=8.5,
        max_rate=9.5,
        cost=0.75,
    )
    alone = _window("probe", "probe", "qwen", True, 0)
    content = report_content(
        neighbours=[
            _neighbour("cards", [priced]),
            _neighbour("review", [alone], workers=1, timeouts=0, failures=0),
        ],
        time_scales={"other": 100.0},
    )
    assert page._neighbour_section(content, {}, page._Glossary()) == (
        "<h2>Neighbour cost: what other load cost an eval</h2><h3>cards</h3>"
        "<p>Baseline over 6 cells overlapping no other load: median 11.50 tok/s, p10 10.25 tok/s, "
        "p90 1,234.50 tok/s. 1 of 10 cells timed out and 2 failed (listed, kept out of rates).</p>"
        + _NEIGHBOUR_HEAD
        + '<tbody><tr><td>probe</td><td>probe</td><td>qwen (same)</td><td class="num">2</td>'
        '<td class="num">0</td><td class="num">0</td><td class="num">9.00</td>'
        '<td class="num">8.50 to 9.50</td>'
        '<td class="num">75</td></tr></tbody></table>'
        '<ul class="terms"><li><b>cost %</b>: 1 - that median over the baseline median</li></ul>'
        "<h3>review at 1 worker</h3>"
        "<p>Baseline over 6 cells overlapping no other load: median 11.50 tok/s, p10 10.25 tok/s, "
        "p90 1,234.50 tok/s. 0 of 10 cells timed out and 0 failed (listed, kept out of rates).</p>"
        '<p class="empty">No cell of this eval overlapped another load.</p>'
    )


def test_an_eval_without_a_baseline_says_why_and_shows_only_its_timeline() -> None:
    """No baseline median: the reason, capitalised, in place of the table; the timeline still
    drawn (the neighbour plot is not)."""
    result = _neighbour("review", [], baseline=RateSummary(n=0), n_cells=4)
    images = {"neighbour-review.png": b"nb", "timeline-review.png": b"tl"}
    assert page._neighbour_section(report_content(neighbours=[result]), images, page._Glossary()) == (
        "<h2>Neighbour cost: what other load cost an eval</h2><h3>review</h3>"
        '<p class="empty">No baseline: every one of the 4 cells of review ran beside other load, so nothing '
        "says what it decodes alone; run a few of its cells with the box otherwise idle.</p>"
        '<img src="data:image/png;base64,dGw=" alt="review over time" data-file="timeline-review.png">'
    )


def test_without_any_neighbour_report_the_section_says_no_eval_had_enough_cells() -> None:
    """The empty note, word for word, under the section's header."""
    assert page._neighbour_section(report_content(), {}, page._Glossary()) == (
        "<h2>Neighbour cost: what other load cost an eval</h2>"
        '<p class="empty">No eval with enough cells to compare against a baseline.</p>'
    )


def _energy() -> EnergyReport:
    one = EvalEnergy(
        eval_name="review", workers=2, n_cells=3, n_measured=3, output_tokens=12_345, energy_j=24_690.4,
        j_per_token=2.0, j_per_cell=8230.0, per_cell=summarize([8000.0, 8230.0, 8460.0]),
        start_unix_ns=T0, end_unix_ns=T0 + 3600 * S,
    )  # fmt: skip
    return EnergyReport(
        gpus=["0"], estimated=False, covered_start_unix_ns=T0, covered_end_unix_ns=T0 + S, box_j=123_456.7,
        attributed_j=0.0, partial_j=0.0, idle_j=2_000.4, evals=[one], cells=[], unmeasured=0, measure=None,
    )  # fmt: skip


def test_the_concurrency_section_draws_curves_tables_each_engines_levels_and_speedups() -> None:
    """A curve of two levels is drawn with its note; one of a single level is a note naming the
    probe that would measure more, at the engine's recorded address. Each engine's levels table
    marks a ceiling hit as a warn cell; the speedup table shows walls to the second, the speedup
    to a tenth with "(other cells)" when the runs differ, the per-cell cost in whole percent or a
    dash. Each term is explained once; the plot and the energy part close the section."""
    levels = [
        LevelSummary(
            level=1, n_cells=4, rate=RateSummary(n=4, median=11.5, p10=10.25, p90=12.75, mean=11.5),
            ceiling_hits=0, failures=0,
        ),
        LevelSummary(
            level=2, n_cells=2, rate=RateSummary(n=1, median=5.5, p10=5.5, p90=5.5, mean=5.5),
            ceiling_hits=1, failures=1,
        ),
    ]  # fmt: skip
    speedups = [
        speedup_of(2, 1234.4, 4567.8, 3.7, per_cell_cost=0.9),
        speedup_of(4, 900.6, 4567.8, 5.0, same_cells=False),
    ]
    content = report_content(
        curves=[probe_curve("qwen", 1, 2), probe_curve("nemo <x>", 1)],
        concurrency=ConcurrencyReport(eval_name=None, engines=[engine_concurrency("qwen", levels, speedups)]),
        energy=_energy(),
        n_cells=6,
        engine_urls={"nemo <x>": "http://n:1"},
    )
    images = {"curve-1-qwen.png": b"c1", "curve-2-nemo--x.png": b"c2", "concurrency.png": b"cc"}
    section = page._concurrency_section(content, images, page._Glossary())
    assert section == (
        "<h2>Concurrency: what more streams buy</h2>"
        '<img src="data:image/png;base64,YzE=" alt="qwen curve" data-file="curve-1-qwen.png">'
        '<p class="note">Curve of qwen: probe of 2026-03-04 05:06 UTC, idle, at 1, 2 streams.</p>'
        '<p class="empty">nemo &lt;x&gt;: one level measured (probe of 2026-03-04 05:06 UTC, idle, at 1 '
        "stream), "
        "so no curve is drawn; measure more levels with "
        "<code>spark-otel probe --engine nemo &lt;x&gt;=http://n:1 --streams 1,2,4,8</code>.</p>"
        "<h3>Recorded cells on qwen</h3>"
        '<table><thead><tr><th class="num">cells in flight</th><th class="num">cells</th>'
        '<th class="num">cells with a rate</th><th class="num">median tok/s</th>'
        '<th class="num">p10 tok/s</th>'
        '<th class="num">p90 tok/s</th><th class="num">mean tok/s</th><th class="num">ceiling hits</th>'
        '<th class="num">failed</th></tr></thead><tbody>'
        '<tr><td class="num">1</td><td class="num">4</td><td class="num">4</td><td class="num">11.50</td>'
        '<td class="num">10.25</td><td class="num">12.75</td><td class="num">11.50</td><td class="num">0</td>'
        '<td class="num">0</td></tr>'
        '<tr><td class="num">2</td><td class="num">2</td><td class="num">1</td><td class="num">5.50</td>'
        '<td class="num">5.50</td><td class="num">5.50</td><td class="num">5.50</td>'
        '<td class="num warn">1</td><td class="num">1</td></tr></tbody></table>'
        '<ul class="terms"><li><b>cells in flight</b>: time-weighted mean number of the engine&#x27;s cells '
        "running while a cell ran, itself included</li><li><b>ceiling hits</b>: cells cut off at their "
        "per-cell ceiling: counted, never rated</li></ul>"
        '<table><thead><tr><th>eval</th><th>workers</th><th class="num">wall s</th>'
        '<th class="num">serial wall s</th><th>wall speedup</th>'
        '<th class="num">per-cell cost %</th></tr></thead>'
        '<tbody><tr><td>review</td><td>1 -&gt; 2</td><td class="num">1,234</td><td class="num">4,568</td>'
        '<td>3.7x</td><td class="num">90</td></tr>'
        '<tr><td>review</td><td>1 -&gt; 4</td><td class="num">901</td><td class="num">4,568</td>'
        '<td>5.0x (other cells)</td><td class="num">-</td></tr></tbody></table>'
        '<ul class="terms"><li><b>wall speedup</b>: wall time per cell of the serial run over this run&#x27;s'
        "</li><li>"
        "<b>per-cell cost %</b>: 1 - the run&#x27;s median tok/s over the serial run&#x27;s: how much "
        "slower each cell ran</li></ul>"
        '<img src="data:image/png;base64,Y2M=" alt="per-cell rate against cells in flight" '
        'data-file="concurrency.png">' + page._energy_part(content, page._Glossary())
    )
    assert "<h3>Energy on the box (GPU 0, energy counter)" in section  # the energy part is there to close it


def test_a_model_clock_labels_the_engines_title_and_its_wall_columns() -> None:
    """Cells recorded at 100x: the engine's title says model time, the speedup walls "model s"."""
    rate = RateSummary(n=1, median=5.0, p10=5.0, p90=5.0, mean=5.0)
    levels = [LevelSummary(level=1, n_cells=1, rate=rate, ceiling_hits=0, failures=0)]
    engine = engine_concurrency("qwen", levels, [speedup_of(2, 10.0, 20.0, 2.0, per_cell_cost=0.0)])
    content = report_content(
        concurrency=ConcurrencyReport(eval_name="review", engines=[engine]), scales=[100.0]
    )
    section = page._concurrency_section(content, {}, page._Glossary())
    assert "<h3>Recorded cells on qwen (model time, 100x)</h3>" in section
    assert (
        '<table><thead><tr><th>eval</th><th>workers</th><th class="num">wall model s</th>'
        '<th class="num">serial wall model s</th><th class="num">wall speedup</th>'
        '<th class="num">per-cell cost %</th></tr></thead><tbody><tr><td>review</td><td>1 -&gt; 2</td>'
        '<td class="num">10</td><td class="num">20</td><td class="num">2.0x</td><td class="num">0</td></tr>'
        "</tbody></table>"
    ) in section


def test_without_probes_curves_or_cells_the_concurrency_section_says_so() -> None:
    """Nothing to show: the header and the empty note, and nothing else."""
    assert page._concurrency_section(report_content(), {"concurrency.png": b"cc"}, page._Glossary()) == (
        '<h2>Concurrency: what more streams buy</h2><p class="empty">No probe runs or cells recorded.</p>'
    )


def _outcome(eval_name: str, workers: int | None, ok: int, deadline: int, **kw: Any) -> DeadlineOutcome:
    fields: dict[str, Any] = {
        "eval_name": eval_name,
        "workers": workers,
        "cells": ok + deadline + 1,
        "statuses": {"ok": ok, "error": 1, "deadline": deadline, "length_cap": 0},
        "ceiling_hits": deadline,
        "salvaged_findings": 3 * deadline,
        "degraded": deadline,
    }
    fields.update(kw)
    return DeadlineOutcome(**fields)


_OUTCOME_HEAD = (
    '<h2>Deadline outcomes</h2><table><thead><tr><th>eval</th><th class="num">workers</th>'
    '<th class="num">cells</th>'
    '<th class="num">ok</th><th class="num">error</th><th class="num">deadline</th>'
    '<th class="num">length_cap</th>'
    '<th class="num">ceiling hits</th><th class="num">salvaged findings</th><th class="num">degraded</th>'
)


def test_the_outcomes_table_counts_each_status_and_marks_ceiling_hits() -> None:
    """Ungoverned cells: one row per eval and worker count with each status in CellStatus order, a
    dash for no worker count, a nonzero ceiling-hit count as a warn cell; no queue columns or note."""
    content = report_content(outcomes=[_outcome("cards", None, 5, 0), _outcome("review", 4, 7, 2)])
    assert page._outcomes_section(content) == (
        _OUTCOME_HEAD + "</tr></thead><tbody>"
        '<tr><td>cards</td><td class="num">-</td><td class="num">6</td><td class="num">5</td>'
        '<td class="num">1</td>'
        '<td class="num">0</td><td class="num">0</td><td class="num">0</td><td class="num">0</td>'
        '<td class="num">0</td></tr>'
        '<tr><td>review</td><td class="num">4</td><td class="num">10</td><td class="num">7</td>'
        '<td class="num">1</td><td class="num">2</td><td class="num">0</td><td class="num warn">2</td>'
        '<td class="num">6</td><td class="num">2</td></tr></tbody></table>'
    )


def test_governed_outcomes_add_the_queue_columns_and_say_what_a_wait_is() -> None:
    """One eval the governor held: every row gets the queued count, the longest wait to the second,
    the waits past the ceiling and the rule that held them (a dash where none did), then the note."""
    content = report_content(
        outcomes=[
            _outcome("cards", 1, 5, 0),
            _outcome("review", 4, 7, 2, queued=3, longest_wait_s=1234.6, waits_past_deadline=1, held_by="q"),
        ]
    )
    assert page._outcomes_section(content) == (
        _OUTCOME_HEAD + '<th class="num">queued</th><th class="num">longest queue wait s</th>'
        '<th class="num">waited past ceiling</th><th>held by</th></tr></thead><tbody>'
        '<tr><td>cards</td><td class="num">1</td><td class="num">6</td><td class="num">5</td>'
        '<td class="num">1</td>'
        '<td class="num">0</td><td class="num">0</td><td class="num">0</td><td class="num">0</td>'
        '<td class="num">0</td><td class="num">0</td><td class="num">-</td><td class="num">0</td>'
        "<td>-</td></tr>"
        '<tr><td>review</td><td class="num">4</td><td class="num">10</td><td class="num">7</td>'
        '<td class="num">1</td><td class="num">2</td><td class="num">0</td><td class="num warn">2</td>'
        '<td class="num">6</td><td class="num">2</td><td class="num">3</td><td class="num">1,235</td>'
        '<td class="num">1</td><td>q</td></tr></tbody></table>'
        '<p class="note">queued: cells the queue governor held before they started, by the rule that held '
        "the most of them; a wait is not part of the cell's time or rate.</p>"
    )


def test_without_cells_the_outcomes_section_says_so() -> None:
    """No outcome: the header and the empty note only."""
    empty = '<h2>Deadline outcomes</h2><p class="empty">No cells recorded.</p>'
    assert page._outcomes_section(report_content()) == empty


def test_the_answers_box_lists_each_answer_then_the_rules_under_their_capitalised_summary() -> None:
    """Answers other than the rules summary as a list, an unmeasured one marked so; the summary with
    its first letter raised and a colon; the advisor's rules, in order, as a numbered list."""
    content = report_content(
        answers=[
            Answer(topic="curve", text="qwen gains 3.0x at 8 streams", measured=True),
            Answer(topic="neighbour", text="no baseline for <review>", measured=False),
            Answer(topic="rules", text="three rules from the records", measured=True),
        ],
        advice=_advice(MEASURE, CAP),
    )
    assert page._answers_section(content) == (
        '<section class="answers"><h2>Answers</h2>'
        "<ul><li>qwen gains 3.0x at 8 streams</li>"
        '<li class="unmeasured">no baseline for &lt;review&gt;</li></ul>'
        "<p>Three rules from the records:</p>"
        "<ol><li>Measure qwen first: no worker count for &lt;review&gt; cells on qwen yet</li>"
        "<li>qwen lane at most 8 streams</li></ol></section>"
    )


def test_the_answers_box_leaves_out_the_list_the_summary_or_the_rules_it_has_none_of() -> None:
    """Only a summary and no advice: the box holds just the summary; only rules and no answers:
    just the rules."""
    summary_only = report_content(answers=[Answer(topic="rules", text="no rules yet", measured=False)])
    assert page._answers_section(summary_only) == (
        '<section class="answers"><h2>Answers</h2><p>No rules yet:</p></section>'
    )
    rules_only = report_content(advice=_advice(CAP))
    assert page._answers_section(rules_only) == (
        '<section class="answers"><h2>Answers</h2><ol><li>qwen lane at most 8 streams</li></ol></section>'
    )


def test_without_answers_or_rules_the_page_has_no_answers_box() -> None:
    """Nothing to answer, with no advice or advice without rules: no box at all, not an empty one."""
    assert page._answers_section(report_content()) == ""
    assert page._answers_section(report_content(advice=_advice())) == ""


_SETTINGS: dict[str, Any] = {"ceiling_s": 12_345.0, "threshold": 0.15}


def test_the_queue_rules_table_shows_each_rule_with_its_evidence_under_the_advisors_settings() -> None:
    """The advisor's ceiling (thousands separated) and threshold (whole percent) in the note, then
    one row per rule, in order, its evidence escaped."""
    content = report_content(advice=_advice(MEASURE, CAP, **_SETTINGS))
    assert page._advice_section(content) == (
        "<h2>Queue rules</h2>"
        '<p class="note">Under a 12,345 s per-cell ceiling; cross-engine loads flagged past '
        "a 15% neighbour cost (as spark-otel advise).</p>"
        "<table><thead><tr><th>queue rule</th><th>evidence</th></tr></thead><tbody>"
        "<tr><td>Measure qwen first: no worker count for &lt;review&gt; cells on qwen yet</td>"
        f"<td>{MEASURE_EVIDENCE}</td></tr>"
        f"<tr><td>{CAP_TEXT}</td><td>{CAP_EVIDENCE}</td></tr>"
        "</tbody></table>"
    )
    assert page._advice_rules(content.advice) == [[MEASURE_TEXT, MEASURE_EVIDENCE], [CAP_TEXT, CAP_EVIDENCE]]


def test_without_rules_the_queue_rules_section_says_the_advisor_had_nothing_to_reason_from() -> None:
    """No advice: the empty note alone; advice without rules: its settings, then the empty note."""
    empty = '<p class="empty">The advisor had no measured curve or neighbour cost to reason from.</p>'
    assert page._advice_section(report_content()) == "<h2>Queue rules</h2>" + empty
    assert page._advice_section(report_content(advice=_advice(**_SETTINGS))) == (
        "<h2>Queue rules</h2>"
        '<p class="note">Under a 12,345 s per-cell ceiling; cross-engine loads flagged past '
        "a 15% neighbour cost (as spark-otel advise).</p>" + empty
    )
    assert page._advice_rules(None) == []


def _level(streams: int, **kw: Any) -> ProbeLevel:
    fields: dict[str, Any] = {
        "streams": streams,
        "start_unix_ns": T0,
        "end_unix_ns": T0 + 10 * S,
        "wall_s": 10.0,
        "tokens_expected": 100,
        "probe_tokens": 100 * streams,
        "per_stream_median": 10.25,
        "per_stream_p10": 9.5,
        "per_stream_p90": 11.25,
        "probe_aggregate_rate": 10.0 * streams,
        "engine_aggregate_rate": 12.5 * streams,
        "engine_probe_ratio": 1.25,
        "ttft_s_median": 0.25,
        "power_w": 200.0,
        "client_cpu_us_per_token": 7.5,
    }
    fields.update(kw)
    return ProbeLevel.model_validate(fields)


def _probe(levels: list[ProbeLevel], warnings: list[str], **meta: Any) -> ProbeReport:
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=T0, engine_url="http://127.0.0.1:8011", engine="qwen", model="q<3>",
            gpu_source="nvml", **meta,
        ),
        settings=ProbeSettings(streams=[lv.streams for lv in levels], tokens=100, mode="plain"),
        levels=levels,
        curve=probe_curve("qwen", *[lv.streams for lv in levels]),
        warnings=warnings,
    )  # fmt: skip


_PROBE_TABLE_HEAD = (
    '<table><thead><tr><th class="num">streams</th><th class="num">wall {s}</th>'
    '<th class="num">per-stream tok/s (median)</th><th class="num">p10 to p90 tok/s</th>'
    '<th class="num">probe aggregate tok/s</th><th class="num">engine aggregate tok/s</th>'
    '<th class="num">engine/probe</th><th class="num">power W</th><th class="num">J/tok</th>'
    '<th class="num">TTFT {s}</th><th class="num">client CPU µs/tok</th><th class="num">streams off pin</th>'
    "</tr></thead><tbody>"
)
_PROBE_TERMS = (
    '<ul class="terms"><li>'
    "<b>engine/probe</b>: the engine&#x27;s own generation counter over the probe&#x27;s "
    "tokens; above 1, another tenant decoded too</li><li>"
    "<b>J/tok</b>: joules per output token: the box&#x27;s "
    "GPU energy over the level (mean power x wall) over the probe&#x27;s tokens, or a cell&#x27;s share over "
    "its "
    "tokens</li><li><b>client CPU µs/tok</b>: the probe client&#x27;s own CPU time per streamed token (real "
    "time); ! past its budget: the client&#x27;s lag may read as the engine&#x27;s</li><li>"
    "<b>streams off pin</b>: "
    "streams that did not produce exactly the pinned token count, or failed; 0: every stream was "
    "pinned</li></ul>"
)


@pytest.mark.usefixtures("india_local_time")
def test_a_probe_is_titled_with_its_engine_model_and_utc_time_and_lists_its_warnings() -> None:
    """The title's time is the probe's creation to the minute in UTC whatever the local zone; the
    settings line; the Appendix A table with a level off its pin as a warn cell; each term once;
    the energy line; then each warning, escaped, in the warnings list."""
    probe = _probe([_level(1), _level(4, token_mismatches=2, errors=1)], ["engine busy <2>", "second"])
    assert page._probe_section(probe, page._Glossary()) == (
        "<h3>Probe of qwen (q&lt;3&gt;), 2026-03-04 05:06 UTC</h3>"
        '<p class="note">100 tokens per stream, plain mode, 1 round(s) per level; http://127.0.0.1:8011.</p>'
        + _PROBE_TABLE_HEAD.format(s="s")
        + '<tr><td class="num">1</td><td class="num">10.0</td><td class="num">10.25</td>'
        '<td class="num">9.50 to 11.25</td><td class="num">10.0</td><td class="num">12.5</td>'
        '<td class="num">1.25</td>'
        '<td class="num">200.0</td><td class="num">20.000</td><td class="num">0.25</td>'
        '<td class="num">7.5</td>'
        '<td class="num">0</td></tr>'
        '<tr><td class="num">4</td><td class="num">10.0</td><td class="num">10.25</td>'
        '<td class="num">9.50 to 11.25</td><td class="num">40.0</td><td class="num">50.0</td>'
        '<td class="num">1.25</td>'
        '<td class="num">200.0</td><td class="num">5.000</td><td class="num">0.25</td>'
        '<td class="num">7.5</td>'
        '<td class="num warn">3</td></tr></tbody></table>'
        + _PROBE_TERMS
        + '<p class="note">energy (power x wall, over the probe&#x27;s own tokens): 4 streams: 5 J/token '
        "against "
        "20 at 1 (4.0x less)</p>"
        '<ul class="warnings"><li>engine busy &lt;2&gt;</li><li>second</li></ul>'
    )


def test_a_probe_without_warnings_has_no_warnings_list_and_a_model_clock_labels_its_title() -> None:
    """No warning: nothing after the energy line. A probe at 100x says model time in its title and
    "model s" in its duration columns; a second probe's table does not explain the terms again."""
    glossary = page._Glossary()
    page._probe_section(_probe([_level(2)], []), glossary)
    probe = _probe([_level(1)], [], time_scale=100.0)
    assert page._probe_section(probe, glossary) == (
        "<h3>Probe of qwen (q&lt;3&gt;), 2026-03-04 05:06 UTC (model time, 100x)</h3>"
        '<p class="note">100 tokens per stream, plain mode, 1 round(s) per level; http://127.0.0.1:8011.</p>'
        + _PROBE_TABLE_HEAD.format(s="model s")
        + '<tr><td class="num">1</td><td class="num">10.0</td><td class="num">10.25</td>'
        '<td class="num">9.50 to 11.25</td><td class="num">10.0</td><td class="num">12.5</td>'
        '<td class="num">1.25</td>'
        '<td class="num">200.0</td><td class="num">20.000</td><td class="num">0.25</td>'
        '<td class="num">7.5</td>'
        '<td class="num">0</td></tr></tbody></table>'
        '<p class="note">energy: one level measured, nothing to compare its J/token with</p>'
    )
