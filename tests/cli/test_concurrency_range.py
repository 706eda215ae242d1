"""`spark-otel concurrency --since/--until`: the cells that start in the range, read from the store
by time, each weighed against every cell running beside it, in tables and JSON alike; energy
shares priced over the whole box."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.support.cells import S
from tests.support.cells import cell as make_cell
from tests.support.energy_samples import T0, energy_store

from spark_otel.analysis.concurrency import concurrency
from spark_otel.cli import main
from spark_otel.store import Store

DAY0 = int(datetime(2026, 11, 2, tzinfo=UTC).timestamp()) * S


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / S, UTC).isoformat()


@pytest.fixture
def box(tmp_path: Path) -> str:
    """a: day 0, 00:00-02:00; b: 01:00-03:00; c: 02:30-03:30 (beside b); d: the next day."""
    path = tmp_path / "box.sqlite"
    cells = [
        make_cell("a", 0, 7200, 7200, t0_ns=DAY0, workers=2),
        make_cell("b", 3600, 10800, 7200, t0_ns=DAY0, workers=2),
        make_cell("c", 9000, 12600, 3600, t0_ns=DAY0, workers=2),
        make_cell("d", 86_400, 90_000, 3600, t0_ns=DAY0, workers=2),
    ]
    with Store(path) as store:
        store.write_cells(cells)
    return str(path)


def answer(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["concurrency", *argv, "--json", "--cells"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_range_reports_the_cells_that_start_in_it_weighed_against_their_neighbours(
    box: str, capsys
) -> None:
    data = answer(capsys, "--store", box, "--since", "2026-11-02T01:30", "--until", "2026-11-02T23:59")
    (engine,) = data["engines"]
    assert [c["uid"] for c in engine["cells"]] == ["c"]
    with Store(box, read_only=True) as store:
        whole = concurrency(store.cells())
    (want,) = [x for x in whole.engines[0].cells if x.uid == "c"]
    assert engine["cells"][0] == want.model_dump(mode="json")  # b, begun before the range, counts
    assert engine["cells"][0]["in_flight"] == (1800 * 2 + 1800) / 3600
    # A date alone is its midnight, UTC; an offset is honoured.
    assert [
        c["uid"] for c in answer(capsys, "--store", box, "--since", "2026-11-03")["engines"][0]["cells"]
    ] == ["d"]
    late = answer(capsys, "--store", box, "--until", "2026-11-02T02:00+01:00")  # 01:00 UTC
    assert [c["uid"] for c in late["engines"][0]["cells"]] == ["a", "b"]


def test_the_tables_show_the_same_range(box: str, capsys) -> None:
    assert main(["concurrency", "--store", box, "--since", iso(DAY0 + 9000 * S), "--cells"]) == 0
    out = capsys.readouterr().out
    assert "2 cells" in out  # c and d


def test_a_range_without_cells_is_refused_naming_it(box: str, capsys) -> None:
    assert main(["concurrency", "--store", box, "--since", "2026-12-01", "--json"]) == 1
    assert "starting in the range of --since/--until" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("when", "problem"), [("yesterday", "not an ISO 8601 date"), ("1999-12-31", "outside 2000-2100")]
)
def test_a_bad_instant_is_a_usage_error_naming_it(box: str, capsys, when: str, problem: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["concurrency", "--store", box, "--since", when])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--since" in err
    assert problem in err


def test_energy_in_a_range_is_each_cells_share_of_the_whole_box(tmp_path: Path, capsys) -> None:
    path = tmp_path / "energy.sqlite"
    energy_store(path)
    whole = answer(capsys, "--store", str(path))["energy"]
    ranged = answer(capsys, "--store", str(path), "--since", iso(T0 + 50 * S))["energy"]
    assert sorted(c["uid"] for c in ranged["cells"]) == ["p1", "p2"]
    assert ranged["cells"] == [c for c in whole["cells"] if c["uid"] in ("p1", "p2")]


def test_without_numpy_concurrency_names_the_extra(
    box: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    for name in [m for m in sys.modules if m == "numpy" or m.startswith("numpy.")] + ["numpy"]:
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: the import fails
    assert main(["concurrency", "--store", box, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "pip install 'spark-otel[cli]'" in captured.err
