"""What the cells list shows for a cell that recorded little (`views.cells.cells_list`): blanks
for an unknown engine and worker count, and its energy marked estimated only where it was."""

from __future__ import annotations

from spark_otel.analysis.energy import EnergyShare
from spark_otel.model import Cell
from spark_otel.views.cells import cells_list


def _rows(*, estimated: bool) -> dict[str, str]:
    cell = Cell(uid="u", eval_name="e", cell_id="c1", start_unix_ns=0, end_unix_ns=1_000_000_000)
    energy = {"u": EnergyShare(cell_uid="u", box_j=24.0, share_j=12.0, estimated=estimated)}
    columns, [row], _ = cells_list([cell], energy)
    return dict(zip(columns, row, strict=True))


def test_an_unknown_engine_and_worker_count_are_blank() -> None:
    row = _rows(estimated=False)
    assert (row["engine"], row["workers"]) == ("", "")


def test_energy_is_marked_estimated_only_where_it_was() -> None:
    measured, estimated = _rows(estimated=False)["energy J"], _rows(estimated=True)["energy J"]
    assert float(measured) == 12.0
    assert estimated != measured
    assert estimated.endswith(measured)
