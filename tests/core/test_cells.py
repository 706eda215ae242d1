"""`spark_otel.cell`: the parent span of one eval cell and its own accounting."""

from __future__ import annotations

import asyncio
import threading

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode
from tests.support.metric_points import metric_points

from spark_otel import ContextThreadPoolExecutor, carry_context, cell, current_cell
from spark_otel import _semconv as sc
from spark_otel.records.span_codec import cell_from_span


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
    from spark_otel.sim.clock import model_time

    with cell("golden", "real", **providers):
        pass
    assert sc.TIME_SCALE not in only_cell_span(span_exporter).attributes
    span_exporter.clear()
    with model_time(50), cell("golden", "modelled", **providers):
        pass
    span = only_cell_span(span_exporter)
    assert span.attributes[sc.TIME_SCALE] == 50.0
    assert cell_from_span(span).attributes[sc.TIME_SCALE] == 50.0  # and so does the stored cell


# -- what mutation testing showed untested (docs/testing.md, "cells") --------------------------------


def test_a_cells_metrics_name_its_eval_and_engine(providers, metric_reader) -> None:
    with cell("golden", "a", engine="qwen", workers=2, **providers):
        (in_flight,) = metric_points(metric_reader, sc.CELLS_IN_FLIGHT)
        assert dict(in_flight.attributes) == {sc.EVAL_NAME: "golden", sc.ENGINE: "qwen"}
    (done,) = metric_points(metric_reader, sc.CELL_COUNT)
    assert dict(done.attributes) == {
        sc.EVAL_NAME: "golden",
        sc.ENGINE: "qwen",
        sc.CELL_STATUS: "ok",
        sc.CELL_WORKERS: 2,
    }
    assert done.value == 1


def test_a_cells_uid_is_its_span_id_and_what_its_requests_carry(providers, span_exporter) -> None:
    with cell("golden", "a", engine="qwen", **providers) as c:
        pass
    span = only_cell_span(span_exporter)
    assert c.uid == format(span.context.span_id, "016x")
    assert c.request_attributes == {
        sc.EVAL_NAME: "golden",
        sc.CELL_ID: "a",
        sc.CELL_UID: c.uid,
        sc.ENGINE: "qwen",
    }


def test_a_cell_without_a_span_still_gets_a_uid_of_its_own(meter_provider) -> None:
    uids = []
    for _ in range(2):
        with cell(
            "golden", "a", tracer_provider=trace.NoOpTracerProvider(), meter_provider=meter_provider
        ) as c:
            assert not c.span.get_span_context().is_valid
            uids.append(c.uid)
    assert all(len(u) == 16 and int(u, 16) >= 0 for u in uids), uids
    assert uids[0] != uids[1]
    assert "0" * 16 not in uids  # the invalid span's id is no uid


def test_findings_added_by_hand_add_up(providers, span_exporter, metric_reader) -> None:
    with cell("finder", "seed", deadline_s=60, **providers) as c:
        c.add_findings(2)
        c.add_findings(3)
        c.record_deadline_result("deadline", 4)
    a = only_cell_span(span_exporter).attributes
    assert (a[sc.CELL_SALVAGED_FINDINGS], a[sc.CELL_DEGRADED]) == (9, True)
    assert sum(p.value for p in metric_points(metric_reader, sc.CELL_SALVAGED_FINDINGS_METRIC)) == 9


def test_an_unknown_deadline_status_counts_as_an_error(providers, span_exporter) -> None:
    with cell("finder", "seed", deadline_s=60, **providers) as c:
        c.record_deadline_result("complete", 0)
        c.record_deadline_result("gave up", 1)
    a = only_cell_span(span_exporter).attributes
    assert (a[sc.CELL_STATUS], a[sc.CELL_DEADLINE_HIT], a[sc.CELL_SALVAGED_FINDINGS]) == ("error", False, 1)


def test_an_error_inside_a_cell_with_a_ceiling_is_not_a_deadline_hit(providers, span_exporter) -> None:
    with pytest.raises(ValueError, match="bad answer"), cell("golden", "x", deadline_s=1800, **providers):
        raise ValueError("bad answer")
    a = only_cell_span(span_exporter).attributes
    assert (a[sc.CELL_STATUS], a[sc.CELL_DEADLINE_HIT], a[sc.ERROR_TYPE]) == ("error", False, "ValueError")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"cell_id": " "}, "cell_id"),
        ({"engine": ""}, "engine"),
        ({"deadline_s": -1.0}, "deadline_s"),
        ({"workers": 0}, "workers"),
    ],
)
def test_a_bad_cell_argument_is_refused_by_name_before_anything_is_recorded(
    providers, span_exporter, kwargs, named
) -> None:
    from spark_otel import ConfigError

    with pytest.raises(ConfigError, match=rf"^cell\({named}="):
        cell("golden", **kwargs, **providers)
    assert span_exporter.get_finished_spans() == ()


def test_the_decorator_keeps_every_setting_and_a_call_without_an_id_gets_a_fresh_one(
    providers, span_exporter
) -> None:
    @cell("golden", engine="qwen", deadline_s=60, workers=3, angle="x", **providers)
    def run_cell() -> str:
        return current_cell().cell_id

    made = run_cell()
    a = only_cell_span(span_exporter).attributes
    assert len(made) == 12
    int(made, 16)
    assert (a[sc.CELL_ID], a[sc.ENGINE], a[sc.CELL_DEADLINE_S], a[sc.CELL_WORKERS], a["angle"]) == (
        made,
        "qwen",
        60.0,
        3,
        "x",
    )


def test_work_submitted_with_keywords_reaches_the_worker(providers) -> None:
    def work(a: int, *, b: int) -> tuple[int, int, str]:
        return a, b, current_cell().cell_id

    with cell("golden", "kw", **providers), ContextThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(work, 1, b=2).result() == (1, 2, "kw")


def test_a_cells_span_is_internal_from_spark_otels_scope(providers, span_exporter) -> None:
    from spark_otel import __version__

    with cell("golden", "x", **providers):
        pass
    span = only_cell_span(span_exporter)
    assert span.kind is trace.SpanKind.INTERNAL
    scope = span.instrumentation_scope
    assert (scope.name, scope.version, scope.schema_url) == (sc.SCOPE_NAME, __version__, sc.SCHEMA_URL)


@pytest.mark.usefixtures("restore_clock")
def test_a_cells_span_times_are_model_time_and_last_its_elapsed(providers, span_exporter) -> None:
    import time

    from spark_otel.sim.clock import model_time

    epoch = 10**18  # 2001: far from the real clock, so a real-time stamp cannot pass for it
    with model_time(50, epoch_unix_ns=epoch), cell("golden", "modelled", **providers):
        time.sleep(0.02)
    span = only_cell_span(span_exporter)
    assert 0 <= span.start_time - epoch < 60 * 10**9
    elapsed_s = span.attributes[sc.CELL_ELAPSED_S]
    assert elapsed_s >= 1.0  # 20 ms real at 50x
    assert (span.end_time - span.start_time) / 1e9 == pytest.approx(elapsed_s, abs=0.01)


def test_in_flight_is_not_decremented_for_a_cell_whose_start_was_not_counted(
    providers, metric_reader, monkeypatch
) -> None:
    """Injected: the meter failing at the cell's start only (no real provider fails once)."""
    from spark_otel import cells as cells_module

    real = cells_module.instruments

    def broken(_provider):
        raise RuntimeError("meter exploded")

    monkeypatch.setattr(cells_module, "instruments", broken)
    with cell("golden", "x", **providers):
        monkeypatch.setattr(cells_module, "instruments", real)
    assert [p.value for p in metric_points(metric_reader, sc.CELLS_IN_FLIGHT)] == []
    assert [p.value for p in metric_points(metric_reader, sc.CELL_COUNT)] == [1]


# -- under a governor ----------------------------------------------------------------------------------

CLASS_RULES = "[[limit]]\nengine = 'q'\neval = 'golden'\ncell_class = 'big'\ncells = 2\n"


@pytest.fixture
def governed(tmp_path):
    from spark_otel.governor import govern, ungovern

    rules = tmp_path / "rules.toml"
    rules.write_text(CLASS_RULES)
    yield lambda **kw: govern(rules, state=tmp_path / "state" / "governor.sqlite", **kw)
    ungovern()


def test_a_governed_cells_class_comes_from_the_rules_unless_it_names_its_own(
    governed, providers, span_exporter
) -> None:
    governed()
    with cell("golden", "ruled", engine="q", **providers):
        pass
    with cell("golden", "own", engine="q", cell_class="small", **providers):
        pass

    @cell("golden", engine="q", cell_class="small", **providers)
    def decorated() -> None:
        pass

    decorated()
    classes = {
        s.attributes[sc.CELL_ID]: s.attributes[sc.CELL_CLASS] for s in span_exporter.get_finished_spans()
    }
    assert classes.pop("ruled") == "big"
    assert classes.pop("own") == "small"
    assert list(classes.values()) == ["small"]


def test_a_governed_cells_slot_metric_is_back_to_zero_on_its_own_provider(
    governed, providers, metric_reader
) -> None:
    governed()
    with cell("golden", "a", engine="q", **providers):
        assert [p.value for p in metric_points(metric_reader, sc.GOVERNOR_SLOTS)] == [1]
    assert [p.value for p in metric_points(metric_reader, sc.GOVERNOR_SLOTS)] == [0]


def test_fail_closed_raises_before_an_async_cell_starts(tmp_path, providers, span_exporter) -> None:
    from spark_otel.governor import GovernorError, govern, ungovern

    rules = tmp_path / "rules.toml"
    rules.write_text(CLASS_RULES)
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("x")
    govern(rules, state=blocked / "governor.sqlite", fail_closed=True)
    ran = False

    async def run() -> None:
        nonlocal ran
        async with cell("golden", "c", engine="q", **providers):
            ran = True

    try:
        with pytest.raises(GovernorError, match="fail-closed"):
            asyncio.run(run())
    finally:
        ungovern()
    assert not ran
    assert span_exporter.get_finished_spans() == ()


def _slots(state_file) -> list[tuple[object, ...]]:
    import sqlite3

    with sqlite3.connect(state_file) as conn:
        return conn.execute("SELECT eval_name, cell_id, cell_class, has_deadline FROM slots").fetchall()


def test_a_governed_cell_holds_its_slot_under_its_own_id_sync_and_async(
    governed, providers, tmp_path
) -> None:
    governed()
    state_file = tmp_path / "state" / "governor.sqlite"
    with cell("golden", "sync-1", engine="q", deadline_s=30, **providers):
        assert _slots(state_file) == [("golden", "sync-1", "big", 1)]

    async def run() -> None:
        async with cell("golden", "async-1", engine="q", **providers):
            assert _slots(state_file) == [("golden", "async-1", "big", 0)]

    asyncio.run(run())
    assert _slots(state_file) == []


def test_leaving_a_cell_restores_the_callers_current_span(providers) -> None:
    tracer = trace.get_tracer("t", tracer_provider=providers["tracer_provider"])
    with tracer.start_as_current_span("caller") as caller:
        with cell("golden", "x", **providers):
            assert trace.get_current_span() is not caller
        assert trace.get_current_span() is caller
    assert current_cell() is None


def test_a_cell_given_only_a_tracer_provider_keeps_it(tracer_provider, span_exporter, tmp_path) -> None:
    import spark_otel

    spark_otel.configure(store=tmp_path / "s.sqlite", set_global=False)
    try:
        with cell("golden", "mine", tracer_provider=tracer_provider):
            pass
    finally:
        spark_otel.shutdown()
    assert only_cell_span(span_exporter).attributes[sc.CELL_ID] == "mine"


def test_a_cell_failed_by_its_requests_alone_is_typed_by_the_error_fallback(providers, span_exporter) -> None:
    with cell("golden", "x", **providers) as c:
        c.add_request(input_tokens=None, output_tokens=None, error_type="500")
    a = only_cell_span(span_exporter).attributes
    assert (a[sc.CELL_STATUS], a[sc.ERROR_TYPE]) == ("error", sc.ERROR_TYPE_OTHER)


def test_every_cell_metric_carries_the_cells_attributes(providers, metric_reader) -> None:
    with cell("finder", "seed", engine="qwen", deadline_s=60, **providers) as c:
        c.add_tokens(completion=10)
        c.record_deadline_result("deadline", 2)
    done = {sc.EVAL_NAME: "finder", sc.ENGINE: "qwen", sc.CELL_STATUS: "deadline"}
    for name in (sc.CELL_DECODE_RATE_METRIC, sc.CELL_DEADLINE_HITS, sc.CELL_SALVAGED_FINDINGS_METRIC):
        (point,) = metric_points(metric_reader, name)
        assert dict(point.attributes) == done, name
    phases = {p.attributes[sc.CELL_PHASE] for p in metric_points(metric_reader, sc.CELL_PHASE_DURATION)}
    assert phases == {"first_token", "decode", "unsplit", "other"}


def test_a_governed_cells_wait_is_its_admission_phase(governed, providers, metric_reader) -> None:
    governed()
    with cell("golden", "a", engine="q", **providers):
        pass
    phases = {
        p.attributes[sc.CELL_PHASE]: p.count for p in metric_points(metric_reader, sc.CELL_PHASE_DURATION)
    }
    assert phases == {"admission": 1, "first_token": 1, "decode": 1, "unsplit": 1, "other": 1}


@pytest.mark.usefixtures("restore_clock")
def test_under_a_model_clock_a_requests_share_of_the_budget_is_model_time(providers, span_exporter) -> None:
    import time

    from spark_otel import _clock
    from spark_otel.sim.clock import model_time
    from spark_otel.time_budget import RequestStamps

    with model_time(50), cell("golden", "m", **providers) as c:
        start = _clock.real_monotonic_ns()
        time.sleep(0.02)
        c.add_request(
            input_tokens=1,
            output_tokens=1,
            error_type=None,
            stamps=RequestStamps(start, 0, _clock.real_monotonic_ns(), False),
        )
    a = only_cell_span(span_exporter).attributes
    assert a[sc.CELL_BUDGET_UNSPLIT_S] >= 0.02 * 50 * 0.9  # model seconds, not the 0.02 real ones
    assert a[sc.CELL_BUDGET_UNSPLIT_S] <= a[sc.CELL_ELAPSED_S]
