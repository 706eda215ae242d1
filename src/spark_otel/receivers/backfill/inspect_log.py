"""Inspect AI's logs (``.eval`` zips and ``.json``) as cells: one per sample and epoch, named and
judged by `records.inspect_sample` (the rules the live Inspect hook shares), placed at Inspect's
own ``started_at`` and ``completed_at``.

Tokens are the sample's ``model_usage`` summed over its models, less what its scorers' model
calls used (a model-graded scorer grades the answer; it is not the answer). Its time budget
comes from its model calls: each call's working time, ending when the call completed, is a
request the client could not split (``unsplit``, as a non-streamed request is); the rest of
the sample's clock time (waits for a connection or a retry, tools, scoring) is ``other``.
Inspect's working time and its waits (clock time less working time) are kept on the cell as
attributes. A log written without events keeps its tokens and times but no budget.

The log is read with Inspect's own reader (``inspect_ai.log.read_eval_log``, the ``inspect``
extra), which knows every version of its format, on bytes read through `read_input` (a regular
file under the backfill cap); a ``.eval``'s members are checked against `MAX_UNPACKED_BYTES`
before Inspect unpacks them.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ... import _semconv as sc
from ..._clock import NS_PER_S
from ..._exceptions import InputError
from ..._files import MIB
from ...model import Cell, CellStatus
from ...records import inspect_sample as rules
from ...time_budget import RequestStamps, split_elapsed

__all__ = ["INSTALL_HINT", "MAX_UNPACKED_BYTES", "InspectCells", "inspect_cells"]

MAX_UNPACKED_BYTES = 2048 * MIB
"""The cap on a ``.eval`` log's members once unpacked (its samples' JSON)."""

INSTALL_HINT = "reading Inspect AI logs needs inspect-ai: pip install 'spark-otel[inspect]'"

_SCORING_SPANS = frozenset({"scorers", "scorer"})
"""Inspect's span types whose model calls grade the answer rather than make it."""


@dataclass
class InspectCells:
    """One log's cells, and (position, message) for each sample that could not be placed."""

    samples: int = 0
    cells: list[Cell] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)


def inspect_cells(path: Path, data: bytes, *, eval_name: str | None, engine: str | None) -> InspectCells:
    """Every sample of the Inspect log in ``data`` (``path``'s bytes) as a cell; a sample that
    cannot be placed is an error naming its position and cell id. A file that is not an Inspect
    log, or holds no samples, raises `InputError` naming it."""
    log = _read_log(path, data)
    if not log.samples:
        raise InputError(
            f"{path}: this Inspect AI log holds no samples (written with log_samples off, or from a "
            "run that has not finished one)"
        )
    run = _Run.of(log, eval_name=eval_name, engine=engine)
    resolved = path.resolve()
    found = InspectCells(samples=len(log.samples))
    for position, sample in enumerate(log.samples, start=1):
        try:
            found.cells.append(_cell(sample, run, rules.cell_uid(sample.uuid or f"{resolved}|{position}")))
        except ValueError as exc:
            found.errors.append((position, f"sample {rules.cell_id(sample.id, sample.epoch)}: {exc}"))
    return found


def _read_log(path: Path, data: bytes) -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError(f"{path}: {INSTALL_HINT}") from None
    packed = data.startswith(b"PK\x03\x04")
    if packed:
        _check_unpacked(path, data)
    try:
        return read_eval_log(io.BytesIO(data), format="eval" if packed else "json")
    except Exception as exc:  # Inspect's reader fails in many ways on a file that is not its log
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not an Inspect AI log ({detail[:200]})") from exc


def _check_unpacked(path: Path, data: bytes) -> None:
    """A ``.eval`` whose members unpack past `MAX_UNPACKED_BYTES` is refused before any is unpacked
    (a zip member cannot unpack to more than its header says)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as packed:
            unpacked = sum(info.file_size for info in packed.infolist())
    except zipfile.BadZipFile as exc:
        raise InputError(f"{path}: not a readable zip (an Inspect .eval log is one): {exc}") from exc
    if unpacked > MAX_UNPACKED_BYTES:
        raise InputError(
            f"{path}: unpacks to {unpacked / MIB:,.0f} MiB, "
            f"over the cap of {MAX_UNPACKED_BYTES / MIB:,.0f} MiB"
        )


class _Run:
    """What every sample of one log shares: its eval, engine, model, workers and limits."""

    def __init__(
        self,
        *,
        eval_name: str,
        engine: str,
        model: str,
        workers: int | None,
        time_limit: float | None,
        working_limit: float | None,
    ) -> None:
        self.eval_name = eval_name
        self.engine = engine
        self.model = model
        self.workers = workers
        self.time_limit = time_limit
        self.working_limit = working_limit

    @classmethod
    def of(cls, log: Any, *, eval_name: str | None, engine: str | None) -> _Run:
        spec = log.eval
        generate = spec.model_generate_config
        plan_config = log.plan.config if log.plan is not None else None
        max_connections = generate.max_connections if generate is not None else None
        if max_connections is None and plan_config is not None:
            max_connections = plan_config.max_connections
        return cls(
            eval_name=rules.eval_name(spec.task, eval_name),
            engine=rules.engine_name(spec.model, spec.model_base_url, engine),
            model=spec.model,
            workers=rules.workers(spec.config.max_samples, max_connections),
            time_limit=spec.config.time_limit,
            working_limit=spec.config.working_limit,
        )


def _ns(moment: Any, what: str) -> int:
    """A timestamp Inspect wrote (a datetime, or ISO 8601 text) in Unix ns."""
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            raise ValueError(f"{what} {moment!r} is not ISO 8601") from None
    if not isinstance(moment, datetime):
        raise ValueError(f"no {what}")
    return round(moment.timestamp() * 1_000_000) * 1000


def _interval_ns(sample: Any) -> tuple[int, int]:
    """The sample's start and end: Inspect's ``started_at`` and ``completed_at`` (else start plus
    ``total_time``)."""
    start = _ns(sample.started_at, "started_at")
    if sample.completed_at is not None:
        end = _ns(sample.completed_at, "completed_at")
    elif sample.total_time is not None:
        end = start + round(sample.total_time * NS_PER_S)
    else:
        raise ValueError("no completed_at or total_time: the sample did not finish")
    if end < start:
        raise ValueError(f"completed_at is before started_at ({(end - start) / NS_PER_S:.3f} s)")
    return start, end


def _in_scoring(span_id: str | None, spans: dict[str, tuple[str | None, str | None]]) -> bool:
    """Whether span ``span_id`` is a scorer's, or inside one."""
    seen: set[str] = set()
    while span_id is not None and span_id in spans and span_id not in seen:
        seen.add(span_id)
        kind, span_id = spans[span_id]
        if kind in _SCORING_SPANS:
            return True
    return False


def _model_calls(sample: Any) -> tuple[list[RequestStamps], list[dict[str, Any]]]:
    """The sample's own model calls as request stamps, and the usage of its scorers' calls."""
    spans = {e.id: (e.type, e.parent_id) for e in sample.events if e.event == "span_begin"}
    calls: list[RequestStamps] = []
    scoring: list[dict[str, Any]] = []
    for event in sample.events:
        if event.event != "model":
            continue
        if _in_scoring(event.span_id, spans):
            if event.output is not None and event.output.usage is not None:
                scoring.append(event.output.usage.model_dump())
        elif event.completed is not None and event.working_time is not None:
            end = _ns(event.completed, "a model call's completed")
            calls.append(RequestStamps(end - round(event.working_time * NS_PER_S), 0, end, streaming=False))
    return calls, scoring


def _cell(sample: Any, run: _Run, uid: str) -> Cell:
    """One sample and epoch as one cell."""
    start, end = _interval_ns(sample)
    calls, scoring = _model_calls(sample)
    prompt, completion = rules.usage_tokens(u.model_dump() for u in sample.model_usage.values())
    scored_prompt, scored_completion = rules.usage_tokens(scoring)
    limit = sample.limit.type if sample.limit is not None else None
    status = rules.sample_status(limit, errored=sample.error is not None)
    budget = split_elapsed(calls, start, end) if sample.events else None
    return Cell(
        uid=uid,
        eval_name=run.eval_name,
        cell_id=rules.cell_id(sample.id, sample.epoch),
        engine=run.engine,
        start_unix_ns=start,
        end_unix_ns=end,
        prompt_tokens=max(0, prompt - scored_prompt),
        completion_tokens=max(0, completion - scored_completion),
        status=status,
        deadline_s=rules.ceiling_s(
            sample.time_limit or run.time_limit,
            run.working_limit,
            halted_at=sample.limit.limit if status is CellStatus.DEADLINE else None,
        ),
        workers=run.workers,
        source="backfill",
        unsplit_s=budget["unsplit"] if budget else None,
        other_s=budget["other"] if budget else None,
        attributes=_attributes(sample, run, limit, status),
    )


def _attributes(sample: Any, run: _Run, limit: str | None, status: CellStatus) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "spark_otel.backfill.mapping": "inspect",
        sc.INSPECT_MODEL: run.model,
        sc.INSPECT_RETRIES: len(sample.error_retries or ()),
    }
    if sample.uuid:
        attributes[sc.INSPECT_SAMPLE_UUID] = sample.uuid
    if limit is not None:
        attributes[sc.INSPECT_LIMIT] = limit
    if sample.working_time is not None:
        attributes[sc.INSPECT_WORKING_S] = float(sample.working_time)
        if sample.total_time is not None:
            attributes[sc.INSPECT_WAITING_S] = max(0.0, float(sample.total_time - sample.working_time))
    if status is CellStatus.DEADLINE:
        attributes[sc.ERROR_TYPE] = sc.ERROR_TYPE_DEADLINE
    elif status is CellStatus.ERROR:
        attributes[sc.ERROR_TYPE] = sc.ERROR_TYPE_OTHER
    return attributes
