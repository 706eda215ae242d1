"""The running box's handle and its thread, at their edges: engine specs at the limits of their
syntax, an IPv6 host, ground truth asked about an engine the box does not have, the model clock
in seconds, a box thread that fails before its loop exists, and one that outlives its stop
timeout (the timeout shortened to nothing, so the test need not wait ten seconds for it)."""

from __future__ import annotations

import logging
import socket
import sys

import httpx
import pytest

from spark_otel import ConfigError
from spark_otel.sim import DENSE, MOE, EngineSpec, parse_engine_spec, run_box
from spark_otel.sim import server as sim_server

INF = float("inf")


def test_engine_specs_at_the_edges_of_their_syntax() -> None:
    assert parse_engine_spec("q=65535:dense") == EngineSpec("q", DENSE, 65535)
    assert parse_engine_spec("q=0:moe") == EngineSpec("q", MOE, 0)
    for text, message in (
        ("q=65536:dense", "--engine 'q=65536:dense': port 65536 is out of range 0..65535"),
        ("q=1:2:dense", "--engine 'q=1:2:dense': port '1:2' is not a number"),  # the last colon splits
        ("a=b=dense", "unknown engine profile 'b=dense'; known profiles: dense, moe"),  # the first = does
    ):
        with pytest.raises(ConfigError) as refused:
            parse_engine_spec(text)
        assert str(refused.value) == message


def test_the_handle_answers_from_the_boxs_own_model() -> None:
    with run_box({"a": "dense", "b": "moe"}, speed=INF) as box:
        assert box.profile("a") is DENSE
        # a at 2 streams (10.6 tok/s alone) under b at 3 (pressure 0.3 + 2 x 0.29 = 0.88).
        assert box.predicted_rate("a", 2, {"b": 3}) == pytest.approx(10.6 / 1.88, rel=1e-12)
        with pytest.raises(ConfigError) as refused:
            box.predicted_rate("a", 2, {"x": 1})
        assert str(refused.value) == "no engine 'x' in this box (a, b)"
        # Idle at infinite speed, the model clock stands at 0: the box's epoch, in seconds.
        assert box.now_unix_s() == box.unix_ns(0) / 1_000_000_000


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_a_box_on_ipv6_loopback_brackets_its_host_in_urls() -> None:
    with run_box({"a": "dense"}, speed=INF, host="::1") as box:
        url = box.url("a")
        assert url == f"http://[::1]:{box.port('a')}"
        assert httpx.get(url + "/health", trust_env=False).status_code == 200


def test_a_box_thread_that_fails_before_its_loop_exists_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "spark_otel.sim.app", None)  # the thread's import of the app fails
    with pytest.raises(ConfigError) as refused, run_box({"a": "dense"}, speed=INF):
        pass
    assert str(refused.value) == (
        "the simulated box did not start: ModuleNotFoundError('import of spark_otel.sim.app halted; "
        "None in sys.modules')"
    )


def test_a_box_that_outlives_its_stop_timeout_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sim_server, "_STOP_TIMEOUT_S", 0.0)  # no thread stops in no time
    caplog.set_level(logging.WARNING, logger="spark_otel.sim")
    with run_box({"a": "dense"}, speed=INF) as box:
        runner = box._runner
    runner.join(10)  # it does stop, a little later
    assert not runner.is_alive()
    ours = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("spark_otel")]
    assert ours == [("spark_otel.sim.server", logging.WARNING, "the simulated box did not stop within 0 s")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"engines": {}}, "a simulated box needs at least one engine"),
        (
            {"engines": {"a": "dense", "c": "moe"}, "ports": {"b": 1}},
            "ports names engine 'b', which is not in the box (a, c)",
        ),
    ],
)
def test_a_box_without_its_engines_is_refused_in_words(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as refused, run_box(**kwargs):
        pass
    assert str(refused.value) == message


def test_a_busy_port_is_refused_with_the_systems_reason() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError) as refused, run_box([EngineSpec("qwen", DENSE, port)], speed=INF):
            pass
    assert str(refused.value) == f"engine 'qwen': cannot listen on 127.0.0.1:{port}: Address already in use"


def test_the_box_runs_in_one_named_daemon_thread_and_leaves_logging_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The thread is named for thread dumps and never keeps the process alive; uvicorn's loggers get
    no handlers of their own, and its start-up chatter stays below WARNING even where the process
    logs INFO."""
    caplog.set_level(logging.INFO)
    uvicorn_logger = logging.getLogger("uvicorn")
    before = (list(uvicorn_logger.handlers), uvicorn_logger.propagate)  # another test's run may set them
    with run_box({"a": "dense"}, speed=INF) as box:
        assert httpx.get(box.url("a") + "/health", trust_env=False).status_code == 200
        runner = box._runner
        assert (runner.name, runner.daemon) == ("spark-otel-sim", True)
    assert (uvicorn_logger.handlers, uvicorn_logger.propagate) == before
    assert [r.getMessage() for r in caplog.records if r.name.startswith("uvicorn")] == []


def test_a_server_that_stops_while_starting_fails_the_box(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    async def returns_at_once(self: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        """A server that gives up before it has started (a real one cannot be made to on demand)."""

    monkeypatch.setattr(uvicorn.Server, "serve", returns_at_once)
    with pytest.raises(ConfigError) as refused, run_box({"a": "dense"}, speed=INF):
        pass
    assert str(refused.value) == (
        'the simulated box did not start: RuntimeError("a simulated engine\'s server stopped while starting")'
    )
