"""The report's plots drawn in forked processes (`render_images` past `PARALLEL_FROM` plots): the
same PNGs, under the same names in the same order, as drawn in the command's own process; and a
drawing process that dies leaves every plot drawn here instead, not a report without plots."""

from __future__ import annotations

import os
from typing import Any

import pytest

from spark_otel.model import Cell, LoadWindow
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.report import ReportInputs, build_report, plots, render_images
from spark_otel.report.content import ReportContent

S = 1_000_000_000
T0 = 1_790_000_000 * S


def _cell(uid: str, eval_name: str, start_s: float, tokens: int) -> Cell:
    return Cell(
        uid=uid, eval_name=eval_name, cell_id=uid, engine="qwen", workers=1,
        start_unix_ns=T0 + int(start_s * S), end_unix_ns=T0 + int((start_s + 100.0) * S),
        completion_tokens=tokens,
    )  # fmt: skip


def _content() -> ReportContent:
    """Two evals beside a load, and a probe's curve: a curve, the concurrency, two timelines and a
    neighbour plot."""
    cells = [_cell(f"s{i}", "serial", i * 100.0, 1000 - 100 * (i % 3)) for i in range(6)]
    cells += [_cell(f"o{i}", "other", i * 100.0, 600) for i in range(4)]
    load = LoadWindow(
        uid="load", name="nemotron load", kind="load", engine="nemotron",
        start_unix_ns=T0 + 300 * S, end_unix_ns=T0 + 500 * S, streams=4,
    )  # fmt: skip
    curve = RateCurve(
        engine="qwen",
        points=[
            CurvePoint(streams=n, per_stream_rate=10.0 / n**0.5, aggregate_rate=10.0 * n**0.5, n=n)
            for n in (1, 2, 4)
        ],
    )
    return build_report(ReportInputs(source="test", cells=cells, windows=[load], curves=[curve]))


def test_plots_drawn_in_processes_are_the_plots_drawn_here() -> None:
    content = _content()
    here = render_images(content, processes=1)
    assert len(here) >= 4
    forked = render_images(content, processes=2)
    assert list(forked) == list(here)
    assert forked == here


def test_a_drawing_process_that_dies_leaves_every_plot_drawn_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault no real plot produces on demand (a drawing process killed, as by the OOM killer),
    so a process that is not this one exits as it draws a timeline."""
    content = _content()
    here = render_images(content, processes=1)
    me = os.getpid()
    draw = plots.plot_timeline

    def dies_elsewhere(*args: Any, **kw: Any) -> bytes:
        if os.getpid() != me:
            os._exit(1)
        return draw(*args, **kw)

    monkeypatch.setattr(plots, "plot_timeline", dies_elsewhere)
    assert render_images(content, processes=2) == here
