"""The table shapes the command line and the report share, cell by cell from levels and evals
built by hand: every column of the probe's Appendix A table, the energy table and its notes, the
level table, and the model-time labels. A figure in the wrong column or unit reads as another."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from tests.support.probe_figures import T0, S, level_with_figures, report_of_levels

from spark_otel import _semconv as sc
from spark_otel.analysis.concurrency import LevelSummary
from spark_otel.analysis.energy import EnergyReport, EvalEnergy
from spark_otel.analysis.stats import RateSummary, summarize
from spark_otel.model import Cell
from spark_otel.views.tables import (
    energy_lines,
    energy_table,
    fmt_number,
    level_table,
    model_time,
    probe_energy_line,
    probe_table,
    seconds,
    time_scales,
)


def test_the_probe_table_puts_each_figure_in_its_column_with_its_digits() -> None:
    columns, rows = probe_table(
        report_of_levels([level_with_figures(1), level_with_figures(4, token_mismatches=2, errors=1)])
    )
    assert columns == [
        "streams", "wall s", "per-stream tok/s (median)", "p10 to p90 tok/s", "probe aggregate tok/s",
        "engine aggregate tok/s", "engine/probe", "power W", "J/tok", "TTFT s", "client CPU µs/tok",
        "streams off pin",
    ]  # fmt: skip
    # J/tok: 200 W x 10 s over 100 tokens at 1 stream, over 400 at 4.
    assert rows == [
        [
            "1",
            "10.0",
            "10.25",
            "9.50 to 11.12",
            "10.0",
            "12.5",
            "1.25",
            "200.0",
            "20.000",
            "0.12",
            "7.2",
            "0",
        ],
        ["4", "10.0", "10.25", "9.50 to 11.12", "40.0", "50.0", "1.25", "200.0", "5.000", "0.12", "7.2", "3"],
    ]


def test_the_probe_table_numbers_repeated_rounds_marks_a_client_over_budget_and_says_model_s() -> None:
    levels = [
        level_with_figures(2, repeat=0),
        level_with_figures(2, repeat=1, client_cpu_over_budget=True, power_w=None),
    ]
    columns, rows = probe_table(report_of_levels(levels, repeats=2, time_scale=100.0))
    assert (columns[1], columns[9]) == ("wall model s", "TTFT model s")
    assert [r[0] for r in rows] == ["2 #1", "2 #2"]
    assert [r[10] for r in rows] == ["7.2", "7.2 !"]
    assert [(r[7], r[8]) for r in rows] == [("200.0", "10.000"), ("-", "-")]


def test_the_probe_energy_line_compares_the_most_streams_with_the_fewest_or_says_why_not() -> None:
    assert probe_energy_line(report_of_levels([level_with_figures(1), level_with_figures(4)])) == (
        "energy (power x wall, over the probe's own tokens): 4 streams: 5 J/token against 20 at 1 (4.0x less)"
    )
    assert probe_energy_line(
        report_of_levels([level_with_figures(1), level_with_figures(4)], gpu="smi")
    ).startswith("energy (mean power samples (nvidia-smi), estimated, over the probe's own tokens): ")
    assert probe_energy_line(
        report_of_levels([level_with_figures(1), level_with_figures(4, power_w=None)])
    ) == ("energy: one level measured, nothing to compare its J/token with")
    assert probe_energy_line(report_of_levels([level_with_figures(1, power_w=None)], gpu=None)) == (
        "energy: no GPU power was read at any level (power source none); measure with "
        "`spark-otel probe --gpu nvml ...`, or record the GPU beside it with `spark-otel receive --gpu auto`"
    )
    assert "(power source sim)" in probe_energy_line(
        report_of_levels([level_with_figures(1, power_w=None)], gpu="sim")
    )


def _eval(name: str, workers: int | None, measured: int, **kw: object) -> EvalEnergy:
    fields: dict[str, object] = {
        "eval_name": name,
        "workers": workers,
        "n_cells": 3,
        "n_measured": measured,
        "output_tokens": 12_345,
        "energy_j": 24_690.4,
        "j_per_token": 2.0,
        "j_per_cell": 8230.0,
        "per_cell": summarize([8000.0, 8230.0, 8460.0]),
        "start_unix_ns": int(datetime(2026, 12, 1, 9, 5, tzinfo=UTC).timestamp()) * S,
        "end_unix_ns": int(datetime(2026, 12, 1, 10, 40, tzinfo=UTC).timestamp()) * S,
    }
    fields.update(kw)
    return EvalEnergy.model_validate(fields)


def _energy(evals: list[EvalEnergy], *, estimated: bool = False) -> EnergyReport:
    return EnergyReport(
        gpus=["0", "1"], estimated=estimated, covered_start_unix_ns=T0, covered_end_unix_ns=T0 + S,
        box_j=123_456.7, attributed_j=0.0, partial_j=0.0, idle_j=2_000.4, evals=evals, cells=[],
        unmeasured=0, measure=None,
    )  # fmt: skip


@pytest.mark.usefixtures("india_local_time")
def test_the_energy_table_names_the_gpus_and_the_source_and_fills_each_column() -> None:
    """The span column is UTC whatever the local zone, as its header says."""
    report = _energy(
        [_eval("serial", 1, 3), _eval("cards", None, 0, j_per_token=None, per_cell=summarize([]))]
    )
    title, columns, rows = energy_table(report)
    assert (
        title == "energy on the box (GPU 0, 1, energy counter): 123,457 J while cells ran,"
        " 2,000 J idle between them"
    )
    assert columns == [
        "eval", "workers", "cells measured", "output tok", "energy J", "J/tok",
        "J/cell (median, 95% CI)", "span (UTC)",
    ]  # fmt: skip
    serial_ci = summarize([8000.0, 8230.0, 8460.0])
    assert rows[0] == [
        "serial", 1, "3 of 3", "12,345", "24,690", "2.000",
        f"8,230 [{serial_ci.ci_low:,.0f} to {serial_ci.ci_high:,.0f}]", "12-01 09:05 to 12-01 10:40",
    ]  # fmt: skip
    assert rows[1] == ["cards", "-", "0 of 3", "12,345", "-", "-", "-", "-"]
    estimated, _, _ = energy_table(_energy([], estimated=True), scales=[1.0, 50.0])
    assert "(GPU 0, 1, integrated from power samples, estimated)" in estimated
    assert estimated.endswith(
        " idle between them (model time, 50x, for the cells recorded under a model clock)"
    )


def test_the_energy_table_leaves_the_interval_out_when_the_cells_give_none_and_a_missing_time_is_a_dash() -> (
    None
):
    one = _eval("one", 1, 1, per_cell=summarize([8000.0]), end_unix_ns=None)
    [row] = energy_table(_energy([one]))[2]
    assert row[6] == "8,000"
    assert row[7] == "12-01 09:05 to -"


def test_the_energy_notes_say_what_is_unmeasured_and_the_command_that_would_measure_it() -> None:
    assert energy_lines(None, 7, "spark-otel receive --gpu auto") == [
        "energy: no GPU readings in the store for these 7 cells; measure with `spark-otel receive --gpu auto`"
    ]
    split = (
        "energy: the box's energy split by tokens among the cells in flight, stretch by stretch; "
        "load that is not a recorded cell (a probe, another client) is charged to the cells beside it"
    )
    assert energy_lines(_energy([]), 0, "m") == [split]
    partial = _energy([]).model_copy(update={"unmeasured": 2, "cells": [object()] * 5, "measure": "nvml cmd"})
    assert energy_lines(partial, 5, "m") == [
        "energy: 2 of 5 cells ran outside the GPU readings (no energy for them);"
        " measure with `nvml cmd` beside the eval",
        split,
    ]
    assert "measure with `m` beside" in energy_lines(partial.model_copy(update={"measure": None}), 5, "m")[0]


def _cell(scale: object | None) -> Cell:
    attributes = {} if scale is None else {sc.TIME_SCALE: scale}
    return Cell(
        uid="u",
        eval_name="e",
        cell_id="c",
        engine="qwen",
        start_unix_ns=T0,
        end_unix_ns=T0 + S,
        attributes=attributes,
    )


def test_time_scales_lists_each_once_in_order_and_reads_a_missing_or_bad_one_as_real_time() -> None:
    cells = [_cell(100.0), _cell(None), _cell("100"), _cell("fast"), _cell(2)]
    assert time_scales(cells) == [100.0, 1.0, 2.0]
    # Any record with attributes: a value that is no number at all (None) reads as real time too.
    assert time_scales([SimpleNamespace(attributes={sc.TIME_SCALE: None}), _cell(3)]) == [1.0, 3.0]


def test_model_time_labels_a_title_only_for_model_time_and_says_so_for_a_mix() -> None:
    assert model_time([1.0, None]) == ""
    assert model_time([100.0]) == " (model time, 100x)"
    assert model_time([100.0, 2.5, 100.0]) == " (model time, 2.5x, 100x)"
    assert model_time([None, 100.0]) == " (model time, 100x, for the cells recorded under a model clock)"
    assert (seconds([1.0]), seconds([None, 3.0])) == ("s", "model s")


def test_a_number_cell_is_thousands_separated_or_a_dash() -> None:
    assert (fmt_number(None), fmt_number(1234.5), fmt_number(1234.5, 0), fmt_number(0.0)) == (
        "-", "1,234.50", "1,234", "0.00",
    )  # fmt: skip


def test_the_level_table_puts_each_rate_statistic_in_its_column() -> None:
    rate = RateSummary(n=3, median=11.5, p10=9.25, p90=1234.5, mean=12.125)
    levels = [
        LevelSummary(level=2, n_cells=4, rate=rate, ceiling_hits=1, failures=0),
        LevelSummary(level=3, n_cells=1, rate=RateSummary(n=0), ceiling_hits=0, failures=1),
    ]
    columns, rows = level_table("cells in flight", levels)
    assert columns == [
        "cells in flight", "cells", "cells with a rate", "median tok/s", "p10 tok/s", "p90 tok/s",
        "mean tok/s", "ceiling hits", "failed",
    ]  # fmt: skip
    assert rows == [
        [2, 4, 3, "11.50", "9.25", "1,234.50", "12.12", 1, 0],
        [3, 1, 0, "-", "-", "-", "-", 0, 1],
    ]
