"""What a trace store must hold of an embedded store's cells, read through Jaeger's query API (the
API Grafana's Jaeger datasource reads): each cell span found by its eval and by its cell id, in
its own trace with its request spans as children, the cell's and the GenAI attributes, and the
cell's times, live or historical, to the microsecond Jaeger keeps."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from tests.support.collector_stack import Jaeger, JaegerSpan
from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel.model import Cell, Request
from spark_otel.records.span_codec import cell_span_name
from spark_otel.store import Store

# Jaeger's JSON carries a span's start and its duration in whole microseconds, each truncated: the
# start is the nanosecond one floored, an end read as start plus duration is under 2 µs below it.
US_TOLERANCE = 2


@dataclass(frozen=True)
class Expected:
    """The cells of some evals in one embedded store, and each cell's requests; ``maybe_lost``
    the cells whose spans were exported while a collector on their way was down (the SDK drops a
    batch it cannot send within its timeout; the store keeps them)."""

    cells: dict[str, Cell]  # by uid, the cell span's id
    requests: dict[str, list[Request]]  # by cell uid
    maybe_lost: frozenset[str] = frozenset()

    @property
    def start_ns(self) -> int:
        return min(c.start_unix_ns for c in self.cells.values())

    @property
    def end_ns(self) -> int:
        return max(c.end_unix_ns for c in self.cells.values())

    def of_eval(self, eval_name: str) -> set[str]:
        return {uid for uid, c in self.cells.items() if c.eval_name == eval_name}

    def may_lose(self, uids: Iterable[str]) -> Expected:
        return replace(self, maybe_lost=frozenset(uids) & set(self.cells))


def expected_from_store(path: Path, evals: Iterable[str]) -> Expected:
    with Store(path, read_only=True) as store:
        cells = {c.uid: c for name in evals for c in store.cells(eval_name=name)}
        requests: dict[str, list[Request]] = {uid: [] for uid in cells}
        for request in store.requests():
            if request.cell_uid in requests:
                requests[request.cell_uid].append(request)
    assert cells, f"no cells of {list(evals)} in {path}"
    return Expected(cells, requests)


def _cell_spans(traces: list[list[JaegerSpan]]) -> dict[str, JaegerSpan]:
    return {
        span.span_id: span
        for trace in traces
        for span in trace
        if span.attributes.get(sc.SPAN_KIND_ATTR) == sc.SPAN_KIND_CELL
    }


def find_by_eval(
    jaeger: Jaeger, service: str, eval_name: str, expected: Expected, timeout_s: float = 60.0
) -> dict[str, JaegerSpan]:
    """The eval's cell spans Jaeger finds by ``spark_otel.eval``, once every expected one is there
    (spans reach it through batching exporters); no cell span the store lacks may come back."""
    every = expected.of_eval(eval_name)
    want = every - expected.maybe_lost

    def found() -> dict[str, JaegerSpan] | None:
        traces = jaeger.find_traces(
            service,
            start_ns=expected.start_ns,
            end_ns=expected.end_ns,
            tags={sc.EVAL_NAME: eval_name},
            limit=max(100, 4 * len(every)),
        )
        spans = _cell_spans(traces)
        return spans if want <= set(spans) else None

    spans = wait_for(found, f"Jaeger to hold the {len(want)} cell spans of {eval_name}", timeout_s, 0.5)
    assert set(spans) <= every, sorted(set(spans) - every)
    return spans


def _same_times(span: JaegerSpan, start_ns: int, end_ns: int) -> bool:
    return span.start_us == start_ns // 1000 and 0 <= end_ns - span.end_us * 1000 < US_TOLERANCE * 1000


def check_cell(jaeger: Jaeger, service: str, cell: Cell, requests: list[Request]) -> JaegerSpan:
    """Found by its cell id: one trace, the cell span at its root with the store's attributes and
    times, and exactly the store's requests as its children, with their GenAI attributes."""
    traces = jaeger.find_traces(
        service,
        start_ns=cell.start_unix_ns,
        end_ns=cell.end_unix_ns,
        tags={sc.CELL_ID: cell.cell_id, sc.EVAL_NAME: cell.eval_name},
    )
    assert len(traces) == 1, (cell.cell_id, [[s.name for s in t] for t in traces])
    spans = {s.span_id: s for s in traces[0]}
    span = spans[cell.uid]
    if cell.trace_id is not None:  # a backfilled cell's trace id is made at export
        assert span.trace_id == cell.trace_id
    assert span.parent_span_id == ""
    assert span.name == cell_span_name(cell.eval_name)
    a = span.attributes
    assert (a[sc.EVAL_NAME], a[sc.CELL_ID], a[sc.CELL_STATUS]) == (
        cell.eval_name,
        cell.cell_id,
        cell.status.value,
    )
    assert a.get(sc.ENGINE) == cell.engine
    assert a.get(sc.CELL_COMPLETION_TOKENS) == cell.completion_tokens
    assert a.get(sc.CELL_PROMPT_TOKENS) == cell.prompt_tokens
    assert a.get(sc.CELL_WORKERS) == cell.workers
    assert a.get(sc.CELL_DEADLINE_HIT) == cell.deadline_hit
    assert a.get(sc.CELL_DEGRADED) == cell.degraded
    assert a.get(sc.CELL_SALVAGED_FINDINGS) == cell.salvaged_findings
    assert _same_times(span, cell.start_unix_ns, cell.end_unix_ns), (span, cell)
    children = {s.span_id: s for s in spans.values() if s.parent_span_id == cell.uid}
    assert set(children) == {r.uid for r in requests}, (cell.cell_id, children, requests)
    for request in requests:
        child = children[request.uid]
        assert child.trace_id == span.trace_id
        r = child.attributes
        assert r[sc.GEN_AI_OPERATION_NAME] == request.operation
        assert r.get(sc.GEN_AI_REQUEST_MODEL) == request.request_model
        assert r.get(sc.GEN_AI_RESPONSE_MODEL) == request.response_model
        assert r.get(sc.GEN_AI_USAGE_INPUT_TOKENS) == request.input_tokens
        assert r.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS) == request.output_tokens
        assert (r[sc.CELL_UID], r[sc.EVAL_NAME], r.get(sc.ENGINE)) == (cell.uid, cell.eval_name, cell.engine)
        assert _same_times(child, request.start_unix_ns, request.end_unix_ns), (child, request)
    return span


def check_every_cell(
    jaeger: Jaeger, service: str, expected: Expected, evals: Iterable[str]
) -> dict[str, JaegerSpan]:
    """Every expected cell found by eval and by cell id, as `check_cell` asks (a cell that may have
    been lost, where Jaeger has it); the cell spans found."""
    found: dict[str, JaegerSpan] = {}
    for eval_name in evals:
        found.update(find_by_eval(jaeger, service, eval_name, expected))
    for uid, cell in expected.cells.items():
        if uid in found or uid not in expected.maybe_lost:
            check_cell(jaeger, service, cell, expected.requests[uid])
    return found
