"""Starting and stopping boxes: free ports, clean shutdown with streams in flight, the model clock,
reproducible output lengths, clients that leave."""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
import threading
import time

import httpx
import openai
import pytest
from tests.support.loopback import in_flight, pinned, stream_many, until

from spark_otel import ConfigError, _clock
from spark_otel.sim import DENSE, EngineSpec, parse_engine_spec, run_box


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_shutdown_with_streams_in_flight_ends_every_stream_and_frees_the_ports() -> None:
    outcomes: list[tuple[int, str | None]] = []

    def consume(url: str) -> None:
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=30) as client:
            stream = client.chat.completions.create(
                model="qwen", messages=[{"role": "user", "content": "go"}], max_tokens=100_000,
                stream=True, extra_body={"ignore_eos": True},
            )  # fmt: skip
            chunks = list(stream)  # a stream the box aborts ends; it never raises into the client
            reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            outcomes.append((len(chunks), reasons[-1] if reasons else None))

    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=20) as box:
        ports = [box.port(n) for n in box.engines]
        threads = [threading.Thread(target=consume, args=(box.url("qwen"),)) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while box.stats("qwen").decoding < 4:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
    stop_s = time.monotonic() - started
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a client hung after shutdown"
    assert len(outcomes) == 4
    # Each stream was cut short mid-answer and ended cleanly, without a finish reason of its own.
    assert all(0 < chunks < 100_000 and reason is None for chunks, reason in outcomes), outcomes
    assert stop_s < 5
    assert all(_refused(p) for p in ports)
    stats = box.stats("qwen")
    assert stats.finished["abort"] == 4
    assert stats.running == 0


def test_shutdown_does_not_hang_on_a_client_that_stopped_reading() -> None:
    with run_box({"qwen": "dense"}, speed=float("inf")) as box:
        sock = socket.create_connection(("127.0.0.1", box.port("qwen")))
        body = b'{"model": "qwen", "prompt": "x", "max_tokens": 100000, "ignore_eos": true, "stream": true}'
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        deadline = time.monotonic() + 10
        while box.stats("qwen").generation_tokens < 20_000:  # far more than the socket buffers hold
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
    assert time.monotonic() - started < 6
    sock.close()


def test_a_client_that_leaves_mid_stream_is_counted_as_abort() -> None:
    with run_box({"qwen": "dense"}, speed=50) as box:

        async def leave_early() -> None:
            async with in_flight(box.port("qwen"), [pinned("qwen", 50_000)]):
                await until(lambda: box.stats("qwen").decoding == 1)

        asyncio.run(leave_early())
        deadline = time.monotonic() + 5
        while box.stats("qwen").running:
            assert time.monotonic() < deadline, "the engine kept decoding for a client that left"
            time.sleep(0.01)
        assert box.stats("qwen").finished == {"stop": 0, "length": 0, "abort": 1}


def test_a_busy_port_fails_naming_the_engine() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with (
            pytest.raises(ConfigError, match=r"engine 'qwen'.*" + str(port)),
            run_box([EngineSpec("qwen", DENSE, port)]),
        ):
            pass
    assert _clock.rate() == 1.0


def test_a_bound_engine_port_cannot_be_shared_by_another_reuseaddr_socket() -> None:
    from spark_otel.sim.server import _bind

    sock = _bind("127.0.0.1", EngineSpec("qwen", DENSE, 0))
    try:
        port = sock.getsockname()[1]
        with socket.socket() as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError, match="in use") as info:
                other.bind(("127.0.0.1", port))
            assert info.value.errno == errno.EADDRINUSE
    finally:
        sock.close()


def test_a_port_another_socket_only_bound_is_the_boxs_once_it_runs() -> None:
    with socket.socket() as early:
        early.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        early.bind(("127.0.0.1", 0))
        port = early.getsockname()[1]
        with run_box({"qwen": "dense"}, speed=100, ports={"qwen": port}) as box:
            with pytest.raises(OSError, match="in use") as info:
                early.listen()  # the box listens; the other socket cannot also serve the port
            assert info.value.errno == errno.EADDRINUSE
            assert httpx.get(box.url("qwen") + "/health", timeout=10).status_code == 200


def test_the_box_sets_and_restores_the_model_clock() -> None:
    assert _clock.rate() == 1.0
    with run_box({"a": "dense"}, speed=250) as box:
        assert _clock.rate() == 250
        with run_box({"b": "moe"}, speed=250):
            pass
        assert _clock.rate() == 250  # still held by the outer box
        with pytest.raises(ConfigError, match="speed"), run_box({"c": "moe"}, speed=10):
            pass
        assert box.speed == 250
    assert _clock.rate() == 1.0


def test_a_box_refused_for_its_speed_leaves_its_port_free() -> None:
    with run_box({"a": "dense"}, speed=250):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with (
            pytest.raises(ConfigError, match="speed") as refused,
            run_box([EngineSpec("c", DENSE, port)], speed=10),
        ):
            pass
        assert "speed 10 cannot start" in str(refused.value)
        # `refused` keeps the traceback alive, so a socket the failed box left open would still listen
        assert _refused(port)


def test_unpinned_outputs_reproduce_with_the_seed_whatever_the_order() -> None:
    def outputs(seed: int, order: list[int]) -> dict[int, tuple[int, str]]:
        with (
            run_box({"qwen": "dense"}, speed=5000, seed=seed) as box,
            httpx.Client(base_url=box.url("qwen")) as http,
        ):
            out = {}
            for i in order:
                body = {"model": "qwen", "prompt": f"cell {i}", "max_tokens": 2000}
                answer = http.post("/v1/completions", json=body, timeout=30).json()
                out[i] = (answer["usage"]["completion_tokens"], answer["choices"][0]["text"])
            return out

    first = outputs(7, [0, 1, 2, 3, 4, 5])
    assert outputs(7, [5, 3, 1, 0, 2, 4]) == first
    other = outputs(8, [0, 1, 2, 3, 4, 5])
    assert [n for n, _ in other.values()] != [n for n, _ in first.values()]
    assert len({n for n, _ in first.values()}) > 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("qwen", "expected NAME=PORT:PROFILE"),
        ("=8011:dense", "expected NAME=PORT:PROFILE"),
        ("qwen=x:dense", "port 'x' is not a number"),
        ("qwen=70000:dense", "out of range"),
        ("qwen=8011:sparse", "unknown engine profile 'sparse'"),
    ],
)
def test_bad_engine_specs_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_engine_spec(text)


def test_engine_spec_forms() -> None:
    assert parse_engine_spec("qwen=8011:dense") == EngineSpec("qwen", DENSE, 8011)
    assert parse_engine_spec("qwen=dense") == EngineSpec("qwen", DENSE, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"engines": {}}, "at least one engine"),
        ({"engines": ["a=dense", "a=moe"]}, "unique"),
        ({"engines": {"a": "dense"}, "ports": {"b": 1}}, "not in the box"),
        ({"engines": {"a": "dense"}, "speed": 0}, "speed must be inf or from 0.001 to 1,000,000"),
        ({"engines": {"a": "dense"}, "contention": -1}, "contention"),
    ],
)
def test_bad_box_arguments_are_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message), run_box(**kwargs):
        pass


def test_unknown_engine_name_on_a_running_box() -> None:
    with (
        run_box({"qwen": "dense"}, speed=100) as box,
        pytest.raises(ConfigError, match="no engine 'nemotron'"),
    ):
        box.url("nemotron")


def test_infinite_speed_streams_exact_tokens_with_model_time_metrics() -> None:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=float("inf")) as box:
        results = asyncio.run(stream_many(box.port("qwen"), [pinned("qwen", 300) for _ in range(4)]))
        assert [r.tokens for r in results] == [300] * 4
        stats = box.stats("qwen")
        info = httpx.get(box.url("qwen") + "/sim/info").json()
    assert float(info["speed"]) == float("inf")
    assert _clock.rate() == 1.0  # an infinite box leaves the process clock alone
    # 300 tokens at 4 streams take 300 / 10.35 s of model time, however fast they were served.
    assert stats.model_time_s >= 300 / DENSE.per_stream_rate(4) * 0.99


@pytest.mark.parametrize("missing", ["uvicorn", "starlette"])
def test_without_the_sim_extra_run_box_names_the_install_command(missing: str, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # makes `import missing` raise ImportError
    with pytest.raises(ConfigError, match=r"pip install 'spark-otel\[sim\]'"), run_box({"a": "dense"}):
        pass
