"""The report's "Where the time went": each eval's phases summed, a bar per cell, and a verdict for
every timeout, from the article's Appendix D and from cells with a recorded budget."""

from __future__ import annotations

import html
from pathlib import Path

from tests.support.article import D_EVAL, appendix_d_cells, appendix_d_loads

from spark_otel.model import Cell
from spark_otel.report import ReportInputs, build_report, render_html, write_report

NEMOTRON = "nemotron-cards eval, 4 workers on nemotron"


def _budgeted(k: int, first_token: float, decode: float) -> Cell:
    return Cell(
        uid=f"r{k}", eval_name="review", cell_id=f"B#{k}", engine="qwen",
        start_unix_ns=k * 10**12, end_unix_ns=k * 10**12 + int((first_token + decode + 5) * 1e9),
        completion_tokens=int(decode * 10),
        first_token_s=first_token, decode_s=decode, unsplit_s=0.0, other_s=5.0,
    )  # fmt: skip


def test_the_report_shows_where_each_evals_time_went_and_why_its_cells_timed_out(tmp_path: Path) -> None:
    probes, others = appendix_d_loads()
    cells = [*appendix_d_cells(), *others, _budgeted(1, 300.0, 600.0), _budgeted(2, 30.0, 100.0)]
    content = build_report(ReportInputs(source="t", cells=cells, windows=probes))
    (review,) = [e for e in content.eval_budgets if e.eval_name == "review"]
    assert review.seconds == {"first_token": 330.0, "decode": 700.0, "unsplit": 0.0, "other": 10.0}
    assert review.wall_s == 1040.0
    assert [v.cell_id for v in content.timeouts if v.eval_name == D_EVAL] == [
        "B #454 security run2", "F #11 correctness run1", "F #11 correctness run2",
    ]  # fmt: skip
    page_path = write_report(content, tmp_path / "out")
    assert (tmp_path / "out" / "budget-review.png").stat().st_size > 1000
    page = html.unescape(page_path.read_text())
    assert "<h2>Where the time went</h2>" in page
    assert "330.0 s (32%)" in page  # first token: 330 of 1,040 s
    assert "700.0 s (67%)" in page
    assert page.count(f"slowed by {NEMOTRON}") == 3
    assert "budget-review.png" in page


def test_without_budgets_or_timeouts_the_section_says_so() -> None:
    cells = [
        Cell(uid="a", eval_name="e", cell_id="1", start_unix_ns=0, end_unix_ns=10**9, completion_tokens=5)
    ]
    page = render_html(build_report(ReportInputs(source="t", cells=cells)), {})
    assert "No cell was recorded with a time budget" in page
    assert "No cell hit its ceiling." in page
