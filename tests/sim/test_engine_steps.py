"""The engine's step model on plain data: every stamp, count and reading worked out by hand.

A box model at infinite speed runs its engines' real step loops on a private event loop, with no
HTTP and no wall clock in its figures, over a small profile whose numbers make the arithmetic
easy: a decode step takes 0.1 s at one stream and 0.2 s at two, a prompt token 0.02 s of
prefill, at most 10 tokens go in one step and 2 requests run at once. The scenarios check the
chunked first-come-first-served prefill (the budget that decode streams use up, the seats, a
budget of exactly one token), the neighbours' memory pressure at one model time, the engine's
mid-run state (held at a model time by a busy neighbour that stands still, as `_keep_pace` holds
any engine at infinite speed), the GPU readout, aborts and the output-length draw.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families
from tests.support.loopback import until

from spark_otel import _clock
from spark_otel.sim import DENSE, BoxModel, EngineStats, GpuReadout, RequestTiming
from spark_otel.sim.box import EngineModel, SimRequest

MS = 1_000_000  # ns
GIB = 1024**3
P = dataclasses.replace(
    DENSE,
    name="p",
    model_id="p-1",
    rate_curve=((1, 10.0), (2, 5.0)),  # decode steps of 0.1 s, 0.2 s, then 0.1 s more a stream
    power_curve=((1, 30.123), (2, 31.0)),
    prefill_tokens_per_s=50.0,  # 0.02 s a prompt token
    max_num_batched_tokens=10,
    max_num_seqs=2,
    kv_cache_tokens=16,
    memory_pressure_base=0.5,
    memory_pressure_per_stream=0.25,
)
INF = math.inf


def _pinned(prompt_tokens: int, tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "max_tokens": tokens,
        "ignore_eos": True,
        "key": f"{prompt_tokens}",
    }


async def _all_done(requests: list[SimRequest]) -> None:
    while not all(r.done for r in requests):  # noqa: ASYNC110 (a yield to the engine's task, no event to wait on)
        await asyncio.sleep(0)


def _serve(
    box: BoxModel,
    submissions: list[tuple[str, dict[str, Any]]],
    *,
    holds: tuple[int, ...] = (),
    at_hold: Callable[[], None] = lambda: None,
) -> list[SimRequest]:
    """Run every engine but ``hold`` until the submitted requests finish (within 5 s: the
    scenarios take milliseconds). With ``holds``, engine ``hold`` stands busy at each of those
    model times in turn and ``at_hold`` runs once the others have stepped past it."""

    async def main() -> list[SimRequest]:
        hold = box.engines.get("hold")
        if hold is not None:
            hold.busy, hold.cursor_ns = True, holds[0]
        running = [e for name, e in box.engines.items() if name != "hold"]
        tasks = [asyncio.create_task(e.run()) for e in running]
        requests = [box.engines[name].submit(**kwargs) for name, kwargs in submissions]
        for held_at in holds:
            assert hold is not None
            hold.cursor_ns = held_at
            await until(lambda: all(e.cursor_ns > held_at or not e.busy for e in running), timeout_s=5)  # noqa: B023
            at_hold()
        if hold is not None:
            hold.busy = False
        waiter = asyncio.create_task(asyncio.wait_for(_all_done(requests), 5))
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for engine in box.engines.values():
            engine.stop()
        await asyncio.gather(*tasks)  # an engine's crash is raised here
        await waiter  # and serving too slowly here
        return requests

    return asyncio.run(main())


def _timing(id: int, prompt: int, tokens: int, first_ms: int | None, last_ms: int, end_ms: int,
            reason: str = "length", arrival_ms: int = 0) -> RequestTiming:  # fmt: skip
    first = None if first_ms is None else first_ms * MS
    return RequestTiming(id, prompt, tokens, reason, arrival_ms * MS, first, last_ms * MS, end_ms * MS)


def _stats(generated: int, prompt: int, finished: dict[str, int], running: int, waiting: int,
           decoding: int, model_ms: int) -> EngineStats:  # fmt: skip
    return EngineStats("a", "p", generated, prompt, {"stop": 0, "length": 0, "abort": 0, **finished}, running,
                       waiting, decoding, model_ms / 1000, 0.0)  # fmt: skip


def _scrape(engine: EngineModel) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(engine.metrics.exposition().decode())
        for sample in family.samples
        if not sample.name.endswith(("_created", "_bucket"))
        and sample.labels.get("finished_reason", "length") == "length"
    }


def test_chunked_prefill_shares_each_step_with_decode_first_come_first_served() -> None:
    """R1 (4 prompt tokens, 3 out), R2 (25, 2) and R3 (3, 1) arrive together at 0.

    step 1, 0 to 200 ms: R1 takes 4 tokens of budget, R2 the other 6 (prefill 0.2 s > decode 0.1 s);
    R3 waits for a seat. R1's first token.
    steps 2 and 3, to 380 and 560 ms: R1 decodes, so 9 tokens of budget are left, all R2's
    (0.18 s each); R1's 2nd and 3rd tokens, the last at 560 ms.
    step 4, to 660 ms: R2's last token of prompt, then R3 gets the seat R1 left and its 3 tokens
    (0.08 s of prefill, under the 0.1 s step). R2's and R3's first tokens; R3 is done.
    step 5, to 760 ms: R2's 2nd and last token.
    """
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    box = BoxModel({"a": P, "hold": P}, speed=INF, tracer_provider=tracing)
    engine = box.engines["a"]
    seen: list[tuple[EngineStats, float, dict[str, float]]] = []

    def look() -> None:
        seen.append((engine.stats(), engine.kv_usage(), _scrape(engine)))

    _serve(box, [("a", _pinned(4, 3)), ("a", _pinned(25, 2)), ("a", _pinned(3, 1))], holds=(100 * MS, 500 * MS),  # noqa: E501
           at_hold=look)  # fmt: skip
    assert list(engine.timings) == [
        _timing(1, 4, 3, 200, 560, 560),
        _timing(3, 3, 1, 660, 660, 660),
        _timing(2, 25, 2, 660, 760, 760),
    ]
    (after_step_1, kv_1, gauges_1), (after_step_3, kv_3, _) = seen
    # R1 decoding with 4 + 1 tokens in the KV cache, R2 prefilling with 6 of 16, R3 waiting.
    assert after_step_1 == _stats(1, 10, {}, running=2, waiting=1, decoding=1, model_ms=200)
    assert kv_1 == 11 / 16
    assert (gauges_1["vllm:num_requests_running"], gauges_1["vllm:num_requests_waiting"]) == (2, 1)
    assert gauges_1["vllm:kv_cache_usage_perc"] == 11 / 16
    # R1 done; R2 holds 24 prompt tokens, more than the cache: the gauge stops at full.
    assert after_step_3 == _stats(3, 28, {"length": 1}, running=1, waiting=1, decoding=0, model_ms=560)
    assert kv_3 == 1.0
    assert engine.stats() == _stats(6, 32, {"length": 3}, running=0, waiting=0, decoding=0, model_ms=760)
    assert engine.kv_usage() == 0.0
    # Every histogram in model seconds: R1, R2, R3 queued 0, 0 and 0.56 s; prefilled 0.2, 0.66
    # and 0.1 s; decoded 0.36, 0.1 and 0 s; the inter-token gaps 0.18, 0.18 (R1) and 0.1 (R2).
    expected = {
        "vllm:prompt_tokens_total": 32,
        "vllm:generation_tokens_total": 6,
        "vllm:request_success_total": 3,
        "vllm:time_to_first_token_seconds_count": 3,
        "vllm:time_to_first_token_seconds_sum": 0.2 + 0.66 + 0.66,
        "vllm:inter_token_latency_seconds_count": 3,
        "vllm:inter_token_latency_seconds_sum": 0.18 + 0.18 + 0.1,
        "vllm:e2e_request_latency_seconds_count": 3,
        "vllm:e2e_request_latency_seconds_sum": 0.56 + 0.76 + 0.66,
        "vllm:request_queue_time_seconds_count": 3,
        "vllm:request_queue_time_seconds_sum": 0.56,
        "vllm:request_prefill_time_seconds_count": 3,
        "vllm:request_prefill_time_seconds_sum": 0.2 + 0.66 + 0.1,
        "vllm:request_decode_time_seconds_count": 3,
        "vllm:request_decode_time_seconds_sum": 0.36 + 0.1,
        "vllm:request_inference_time_seconds_count": 3,
        "vllm:request_inference_time_seconds_sum": 0.56 + 0.76 + 0.1,
        "vllm:request_prompt_tokens_count": 3,
        "vllm:request_prompt_tokens_sum": 32,
        "vllm:request_generation_tokens_count": 3,
        "vllm:request_generation_tokens_sum": 6,
        "vllm:num_requests_running": 0,
        "vllm:num_requests_waiting": 0,
        "vllm:kv_cache_usage_perc": 0,
    }
    assert _scrape(engine) == pytest.approx(expected, abs=1e-12)
    # A request submitted to the model directly carries no context: each span is a root.
    spans = exporter.get_finished_spans()
    assert [(s.name, s.parent, (s.attributes or {})["gen_ai.request.id"]) for s in spans] == [
        ("llm_request", None, "sima00000001"),
        ("llm_request", None, "sima00000003"),
        ("llm_request", None, "sima00000002"),
    ]
    assert {s.instrumentation_scope.name for s in spans if s.instrumentation_scope} == {"spark_otel.sim"}


def test_the_prefill_budget_is_spent_to_the_last_token() -> None:
    """A (19 prompt tokens), B (12) and C (5), one token out each, arrive together at 0.

    step 1, to 200 ms: A takes all 10 tokens; B waits, though a seat is free.
    step 2, to 400 ms: A's last 9, then B is scheduled for the 1 token left. A is done.
    step 3, to 600 ms: B takes 10; C waits with no budget left.
    step 4, to 720 ms: B's last token, then C (scheduled at 600 ms) its 5: 0.12 s of prefill.
    """
    box = BoxModel({"a": P}, speed=INF)
    _serve(box, [("a", _pinned(19, 1)), ("a", _pinned(12, 1)), ("a", _pinned(5, 1))])
    engine = box.engines["a"]
    assert list(engine.timings) == [
        _timing(1, 19, 1, 400, 400, 400),
        _timing(2, 12, 1, 720, 720, 720),
        _timing(3, 5, 1, 720, 720, 720),
    ]
    queued = _scrape(engine)["vllm:request_queue_time_seconds_sum"]
    assert queued == pytest.approx(0 + 0.2 + 0.6, abs=1e-12)


def test_a_request_waits_for_a_seat_while_two_decode() -> None:
    """Three requests of 1 prompt token and 2 out, 2 seats: R3 waits until R1 and R2 are done at
    300 ms (a step of two streams takes 0.2 s), then takes 0.1 s a token."""
    box = BoxModel({"a": P}, speed=INF)
    _serve(box, [("a", _pinned(1, 2)), ("a", _pinned(1, 2)), ("a", _pinned(1, 2))])
    assert list(box.engines["a"].timings) == [
        _timing(1, 1, 2, 100, 300, 300),
        _timing(2, 1, 2, 100, 300, 300),
        _timing(3, 1, 2, 400, 500, 500),
    ]


def test_engines_at_infinite_speed_step_in_model_time_order_under_each_others_pressure() -> None:
    """Engines a and b, ten tokens each (pressure 0.5 on the other: steps of 0.15 s while both
    decode). a's first step sees b idle (0.1 s), b's sees a decoding, and from then on neither
    steps past the other: a's tokens at 100, 250 ... 1450 ms, b's at 150, 300 ... 1350 ms, and
    its last, after a is done, 0.1 s later at 1450 ms. Waiting for a neighbour costs no wall
    time (the whole run is well inside `_serve`'s 5 s)."""
    box = BoxModel({"a": P, "b": P}, speed=INF)
    _serve(box, [("a", _pinned(1, 10)), ("b", _pinned(1, 10))])
    assert list(box.engines["a"].timings) == [_timing(1, 1, 10, 100, 1450, 1450)]
    assert list(box.engines["b"].timings) == [_timing(1, 1, 10, 150, 1450, 1450)]


def test_an_idle_engine_resumes_at_the_arrival() -> None:
    """Engine a idle while the box's clock moved on to 1 s: a request arriving then is stamped at
    1 s, its first token 0.1 s later."""
    box = BoxModel({"a": P}, speed=INF)
    box.clock.advance(1000 * MS)  # as another engine's steps would move it
    _serve(box, [("a", _pinned(1, 2))])
    engine = box.engines["a"]
    assert list(engine.timings) == [_timing(1, 1, 2, 1100, 1200, 1200, arrival_ms=1000)]
    scraped = _scrape(engine)
    assert (
        scraped["vllm:time_to_first_token_seconds_sum"],
        scraped["vllm:e2e_request_latency_seconds_sum"],
    ) == (
        pytest.approx(0.1, abs=1e-12),
        pytest.approx(0.2, abs=1e-12),
    )


def test_a_request_that_arrives_while_a_neighbour_ran_ahead_is_served_after_its_arrival() -> None:
    """At infinite speed a request arrives at the box's model time, which a neighbour's long step
    can put ahead of its engine's: the engine takes it into the first step that starts at or after
    its arrival, never into one that ends before it (the old model stamped its first token 0.8 s
    before it arrived).

    Engine a decodes R (1 prompt token, 15 out: a token every 0.1 s); engine b prefills S (20
    prompt tokens at 10 a second: steps of 1 s). After a's first step (to 100 ms) and b's (to
    1000 ms), L (1 prompt token, 2 out) arrives at a at 1000 ms. a steps on alone to 1000 ms, then
    takes L with R: L's first token at 1100 ms, its second after a 2-stream step (0.2 s) at 1300 ms.
    """
    box = BoxModel({"a": P, "b": dataclasses.replace(P, prefill_tokens_per_s=10.0)}, speed=INF)
    a, b = box.engines["a"], box.engines["b"]

    async def main() -> None:
        tasks = [asyncio.create_task(e.run()) for e in (a, b)]
        a.submit(**_pinned(1, 15))
        b.submit(**_pinned(20, 1))
        while not b.cursor_ns > a.cursor_ns > 0:  # noqa: ASYNC110 - a waits for b, b for a: each yields at once
            await asyncio.sleep(0)
        late = a.submit(**_pinned(1, 2))
        await asyncio.wait_for(_all_done([late]), 5)
        for engine in (a, b):
            engine.stop()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert list(a.timings) == [
        _timing(2, 1, 2, 1100, 1300, 1300, arrival_ms=1000),
        _timing(1, 1, 15, 100, 1600, 1600),  # R's 12th token at 1300 ms, then alone again
    ]
    assert list(b.timings) == [_timing(1, 20, 1, 2000, 2000, 2000)]


def test_a_prefill_gets_the_one_token_nine_decoding_streams_leave() -> None:
    """Nine requests of 1 prompt token and 3 out, then X of 30 prompt tokens, at 0, with 16 seats.

    step 1, to 200 ms: the nine take 9 tokens of budget, X the last one.
    steps 2 and 3, to 1100 and 2000 ms: nine streams decode (0.1 s + 7 x 0.1 s a step) and leave
    one token of budget, which X takes each time; the nine are done at 2000 ms.
    steps 4 to 6, to 2200, 2400 and 2540 ms: X's remaining 27 tokens, 10, 10 and 7.
    """
    box = BoxModel({"a": dataclasses.replace(P, max_num_seqs=16)}, speed=INF)
    _serve(box, [("a", _pinned(1, 3)) for _ in range(9)] + [("a", _pinned(30, 1))])
    assert list(box.engines["a"].timings) == [
        *(_timing(i, 1, 3, 200, 2000, 2000) for i in range(1, 10)),
        _timing(10, 30, 1, 2540, 2540, 2540),
    ]


def test_predicted_rate_scales_the_neighbours_pressure_by_the_boxs_contention() -> None:
    box = BoxModel({"a": P, "b": P}, speed=INF, contention=0.5)
    # b at 3 streams: pressure 0.5 + 2 x 0.25 = 1, halved; a's 2-stream step of 0.2 s takes 1.5x.
    assert box.predicted_rate("a", 2, {"b": 3}) == pytest.approx(1 / (0.2 * 1.5), rel=1e-12)
    assert box.predicted_rate("a", 2) == pytest.approx(5.0, rel=1e-12)


G = dataclasses.replace(P, name="g", rate_curve=((1, 0.2), (2, 0.1)))  # decode steps of 5 s


def test_the_gpu_readout_while_idle_and_while_decoding() -> None:
    box = BoxModel({"a": G, "hold": G}, speed=INF)
    readings = [box.gpu()]
    # One request of 1 prompt token: its first step (5 s) ends with the first token; the box
    # is held there, decoding one stream. Energy: the idle 12 W held for those 5 s.
    _serve(box, [("a", _pinned(1, 3))], holds=(1,), at_hold=lambda: readings.append(box.gpu()))
    memory = 2 * 52 * GIB
    assert readings == [
        GpuReadout(0.0, 12.0, 0.0, 1200.0, memory, 128 * GIB, box.clock.unix_ns(0)),
        # 96 % and a wobble of 0.4 x sin(5 / 7) = 0.262; the power curve's 30.123 W to 0.01 W.
        GpuReadout(96.3, 30.12, 60.0, 2405.0, memory, 128 * GIB, box.clock.unix_ns(5000 * MS)),
    ]


def test_the_virtual_clocks_unix_time_runs_forward_from_the_boxs_start() -> None:
    clock = BoxModel({"a": P}, speed=INF).clock
    assert clock.unix_ns(5000 * MS) - clock.unix_ns(0) == 5000 * MS
    assert clock.now_ns() == 0


def test_a_finite_box_reads_the_process_clock() -> None:
    """At a finite speed the model's clock is the process's model clock (real time here): its Unix
    time, an arrival at a busy engine whose loop ran ahead, an abort's stamp, the energy."""
    start = _clock.perf_ns()
    before_unix = _clock.wall_ns()
    box = BoxModel({"a": P}, speed=1000)
    created = _clock.perf_ns()
    unix_now = box.clock.unix_ns(box.clock.now_ns())
    after_unix = _clock.wall_ns()
    assert before_unix - MS <= unix_now <= after_unix + MS  # a millisecond for the clocks' reads
    engine = box.engines["a"]
    engine.busy, engine.cursor_ns = True, _clock.perf_ns() + 10**12  # a loop that ran far ahead
    before = _clock.perf_ns()
    req = engine.submit(**_pinned(1, 5))
    queued_at = _clock.perf_ns()
    assert before <= req.arrival_ns <= queued_at
    engine.cursor_ns = req.arrival_ns
    before = _clock.perf_ns()
    engine.abort(req)
    after = _clock.perf_ns()
    assert req.finished_ns is not None
    assert before <= req.finished_ns <= after
    idle_w = 12.0
    reading = box.gpu()
    read = _clock.perf_ns()
    assert idle_w * (before - created) / 1e9 <= reading.energy_j <= idle_w * (read - start) / 1e9


def test_aborts_of_queued_and_late_requests_are_stamped_at_the_engines_own_time() -> None:
    box = BoxModel({"a": P, "b": P}, speed=INF)
    engine = box.engines["a"]
    box.clock.advance(5000 * MS)  # as engine b's steps would move the box's clock
    first = engine.submit(**_pinned(3, 5))
    second = engine.submit(**_pinned(4, 5))
    box.clock.advance(8000 * MS)
    engine.abort(second)  # still queued: it leaves at a's own model time, which never moved
    assert engine.stats().waiting == 1
    engine.stop()
    late = engine.submit(**_pinned(2, 5))  # after the stop: ends before it starts
    assert (first.finish_reason, second.finish_reason, late.finish_reason) == ("abort", "abort", "abort")
    assert list(engine.timings) == [
        _timing(2, 4, 0, None, 5000, 5000, reason="abort", arrival_ms=5000),
        _timing(1, 3, 0, None, 5000, 5000, reason="abort", arrival_ms=5000),
        _timing(3, 2, 0, None, 8000, 8000, reason="abort", arrival_ms=8000),
    ]
    assert engine.stats().finished == {"stop": 0, "length": 0, "abort": 3}
    queued = _scrape(engine)
    assert queued["vllm:request_queue_time_seconds_count"] == 3
    assert queued["vllm:request_queue_time_seconds_sum"] == 0
    assert queued["vllm:e2e_request_latency_seconds_sum"] == 0  # each ended when it arrived
    assert queued["vllm:request_prefill_time_seconds_count"] == 0


def test_a_chunk_of_a_request_aborted_mid_step_is_dropped_and_the_rest_applied() -> None:
    box = BoxModel({"a": P}, speed=INF)
    engine = box.engines["a"]
    gone = engine.submit(**_pinned(4, 2))
    kept = engine.submit(**_pinned(3, 2))
    chunks, step_s = engine._plan()
    assert ([(r.id, take) for r, take in chunks], step_s) == ([(1, 4), (2, 3)], pytest.approx(0.14))
    engine.abort(gone)  # the client left while the step ran
    work = engine._apply(chunks, 140 * MS)
    assert (kept.prefilled, kept.produced, kept.first_token_ns) == (3, 1, 140 * MS)
    assert work == 1 + 2  # the step's work: one token made and two chunks planned
    assert (engine.prompt_tokens, engine.generation_tokens) == (3, 1)
    # The aborted one was scheduled and left at model time 0: no time in the queue or running.
    scraped = _scrape(engine)
    assert (
        scraped["vllm:request_inference_time_seconds_count"],
        scraped["vllm:request_inference_time_seconds_sum"],
    ) == (1, 0)


def test_the_engine_warns_once_when_it_falls_behind_then_only_logs_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="spark_otel.sim")
    engine = BoxModel({"a": P}, speed=1000).engines["a"]
    engine._fell_behind(0.3004)
    engine._fell_behind(2.0)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            logging.WARNING,
            "sim engine a fell 0.300 s behind the wall clock and dropped model time: its rates now read "
            "slower than its profile (lower the speed or the load; dropped_model_s in /sim/info counts it)",
        ),
        (logging.DEBUG, "sim engine a fell 2.000 s behind the wall clock"),
    ]


def test_a_request_submitted_with_the_defaults_draws_its_length_and_words_from_its_key() -> None:
    """No ``min_tokens``, no ``ignore_eos``, no key: the output length is drawn (not pinned at
    ``max_tokens``) from the seed, the engine, the empty key's digest and its first occurrence."""
    engine = BoxModel({"a": P}, speed=INF).engines["a"]
    first = engine.submit(prompt_tokens=5, max_tokens=1000)
    again = engine.submit(prompt_tokens=5, max_tokens=1000)
    # The empty key's 16-byte BLAKE2b digest starts 0xcae66941 = 3404097857; its word cycle
    # starts there plus the occurrence, and each occurrence draws its own length.
    assert (first.target_tokens, first.stop_reason, first.text_offset) == (180, "stop", 3404097857 + 1)
    assert (again.target_tokens, again.stop_reason, again.text_offset) == (241, "stop", 3404097857 + 2)
    # With a median of one token, engine c's first draw rounds to none: one token, then "stop".
    tiny = BoxModel({"c": dataclasses.replace(P, output_tokens_median=1)}, speed=INF).engines["c"]
    one = tiny.submit(prompt_tokens=5, max_tokens=1)
    assert (one.target_tokens, one.stop_reason) == (1, "stop")


def test_the_pressure_on_an_engine_is_its_neighbours_summed_and_scaled_by_the_contention() -> None:
    """b decoding 2 streams (0.5 + 0.25) and c one (0.5), held after their first step; at a
    contention of 0.5 the pressure on a is half their sum, and on b half of c's."""
    box = BoxModel({"a": P, "b": P, "c": P, "hold": P}, speed=INF, contention=0.5)
    pressures: list[tuple[float, float]] = []

    def look() -> None:
        pressures.append((box.neighbour_pressure(box.engines["a"]), box.neighbour_pressure(box.engines["b"])))

    _serve(box, [("b", _pinned(1, 3)), ("b", _pinned(1, 3)), ("c", _pinned(1, 3))], holds=(1,), at_hold=look)
    assert pressures == [((0.75 + 0.5) * 0.5, 0.5 * 0.5)]


def test_the_gpu_power_adds_a_watt_an_extra_busy_engine_and_two_for_prefill() -> None:
    """a prefilling a 15-token prompt (10 in its first step) and b decoding one stream, held after
    their first 5 s step: the highest curve power (30.123 W), 1 W for the second engine, 2 W for
    the prefill."""
    box = BoxModel({"a": G, "b": G, "hold": G}, speed=INF)
    readings: list[GpuReadout] = []
    _serve(
        box,
        [("a", _pinned(15, 1)), ("b", _pinned(1, 3))],
        holds=(1,),
        at_hold=lambda: readings.append(box.gpu()),
    )
    (reading,) = readings
    assert (reading.power_w, reading.energy_j, reading.memory_used_bytes) == (33.12, 60.0, 3 * 52 * GIB)


def test_a_box_started_and_stopped_ends_its_engines_loops() -> None:
    box = BoxModel({"a": P, "b": P}, speed=INF)

    async def main() -> SimRequest:
        box.start()
        names = {t.get_name() for t in asyncio.all_tasks()}
        assert {"sim-a", "sim-b"} <= names  # each engine's loop is named for task dumps
        req = box.engines["a"].submit(**_pinned(1, 2))
        await asyncio.wait_for(_all_done([req]), 5)
        await box.stop()
        return req

    req = asyncio.run(main())
    assert (req.finish_reason, req.finished_ns) == ("length", 200 * MS)
    late = box.engines["b"].submit(**_pinned(1, 2))  # a stopped engine takes no more work
    assert late.finish_reason == "abort"


def test_a_box_stopped_before_it_started_aborts_what_it_holds() -> None:
    box = BoxModel({"a": P}, speed=INF)
    queued = box.engines["a"].submit(**_pinned(1, 2))
    asyncio.run(box.stop())
    assert (queued.finish_reason, box.engines["a"].stats().finished["abort"]) == ("abort", 1)


def test_an_engine_keeps_the_stamps_of_its_last_4096_requests() -> None:
    box = BoxModel({"a": dataclasses.replace(P, max_num_seqs=10)}, speed=INF)
    _serve(box, [("a", _pinned(1, 1))] * 4097)  # ten a step, each done at its first token
    timings = box.engines["a"].timings
    assert (len(timings), timings[0].id, timings[-1].id) == (4096, 2, 4097)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"speed": 0}, "speed must be inf or from 0.001 to 1,000,000, got 0"),
        ({"speed": -1.5}, "speed must be inf or from 0.001 to 1,000,000, got -1.5"),
        ({"speed": math.nan}, "speed must be inf or from 0.001 to 1,000,000, got nan"),
        ({"speed": 1e7}, "speed must be inf or from 0.001 to 1,000,000, got 10000000.0"),
        ({"speed": 1, "contention": -0.5}, "contention must not be negative, got -0.5"),
    ],
)
def test_a_box_model_refuses_a_speed_or_contention_out_of_range(
    kwargs: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        BoxModel({"a": P}, **kwargs)


def test_a_box_model_takes_any_positive_speed_and_no_contention() -> None:
    box = BoxModel({"a": P}, speed=0.5, contention=0)
    assert (box.speed, box.contention, box.clock.finite) == (0.5, 0.0, True)
