"""A steady GPU draw read as NVML's energy counter or as power readings, the cells that ran under
it, from one origin (`T0`), and a store of two evals measured so."""

from __future__ import annotations

from pathlib import Path

from spark_otel import _semconv as sc
from spark_otel.model import Cell, CellStatus, MetricSample
from spark_otel.store import Store

S = 1_000_000_000


T0 = 1_700_000_000 * S


GPU0 = {sc.GPU_ID: "0"}


def counter(
    watts: float, seconds: int, *, every: int = 5, gpu: str = "0", start_j: float = 5_000.0
) -> list[MetricSample]:
    """A steady draw read as NVML's cumulative energy counter every ``every`` s."""
    return [
        MetricSample(
            name=sc.GPU_ENERGY,
            unix_ns=T0 + k * S,
            value=start_j + watts * k,
            unit="J",
            attributes={sc.GPU_ID: gpu},
        )
        for k in range(0, seconds + 1, every)
    ]


def power(watts: float, seconds: int, *, every: int = 5) -> list[MetricSample]:
    return [
        MetricSample(name=sc.GPU_POWER, unix_ns=T0 + k * S, value=watts, unit="W", attributes=GPU0)
        for k in range(0, seconds + 1, every)
    ]


def cell(
    uid: str, start_s: float, end_s: float, tokens: int | None, *, eval_name: str = "ev", workers: int = 2
) -> Cell:
    return Cell(
        uid=uid,
        eval_name=eval_name,
        cell_id=uid,
        engine="qwen",
        start_unix_ns=T0 + int(start_s * S),
        end_unix_ns=T0 + int(end_s * S),
        completion_tokens=tokens,
        status=CellStatus.OK if tokens else CellStatus.DEADLINE,
        workers=workers,
    )


def energy_store(path: Path) -> None:
    """Two evals on one box read by NVML's counter at a steady 40 W: a serial one (two cells of
    400 tokens over 20 s each) and one at two workers (two cells of 400 tokens side by side over
    20 s), and a cell that ran before the GPU was sampled."""

    cells = [
        cell("s1", 0, 20, 400, eval_name="serial", workers=1),
        cell("s2", 20, 40, 400, eval_name="serial", workers=1),
        cell("p1", 60, 80, 400, eval_name="pair", workers=2),
        cell("p2", 60, 80, 400, eval_name="pair", workers=2),
        cell("early", -300, -280, 100, eval_name="serial", workers=1),
    ]
    with Store(path) as store:
        store.write_cells(cells)
        store.write_samples(counter(40.0, 100))
    assert T0  # the cells' and samples' shared origin
