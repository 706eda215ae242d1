"""The HTML report from hand-built records with known answers: sections, embedded plots, errors."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from tests.support.report_records import T0, S, report_records, serial_cell

from spark_otel import InputError
from spark_otel import _semconv as sc
from spark_otel.analysis.outcomes import deadline_outcomes
from spark_otel.analysis.probe_levels import LevelMeasurement, curve_of, summarize_level
from spark_otel.model import Cell, CellStatus
from spark_otel.records.probe_report import ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.report import (
    ReportInputs,
    build_report,
    inputs_from_store,
    render_html,
    write_report,
)
from spark_otel.store import Store
from spark_otel.views.rules import rule_text


def _probe_report() -> ProbeReport:
    from spark_otel.analysis.probe_levels import StreamTiming

    levels = []
    for n, rate in ((1, 11.1), (8, 10.1), (32, 5.8)):
        streams = [
            StreamTiming(start_ns=0, first_ns=int(0.2 * S), end_ns=int(512 / rate * S), completion_tokens=512)
            for _ in range(n)
        ]
        m = LevelMeasurement(
            streams=n, repeat=0, tokens=512, streaming=True, results=streams, engine_generation_tokens=None,
            requests_running_before=None, requests_running_after=None,
            quiescent=True, start_unix_ns=T0, end_unix_ns=T0 + S, cpu_s=0.001, power_w=36.0,
        )  # fmt: skip
        levels.append(summarize_level(m))
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=T0, engine_url="http://127.0.0.1:8011", engine="qwen", model="qwen3.8-27b"
        ),
        settings=ProbeSettings(streams=[1, 8, 32]),
        levels=levels,
        curve=curve_of("qwen", levels),
    )


def test_deadline_outcomes_count_statuses_hits_findings_and_degraded_cells_per_eval_and_workers() -> None:
    cells, _ = report_records()
    outcomes = {(o.eval_name, o.workers): o for o in deadline_outcomes(cells)}
    serial = outcomes[("serial-review", 1)]
    assert serial.cells == 10
    assert serial.statuses == {"ok": 9, "error": 0, "deadline": 1, "length_cap": 0}
    assert (serial.ceiling_hits, serial.salvaged_findings, serial.degraded) == (1, 2, 1)
    assert outcomes[("nemotron-cards", 4)].statuses["ok"] == 4


def test_outcomes_count_the_cells_the_governor_held_and_the_report_shows_their_waits() -> None:
    rule = "nemotron yields while serial-review runs on qwen"
    cells = [
        serial_cell(
            i, i * 1000.0, 1000.0, 11_500, attributes={sc.CELL_QUEUE_WAIT_S: wait, sc.CELL_QUEUE_RULE: rule}
        )
        for i, wait in enumerate((0.0, 40.0, 2400.0))  # the last waited past its 1800 s ceiling
    ]
    cells.append(serial_cell(3, 3000.0, 1000.0, 11_500))
    [outcome] = deadline_outcomes(cells)
    assert (outcome.queued, outcome.longest_wait_s, outcome.waits_past_deadline) == (2, 2400.0, 1)
    assert outcome.held_by == rule
    content = build_report(ReportInputs(source="test", cells=cells))
    page = render_html(content, images={})
    outcomes = page[page.index("<h2>Deadline outcomes</h2>") : page.index("<h2>Queue rules</h2>")]
    assert '<th class="num">longest queue wait s</th>' in outcomes
    assert f"<td>{rule}</td>" in outcomes
    assert '<td class="num">2,400</td>' in outcomes

    [ungoverned] = deadline_outcomes(cells[3:])
    assert (ungoverned.queued, ungoverned.longest_wait_s, ungoverned.held_by) == (0, None, None)
    plain = render_html(build_report(ReportInputs(source="test", cells=cells[3:])), images={})
    assert "queue wait" not in plain  # no governor, no columns


def test_report_from_the_store_has_every_section_and_embeds_its_plots(tmp_path: Path) -> None:
    cells, windows = report_records()
    probe = _probe_report()
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells(cells)
        store.write_windows(windows)
        store.put_document("probe", "qwen sweep", probe.model_dump(mode="json"))
        inputs = inputs_from_store(store)
    content = build_report(inputs)

    [serial] = [n for n in content.neighbours if n.eval_name == "serial-review"]
    assert serial.baseline.median == pytest.approx(11.5)
    nemo = next(w for w in serial.windows if w.engine == "nemotron")
    assert nemo.cost == pytest.approx(1 - 5.25 / 11.5)
    assert content.advice is not None
    assert content.advice.rules

    page = write_report(content, tmp_path / "out")
    text = page.read_text()
    for heading in (
        "Concurrency: what more streams buy",
        "Neighbour cost",
        "Deadline outcomes",
        "Queue rules",
    ):
        assert heading in text
    assert "Probe of qwen (qwen3.8-27b)" in text
    assert "54%" in text  # 1 - 5.25/11.5 = 54%
    assert "11.10" in text  # the probe's single-stream median
    images = re.findall(
        r'src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="[^"]*" data-file="([^"]+)"', text
    )
    assert {name for _, name in images} >= {
        "curve-1-qwen.png",
        "neighbour-serial-review.png",
        "concurrency.png",
    }
    for data, name in images:
        png = base64.b64decode(data)
        assert png.startswith(b"\x89PNG")
        assert (tmp_path / "out" / name).read_bytes() == png
    assert "<script" not in text
    assert 'href="http' not in text


def test_tables_mark_a_nonzero_count_and_never_a_zero() -> None:
    cells, windows = report_records()
    page = render_html(build_report(ReportInputs(source="t", cells=cells, windows=windows)), {})
    marked = re.findall(r'<td class="num warn">([^<]*)</td>', page)
    assert "1" in marked  # the serial eval's ceiling hit
    assert "0" not in marked  # nemotron's cells hit no ceiling
    assert '<td class="num">0</td>' in page


def test_numbers_align_right_and_text_left() -> None:
    cells, windows = report_records()
    page = render_html(build_report(ReportInputs(source="t", cells=cells, windows=windows)), {})
    assert "<td>serial-review</td>" in page  # a name: left
    assert '<th class="num">cells</th>' in page  # a column of counts: right, header and all
    assert '<td class="num">5,250.00</td>' not in page  # (a rate reads with two decimals)
    assert re.search(r'<td class="num">\d+\.\d\d</td>', page)


def test_report_for_one_eval_names_an_unknown_eval(tmp_path: Path) -> None:
    cells, _windows = report_records()
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells(cells)
        inputs = inputs_from_store(store)
    with pytest.raises(InputError, match=r"no cells recorded for eval 'nope'.*serial-review"):
        build_report(inputs, eval_name="nope")


def test_report_prices_a_mixed_worker_eval_per_worker_count_and_counts_failures_apart(tmp_path: Path) -> None:
    cells, windows = report_records()
    # The serial eval again at four workers, later, alone: its own batching is no neighbour's cost.
    cells += [
        Cell(
            uid=f"four-{i}",
            eval_name="serial-review",
            cell_id=f"c{i}",
            engine="qwen",
            start_unix_ns=T0 + 50_000 * S,
            end_unix_ns=T0 + 51_000 * S,
            prompt_tokens=5000,
            completion_tokens=10_000,
            workers=4,
        )
        for i in range(4)
    ]
    # A failed cell inside the nemotron window: counted as failed, never as a timeout.
    cells.append(serial_cell(20, 8500.0, 400.0, 100, status=CellStatus.ERROR))
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells(cells)
        store.write_windows(windows)
        inputs = inputs_from_store(store)
    content = build_report(inputs)
    serial = {n.workers: n for n in content.neighbours if n.eval_name == "serial-review"}
    assert sorted(serial) == [1, 4]
    assert serial[1].baseline.median == pytest.approx(11.5)  # the 10 tok/s four-worker cells stay out
    assert serial[4].baseline.median == pytest.approx(10.0)
    assert (serial[1].timeouts, serial[1].failures) == (1, 1)
    nemo = next(w for w in serial[1].windows if w.engine == "nemotron")
    assert nemo.cost == pytest.approx(1 - 5.25 / 11.5)
    assert nemo.failures == 1
    page = write_report(content, tmp_path / "out")
    text = page.read_text()
    assert "<h3>serial-review at 1 worker</h3>" in text
    assert "1 of 11 cells timed out and 1 failed" in text
    assert (tmp_path / "out" / "neighbour-serial-review-1-workers.png").exists()


def test_the_page_opens_with_the_answers_and_the_rules() -> None:
    import html as html_lib

    cells, windows = report_records()
    content = build_report(ReportInputs(source="t", cells=cells, windows=windows))
    page = html_lib.unescape(render_html(content, {}))
    box = page[page.index('<section class="answers">') : page.index("</section>")]
    assert page.index('<section class="answers">') < page.index("Concurrency: what more streams buy")
    texts = [a.text for a in content.answers]
    assert any(
        t.startswith("nemotron-cards eval, 4 workers on nemotron on another engine cost serial-review")
        for t in texts
    )
    assert any(
        t.startswith("what more workers buy is not measured: no eval ran at two worker counts") for t in texts
    )
    for answer in content.answers[:-1]:
        tag = "<li>" if answer.measured else '<li class="unmeasured">'
        assert f"{tag}{answer.text}</li>" in box
    assert content.advice is not None
    for rule in content.advice.rules:
        assert f"<li>{rule_text(rule)}</li>" in box


def test_the_page_names_figures_as_the_command_line_does_and_explains_each_once() -> None:
    import html as html_lib

    from spark_otel.views.tables import GLOSSARY, probe_table

    cells, windows = report_records()
    probe = _probe_report()
    page = html_lib.unescape(
        render_html(build_report(ReportInputs(source="t", cells=cells, windows=windows, probes=[probe])), {})
    )
    columns, _ = probe_table(probe)  # the very columns `spark-otel probe` prints
    header = page[page.index("Probe of qwen") :]
    header = header[header.index("<thead>") : header.index("</thead>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", header) == columns
    for term in ("engine/probe", "streams off pin", "cells in flight", "ceiling hits"):
        assert page.count(f"<b>{term}</b>: {GLOSSARY[term]}") == 1
    assert '<th class="num">cost %</th>' in page
    assert '<td class="num">54 !</td>' in page  # past the advisor's 20% threshold, as the CLI marks it
