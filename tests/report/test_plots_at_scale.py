"""Plots of a long history (issue 38): a neighbour plot draws the windows beside the most cells and
says how many it left out; a timeline gives each load one colour and one legend entry however many
times it ran, and past as many loads as it has colours shades the rest in one grey."""

from __future__ import annotations

from typing import Any

from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.patches import Patch

from spark_otel.analysis.neighbour import NeighbourReport, WindowCost, neighbour_cost, windows_touched
from spark_otel.analysis.stats import RateSummary
from spark_otel.model import Cell, LoadWindow
from spark_otel.report.plots import (
    _LOAD_COLOURS,
    _OTHER_LOADS,
    NEIGHBOUR_ROWS,
    neighbour_figure,
    timeline_figure,
)

S = 1_000_000_000
T0 = 1_790_000_000 * S


def _window(k: int, n_cells: int) -> WindowCost:
    return WindowCost(
        uid=f"w{k}", name=f"load {k}", kind="load", engine="nemotron", streams=4,
        start_unix_ns=T0 + k * S, end_unix_ns=T0 + (k + 1) * S, same_engine=False, n_cells=n_cells,
        timeouts=0, failures=0, rate=RateSummary(n=n_cells, median=5.0), min_rate=4.0, max_rate=6.0,
        cost=0.5,
    )  # fmt: skip


def _report(windows: list[WindowCost]) -> NeighbourReport:
    return NeighbourReport(
        eval_name="serial", engine="qwen", workers=None, min_overlap_fraction=0.25, n_cells=3, timeouts=0,
        failures=0, baseline=RateSummary(n=3, median=10.0, p10=9.0, p90=11.0), baseline_timeouts=0,
        windows=windows, cells=[], warnings=[],
    )  # fmt: skip


def test_a_neighbour_plot_of_many_windows_draws_those_beside_the_most_cells_in_time_order() -> None:
    """45 windows: the five beside one cell each are left out, the rest drawn in time order."""
    few = {3, 10, 11, 30, 44}
    windows = [_window(k, 1 if k in few else 2 + k % 3) for k in range(NEIGHBOUR_ROWS + 5)]
    [ax] = neighbour_figure(_report(windows)).axes
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        f"load {k}" for k in range(NEIGHBOUR_ROWS + 5) if k not in few
    ]
    assert (
        ax.get_title() == f"What other load cost serial (the {NEIGHBOUR_ROWS} beside the most cells, of 45)"
    )
    [ax] = neighbour_figure(_report(windows[:NEIGHBOUR_ROWS])).axes
    assert len(ax.get_yticklabels()) == NEIGHBOUR_ROWS
    assert ax.get_title() == "What other load cost serial"


def _cell(i: int) -> Cell:
    """Cells back to back, 100 s each at 10 tok/s."""
    start = T0 + i * 100 * S
    return Cell(
        uid=f"c{i}", eval_name="serial", cell_id=f"c{i}", engine="qwen", start_unix_ns=start,
        end_unix_ns=start + 100 * S, completion_tokens=1000, workers=1,
    )  # fmt: skip


def _load(name: str, i: int) -> LoadWindow:
    """A load over cell ``i`` alone."""
    start = T0 + i * 100 * S
    return LoadWindow(uid=f"{name}-{i}", name=name, kind="load", engine="nemotron", start_unix_ns=start,
                      end_unix_ns=start + 100 * S)  # fmt: skip


def _shades(ax: Any) -> list[tuple[str, str]]:
    """Each shaded load in time order: its legend label where it is the first of that label's
    windows ('' after), and its colour. The windows are one collection, a polygon each in time
    order; the legend carries an entry per label."""
    [shades] = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(ax.patches) == 0  # no patch per window
    colours = [to_hex(c) for c in shades.get_facecolor()]
    starts = [float(path.vertices[:, 0].min()) for path in shades.get_paths()]
    assert starts == sorted(starts)
    legend = ax.get_legend()
    entries = {
        text.get_text(): to_hex(handle.get_facecolor())
        for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True)
        if isinstance(handle, Patch)
    }
    out, seen = [], set()
    for colour in colours:
        [label] = [name for name, c in entries.items() if c == colour]
        out.append(("" if label in seen else label, colour))
        seen.add(label)
    return out


def test_a_load_that_ran_several_times_keeps_one_colour_and_one_legend_entry() -> None:
    cells = [_cell(i) for i in range(8)]
    loads = [_load("probe", 1), _load("other eval", 2), _load("probe", 4), _load("probe", 6)]
    [ax] = timeline_figure(neighbour_cost("serial", cells, loads)).axes
    probe, other = _LOAD_COLOURS[0], _LOAD_COLOURS[1]
    assert _shades(ax) == [("probe", probe), ("other eval", other), ("", probe), ("", probe)]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels.count("probe") == 1
    assert "other eval" in labels


def test_past_as_many_loads_as_colours_the_ones_beside_the_fewest_cells_share_a_grey() -> None:
    """Nine loads over 14 cells: the two that ran twice and four of the seven that ran once keep
    their colours (most cells first, then the first to appear); three go grey, one legend entry."""
    cells = [_cell(i) for i in range(14)]
    once = [f"load {k}" for k in range(7)]
    loads = [_load(name, i) for i, name in enumerate(once)] + [
        _load("twice a", 7), _load("twice b", 8), _load("twice a", 9), _load("twice b", 10),
    ]  # fmt: skip
    result = neighbour_cost("serial", cells, loads)
    assert len(windows_touched(result)) == 11
    [ax] = timeline_figure(result).axes
    kept = ["load 0", "load 1", "load 2", "load 3", "twice a", "twice b"]
    colour = dict(zip(kept, _LOAD_COLOURS, strict=False))
    grey = [("3 other loads", _OTHER_LOADS), ("", _OTHER_LOADS), ("", _OTHER_LOADS)]
    assert _shades(ax) == [(name, colour[name]) for name in kept[:4]] + grey + [
        ("twice a", colour["twice a"]), ("twice b", colour["twice b"]), ("", colour["twice a"]),
        ("", colour["twice b"]),
    ]  # fmt: skip
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [lbl for lbl in labels if lbl in kept or lbl == "3 other loads"] == [
        *kept[:4],
        "3 other loads",
        *kept[4:],
    ]
