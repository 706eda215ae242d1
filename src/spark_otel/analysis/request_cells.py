"""Requests no cell holds, standing in for cells: how a store of bare requests still answers.

A runner instrumented with `instrument()` that never opens a `cell()` (lm-eval, a script, any
OpenAI-compatible client) records requests and no cells, and every analysis reads cells. So each
request that no cell holds counts as a cell of its own, marked as such (``source`` "request"),
and each result says how many of its cells are requests (``requests_as_cells``). The rule, here
once (docs/decisions.md, "Requests standing in for cells"):

* **which**: a request without a cell, or whose cell is not among the cells given (a request
  inside a recorded cell is that cell's, never counted twice), unless it ran inside a recorded
  load or probe window on its engine: that window already stands for it as load (the demo's
  imposed streams, a probe run in an instrumented process);
* **eval**: the eval recorded with the request (the cell's it ran in, else its runner's
  ``SPARK_OTEL_EVAL``, ``spark_otel.eval`` resource attribute or ``OTEL_SERVICE_NAME``: see
  `records.span_codec.runner_eval`), else ``requests to ENGINE``;
* **engine**: the request's own, else the engine that requests to the same address named (a
  cell's), else the address itself (``host:port``), else unknown;
* **status**: an ``error.type`` naming a timeout (``deadline``, ``APITimeoutError``,
  ``ReadTimeout``, ...) is ``deadline``, any other ``error``; a finish reason ``length`` is
  ``length_cap``; else ``ok``. Its ceiling and worker count are unknown (None);
* **identity**: uid and cell id are the request's span id; tokens are its usage.

Pure: requests and cells in, cells out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .. import _semconv as sc
from ..model import AttributeValue, Cell, CellStatus, LoadWindow, Request

if TYPE_CHECKING:
    from ..records.cell_columns import CellColumns

__all__ = [
    "LOAD_KINDS",
    "REQUEST_SOURCE",
    "columns_with_requests_as_cells",
    "count_requests_as_cells",
    "is_request_cell",
    "request_as_cell",
    "request_engine",
    "request_eval",
    "request_status",
    "requests_as_cells",
    "with_requests_as_cells",
]

REQUEST_SOURCE = "request"
"""The ``source`` of a cell that is a request standing in for one."""
LOAD_KINDS = ("load", "probe")
"""Kinds of recorded window whose requests are that load's, not cells."""


def is_request_cell(cell: Cell) -> bool:
    """Whether ``cell`` is a request standing in for a cell."""
    return cell.source == REQUEST_SOURCE


def count_requests_as_cells(cells: Iterable[Cell]) -> int:
    """How many of ``cells`` are requests standing in for cells."""
    return sum(1 for c in cells if is_request_cell(c))


def _address(request: Request) -> str | None:
    if not request.server_address:
        return None
    return (
        f"{request.server_address}:{request.server_port}" if request.server_port else request.server_address
    )


def _engines_by_address(engine_urls: Mapping[str, str]) -> dict[str, str]:
    """``host:port`` (or ``host``) to the engine named there, from each engine's base URL."""
    out: dict[str, str] = {}
    for engine, url in sorted(engine_urls.items()):
        parts = urlsplit(url)
        if parts.hostname:
            out.setdefault(f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname, engine)
    return out


def request_engine(request: Request, engine_urls: Mapping[str, str] | None = None) -> str | None:
    """The engine a request ran on: its own, else the one ``engine_urls`` (engine to base URL, as
    `Store.engine_urls` reads them) names at its address, else the address; None without one."""
    return _engine(request, _engines_by_address(engine_urls or {}))


def _engine(request: Request, by_address: Mapping[str, str]) -> str | None:
    if request.engine:
        return request.engine
    address = _address(request)
    return None if address is None else by_address.get(address, address)


def request_eval(request: Request, engine: str | None) -> str:
    """The eval a request counts in: the one recorded with it, else ``requests to ENGINE``."""
    if request.eval_name:
        return request.eval_name
    return f"requests to {engine or 'an unknown engine'}"


def request_status(request: Request) -> CellStatus:
    """How the request ended, as a cell's status (the module's rule)."""
    if request.error_type is not None:
        if request.error_type == sc.ERROR_TYPE_DEADLINE or "timeout" in request.error_type.lower():
            return CellStatus.DEADLINE
        return CellStatus.ERROR
    if "length" in request.finish_reasons:
        return CellStatus.LENGTH_CAP
    return CellStatus.OK


def request_as_cell(request: Request, engine_urls: Mapping[str, str] | None = None) -> Cell:
    """One request as a cell of its own (the module's rule)."""
    return _as_cell(request, _engines_by_address(engine_urls or {}))


def _as_cell(request: Request, by_address: Mapping[str, str]) -> Cell:
    engine = _engine(request, by_address)
    attributes: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: request.operation}
    model = request.response_model or request.request_model
    if model:
        attributes[sc.GEN_AI_RESPONSE_MODEL] = model
    return Cell(
        uid=request.uid,
        eval_name=request_eval(request, engine),
        cell_id=request.uid,
        engine=engine,
        start_unix_ns=request.start_unix_ns,
        end_unix_ns=request.end_unix_ns,
        prompt_tokens=request.input_tokens,
        completion_tokens=request.output_tokens,
        status=request_status(request),
        source=REQUEST_SOURCE,
        trace_id=request.trace_id,
        attributes=attributes,
    )


def _inside_load(cell: Cell, loads: Sequence[LoadWindow]) -> bool:
    return any(
        w.engine == cell.engine
        and w.start_unix_ns <= cell.start_unix_ns
        and cell.end_unix_ns <= w.end_unix_ns
        for w in loads
    )


def requests_as_cells(
    requests: Iterable[Request],
    cells: Iterable[Cell] = (),
    *,
    engine_urls: Mapping[str, str] | None = None,
    windows: Iterable[LoadWindow] = (),
) -> list[Cell]:
    """The requests no cell of ``cells`` holds and no load or probe window of ``windows`` on their
    engine covers, each as a cell of its own, in time order."""
    return _stand_ins(requests, {c.uid for c in cells}, engine_urls=engine_urls, windows=windows)


def _stand_ins(
    requests: Iterable[Request],
    held: Collection[str],
    *,
    engine_urls: Mapping[str, str] | None,
    windows: Iterable[LoadWindow],
) -> list[Cell]:
    loads = [w for w in windows if w.kind in LOAD_KINDS and w.engine is not None]
    by_address = _engines_by_address(engine_urls or {})
    out = [_as_cell(r, by_address) for r in requests if r.cell_uid is None or r.cell_uid not in held]
    return sorted((c for c in out if not _inside_load(c, loads)), key=lambda c: (c.start_unix_ns, c.uid))


def with_requests_as_cells(
    cells: Sequence[Cell],
    requests: Iterable[Request],
    *,
    engine_urls: Mapping[str, str] | None = None,
    windows: Iterable[LoadWindow] = (),
) -> list[Cell]:
    """``cells`` and the requests none of them holds as cells of their own (`requests_as_cells`),
    in time order."""
    stand_ins = requests_as_cells(requests, cells, engine_urls=engine_urls, windows=windows)
    if not stand_ins:
        return list(cells)
    return sorted([*cells, *stand_ins], key=lambda c: c.start_unix_ns)


def columns_with_requests_as_cells(
    columns: CellColumns,
    requests: Iterable[Request],
    *,
    engine_urls: Mapping[str, str] | None = None,
    windows: Iterable[LoadWindow] = (),
) -> CellColumns:
    """`with_requests_as_cells` for cells given as columns: the same cells, in the same order."""
    from ..records.cell_columns import CellColumns

    stand_ins = _stand_ins(requests, set(columns.uid), engine_urls=engine_urls, windows=windows)
    return columns.merged(CellColumns.from_cells(stand_ins)) if stand_ins else columns
