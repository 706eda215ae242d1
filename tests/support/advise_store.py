"""The advise tests' small store: engine q probed at 1 to 8 streams, a prompt-heavy eval and a
generation-heavy one."""

from __future__ import annotations

from pathlib import Path

from tests.support.cells import cell

from spark_otel.model import Cell
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.store import Store

CURVE = RateCurve(
    engine="q",
    model="qwen3.8-27b",
    points=[
        CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
        CurvePoint(streams=2, per_stream_rate=9.0, aggregate_rate=18.0),
        CurvePoint(streams=4, per_stream_rate=6.0, aggregate_rate=24.0),
        CurvePoint(streams=8, per_stream_rate=2.5, aggregate_rate=20.0),
    ],
)


def _cells(attributes: dict[str, object]) -> list[Cell]:
    cards = dict(eval_name="cards", prompt_tokens=5_000, attributes=attributes)
    gen = dict(eval_name="gen", prompt_tokens=100, attributes=attributes)
    return [
        *(cell(f"a{k}", 100 * k, 100 * k + 20, 100, workers=1, **cards) for k in range(4)),
        *(
            cell(f"b{k}{j}", 1_000 + 100 * k, 1_000 + 100 * k + 30, 100, workers=2, **cards)
            for k in range(2)
            for j in range(2)
        ),
        *(cell(f"g{k}", 3_000 + 200 * k, 3_100 + 210 * k, 1_000, workers=1, **gen) for k in range(5)),
    ]


def advise_store(path: Path, attributes: dict[str, object] | None = None) -> str:
    """The store the module docstring describes; ``attributes`` on every cell."""
    with Store(path) as store:
        store.write_cells(_cells(attributes or {}))
        store.put_document("probe", "q probe", {"curve": CURVE.model_dump(mode="json")})
    return str(path)
