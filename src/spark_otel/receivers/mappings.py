"""Built-in field mappings for `spark-otel backfill`: common eval record layouts.

``spark-bench``   the article's per-cell records (one JSON object per cell, often one file per
                  cell): ``usage.completion_tokens``, ``elapsed_s``, a ``status`` string or a
                  ``timeout`` flag; start from ``started_at`` when present, else the file's mtime
                  minus elapsed when the file holds that one record (Appendix D).
``generic-csv``   one row per cell with plain columns: ``cell_id``, ``engine``, ``start``
                  (ISO 8601 or Unix time), ``elapsed_s``, ``prompt_tokens``,
                  ``completion_tokens``, ``status``, ``workers``. Works for flat JSON/JSONL too.
``openai-usage``  request logs that keep the OpenAI response body: ``custom_id`` or ``id``,
                  ``response.body.usage.{prompt,completion}_tokens``, ``started_at`` and
                  ``completed_at`` (ISO 8601 or Unix time), ``response.body.model`` as the engine.

To write your own, save a JSON object with the `FieldMapping` fields and pass its path to
``--mapping``; see docs/receivers.md.
"""

from __future__ import annotations

from .backfill import FieldMapping

__all__ = ["BUILTIN_MAPPINGS"]

SPARK_BENCH = FieldMapping(
    name="spark-bench",
    description="Spark Bench per-cell eval records (the article's layout)",
    cell_id="cell_id || {pr} {angle} run{run}",
    eval_name="eval",
    engine="engine",
    prompt_tokens="usage.prompt_tokens",
    completion_tokens="usage.completion_tokens",
    elapsed="elapsed_s",
    start="started_at",
    status="status",
    timeout_flag="timeout",
    deadline_s="deadline_s",
    workers="workers",
    attributes={
        "spark_otel.backfill.pr": "pr",
        "spark_otel.backfill.angle": "angle",
        "spark_otel.backfill.run": "run",
    },
)

GENERIC_CSV = FieldMapping(
    name="generic-csv",
    description="one row per cell: cell_id, engine, start, elapsed_s, prompt/completion tokens, status",
    cell_id="cell_id",
    engine="engine",
    prompt_tokens="prompt_tokens",
    completion_tokens="completion_tokens",
    elapsed="elapsed_s",
    start="start",
    end="end",
    status="status",
    timeout_flag="timeout",
    deadline_s="deadline_s",
    workers="workers",
)

OPENAI_USAGE = FieldMapping(
    name="openai-usage",
    description="request logs keeping the OpenAI response body and start/completion times",
    cell_id="custom_id || id",
    engine="response.body.model",
    prompt_tokens="response.body.usage.prompt_tokens",
    completion_tokens="response.body.usage.completion_tokens",
    start="started_at",
    end="completed_at",
    elapsed="elapsed_s",
    status="status",
    mtime_is_end=False,
)

BUILTIN_MAPPINGS: dict[str, FieldMapping] = {m.name: m for m in (SPARK_BENCH, GENERIC_CSV, OPENAI_USAGE)}
