"""What the probe finds out before its first level, from a real engine on 127.0.0.1 scripted per
route: the engine's label (``/sim/info``'s name, else host:port, never the model id), the model
clock (the box's speed and epoch, or the one asked for), the model, the power source ``auto``
picks, and the errors that stop it (no engine, no model, impossible levels), each in its words.

A ``/sim/info`` that answers JSON but no object, or no JSON, is a plain engine's; so is one that
answers no finite speed, whose name still labels the engine. Proxies in the environment are
never used: the engine is reached directly.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from tests.support.scripted_engine import MODEL, ScriptedEngine, load_free

from spark_otel import ConfigError, EngineError
from spark_otel.probe import ProbeReport, ProbeSettings, run_probe

EPOCH = 10**18  # 2001-09-09: a box's model clock far from the wall clock
SPEED = 1000.0
TINY = {"streams": [1], "tokens": 4, "warmup": False, "gpu": "none"}


@pytest.fixture
def no_gpu_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither nvidia-ml-py nor nvidia-smi, whatever machine runs the tests."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))


def _probe(engine: ScriptedEngine, **settings: object) -> ProbeReport:
    return run_probe(engine.url, ProbeSettings.model_validate({**TINY, **settings}))


def test_a_simulated_box_sets_the_model_clock_to_its_speed_and_epoch(restore_clock: None) -> None:
    """Five readings of ``/sim/info``, the shortest round trip kept; the level's window then reads
    on the box's own clock, so it meets the windows of the box's other clients."""
    with ScriptedEngine(info={"engine": "qwen", "speed": SPEED, "unix_ns": EPOCH}) as engine:
        started = time.monotonic()
        report = _probe(engine)
        elapsed_s = time.monotonic() - started
        hits = engine.hits["/sim/info"]
    [level] = report.levels
    assert hits == 5
    assert (report.metadata.engine, report.metadata.model, report.metadata.time_scale) == (
        "qwen",
        MODEL,
        SPEED,
    )
    assert EPOCH < level.start_unix_ns < level.end_unix_ns < report.metadata.created_unix_ns
    assert report.metadata.created_unix_ns < EPOCH + elapsed_s * SPEED * 1e9
    assert (level.probe_tokens, level.errors) == (4, 0)


def test_a_time_scale_asked_for_runs_the_model_clock_from_the_wall_clock(restore_clock: None) -> None:
    """Another speed than the box's cannot follow the box's clock: its epoch is not taken."""
    with ScriptedEngine(info={"engine": "qwen", "speed": SPEED, "unix_ns": EPOCH}) as engine:
        wall_before, started = time.time_ns(), time.monotonic()
        report = _probe(engine, time_scale=20.0)
        elapsed_s = time.monotonic() - started
    [level] = report.levels
    assert report.metadata.time_scale == 20.0
    assert wall_before < level.start_unix_ns < level.end_unix_ns < wall_before + elapsed_s * 20 * 1e9


def test_a_time_scale_asked_for_holds_on_an_engine_without_a_clock(restore_clock: None) -> None:
    with ScriptedEngine() as engine:
        report = _probe(engine, time_scale=20.0)
    assert report.metadata.time_scale == 20.0


def test_an_engine_without_sim_info_is_labelled_by_host_and_port_in_real_time() -> None:
    with ScriptedEngine() as engine:
        report = _probe(engine)
        hits = dict(engine.hits)
    host_port = engine.url.removeprefix("http://")
    assert (report.metadata.engine, report.metadata.model, report.metadata.time_scale) == (
        host_port,
        MODEL,
        1.0,
    )
    assert report.curve.engine == host_port
    assert (hits["/sim/info"], hits["/v1/models"]) == (1, 1)
    assert load_free(report.warnings) == []


def test_a_sim_info_without_a_finite_speed_names_the_engine_but_sets_no_clock() -> None:
    with ScriptedEngine(info={"engine": "qwen", "speed": "inf"}) as engine:
        report = _probe(engine)
        hits = engine.hits["/sim/info"]
    assert (report.metadata.engine, report.metadata.time_scale, hits) == ("qwen", 1.0, 1)


@pytest.mark.parametrize("info", [["qwen"], "qwen", 3])
def test_a_sim_info_that_is_json_but_not_an_object_is_a_plain_engines(info: object) -> None:
    """It used to fail the probe with ``AttributeError: 'list' object has no attribute 'get'``."""
    with ScriptedEngine(info=info) as engine:
        report = _probe(engine)
    assert (report.metadata.engine, report.metadata.time_scale) == (engine.url.removeprefix("http://"), 1.0)
    assert report.levels[0].probe_tokens == 4


@pytest.mark.parametrize("info", [None, b"<html>not json</html>"])
def test_auto_power_on_a_plain_engine_never_reads_its_sim_gpu(info: bytes | None, no_gpu_here: None) -> None:
    """No ``/sim/info`` (or one that is no JSON): not a simulated box, so ``auto`` looks for a
    real GPU, finds none here and leaves power out, even though the URL answers ``/sim/gpu``."""
    with ScriptedEngine(info=info, gpu=lambda hit: {"power_w": 300.0, "energy_j": 10.0 * hit}) as engine:
        report = _probe(engine, gpu="auto")
        gpu_hits = engine.hits["/sim/gpu"]
    assert (report.metadata.engine, report.metadata.gpu_source, gpu_hits) == (
        engine.url.removeprefix("http://"),
        None,
        0,
    )
    assert report.levels[0].power_w is None


def test_an_unreachable_engine_is_named_with_the_clients_reason(free_port: int) -> None:
    url = f"http://127.0.0.1:{free_port}"
    with pytest.raises(EngineError) as caught:
        run_probe(url, ProbeSettings(streams=[1]))
    assert (
        str(caught.value) == f"{url}: cannot reach the engine: ConnectError: All connection attempts failed"
    )


def test_an_engine_whose_models_cannot_be_listed_asks_for_the_model() -> None:
    with (
        ScriptedEngine(models=b"<html>busy</html>", models_status=500) as engine,
        pytest.raises(EngineError) as e,
    ):
        _probe(engine)
    assert str(e.value) == (
        f"{engine.url}/v1/models: cannot list the engine's models (Expecting value: line 1 column 1 "
        "(char 0)); pass --model"
    )
    with ScriptedEngine(models={"object": "list", "data": []}) as engine, pytest.raises(EngineError) as e:
        _probe(engine)
    assert str(e.value) == f"{engine.url}/v1/models lists no model; pass --model"


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        ([], "--streams: give at least one concurrency level, e.g. 1,2,4,8"),
        ([2, 0, -1], "--streams: levels must be positive integers, got 0"),
    ],
)
def test_impossible_levels_are_refused_before_the_engine_is_asked(
    streams: list[int], message: str, free_port: int
) -> None:
    with pytest.raises(ConfigError) as caught:
        run_probe(f"http://127.0.0.1:{free_port}", ProbeSettings(streams=streams))
    assert str(caught.value) == message


def test_proxies_in_the_environment_are_not_used(monkeypatch: pytest.MonkeyPatch, free_port: int) -> None:
    """A proxy setting meant for the internet must not route a probe of a local engine."""
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{free_port}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with ScriptedEngine() as engine:
        report = _probe(engine)
    [level] = report.levels
    assert (level.probe_tokens, level.errors, level.engine_generation_tokens) == (4, 0, 4.0)
    assert load_free(report.warnings) == []
