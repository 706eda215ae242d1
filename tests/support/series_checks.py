"""The Prometheus series one box produces, read from the real Prometheus: how many, their labels'
cardinality, and whether any label carries a per-cell value (a cell id, a span or trace id). A cell
is a span, never a series: a label per cell would grow the series with every cell a box runs. The
fleet test asserts these; benchmarks/bench_fleet.py prints them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx
from tests.support.collector_stack import Prometheus

from spark_otel.store import Store

BOX_LABEL = "host_name"
# Histogram bucket bounds: fixed by the instruments' and span metrics' bucket lists, not by data.
BUCKET_LABEL = "le"


@dataclass(frozen=True)
class BoxSeries:
    """One box's series over a time range (``/api/v1/series``), recording rules' outputs apart."""

    box: str
    series: list[dict[str, str]]

    @property
    def ingested(self) -> list[dict[str, str]]:
        """The series the box's collector wrote (recording rules' names hold a colon)."""
        return [s for s in self.series if ":" not in s["__name__"]]

    @property
    def recorded(self) -> list[dict[str, str]]:
        return [s for s in self.series if ":" in s["__name__"]]

    def label_values(self) -> dict[str, set[str]]:
        """Each label name and the distinct values it takes on the box's series."""
        values: dict[str, set[str]] = defaultdict(set)
        for s in self.series:
            for name, value in s.items():
                if name != "__name__":
                    values[name].add(value)
        return dict(values)

    def cardinality(self) -> dict[str, int]:
        """Distinct values per label, largest first."""
        counts = {name: len(v) for name, v in self.label_values().items()}
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def series_of(prom: Prometheus, match: str, start: float, end: float) -> list[dict[str, str]]:
    resp = httpx.get(
        f"{prom.url}/api/v1/series", params={"match[]": match, "start": start, "end": end}, timeout=30.0
    )
    body = resp.json()
    if body.get("status") != "success":
        raise AssertionError(f"series {match!r} failed: {body}")
    return list(body["data"])


def box_series(prom: Prometheus, box: str, start: float, end: float) -> BoxSeries:
    return BoxSeries(box, series_of(prom, f'{{{BOX_LABEL}="{box}"}}', start, end))


def without_box(prom: Prometheus, start: float, end: float) -> list[dict[str, str]]:
    """Series no box label names: nothing a box sent should be here (the dashboards filter by it)."""
    return series_of(prom, f'{{__name__=~".+", {BOX_LABEL}=""}}', start, end)


def per_cell_values(stores: Iterable[Path]) -> tuple[set[str], set[str]]:
    """(cell ids, hex ids) of the stores: the cells' ids; their span, trace and requests' ids."""
    cell_ids: set[str] = set()
    hex_ids: set[str] = set()
    for path in stores:
        with Store(path, read_only=True) as store:
            for cell in store.cells():
                cell_ids.add(cell.cell_id)
                hex_ids.add(cell.uid)
                if cell.trace_id:
                    hex_ids.add(cell.trace_id)
            hex_ids.update(r.uid for r in store.requests())
    return cell_ids, hex_ids


def per_cell_labels(series: BoxSeries, cell_ids: set[str], hex_ids: set[str]) -> list[str]:
    """Label values that name one cell or request: a cell id within them, or a span/trace id."""
    found = []
    for name, values in series.label_values().items():
        for value in values:
            if value in hex_ids or any(cid in value for cid in cell_ids):
                found.append(f"{name}={value!r}")
    return sorted(found)


def unbucketed_over(series: BoxSeries, bound: int) -> dict[str, int]:
    """Labels but ``le`` with more than ``bound`` values on the box; ``le`` values not numbers."""
    over = {n: c for n, c in series.cardinality().items() if n != BUCKET_LABEL and c > bound}
    for value in series.label_values().get(BUCKET_LABEL, set()):
        try:
            float(value)
        except ValueError:
            over[f"{BUCKET_LABEL}={value!r}"] = 1
    return over
