"""`spark-otel neighbour-cost`'s whole output over a small store whose every figure is worked out
by hand: both tables (title, header, rows, notes) and the no-baseline line (snapshots), the `--json` document
for each way of choosing the reports, the refusals, the spinner's phases and the plots' files.

The other tests of the command read a few figures out of the article's store; a changed
placeholder, column, mark or option that reached the wrong place went unseen. Times are printed
in UTC whatever the local zone, so the tests run in a zone that is not UTC.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.cells import cell
from tests.support.printed import (
    phases,
    read_back_without_blanks,
    stderr_on_a_terminal,
)
from tests.support.snapshots import Snapshot

from spark_otel import _semconv as sc
from spark_otel.analysis.neighbour import neighbour_cost, neighbour_costs
from spark_otel.cli import main
from spark_otel.model import CellStatus, LoadWindow
from spark_otel.store import Store

S = 1_000_000_000
MARCH_7 = 1_772_876_460 * S  # 2026-03-07 09:41:00 UTC

# Local time 5:30 ahead of UTC (a POSIX zone, no tz database needed).
pytestmark = pytest.mark.usefixtures("india_local_time")

BG = "bg eval, 2 workers on qwen"


def _store(path: Path) -> tuple[str, list, list[LoadWindow]]:
    """Eval ev on qwen, one worker, 100 s a cell from 09:41 UTC: a baseline of 10, 12 and 14
    tok/s; 6, 5 and a timeout beside a job on nem (4 streams); 9 and a failure beside eval bg's
    two cells on qwen (bg runs under no clock of its own, 10 s more of it at 870 s); x1 brushing
    bg's second run and a probe for 10 s and 5 s of its 100; a timeout beside an engine-less
    stall and eval lone (one cell, no engine, a 100x model clock); a cell without tokens alone."""
    ev = {"eval_name": "ev", "engine": "qwen", "workers": 1, "t0_ns": MARCH_7}
    bg = {"eval_name": "bg", "engine": "qwen", "workers": 2, "t0_ns": MARCH_7}
    cells = [
        cell("b1", 0, 100, 1000, **ev),
        cell("b2", 100, 200, 1200, **ev),
        cell("b3", 200, 300, 1400, **ev),
        cell("j1", 300, 400, 600, **ev),
        cell("j2", 400, 500, 500, **ev),
        cell("j3", 500, 600, 90, status=CellStatus.DEADLINE, **ev),
        cell("g1", 700, 800, 900, **ev),
        cell("g2", 700, 800, None, status=CellStatus.ERROR, **ev),
        cell("x1", 805, 905, 1000, **ev),
        cell("s1", 1100, 1200, 90, status=CellStatus.DEADLINE, **ev),
        cell("n1", 1300, 1400, None, **ev),
        cell("o1", 700, 800, 2000, **bg),
        cell("o2", 700, 800, 2000, **bg),
        cell("o3", 870, 880, 200, **bg),
        cell(
            "l1", 1100, 1200, 500, eval_name="lone", engine=None, t0_ns=MARCH_7,
            attributes={sc.TIME_SCALE: 100},
        ),
    ]  # fmt: skip

    def window(uid: str, name: str, kind: str, start: int, end: int, **kw: object) -> LoadWindow:
        return LoadWindow(
            uid=uid,
            name=name,
            kind=kind,
            start_unix_ns=MARCH_7 + start * S,
            end_unix_ns=MARCH_7 + end * S,
            **kw,
        )

    windows = [
        window("w1", "a job", "load", 300, 600, engine="nem", streams=4),
        window("w3", "stall", "load", 1100, 1200),
        window("w2", "probe 8", "probe", 900, 1000),
    ]
    with Store(path) as store:
        store.write_cells(cells)
        store.write_windows(windows)
    return str(path), cells, windows


def test_the_costs_and_every_cell_of_an_eval(tmp_path: Path, capsys, snapshot: Snapshot) -> None:
    """Costs against the 12 tok/s baseline: 1 - 5.5/12 = 54 % beside the job, 1 - 9/12 = 25 %
    beside bg, both past the default 20 %; no rate beside lone and the stall (a timeout only)."""
    store, _, _ = _store(tmp_path / "s.sqlite")
    assert main(["neighbour-cost", "--store", store, "--eval", "ev", "--all-cells"]) == 0
    snapshot(capsys.readouterr().out)


def test_a_cost_at_the_threshold_is_not_marked_and_baseline_cells_are_left_out(
    tmp_path: Path, capsys
) -> None:
    store, _, _ = _store(tmp_path / "s.sqlite")
    assert main(["neighbour-cost", "--store", store, "--eval", "ev", "--threshold", "0.25"]) == 0
    printed = read_back_without_blanks(capsys.readouterr().out)
    assert printed[2:4] == [
        ["a job", "load", "nem", "4", "09:46 to 09:51", "3", "1", "0", "5.50", "5.00 to 6.00", "54 !"],
        [BG, "eval", "qwen (same)", "2", "09:52 to 09:54", "2", "0", "1", "9.00", "-", "25"],
    ]
    assert printed[7] == "cost %: 1 - that median over the baseline median; ! past --threshold (25%)"
    assert [row[0] for row in printed[10:]] == ["j1", "j2", "j3", "g1", "g2", "x1", "s1"]


def test_an_eval_without_engine_or_baseline_on_a_model_clock(
    tmp_path: Path, capsys, snapshot: Snapshot
) -> None:
    store, _, _ = _store(tmp_path / "s.sqlite")
    assert main(["neighbour-cost", "--store", store, "--eval", "lone"]) == 0
    snapshot(capsys.readouterr().out)


def test_the_baseline_title_names_an_unknown_engine(tmp_path: Path, capsys) -> None:
    path = tmp_path / "e.sqlite"
    with Store(path) as store:
        store.write_cells([cell(f"c{i}", 10 * i, 10 * i + 10, 50, engine=None, workers=1) for i in range(3)])
    assert main(["neighbour-cost", "--store", str(path), "--eval", "g"]) == 0
    assert read_back_without_blanks(capsys.readouterr().out)[0] == (
        "g on unknown engine: baseline over 3 cells overlapping no other load: median 5.00 tok/s, p10 5.00, "
        "p90 5.00"
    )


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> object:
    assert main(["neighbour-cost", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_is_the_analysis_of_the_options_given(tmp_path: Path, capsys) -> None:
    """--min-overlap 0.05 and --merge-gap 100 attribute x1 to the probe (5 s of its 100) and to
    bg's one run from 700 s to 880 s (75 s of it), which the defaults leave brushed."""
    store, cells, windows = _store(tmp_path / "s.sqlite")
    options = ["--store", store, "--eval", "ev", "--min-overlap", "0.05", "--merge-gap", "100"]
    tuned = {"min_overlap_fraction": 0.05, "merge_gap_s": 100.0}
    one = _json([*options, "--workers", "1", "--threshold", "0.3"], capsys)
    assert one == neighbour_cost("ev", cells, windows, workers=1, **tuned).model_dump(mode="json") | {
        "threshold": 0.3
    }
    assert isinstance(one, dict)
    x1 = next(c for c in one["cells"] if c["uid"] == "x1")
    assert x1["windows"] == [BG, "probe 8"]
    assert [w["name"] for w in one["windows"] if w["n_cells"]] == [
        "a job",
        BG,
        "probe 8",
        "lone eval",
        "stall",
    ]
    every = _json(options, capsys)
    [report] = neighbour_costs(cells, windows, eval_names=["ev"], min_cells=1, **tuned)
    assert every == report.model_dump(mode="json") | {"threshold": 0.2}
    lone = _json(["--store", store, "--eval", "lone"], capsys)
    assert isinstance(lone, dict)
    assert (lone["eval_name"], lone["n_cells"], lone["baseline"]["n"]) == ("lone", 1, 0)


def test_an_eval_at_several_worker_counts_is_a_list_of_reports(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.sqlite"
    with Store(path) as store:
        store.write_cells([cell("a", 0, 10, 50, workers=1), cell("b", 20, 30, 80, workers=2)])
    reports = _json(["--store", str(path), "--eval", "g"], capsys)
    assert [(r["workers"], r["n_cells"], r["baseline"]["median"], r["threshold"]) for r in reports] == [
        (1, 1, 5.0, 0.2),
        (2, 1, 8.0, 0.2),
    ]


def test_an_unknown_eval_names_the_stores_evals(tmp_path: Path, capsys) -> None:
    store, _, _ = _store(tmp_path / "s.sqlite")
    empty = str(tmp_path / "empty.sqlite")
    Store(empty).close()
    for path, held in (
        (
            store,
            "it holds 15 cells (`spark-otel cells`), 3 load windows (`spark-otel report`); "
            "evals: bg, ev, lone",
        ),
        (
            empty,
            "nothing is recorded there: instrument an eval (spark_otel.instrument(), with spark_otel.cell() "
            "per cell) or run `spark-otel backfill` first",
        ),
    ):
        assert main(["neighbour-cost", "--store", path, "--eval", "nope"]) == 1
        assert capsys.readouterr().err == f"spark-otel: error: {path}: no cells of eval 'nope'; {held}\n"


def test_the_spinner_names_each_phase(tmp_path: Path, capsys) -> None:
    store, _, _ = _store(tmp_path / "s.sqlite")
    with stderr_on_a_terminal() as terminal:
        assert main(["neighbour-cost", "--store", store, "--eval", "ev"]) == 0
    assert phases(terminal.getvalue()) == [
        "reading cells and load windows",
        f"reading cells and load windows from {store}",
        "pricing neighbours of ev over 15 cells and 3 windows",
        "laying out the tables",
    ]
    capsys.readouterr()


def test_plots_are_drawn_on_each_evals_own_clock_one_file_per_report(tmp_path: Path, capsys) -> None:
    from spark_otel.report.plots import plot_timeline

    store, cells, windows = _store(tmp_path / "s.sqlite")
    real = tmp_path / "ev.png"
    assert (
        main(["neighbour-cost", "--store", store, "--eval", "ev", "--workers", "1", "--plot", str(real)]) == 0
    )
    assert capsys.readouterr().err == f"wrote {real}\n"
    report = neighbour_cost("ev", cells, windows, workers=1)
    assert real.read_bytes() == plot_timeline(report, time_scale=1.0)
    assert real.read_bytes() != plot_timeline(report, time_scale=100.0)  # lone's clock is not ev's
    model = tmp_path / "lone.png"
    assert main(["neighbour-cost", "--store", store, "--eval", "lone", "--plot", str(model), "--json"]) == 0
    captured = capsys.readouterr()
    assert (captured.err, json.loads(captured.out)["eval_name"]) == (f"wrote {model}\n", "lone")
    [lone] = neighbour_costs(cells, windows, eval_names=["lone"], min_cells=1)
    assert model.read_bytes() == plot_timeline(lone, time_scale=100.0)
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["ev.png", "lone.png"]
    missing = tmp_path / "no" / "x.png"
    assert main(["neighbour-cost", "--store", store, "--eval", "ev", "--plot", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"spark-otel: error: --plot {missing}: {missing.parent}: no such directory\n"
    )
