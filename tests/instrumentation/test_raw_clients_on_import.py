"""`instrument()` imports neither ``requests`` nor ``aiohttp``: each is patched when the program
imports it (at once if it already has), never after `uninstrument()`, and a patch that fails there
leaves the program's import as it was."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import types

import pytest
import requests.adapters
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

import spark_otel
from spark_otel.instrumentation import InstrumentationConfig, SparkOtelInstrumentor
from spark_otel.instrumentation._runtime import Runtime

PROGRAM = """
import asyncio, json, sys
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import spark_otel
import openai.resources.chat.completions  # openai itself may load aiohttp (its vendored transport)

before = set(sys.modules)
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
spark_otel.instrument(tracer_provider=provider, meter_provider=MeterProvider())
loaded = sorted(name for name in ("requests", "aiohttp") if name in set(sys.modules) - before)
url = sys.argv[1] + "/completions"
body = {"model": sys.argv[2], "prompt": "a b", "max_tokens": 2}

import requests
requests.post(url, json=body)

import aiohttp

async def post():
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        await response.json()

asyncio.run(post())
spans = [(s.attributes["spark_otel.request.layer"], s.attributes["gen_ai.usage.output_tokens"])
         for s in exporter.get_finished_spans()]
print(json.dumps({"loaded_by_instrument": loaded, "spans": spans}))
"""


def test_instrument_imports_neither_client_and_patches_each_when_the_program_does(base_url: str) -> None:
    from tests.support.engine_server import MODEL

    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, base_url, MODEL],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"loaded_by_instrument": [], "spans": [["requests", 2], ["aiohttp", 2]]}


def _runtime() -> Runtime:
    return Runtime(InstrumentationConfig(), TracerProvider(), MeterProvider())


def test_a_client_imported_after_uninstrument_is_left_alone() -> None:
    original = requests.adapters.HTTPAdapter.send
    runtime = _runtime()
    runtime.active = False  # what `uninstrument()` does to the runtime a pending import hook holds
    SparkOtelInstrumentor._client_imported(runtime, "requests", requests.adapters)
    assert requests.adapters.HTTPAdapter.send is original
    assert SparkOtelInstrumentor._patches == []


def test_a_patch_that_fails_at_the_clients_import_is_reported_once_and_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = types.ModuleType("aiohttp.client")  # no ClientSession: a release that moved it
    with caplog.at_level(logging.WARNING):
        SparkOtelInstrumentor._client_imported(_runtime(), "aiohttp", broken)
        SparkOtelInstrumentor._client_imported(_runtime(), "aiohttp", broken)
    assert [r.getMessage() for r in caplog.records] == [
        "spark_otel: instrument() patch of aiohttp failed; the call goes on untouched"
    ]
    assert SparkOtelInstrumentor._patches == []
    assert not SparkOtelInstrumentor().is_instrumented
    spark_otel.instrument()  # the instrumentor itself is untouched by the failure
    spark_otel.uninstrument()
