"""The records the HTML report is built from in its tests: six baseline cells, three beside a
nemotron window, a timeout, the nemotron eval's cells and a probe window."""

from __future__ import annotations

from spark_otel.model import Cell, CellStatus, LoadWindow

S = 1_000_000_000


T0 = 1_790_000_000 * S


def serial_cell(i: int, start_s: float, elapsed_s: float, tokens: int | None, **kw: object) -> Cell:
    return Cell(
        uid=f"serial-{i}",
        eval_name="serial-review",
        cell_id=f"c{i}",
        engine="qwen",
        start_unix_ns=T0 + int(start_s * S),
        end_unix_ns=T0 + int((start_s + elapsed_s) * S),
        prompt_tokens=5000,
        completion_tokens=tokens,
        workers=1,
        deadline_s=1800,
        **kw,
    )


def report_records() -> tuple[list[Cell], list[LoadWindow]]:
    """Six baseline cells at 11.5 tok/s, then three inside a nemotron window at 5.25, one timeout."""
    cells = [serial_cell(i, i * 1000.0, 1000.0, 11_500) for i in range(6)]
    cells += [serial_cell(6 + i, 6000.0 + i * 1000.0, 1000.0, 5_250) for i in range(3)]
    cells.append(
        serial_cell(
            9,
            9000.0,
            1800.0,
            None,
            status=CellStatus.DEADLINE,
            salvaged_findings=2,
        )
    )
    cells += [
        Cell(
            uid=f"nemo-{i}",
            eval_name="nemotron-cards",
            cell_id=f"n{i}",
            engine="nemotron",
            start_unix_ns=T0 + int((6000 + i * 900) * S),
            end_unix_ns=T0 + int((6000 + i * 900 + 880) * S),
            prompt_tokens=12_000,
            completion_tokens=300,
            workers=4,
        )
        for i in range(4)
    ]
    windows = [
        LoadWindow(
            uid="probe-8",
            name="probe 8 streams",
            kind="probe",
            engine="qwen",
            start_unix_ns=T0 + 20_000 * S,
            end_unix_ns=T0 + 20_050 * S,
            streams=8,
        )
    ]
    return cells, windows
