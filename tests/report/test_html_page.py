"""The HTML page's building blocks and the page itself, from hand-built results with known answers,
compared as whole HTML: a table's markup (right-aligned numeric columns, ``class="num warn"`` cells),
the embedded ``<img>`` tags and their alt text, the glossary notes under a table, the Instruments
section, the energy part, "Where the time went", the page's title, version and creation line, and the
files `write_report` writes. A changed tag, word, format or condition reads as a failure."""

from __future__ import annotations

import base64
import html
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.support.report_content import S, instrument_verdict, instruments_report, report_content

import spark_otel
from spark_otel import InputError, __version__
from spark_otel.analysis.budget import CellBudget, EvalBudget
from spark_otel.analysis.energy import CellEnergy, EnergyReport, EvalEnergy
from spark_otel.analysis.gauges.grades import (
    InstrumentsReport,
    IntervalReading,
)
from spark_otel.analysis.stats import summarize
from spark_otel.analysis.timeouts import TimeoutVerdict
from spark_otel.report import html as page
from spark_otel.report.content import ReportContent
from spark_otel.report.plots import render_images
from spark_otel.views.gauges import evidence

NOW = int(datetime(2026, 3, 4, 23, 50, 30, tzinfo=UTC).timestamp()) * S
"""The page's generation time: 05:20 the next day in India, so a local time reads as another day."""
MEASURE = "spark-otel receive --engine NAME=URL --gpu auto --interval 1"


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's generation time read off a fixed clock, so its creation line can be pinned."""
    monkeypatch.setattr(page, "real_wall_ns", lambda: NOW)


# -- tables, images and glossary ---------------------------------------------------------------------
def test_a_table_right_aligns_number_columns_and_marks_the_warn_columns_nonzero_cells() -> None:
    """Numbers (with units, ranges, a repeat) and dashes or blanks read right-aligned; any text makes
    a column left-aligned; the warn column's cells are warned unless blank, "-" or 0 (an int 0 too)."""
    columns = ["eval", "rate", "range", "missing", "hits"]
    rows = [
        ["a <b>", "1,234.5 tok/s", "1.5 to 2.0", "", 2],
        ["c", "-", "", "-", 0],
        ["d", "12%", "3 #2", "", "-"],
        ["e", "", "-", "", ""],
    ]
    assert page._table(columns, rows, warn_col=4) == (
        "<table><thead><tr>"
        '<th>eval</th><th class="num">rate</th><th class="num">range</th><th>missing</th>'
        '<th class="num">hits</th>'
        "</tr></thead><tbody>"
        '<tr><td>a &lt;b&gt;</td><td class="num">1,234.5 tok/s</td><td class="num">1.5 to 2.0</td><td></td>'
        '<td class="num warn">2</td></tr>'
        '<tr><td>c</td><td class="num">-</td><td class="num"></td><td>-</td><td class="num">0</td></tr>'
        '<tr><td>d</td><td class="num">12%</td><td class="num">3 #2</td><td></td><td class="num">-</td></tr>'
        '<tr><td>e</td><td class="num"></td><td class="num">-</td><td></td><td class="num"></td></tr>'
        "</tbody></table>"
    )


def test_a_text_column_warns_without_the_number_class_and_no_warn_column_warns_nothing() -> None:
    """A warn cell of a text column is ``class="warn"`` alone; without ``warn_col`` no cell warns."""
    assert page._table(["verdict", "n"], [["slowed", "3"], ["ok", "0"]], warn_col=0) == (
        '<table><thead><tr><th>verdict</th><th class="num">n</th></tr></thead><tbody>'
        '<tr><td class="warn">slowed</td><td class="num">3</td></tr>'
        '<tr><td class="warn">ok</td><td class="num">0</td></tr></tbody></table>'
    )
    assert page._table(["n"], [["3"]]) == (
        '<table><thead><tr><th class="num">n</th></tr></thead>'
        '<tbody><tr><td class="num">3</td></tr></tbody></table>'
    )


def test_an_image_is_a_data_uri_with_escaped_alt_text_and_its_file_name_and_a_missing_one_is_nothing() -> (
    None
):
    """The PNG's bytes in base64, the alt text escaped, the file it was written to; nothing when absent."""
    images = {"curve-1-qwen.png": b"\x89PNG\r\n"}
    assert page._img("curve-1-qwen.png", images, 'qwen "curve" <1>') == (
        '<img src="data:image/png;base64,iVBORw0K" alt="qwen &quot;curve&quot; &lt;1&gt;" '
        'data-file="curve-1-qwen.png">'
    )
    assert page._img("curve-2-qwen.png", images, "qwen curve") == ""


def test_the_glossary_explains_each_term_once_under_the_first_table_that_shows_it() -> None:
    """Known terms in column order, escaped, an extra term beside them; a second table showing the
    same terms, or one showing none, adds no list at all."""
    glossary = page._Glossary()
    assert glossary.notes(
        ["eval", "wall speedup", "cost %", "J/tok"], {"cost %": "1 - median <over> base"}
    ) == (
        '<ul class="terms">'
        "<li><b>wall speedup</b>: wall time per cell of the serial run over this run&#x27;s</li>"
        "<li><b>cost %</b>: 1 - median &lt;over&gt; base</li>"
        "<li><b>J/tok</b>: joules per output token: the box&#x27;s GPU energy over the level (mean power x "
        "wall) over the probe&#x27;s tokens, or a cell&#x27;s share over its tokens</li>"
        "</ul>"
    )
    assert glossary.notes(["wall speedup", "J/tok"]) == ""
    assert glossary.notes(["eval", "workers"]) == ""


# -- the Instruments section --------------------------------------------------------------------------
def _said(report: InstrumentsReport, k: int) -> str:
    """The evidence cell of the ``k``-th gauge: the views layer's sentence, escaped."""
    return html.escape(evidence(report.instruments[k], report))


HEAD = "<h2>Instruments: which gauge measures load</h2>"
ELASTICITY_NOTE = (
    '<p class="note">elasticity: least-squares slope of the gauge on throughput, times mean throughput '
    "over mean gauge (1 moves in proportion, 0 not at all); rank corr: Spearman rank correlation.</p>"
)
INSTRUMENTS_HEAD = (
    '<table><thead><tr><th>instrument</th><th>verdict</th><th class="num">intervals</th>'
    '<th class="num">elasticity</th><th class="num">rank corr</th><th>evidence</th></tr></thead>'
)


def test_the_instruments_section_grades_each_gauge_and_shows_its_plot_and_the_notes() -> None:
    """The intervals and their throughput range in model time, one row per gauge (a missing figure
    is a dash, two decimals otherwise), every plot there is in a row of gauges, then each note."""
    images = {"instrument-1-gpu-0-power.png": b"AB", "instrument-2-qwen-requests-running.png": b"CD"}
    report = instruments_report()
    assert page._instruments_section(report_content(instruments=report), images) == (
        HEAD + '<p class="note">2 probe intervals, 12.5 to 1,234.6 tok/s (model time, 100x): '
        "each gauge's value per interval against the interval's throughput.</p>"
        + INSTRUMENTS_HEAD
        + "<tbody>"
        '<tr><td>GPU 0 power</td><td>not load</td><td class="num">2</td><td class="num">0.04</td>'
        f'<td class="num">-</td><td>{_said(report, 0)}</td></tr>'
        '<tr><td>qwen requests running</td><td>tracks load</td><td class="num">3</td><td class="num">-</td>'
        f'<td class="num">0.95</td><td>{_said(report, 1)}</td></tr>'
        "</tbody></table>" + ELASTICITY_NOTE + '<div class="gauges">'
        '<img src="data:image/png;base64,QUI=" alt="GPU 0 power against throughput" '
        'data-file="instrument-1-gpu-0-power.png">'
        '<img src="data:image/png;base64,Q0Q=" alt="qwen requests running against throughput" '
        'data-file="instrument-2-qwen-requests-running.png">'
        "</div>"
        '<p class="note">no GPU samples &amp; no Nsight</p><p class="note">one engine</p>'
    )


def test_without_a_source_or_throughput_the_section_reads_zero_and_a_gauge_without_a_plot_shows_none() -> (
    None
):
    """No interval source is a blank word, no throughput 0.0 to 0.0; a gauge read in under two
    intervals has no plot (an empty row of gauges), and no notes add nothing."""
    report = instruments_report(
        interval_source=None,
        intervals=[],
        throughput_min=None,
        throughput_max=None,
        instruments=[instrument_verdict("qwen cells' decode rate", "unsupported", 1, 1.25, -0.5)],
        notes=[],
    )
    assert page._instruments_section(report_content(instruments=report), {"instrument-2-x.png": b"AB"}) == (
        HEAD + '<p class="note">0  intervals, 0.0 to 0.0 tok/s: '
        "each gauge's value per interval against the interval's throughput.</p>"
        + INSTRUMENTS_HEAD
        + "<tbody>"
        '<tr><td>qwen cells&#x27; decode rate</td><td>unsupported</td><td class="num">1</td>'
        f'<td class="num">1.25</td><td class="num">-0.50</td><td>{_said(report, 0)}</td></tr>'
        "</tbody></table>" + ELASTICITY_NOTE + '<div class="gauges"></div>'
    )


def test_a_report_without_gauges_says_which_commands_would_record_them() -> None:
    """No instruments report: the section is its title and the two commands, nothing else."""
    assert page._instruments_section(report_content(), {}) == (
        HEAD + '<p class="empty">No gauge recorded beside a measured load. Record the GPU and the engines '
        "beside a probe: <code>spark-otel receive --engine NAME=URL --gpu auto --interval 1</code> and "
        "<code>spark-otel probe --engine NAME=URL --streams 1,2,4,8,16</code>.</p>"
    )


# -- the energy part ----------------------------------------------------------------------------------
def _energy(**kw: Any) -> EnergyReport:
    serial = EvalEnergy(
        eval_name="serial", workers=1, n_cells=3, n_measured=2, output_tokens=12_345, energy_j=24_690.4,
        j_per_token=2.0, j_per_cell=8230.0, per_cell=summarize([8000.0, 8460.0]),
        start_unix_ns=int(datetime(2026, 12, 1, 9, 5, tzinfo=UTC).timestamp()) * S,
        end_unix_ns=int(datetime(2026, 12, 1, 10, 40, tzinfo=UTC).timestamp()) * S,
    )  # fmt: skip
    cells = [
        CellEnergy(uid=f"c{i}", eval_name="serial", cell_id=f"#{i}", engine="qwen", workers=1,
                   start_unix_ns=0, end_unix_ns=S, completion_tokens=10, box_j=None, share_j=None,
                   j_per_token=None)
        for i in range(3)
    ]  # fmt: skip
    fields: dict[str, Any] = {
        "gpus": ["0", "1"], "estimated": False, "covered_start_unix_ns": 0, "covered_end_unix_ns": S,
        "box_j": 123_456.7, "attributed_j": 0.0, "partial_j": 0.0, "idle_j": 2_000.4, "cells": cells,
        "evals": [serial], "unmeasured": 1, "measure": None,
    }  # fmt: skip
    fields.update(kw)
    return EnergyReport(**fields)


SPLIT = (
    '<p class="note">energy: the box&#x27;s energy split by tokens among the cells in flight, stretch by '
    "stretch; load that is not a recorded cell (a probe, another client) is charged to the cells "
    "beside it</p>"
)


def test_the_energy_part_shows_each_evals_joules_under_a_capitalised_title_then_its_terms_and_lines() -> None:
    """The title in model time for the content's scales, capitalised; the table; the glossary of its
    two energy columns; the unmeasured cells with the command that would measure them; the split."""
    content = report_content(energy=_energy(), n_cells=3, scales=[1.0, 50.0])
    assert page._energy_part(content, page._Glossary()) == (
        "<h3>Energy on the box (GPU 0, 1, energy counter): 123,457 J while cells ran, 2,000 J idle between "
        "them (model time, 50x, for the cells recorded under a model clock)</h3>"
        '<table><thead><tr><th>eval</th><th class="num">workers</th><th>cells measured</th>'
        '<th class="num">output tok</th><th class="num">energy J</th><th class="num">J/tok</th>'
        "<th>J/cell (median, 95% CI)</th><th>span (UTC)</th></tr></thead><tbody>"
        '<tr><td>serial</td><td class="num">1</td><td>2 of 3</td><td class="num">12,345</td>'
        '<td class="num">24,690</td><td class="num">2.000</td><td>8,230 [8,000 to 8,460]</td>'
        "<td>12-01 09:05 to 12-01 10:40</td></tr></tbody></table>"
        '<ul class="terms"><li><b>J/tok</b>: joules per output token: the box&#x27;s GPU energy over the '
        "level (mean power x wall) over the probe&#x27;s tokens, or a cell&#x27;s share over its tokens</li>"
        "<li><b>J/cell (median, 95% CI)</b>: each cell&#x27;s share of the box&#x27;s energy: split by "
        "tokens among the cells in flight, stretch by stretch; median over the cells and its 95% "
        "interval</li></ul>"
        '<p class="note">energy: 1 of 3 cells ran outside the GPU readings (no energy for them); measure '
        f"with `{MEASURE}` beside the eval</p>" + SPLIT
    )


def test_without_gpu_readings_the_energy_part_says_how_to_measure_and_without_cells_says_nothing() -> None:
    """No energy report: one line naming the cells and the receiver command; no evals measured: the
    lines alone, no table; no cells at all: nothing (there is nothing to measure)."""
    assert page._energy_part(report_content(n_cells=4), page._Glossary()) == (
        '<p class="note">energy: no GPU readings in the store for these 4 cells; measure with '
        f"`{MEASURE}`</p>"
    )
    bare = _energy(evals=[], unmeasured=0)
    assert page._energy_part(report_content(energy=bare, n_cells=3), page._Glossary()) == SPLIT
    assert page._energy_part(report_content(), page._Glossary()) == ""


# -- where the time went ------------------------------------------------------------------------------
def _eval_budget() -> EvalBudget:
    return EvalBudget(
        eval_name="review", n_cells=2, unsplit_cells=0, requests=2, joined=0, wall_s=100.0,
        seconds={"first_token": 30.0, "decode": 60.0, "other": 10.0}, sources={},
    )  # fmt: skip


def _cell_budget() -> CellBudget:
    return CellBudget(
        uid="u1", eval_name="review", cell_id="B#1", status="ok", elapsed_s=50.0, wall_s=50.0,
        seconds={"first_token": 15.0, "decode": 30.0, "other": 5.0}, sources={}, requests=1, joined=0,
    )  # fmt: skip


def _timeout(cell_id: str, start_unix_ns: int, kind: str, loads: list[str]) -> TimeoutVerdict:
    return TimeoutVerdict(
        uid=cell_id, eval_name="review", cell_id=cell_id, engine="qwen", start_unix_ns=start_unix_ns,
        elapsed_s=1800.0, ceiling_s=1800.0, completion_tokens=900, rate=0.5, baseline_rate=1.0,
        baseline_n=4, share_of_baseline=0.5, share_cells=None, loads=loads, admission_s=None,
        needed_at_baseline_s=None, rerun=None, kind=kind, unjudged=None,
    )  # fmt: skip


def test_where_the_time_went_sums_each_evals_phases_explains_them_and_gives_each_timeout_a_verdict() -> None:
    """The eval's phases, the notes of the phases shown (only those), its plot, then each timeout's row
    under the eval's name."""
    started = int(datetime(2026, 9, 21, 14, 13, tzinfo=UTC).timestamp()) * S
    content = report_content(
        eval_budgets=[_eval_budget()],
        budgets=[_cell_budget()],
        timeouts=[
            _timeout("B#1", started, "long", []),
            _timeout("F#2", started + 3600 * S, "slowed", ["<qwen> x"]),
        ],
    )
    assert page._budget_section(content, {"budget-review.png": b"PNG"}) == (
        "<h2>Where the time went</h2>"
        '<table><thead><tr><th>eval</th><th class="num">cells</th><th class="num">wall s</th>'
        "<th>first token</th><th>decode</th><th>other</th></tr></thead><tbody>"
        '<tr><td>review</td><td class="num">2</td><td class="num">100</td><td>30.0 s (30%)</td>'
        "<td>60.0 s (60%)</td><td>10.0 s (10%)</td></tr></tbody></table>"
        '<p class="note">first token: waiting for the first token of a streamed request (engine queue, '
        "prefill, network); decode: a streamed request past its first token: tokens flowing; other: no "
        "request in flight: the runner&#x27;s own work between requests.</p>"
        '<img src="data:image/png;base64,UE5H" alt="review: where each cell&#x27;s time went" '
        'data-file="budget-review.png">'
        "<h3>Timeouts</h3>"
        '<table><thead><tr><th>eval</th><th>cell</th><th>started (UTC)</th><th class="num">elapsed s</th>'
        '<th class="num">output tok</th><th class="num">tok/s</th><th class="num">of baseline</th>'
        "<th>verdict</th></tr></thead><tbody>"
        '<tr><td>review</td><td>B#1</td><td>2026-09-21 14:13</td><td class="num">1,800</td>'
        '<td class="num">900</td><td class="num">0.50</td><td class="num">50%</td>'
        "<td>long by itself: ran at baseline speed, ceiling 1,800 s</td></tr>"
        '<tr><td>review</td><td>F#2</td><td>2026-09-21 15:13</td><td class="num">1,800</td>'
        '<td class="num">900</td><td class="num">0.50</td><td class="num">50%</td>'
        "<td>slowed by &lt;qwen&gt; x (ran at 50% of baseline)</td></tr>"
        "</tbody></table>"
    )


def test_without_budgets_or_timeouts_the_section_says_why_each_is_empty() -> None:
    """No budget: why older cells have none; no timeout: that no cell hit its ceiling."""
    assert page._budget_section(report_content(), {}) == (
        "<h2>Where the time went</h2>"
        '<p class="empty">No cell was recorded with a time budget (a live cell() records one; '
        "older and backfilled cells have none unless their records say).</p>"
        '<h3>Timeouts</h3><p class="empty">No cell hit its ceiling.</p>'
    )


# -- the page -----------------------------------------------------------------------------------------
def _empty_body(among: str) -> str:
    """Each section's empty note; ``among``: which cells held no adaptive decision."""
    return EMPTY_BODY.replace("{among}", among)


EMPTY_BODY = (
    '<h2>Concurrency: what more streams buy</h2><p class="empty">No probe runs or cells recorded.</p>'
    "<h2>Neighbour cost: what other load cost an eval</h2>"
    '<p class="empty">No eval with enough cells to compare against a baseline.</p>'
    + HEAD
    + '<p class="empty">No gauge recorded beside a measured load. Record the GPU and the engines beside a '
    "probe: <code>spark-otel receive --engine NAME=URL --gpu auto --interval 1</code> and "
    "<code>spark-otel probe --engine NAME=URL --streams 1,2,4,8,16</code>.</p>"
    '<h2>Deadline outcomes</h2><p class="empty">No cells recorded.</p>'
    '<h2>Adaptive governor: what it admitted and held</h2><p class="empty">No adaptive governor decision '
    "recorded {among}: run an eval with adaptive governing, <code>SPARK_OTEL_GOVERN=adaptive &lt;your eval "
    "command&gt;</code>, and each cell&#x27;s span records what it was admitted or held on.</p>"
    "<h2>Where the time went</h2>"
    '<p class="empty">No cell was recorded with a time budget (a live cell() records one; older and '
    'backfilled cells have none unless their records say).</p><h3>Timeouts</h3><p class="empty">No cell hit '
    'its ceiling.</p><h2>Queue rules</h2><p class="empty">The advisor had no measured curve or neighbour '
    "cost to reason from.</p>"
)
FOOTER = (
    f'<p class="note">Generated by spark-otel {__version__}. Rates are completion tokens over elapsed '
    "seconds; timeouts are listed but kept out of rates.</p>\n</body>\n</html>\n"
)


def _split(text: str) -> tuple[str, str]:
    head, body = text.split("<body>\n")
    return head, body


@pytest.mark.usefixtures("fixed_clock", "india_local_time")
def test_the_page_of_all_evals_names_its_source_counts_and_creation_minute_in_utc() -> None:
    """The title, the generator's version, the counts, "all evals" and the minute generated in UTC
    (not the local zone's), then each section's empty note and no warnings list."""
    head, body = _split(page.render_html(report_content(n_cells=0, n_windows=2), {}))
    assert head.startswith(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="generator" content="spark-otel {__version__}">\n<title>spark-otel report</title>\n'
    )
    assert body == (
        "<h1>spark-otel report</h1>\n"
        '<p class="meta">From store.db: 0 cells, 2 load windows, 0 probe runs (all evals); '
        "generated 2026-03-04 23:50 UTC.</p>\n" + _empty_body("(no cells recorded)") + "\n" + FOOTER
    )


@pytest.mark.usefixtures("fixed_clock")
def test_the_page_of_one_eval_names_it_in_the_title_and_lists_the_analyses_notes_as_warnings() -> None:
    """The eval in the title and the scope, the escaped notes as the warnings list after the sections."""
    content = report_content(eval_name="re<view>", n_cells=3, notes=["no baseline for <x>", "only 1 probe"])
    head, body = _split(page.render_html(content, {}))
    assert "<title>spark-otel report: re&lt;view&gt;</title>\n" in head
    assert body == (
        "<h1>spark-otel report: re&lt;view&gt;</h1>\n"
        '<p class="meta">From store.db: 3 cells, 0 load windows, 0 probe runs (eval re&lt;view&gt;); '
        "generated 2026-03-04 23:50 UTC.</p>\n"
        + _empty_body("among these 3 cells")
        + '<ul class="warnings"><li>no baseline for &lt;x&gt;</li><li>only 1 probe</li></ul>\n'
        + FOOTER
    )


# -- the files written --------------------------------------------------------------------------------
def _plottedreport_content() -> ReportContent:
    """A gauge read in two intervals (one plot) and an eval's budget over one cell (another)."""
    readings = [
        IntervalReading(interval="1 stream", throughput=12.5, value=40.0, samples=3),
        IntervalReading(interval="8 streams", throughput=1234.5, value=90.0, samples=3),
    ]
    report = instruments_report(
        instruments=[instrument_verdict("GPU 0 power", "tracks load", 2, 0.8, 1.0, readings)], notes=[]
    )
    return report_content(
        instruments=report, eval_budgets=[_eval_budget()], budgets=[_cell_budget()], n_cells=1
    )


@pytest.mark.usefixtures("fixed_clock")
def test_write_report_creates_the_directory_and_writes_the_page_and_every_plot(tmp_path: Path) -> None:
    """A directory two levels down is created; it holds the page, as `render_html` renders it over
    `render_images`' plots, and each plot under its name with exactly those bytes."""
    content = _plottedreport_content()
    out = tmp_path / "reports" / "today"
    written = page.write_report(content, out)
    images = render_images(content)
    assert sorted(images) == ["budget-review.png", "instrument-1-gpu-0-power.png"]
    assert written == out / "report.html"
    assert sorted(p.name for p in out.iterdir()) == [
        "budget-review.png",
        "instrument-1-gpu-0-power.png",
        "report.html",
    ]
    for name, png in images.items():
        assert (out / name).read_bytes() == png
    text = written.read_text("utf-8")
    assert text == page.render_html(content, images)
    encoded = base64.b64encode(images["instrument-1-gpu-0-power.png"]).decode("ascii")
    assert (
        f'<img src="data:image/png;base64,{encoded}" alt="GPU 0 power against throughput" '
        'data-file="instrument-1-gpu-0-power.png">'
    ) in text


@pytest.mark.usefixtures("fixed_clock")
def test_write_report_writes_into_a_directory_that_exists_over_an_earlier_page(tmp_path: Path) -> None:
    """The report directory may exist already (a rerun): the page is written over the old one."""
    (tmp_path / "report.html").write_text("old", encoding="utf-8")
    content = report_content(n_cells=1)
    assert page.write_report(content, tmp_path) == tmp_path / "report.html"
    assert (tmp_path / "report.html").read_text("utf-8") == page.render_html(content, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_report_directory_that_cannot_be_created_is_an_input_error_naming_it(tmp_path: Path) -> None:
    """A path under a file: the error names the directory and the system's reason."""
    (tmp_path / "file").write_text("x", encoding="utf-8")
    out = tmp_path / "file" / "report"
    with pytest.raises(InputError) as caught:
        page.write_report(report_content(n_cells=1), out)
    assert str(caught.value) == (
        f"{out}: cannot create the report directory: [Errno 20] Not a directory: '{out}'"
    )


def _utf8report_content() -> ReportContent:
    return report_content(
        n_cells=1,
        instruments=instruments_report(
            instruments=[instrument_verdict("client CPU µs/tok", "not load", 1, None, None)]
        ),
    )


def write_utf8_page(out_dir: str) -> None:
    """The page of `_utf8_content` at the fixed clock: what the C-locale child process writes."""
    page.real_wall_ns = lambda: NOW
    page.write_report(_utf8report_content(), out_dir)


@pytest.mark.usefixtures("fixed_clock")
def test_the_page_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """A process in the C locale (ASCII) writes the same UTF-8 page, "µ" and all, as this one does."""
    here = page.write_report(_utf8report_content(), tmp_path / "here")
    assert "<td>client CPU µs/tok</td>" in here.read_text("utf-8")
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "LC_ALL": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONPATH": os.pathsep.join([str(Path(spark_otel.__file__).resolve().parents[1]), str(root)]),
    }
    code = "import sys; from tests.report.test_html_page import write_utf8_page; write_utf8_page(sys.argv[1])"
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c")], env=env, cwd=root, check=True, timeout=120
    )
    assert (tmp_path / "c" / "report.html").read_bytes() == here.read_bytes()
