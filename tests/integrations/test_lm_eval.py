"""lm-evaluation-harness's API models, run for real against the simulated engine: every request the
engine served is recorded with its exact tokens, at ``num_concurrent`` 1 (lm-eval posts with
``requests``) and 4 (an ``aiohttp`` session), for ``local-completions`` and
``local-chat-completions``; and with no code, through ``opentelemetry-instrument``, into the store."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.finished_spans import request_spans
from tests.support.lm_eval_task import DOCS, TASK, model_args, write_task
from tests.support.served import served_count, served_since

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.instrumentation import SparkOtelInstrumentor
from spark_otel.store import Store

ENGINE = "qwen"
SECRET = "sk-lm-eval-secret"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def lm_eval(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """lm-eval (imported offline) and its task manager over the task this module writes."""
    saved = {name: os.environ.get(name) for name in OFFLINE}
    os.environ.update(OFFLINE)
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager

        include = write_task(tmp_path_factory.mktemp("lm-eval-task"))
        yield lm_eval, TaskManager(include_path=str(include), include_defaults=False)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(autouse=True)
def _uninstrumented_after() -> Iterator[None]:
    yield
    if SparkOtelInstrumentor().is_instrumented:
        spark_otel.uninstrument()


@pytest.mark.parametrize("num_concurrent", [1, 4])
@pytest.mark.parametrize("model", ["local-completions", "local-chat-completions"])
def test_every_request_lm_eval_makes_is_recorded_with_the_engines_tokens(
    model: str,
    num_concurrent: int,
    lm_eval: tuple[Any, Any],
    live_box: Any,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    harness, tasks = lm_eval
    chat = model == "local-chat-completions"
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # lm-eval sends it as `Authorization: Bearer ...`
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    before = served_count(live_box, ENGINE)
    generated_before = live_box.stats(ENGINE).generation_tokens
    results = harness.simple_evaluate(
        model=model,
        model_args=model_args(live_box.url(ENGINE), ENGINE, chat=chat, num_concurrent=num_concurrent),
        tasks=[TASK],
        task_manager=tasks,
        apply_chat_template=chat,
    )
    assert results["n-samples"][TASK]["effective"] == DOCS
    served = served_since(live_box, ENGINE, before)
    spans = request_spans(span_exporter)
    recorded = [(s.attributes or {}) for s in spans]
    assert len(served) == DOCS
    assert len({prompt for prompt, _ in served}) == DOCS  # each document's own prompt
    # Concurrent requests finish in any order: the same requests, each with its exact tokens.
    assert sorted(
        (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) for a in recorded
    ) == sorted(served)
    assert sum(a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for a in recorded) == (
        live_box.stats(ENGINE).generation_tokens - generated_before
    )
    assert {a[sc.REQUEST_LAYER] for a in recorded} == {"requests" if num_concurrent == 1 else "aiohttp"}
    assert {a[sc.GEN_AI_OPERATION_NAME] for a in recorded} == {
        sc.OPERATION_CHAT if chat else sc.OPERATION_TEXT_COMPLETION
    }
    assert all(sc.ERROR_TYPE not in a for a in recorded)
    assert SECRET not in repr(recorded)
    assert SECRET not in repr(metric_reader.get_metrics_data())


@pytest.mark.slow
def test_with_no_code_opentelemetry_instrument_records_lm_evals_requests_in_the_store(
    live_box: Any, tmp_path: Path, clean_env: None
) -> None:
    """The README's recipe: ``opentelemetry-instrument lm_eval ...`` with no SDK configurator, so
    spark-otel sets up its own store; contrib's requests and aiohttp instrumentations load too."""
    include = write_task(tmp_path / "task")
    store_path = tmp_path / "store.sqlite"
    bin_dir = Path(sys.executable).parent
    before = served_count(live_box, ENGINE)
    env = {
        **os.environ,
        **OFFLINE,
        "SPARK_OTEL_STORE": str(store_path),
        "OTEL_PYTHON_CONFIGURATOR": "none",
    }
    done = subprocess.run(
        [
            str(bin_dir / "opentelemetry-instrument"),
            str(bin_dir / "lm_eval"),
            "--model",
            "local-chat-completions",
            "--model_args",
            model_args(live_box.url(ENGINE), ENGINE, chat=True, num_concurrent=4),
            "--apply_chat_template",
            "--tasks",
            TASK,
            "--include_path",
            str(include),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    served = served_since(live_box, ENGINE, before)
    with Store(store_path) as store:
        stored = store.requests()
    assert len(served) == DOCS
    assert sorted((r.input_tokens, r.output_tokens) for r in stored) == sorted(served)
    assert {(r.operation, r.server_port, r.error_type) for r in stored} == {
        (sc.OPERATION_CHAT, live_box.port(ENGINE), None)
    }
