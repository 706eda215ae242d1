"""Each cell's energy priced on read from what `Store.energy_inputs` reads for it: always what
`analysis.energy.attribute` gives over the whole store, whatever order cells and GPU readings
arrive in, and whichever cells are asked for."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.energy_samples import T0, S, cell, counter, power
from tests.support.stored_energy import assert_kept_is_derived, kept, priced

from spark_otel import _semconv as sc
from spark_otel.model import Cell, MetricSample
from spark_otel.store import Store
from spark_otel.store import versions as store_versions


def test_a_cell_written_before_the_reading_past_its_end_gets_its_energy_from_that_reading(
    tmp_path: Path,
) -> None:
    """The usual order: the eval writes the cell as it ends; the sampler's next reading covers it."""
    readings = counter(100.0, 60, every=5)  # 100 W, read every 5 s
    with Store(tmp_path / "s.sqlite") as store:
        store.write_samples(readings[:5])  # up to 20 s
        store.write_cells([cell("a", 2, 22, 100), cell("b", 12, 22, 300)])
        assert priced(store) == {}  # nothing read past 22 s yet
        store.write_samples(readings[5:])
        energy = priced(store)
    # 2-12 s: a alone (1,000 J); 12-22 s: a at 5 tok/s, b at 30 tok/s share 1,000 J as 1:6.
    assert energy["a"].box_j == pytest.approx(2_000.0)
    assert energy["a"].share_j == pytest.approx(1_000.0 + 1_000.0 / 7)
    assert energy["b"].box_j == pytest.approx(1_000.0)
    assert energy["b"].share_j == pytest.approx(6_000.0 / 7)
    assert energy["a"].share_j + energy["b"].share_j == pytest.approx(2_000.0)
    assert not energy["a"].estimated


def test_a_cell_recorded_later_beside_others_moves_their_shares(tmp_path: Path) -> None:
    """A long cell ends (and is written) after the short ones beside it: theirs are rewritten."""
    with Store(tmp_path / "s.sqlite") as store:
        store.write_samples(counter(100.0, 100, every=1))
        store.write_cells([cell("short", 10, 20, 100)])
        assert priced(store)["short"].share_j == pytest.approx(1_000.0)
        store.write_cells([cell("long", 0, 90, 900)])  # 10 tok/s beside short's 10 tok/s
        energy = priced(store)
        assert energy["short"].share_j == pytest.approx(500.0)
        assert energy["long"].share_j == pytest.approx(9_000.0 - 500.0)
        assert_kept_is_derived(store)


def test_a_cell_the_readings_do_not_cover_has_no_row_and_rewriting_it_outside_drops_its_row(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.write_samples(counter(50.0, 30, every=5))
        store.write_cells([cell("in", 5, 25, 10), cell("out", 20, 40, 10)])
        assert set(priced(store)) == {"in"}
        store.write_cells([cell("in", 25, 45, 10)])  # re-ingested with other times: now outside
        assert priced(store) == {}
    with Store(tmp_path / "moved.sqlite") as store:
        store.write_samples(counter(50.0, 100, every=5))
        store.write_cells([cell("stays", 10, 20, 10), cell("moves", 10, 20, 10)])
        assert priced(store)["stays"].share_j == pytest.approx(250.0)
        store.write_cells([cell("moves", 60, 70, 10)])  # its old neighbour has the box alone now
        assert priced(store)["stays"].share_j == pytest.approx(500.0)
        assert priced(store)["moves"].share_j == pytest.approx(500.0)
        store.write_cells([cell("late", 80, 90, 10), cell("moves", 80, 90, 10)])
        store.write_cells([cell("moves", 5, 8, 10)])  # earlier: "late" is left alone too
        assert priced(store)["late"].share_j == pytest.approx(500.0)
        assert_kept_is_derived(store)


def test_a_write_of_more_cells_than_sqlite_binds_at_once_reprices_all_their_neighbours(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.write_samples(counter(10.0, 1_400, every=10))
        store.write_cells([cell(f"c{k}", k, k + 1, 10) for k in range(1_200)])
        store.write_cells([cell(f"n{k}", k, k + 1, 10) for k in range(1_200)])  # one beside each
        assert len(priced(store)) == 2_400
        assert priced(store, ["c0", "c1199", "n700"]).keys() == {"c0", "c1199", "n700"}
        assert priced(store, ["c1199"])["c1199"].share_j == pytest.approx(5.0)
        store.write_cells([cell(f"n{k}", k + 1_300, k + 1_301, 10) for k in range(1_200)])  # moved away
        assert priced(store)["c1199"].share_j == pytest.approx(10.0)  # alone again
        assert priced(store)["c3"].share_j == pytest.approx(10.0)


def test_power_readings_give_an_estimated_share_and_two_gpus_sum(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells([cell("a", 10, 20, 10)])
        store.write_samples(power(40.0, 30, every=2))
        assert priced(store)["a"].estimated
        assert priced(store)["a"].box_j == pytest.approx(400.0)
    with Store(tmp_path / "two.sqlite") as store:
        store.write_cells([cell("a", 10, 20, 10)])
        store.write_samples(counter(40.0, 30, every=2, gpu="0") + counter(60.0, 30, every=2, gpu="1"))
        assert priced(store)["a"].box_j == pytest.approx(1_000.0)
        assert not priced(store)["a"].estimated
        assert_kept_is_derived(store)


def test_a_gpu_read_less_often_is_reached_beyond_the_others_readings(tmp_path: Path) -> None:
    """GPU 1 read every 10 s, GPU 0 every second: a 2 s cell between GPU 1's readings still sums
    both (the nearest readings of GPU 0 alone would leave GPU 1 out)."""
    with Store(tmp_path / "s.sqlite") as store:
        store.write_samples(counter(40.0, 40, every=1, gpu="0") + counter(60.0, 40, every=10, gpu="1"))
        store.write_cells([cell("a", 13, 15, 10)])
        assert priced(store)["a"].box_j == pytest.approx(200.0)
        assert_kept_is_derived(store)


def test_readings_that_arrive_late_or_out_of_order_reprice_the_cells_they_reach(tmp_path: Path) -> None:
    """A second GPU's sampler started late (or a backfill of its readings), and a reading written
    between two older ones: both change cells already priced."""
    with Store(tmp_path / "s.sqlite") as store:
        store.write_samples(counter(40.0, 30, every=2, gpu="0"))
        store.write_cells([cell("a", 10, 20, 10), cell("before", 2, 8, 10)])
        assert priced(store)["a"].box_j == pytest.approx(400.0)
        assert priced(store)["before"].box_j == pytest.approx(240.0)
        late = [r for r in counter(60.0, 30, every=2, gpu="1") if r.unix_ns >= T0 + 10 * S]
        store.write_samples(late)  # GPU 1 read from 10 s on: the box is known from then only
        assert priced(store)["a"].box_j == pytest.approx(1_000.0)
        assert "before" not in priced(store)
        assert_kept_is_derived(store)
    with Store(tmp_path / "gap.sqlite") as store:
        first, *_, last = counter(100.0, 20, every=20)  # 0 s and 20 s: 2,000 J apart
        store.write_samples([first, last])
        store.write_cells([cell("b", 12, 18, 10)])
        assert priced(store)["b"].box_j == pytest.approx(600.0)  # interpolated at 100 W
        middle = first.model_copy(update={"unix_ns": first.unix_ns + 10 * S, "value": first.value + 1_500.0})
        store.write_samples([middle])  # the draw was 150 W in the first half, 50 W in the second
        assert priced(store)["b"].box_j == pytest.approx(300.0)
        assert_kept_is_derived(store)


# -- any order of writes ------------------------------------------------------------------------------
Run = tuple[list[Cell], list[MetricSample], list[tuple[str, int]]]


@st.composite
def box_runs(draw: st.DrawFn) -> Run:
    """Cells on a box read every 1-7 s by an energy counter (or power) on one or two GPUs, and an
    order of writes: batches of cells and of readings, interleaved at random."""
    n = draw(st.integers(1, 8))
    cells = []
    for k in range(n):
        start = draw(st.integers(0, 90))
        length = draw(st.integers(1, 40))
        tokens = draw(st.one_of(st.none(), st.integers(0, 2_000)))
        cells.append(cell(f"c{k}", start, start + length, tokens, eval_name=draw(st.sampled_from("xy"))))
    every = draw(st.integers(1, 7))
    seconds = draw(st.integers(10, 140))
    gpus = draw(st.sampled_from([["0"], ["0", "1"]]))
    as_power = draw(st.booleans())
    readings = []
    for gpu in gpus:
        watts = draw(st.floats(5.0, 400.0))
        readings += (
            [
                r.model_copy(update={"attributes": {sc.GPU_ID: gpu}})
                for r in power(watts, seconds, every=every)
            ]
            if as_power
            else counter(watts, seconds, every=every, gpu=gpu)
        )
    readings.sort(key=lambda s: s.unix_ns)
    writes = [("cells", k) for k in range(n)] + [("readings", k) for k in range(len(readings))]
    order = draw(st.permutations(writes))
    return cells, readings, order


@settings(max_examples=60, deadline=None)
@given(run=box_runs())
def test_whatever_order_cells_and_readings_arrive_in_each_cells_energy_is_the_derived_one(
    tmp_path_factory: pytest.TempPathFactory, run: Run
) -> None:
    cells, readings, order = run
    path = tmp_path_factory.mktemp("order") / "s.sqlite"
    with Store(path) as store:
        pending: list[MetricSample] = []
        for kind, k in order:  # readings go in batches of consecutive ticks, as a sampler exports
            if kind == "readings":
                pending.append(readings[k])
                if len(pending) >= 3:
                    store.write_samples(pending)
                    pending = []
            else:
                store.write_cells([cells[k]])
        store.write_samples(pending)
        assert_kept_is_derived(store)


# -- migration -------------------------------------------------------------------------
def test_a_schema_2_store_is_migrated_and_its_cells_priced_as_before(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.write_samples(counter(100.0, 60, every=5))
        store.write_cells([cell("a", 5, 25, 100), cell("b", 15, 35, 100)])
        before = kept(store)
    conn = sqlite3.connect(path)  # as schema 2 left it: no end index, no readings by GPU
    conn.executescript(
        "DROP INDEX cells_end; DROP INDEX metric_samples_energy_by_gpu; "
        "DROP INDEX metric_samples_power_by_gpu; UPDATE meta SET value = '2' WHERE key = 'schema_version';"
    )
    conn.close()
    with Store(path, read_only=True) as reader:  # read before migrating, without the indexes
        assert reader.schema_version() == 2
        assert kept(reader) == before
    with Store(path) as store:
        assert store.schema_version() == store_versions.SCHEMA_VERSION
        assert kept(store) == before
        assert set(before) == {"a", "b"}
        assert_kept_is_derived(store)


def test_a_schema_3_store_loses_its_energy_table_and_keeps_every_record(tmp_path: Path) -> None:
    """Schema 3 kept each cell's energy in a table its writes rewrote; schema 4 drops it (the
    energy is priced on read) and keeps every cell and reading."""
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.write_samples(counter(100.0, 60, every=5))
        store.write_cells([cell("a", 5, 25, 100)])
        before = kept(store)
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE cell_energy (cell_uid TEXT PRIMARY KEY, box_j REAL NOT NULL, share_j REAL NOT NULL, "
        "estimated INTEGER NOT NULL); INSERT INTO cell_energy VALUES ('a', 1.0, 1.0, 0); "
        "UPDATE meta SET value = '3' WHERE key = 'schema_version';"
    )
    conn.close()
    with Store(path) as store:
        assert store.schema_version() == 4
        assert [c.uid for c in store.cells()] == ["a"]
        assert len(store.samples(sc.GPU_ENERGY)) == 13
        assert kept(store) == before
    tables = {
        row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    assert "cell_energy" not in tables
