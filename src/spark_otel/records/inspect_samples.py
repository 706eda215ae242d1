"""An Inspect AI sample as a cell: its eval, cell id, engine, workers, ceiling and status.

One rule for every reader of Inspect's samples (the live hook in `integrations`, a reader of its
logs), so a sample recorded live and the same sample read back from its log are the same cell.
Plain values in (what Inspect's `EvalSpec` and `EvalSample` hold), plain values out: nothing here
imports Inspect.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..model import CellStatus

__all__ = [
    "ENGINE_KEY",
    "EVAL_KEY",
    "sample_cell_id",
    "sample_deadline_s",
    "sample_engine",
    "sample_eval_name",
    "sample_status",
    "sample_workers",
]

EVAL_KEY = "spark_otel_eval"
"""The eval metadata key (``inspect eval --metadata spark_otel_eval=NAME``, ``eval(metadata=...)``)
that names the eval a task's samples belong to, in place of the task's name."""
ENGINE_KEY = "spark_otel_engine"
"""The eval metadata key that names the engine, as the user's other cells and rules name it."""

_DEADLINE_LIMITS = frozenset({"time", "working"})
_CAP_LIMITS = frozenset({"token", "message", "context", "cost", "turn"})


def sample_eval_name(task: str, named: str | None = None) -> str:
    """The eval a sample's cell belongs to: the name the user set, else the task's."""
    return named.strip() if named and named.strip() else task


def sample_cell_id(sample_id: int | str, epoch: int) -> str:
    """``{id}_epoch_{epoch}``: the name Inspect gives the sample's record in its ``.eval`` log."""
    return f"{sample_id}_epoch_{epoch}"


def sample_engine(model: str, base_url: str | None, named: str | None = None) -> str:
    """The engine the sample's model ran on: the name the user set, else the model's provider and
    the host and port it was served from (``vllm@127.0.0.1:8000``, ``openai-api/local@host:port``);
    a provider's own service with no base URL is the provider (``openai``).

    The model's own name is left out: one engine serves one model, and a model renamed on the
    same server is still the same engine."""
    if named and named.strip():
        return named.strip()
    parts = model.split("/")
    # openai-api names its service second (openai-api/<service>/<model>): part of the provider.
    provider = "/".join(parts[:2]) if parts[0] == "openai-api" and len(parts) > 2 else parts[0]
    if not base_url:
        return provider
    try:
        where = urlsplit(base_url.strip()).netloc.rpartition("@")[2]
    except ValueError:
        where = ""
    return f"{provider}@{where}" if where else provider


def sample_deadline_s(time_limit: float | None, working_limit: float | None) -> float | None:
    """The sample's ceiling: the tighter of its time limit and its working limit (either, where only
    one is set); None without both. Non-positive limits are no ceiling."""
    limits = [float(x) for x in (time_limit, working_limit) if x is not None and x > 0]
    return min(limits) if limits else None


def sample_workers(
    max_samples: int | None, max_connections: int | None, sample_limit: int | None = None
) -> int | None:
    """How many samples ran at once: the task's sample limit in force (``sample_limit``, read live
    where it adapts; else ``max_samples``), no more than ``max_connections`` to the model; None
    where neither is known."""
    samples = sample_limit if sample_limit is not None else max_samples
    known = [n for n in (samples, max_connections) if n is not None and n >= 1]
    return min(known) if known else None


def sample_status(limit_type: str | None, errored: bool) -> CellStatus:
    """The cell's status from Inspect's outcome: a time or working limit is ``deadline``; a token,
    message, context, turn or cost limit ``length_cap``; an error ``error``; else ``ok`` (an
    operator's interrupt and a custom limit end the sample as Inspect scores it)."""
    if limit_type in _DEADLINE_LIMITS:
        return CellStatus.DEADLINE
    if limit_type in _CAP_LIMITS:
        return CellStatus.LENGTH_CAP
    return CellStatus.ERROR if errored else CellStatus.OK
