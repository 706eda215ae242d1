"""`spark_otel.cell`: the parent span of one eval cell and its own accounting."""

from __future__ import annotations

import asyncio
import threading

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode
from tests.conftest import metric_points

from spark_otel import ContextThreadPoolExecutor, carry_context, cell, current_cell
from spark_otel import _semconv as sc
from spark_otel.store.codec import cell_from_span


@pytest.fixture
def providers(tracer_provider, meter_provider):
    return {"tracer_provider": tracer_provider, "meter_provider": meter_provider}


def only_cell_span(span_exporter):
    spans = [
        s
        for s in span_exporter.get_finished_spans()
        if s.attributes.get(sc.SPAN_KIND_ATTR) == sc.SPAN_KIND_CELL
    ]
    assert len(spans) == 1
    return spans[0]


def test_cell_span_carries_identity_tokens_rate_and_free_attributes(providers, span_exporter) -> None:
    with cell(
        "golden", "B#265", engine="qwen", deadline_s=1800, workers=8, angle="correctness", **providers
    ) as c:
        c.add_request(input_tokens=9857, output_tokens=5885, error_type=None)
        c.add_request(input_tokens=3, output_tokens=5, error_type=None)
    span = only_cell_span(span_exporter)
    a = span.attributes
    assert span.name == "cell golden"
    assert (a[sc.EVAL_NAME], a[sc.CELL_ID], a[sc.ENGINE]) == ("golden", "B#265", "qwen")
    assert (a[sc.CELL_DEADLINE_S], a[sc.CELL_WORKERS], a["angle"]) == (1800.0, 8, "correctness")
    assert (a[sc.CELL_PROMPT_TOKENS], a[sc.CELL_COMPLETION_TOKENS]) == (9860, 5890)
    assert a[sc.CELL_STATUS] == "ok"
    assert a[sc.CELL_DEADLINE_HIT] is False
    assert a[sc.CELL_DECODE_RATE] == pytest.approx(5890 / a[sc.CELL_ELAPSED_S])
    stored = cell_from_span(span)
    assert stored.completion_tokens == 5890
    assert stored.attributes == {"angle": "correctness"}


def test_user_exception_passes_through_and_marks_the_cell_error(providers, span_exporter) -> None:
    class Boom(RuntimeError):
        pass

    with pytest.raises(Boom, match="judge crashed"), cell("golden", "x", **providers):
        raise Boom("judge crashed")
    span = only_cell_span(span_exporter)
    assert span.attributes[sc.CELL_STATUS] == "error"
    assert (
        span.attributes[sc.ERROR_TYPE]
        == "test_user_exception_passes_through_and_marks_the_cell_error.<locals>.Boom"
    )
    assert span.status.status_code is StatusCode.ERROR


def test_a_timeout_inside_a_cell_with_a_ceiling_is_a_deadline_hit(providers, span_exporter) -> None:
    with pytest.raises(TimeoutError), cell("golden", "x", deadline_s=1800, **providers):
        raise TimeoutError
    a = only_cell_span(span_exporter).attributes
    assert (a[sc.CELL_STATUS], a[sc.CELL_DEADLINE_HIT], a[sc.ERROR_TYPE]) == ("deadline", True, "deadline")


@pytest.mark.parametrize(
    ("results", "status", "hit", "degraded", "findings"),
    [
        ([("complete", 0)], "ok", False, False, 0),
        ([("deadline", 4), ("complete", 2)], "deadline", True, True, 6),
        ([("deadline", 0)], "deadline", True, False, 0),
        ([("length_cap", 1)], "length_cap", False, False, 1),
    ],
)
def test_deadline_results_decide_status_and_degraded(
    providers, span_exporter, metric_reader, results, status, hit, degraded, findings
) -> None:
    with cell("finder", "seed", deadline_s=1800, workers=3, **providers) as c:
        for result_status, count in results:
            c.record_deadline_result(result_status, count)
    a = only_cell_span(span_exporter).attributes
    assert (a[sc.CELL_STATUS], a[sc.CELL_DEADLINE_HIT], a[sc.CELL_DEGRADED]) == (status, hit, degraded)
    assert a[sc.CELL_SALVAGED_FINDINGS] == findings
    hits = metric_points(metric_reader, sc.CELL_DEADLINE_HITS)
    assert sum(p.value for p in hits) == (1 if hit else 0)
    salvaged = metric_points(metric_reader, sc.CELL_SALVAGED_FINDINGS_METRIC)
    assert sum(p.value for p in salvaged) == findings


def test_cell_metrics_and_in_flight_counter(providers, metric_reader) -> None:
    with cell("golden", "a", engine="qwen", workers=2, **providers) as c:
        c.add_tokens(prompt=100, completion=40)
        in_flight = metric_points(metric_reader, sc.CELLS_IN_FLIGHT)
        assert [p.value for p in in_flight] == [1]
    assert [p.value for p in metric_points(metric_reader, sc.CELLS_IN_FLIGHT)] == [0]
    (duration,) = metric_points(metric_reader, sc.CELL_DURATION)
    assert duration.count == 1
    assert duration.attributes[sc.CELL_STATUS] == "ok"
    assert duration.attributes[sc.CELL_WORKERS] == 2
    assert list(duration.explicit_bounds) == list(sc.CELL_DURATION_BUCKETS_S)
    tokens = {p.attributes[sc.GEN_AI_TOKEN_TYPE]: p.sum for p in metric_points(metric_reader, sc.CELL_TOKENS)}
    assert tokens == {"input": 100, "output": 40}
    (rate,) = metric_points(metric_reader, sc.CELL_DECODE_RATE_METRIC)
    assert rate.count == 1
    assert rate.sum > 0


def test_context_reaches_worker_threads_and_tasks(providers, span_exporter) -> None:
    tracer = trace.get_tracer("t", tracer_provider=providers["tracer_provider"])
    seen: list[object] = []

    def work() -> None:
        state = current_cell()
        seen.append(state.cell_id if state else None)
        state.add_request(input_tokens=1, output_tokens=2, error_type=None)
        with tracer.start_as_current_span("worker request"):
            pass

    async def task_work() -> None:
        work()

    with cell("golden", "threads", **providers):
        with ContextThreadPoolExecutor(max_workers=2) as pool:
            pool.submit(work).result()
            pool.submit(work).result()
        thread = threading.Thread(target=carry_context(work))
        thread.start()
        thread.join()
        asyncio.run(task_work())
    assert seen == ["threads"] * 4
    cell_span = only_cell_span(span_exporter)
    children = [s for s in span_exporter.get_finished_spans() if s.name == "worker request"]
    assert len(children) == 4
    assert all(s.parent.span_id == cell_span.context.span_id for s in children)
    assert cell_span.attributes[sc.CELL_COMPLETION_TOKENS] == 8


def test_decorator_sync_and_async_take_cell_id_from_the_call(providers, span_exporter) -> None:
    @cell("golden", **providers)
    def run_cell(*, cell_id: str) -> str:
        return current_cell().cell_id

    @cell("golden", **providers)
    async def arun_cell(*, cell_id: str) -> str:
        await asyncio.sleep(0)
        return current_cell().cell_id

    assert run_cell(cell_id="B#1") == "B#1"
    assert asyncio.run(arun_cell(cell_id="B#2")) == "B#2"
    ids = sorted(s.attributes[sc.CELL_ID] for s in span_exporter.get_finished_spans())
    assert ids == ["B#1", "B#2"]
    assert current_cell() is None


async def test_concurrent_async_cells_keep_their_own_accounting(providers, span_exporter) -> None:
    async def one(i: int) -> None:
        async with cell("golden", f"c{i}", **providers) as c:
            await asyncio.sleep(0.01)
            c.add_tokens(completion=i + 1)
            assert current_cell() is c

    await asyncio.gather(*(one(i) for i in range(5)))
    tokens = {
        s.attributes[sc.CELL_ID]: s.attributes[sc.CELL_COMPLETION_TOKENS]
        for s in span_exporter.get_finished_spans()
    }
    assert tokens == {f"c{i}": i + 1 for i in range(5)}


def test_a_failing_metric_record_never_breaks_the_cell(providers, span_exporter, monkeypatch) -> None:
    from spark_otel import cells as cells_module

    def broken(_provider):
        raise RuntimeError("meter exploded")

    monkeypatch.setattr(cells_module, "instruments", broken)
    with cell("golden", "x", **providers) as c:
        c.add_tokens(completion=3)
    assert len(span_exporter.get_finished_spans()) == 1
    assert current_cell() is None


def test_carry_context_runs_in_several_threads_at_once(providers) -> None:
    barrier = threading.Barrier(4)
    seen: list[str] = []

    def work() -> None:
        barrier.wait(timeout=10)
        seen.append(current_cell().cell_id)

    with cell("golden", "shared", **providers):
        wrapped = carry_context(work)
        threads = [threading.Thread(target=wrapped) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert seen == ["shared"] * 4


def test_leaving_a_cell_from_another_context_still_ends_its_span(providers, span_exporter) -> None:
    import contextvars

    manager = cell("golden", "elsewhere", **providers)
    entered = contextvars.copy_context()  # entered and left here, so this test's own context stays clean
    entered.run(manager.__enter__)
    entered.run(lambda: contextvars.copy_context().run(manager.__exit__, None, None, None))
    span = only_cell_span(span_exporter)
    assert span.attributes[sc.CELL_STATUS] == "ok"


def test_a_cell_whose_requests_all_failed_is_an_error_even_if_the_runner_caught_it(
    providers, span_exporter
) -> None:
    with cell("golden", "x", **providers) as c:
        c.add_request(input_tokens=None, output_tokens=None, error_type="500")
        c.add_request(input_tokens=None, output_tokens=None, error_type="APIConnectionError")
    a = only_cell_span(span_exporter).attributes
    assert a[sc.CELL_STATUS] == "error"
    assert (a[sc.CELL_REQUESTS], a[sc.CELL_FAILED_REQUESTS]) == (2, 2)


def test_one_good_request_keeps_the_cell_ok(providers, span_exporter) -> None:
    with cell("golden", "x", **providers) as c:
        c.add_request(input_tokens=None, output_tokens=None, error_type="500")
        c.add_request(input_tokens=5, output_tokens=7, error_type=None)
    a = only_cell_span(span_exporter).attributes
    assert a[sc.CELL_STATUS] == "ok"
    assert (a[sc.CELL_REQUESTS], a[sc.CELL_FAILED_REQUESTS]) == (2, 1)


def test_the_span_status_never_carries_the_exception_message(providers, span_exporter) -> None:
    with pytest.raises(ValueError, match="secret"), cell("golden", "x", **providers):
        raise ValueError("the prompt said: secret plans")
    span = only_cell_span(span_exporter)
    assert "secret" not in (span.status.description or "")
    assert span.status.description == "ValueError"


@pytest.mark.usefixtures("restore_clock")
def test_a_cell_under_a_model_clock_says_its_times_are_model_time(providers, span_exporter) -> None:
    from spark_otel import _clock

    with cell("golden", "real", **providers):
        pass
    assert sc.TIME_SCALE not in only_cell_span(span_exporter).attributes
    span_exporter.clear()
    with _clock.model_time(50), cell("golden", "modelled", **providers):
        pass
    span = only_cell_span(span_exporter)
    assert span.attributes[sc.TIME_SCALE] == 50.0
    assert cell_from_span(span).attributes[sc.TIME_SCALE] == 50.0  # and so does the stored cell
