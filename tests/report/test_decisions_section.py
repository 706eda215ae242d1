"""The report's adaptive governor section: built from a real store of cells whose attributes the
governor's own code wrote (tests/support/adaptive_cells), its facts equal to the run's figures,
narrowed with --eval, and its HTML pinned by snapshots; a store without decisions names the
command that records them; `spark-otel report` prints the glance line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.support.adaptive_cells import decided_run
from tests.support.cells import cell
from tests.support.snapshots import Snapshot

from spark_otel.analysis.adaptive_decisions import adaptive_decisions
from spark_otel.cli import main
from spark_otel.model import Cell
from spark_otel.report import build_report, inputs_from_store, render_html
from spark_otel.store import Store
from spark_otel.views.adaptive_decisions import summary_line

_SECTION = re.compile(r"<h2>Adaptive governor: what it admitted and held</h2>.*?(?=<h2>)", re.S)


def _section(page: str) -> str:
    """The section's HTML, a line per tag that opens a block, so a snapshot's diff reads."""
    match = _SECTION.search(page)
    assert match is not None
    return re.sub(r"(<(?:h2|h3|p|table|tr|ul|li)[ >])", r"\n\1", match.group(0)).lstrip("\n") + "\n"


def _stored(tmp_path: Path, cells: list[Cell]) -> Path:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.write_cells(cells)
    return path


def test_the_section_shows_each_evals_decisions_from_the_store(tmp_path: Path, snapshot: Snapshot) -> None:
    path = _stored(tmp_path, decided_run())
    with Store(path, read_only=True) as store:
        inputs = inputs_from_store(store)
    content = build_report(inputs)
    assert content.decisions == adaptive_decisions(decided_run())
    assert content.decisions is not None
    assert (content.decisions.cells, content.decisions.held, content.decisions.hold_s) == (8, 3, 177.75)
    snapshot(_section(render_html(content, {})), "all")

    serial = build_report(inputs, eval_name="serial").decisions
    assert serial is not None
    assert ([e.eval_name for e in serial.evals], serial.cells, serial.held) == (["serial"], 2, 0)
    snapshot(_section(render_html(build_report(inputs, eval_name="serial"), {})), "serial")


def test_a_store_without_decisions_names_the_command_that_records_them(
    tmp_path: Path, snapshot: Snapshot
) -> None:
    path = _stored(tmp_path, [cell("a", 0, 10, 50), cell("b", 5, 20, 50)])
    with Store(path, read_only=True) as store:
        content = build_report(inputs_from_store(store))
    assert content.decisions is not None
    assert (content.decisions.any, content.decisions.cells_seen) == (False, 2)
    snapshot(_section(render_html(content, {})))


def test_the_report_command_prints_the_glance_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # the line unwrapped
    path = _stored(tmp_path, decided_run())
    out_dir = tmp_path / "out"
    assert main(["report", "--store", str(path), "--out", str(out_dir)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"wrote {out_dir / 'report.html'}", summary_line(adaptive_decisions(decided_run()))]
    assert summary_line(adaptive_decisions(decided_run())) in (out_dir / "report.html").read_text().replace(
        "&#x27;", "'"
    )
