"""One Inspect AI sample (one epoch of it) as one cell: the rules that name and judge it, shared by
backfill's reader of Inspect's logs and the live Inspect hook, so a sample recorded live and the
same sample read back from its log are the same cell.

The rules take plain values (what an ``EvalSample`` or the hook's events hold), never Inspect's
own types, so this module needs no Inspect import:

- the eval is named after the task, unless the user names it (``--eval``);
- the cell id is the sample id and epoch as Inspect names a sample in its ``.eval`` logs
  (``42_epoch_1``);
- the engine is the model's provider and the host and port it was served from
  (``vllm@127.0.0.1:8000``, ``openai-api/local@box:9``), a provider alone where no base URL is
  known, unless the user names it as their other cells name it (``--engine``,
  ``SPARK_OTEL_ENGINE``, the eval's ``spark_otel_engine`` metadata);
- workers is the run's concurrency: the smaller of the sample limit in force (read live where
  Inspect adapts it, else ``max_samples``) and ``max_connections`` where set, else unknown;
- the ceiling is the time or working limit that halted the sample, else its time limit, else its
  working limit;
- the status is Inspect's own outcome: a time or working limit is ``deadline``, any other limit
  on what the sample may use (tokens, messages, turns, context, cost, a custom limit)
  ``length_cap``, an operator's stop or an error ``error``;
- tokens are summed over every model's usage, input counted as Inspect says its true total is
  (``input_tokens`` plus cache reads and writes);
- the cell's uid comes from the sample's own uuid (Inspect's ``EvalSample.uuid``, one per sample
  and epoch of a run), so reading the same run again, from its ``.eval`` or its ``.json``, replaces
  its cells instead of adding them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..model import CellStatus

__all__ = [
    "ENGINE_KEY",
    "EVAL_KEY",
    "LIMIT_STATUSES",
    "ceiling_s",
    "cell_id",
    "cell_uid",
    "engine_name",
    "eval_name",
    "sample_status",
    "usage_tokens",
    "workers",
]

EVAL_KEY = "spark_otel_eval"
"""The eval metadata key (``inspect eval --metadata spark_otel_eval=NAME``, ``Task(metadata=...)``)
that names the eval a task's samples belong to, in place of the task's name."""
ENGINE_KEY = "spark_otel_engine"
"""The eval metadata key that names the engine, as the user's other cells and rules name it."""

LIMIT_STATUSES: dict[str, CellStatus] = {
    "time": CellStatus.DEADLINE,
    "working": CellStatus.DEADLINE,
    "token": CellStatus.LENGTH_CAP,
    "message": CellStatus.LENGTH_CAP,
    "turn": CellStatus.LENGTH_CAP,
    "context": CellStatus.LENGTH_CAP,
    "cost": CellStatus.LENGTH_CAP,
    "custom": CellStatus.LENGTH_CAP,
    "operator": CellStatus.ERROR,
}
"""Inspect's limit types (``EvalSampleLimit.type``) and the status a sample halted by each has; a
type Inspect adds later reads as ``length_cap``, a cap the sample reached."""

_PROVIDERS_WITH_SERVICE = frozenset({"openai-api"})
"""Providers whose model names carry a service before the model (``openai-api/<service>/<model>``)."""


def eval_name(task: str, override: str | None = None) -> str:
    """The eval's name: the user's (unless blank), else the task's."""
    return override.strip() if override and override.strip() else task


def cell_id(sample_id: int | str, epoch: int) -> str:
    """The cell's id: the sample id and epoch, as Inspect names a sample in its logs."""
    return f"{sample_id}_epoch_{epoch}"


def cell_uid(sample_uuid: str) -> str:
    """The cell's uid (16 hex digits, usable as a span id) from the sample's uuid."""
    uid = hashlib.sha256(f"inspect|{sample_uuid}".encode()).hexdigest()[:16]
    return uid if uid != "0" * 16 else "0" * 15 + "1"


def engine_name(model: str, base_url: str | None, override: str | None = None) -> str:
    """The engine's name: the user's (unless blank), else the model's provider and the host and
    port it was served from; a provider with no base URL known is the provider (``openai``).

    The model's own name is left out: one engine serves one model, and a model renamed on the
    same server is still the same engine. Credentials in the URL never reach the name."""
    if override and override.strip():
        return override.strip()
    parts = model.split("/")
    provider = "/".join(parts[:2]) if parts[0] in _PROVIDERS_WITH_SERVICE and len(parts) > 2 else parts[0]
    if not base_url:
        return provider
    try:
        where = urlsplit(base_url.strip()).netloc.rpartition("@")[2]
    except ValueError:
        where = ""
    return f"{provider}@{where}" if where else provider


def workers(
    max_samples: int | None, max_connections: int | None, sample_limit: int | None = None
) -> int | None:
    """The run's concurrency: the smaller of the sample limit in force (``sample_limit`` where it
    is read live, else ``max_samples``) and ``max_connections``, None when neither is set."""
    samples = sample_limit if sample_limit is not None else max_samples
    given = [n for n in (samples, max_connections) if n is not None and n > 0]
    return min(given) if given else None


def ceiling_s(
    time_limit: float | None, working_limit: float | None, halted_at: float | None = None
) -> float | None:
    """The cell's ceiling: the time or working limit that halted the sample (a scoped limit inside
    a solver, say), else its clock-time limit, else its working-time limit, else none."""
    for limit in (halted_at, time_limit, working_limit):
        if limit is not None and limit > 0:
            return float(limit)
    return None


def sample_status(limit: str | None, errored: bool) -> CellStatus:
    """How the sample ended: the limit that halted it, else an error, else ``ok``."""
    if limit is not None:
        return LIMIT_STATUSES.get(limit, CellStatus.LENGTH_CAP)
    return CellStatus.ERROR if errored else CellStatus.OK


def usage_tokens(usages: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(prompt, completion) tokens summed over model usages (``ModelUsage`` as a dict)."""
    prompt = completion = 0
    for usage in usages:
        prompt += sum(
            int(usage.get(key) or 0)
            for key in ("input_tokens", "input_tokens_cache_read", "input_tokens_cache_write")
        )
        completion += int(usage.get("output_tokens") or 0)
    return prompt, completion
