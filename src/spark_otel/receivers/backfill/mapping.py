"""Where a record keeps each cell field (`FieldMapping`), and the built-in layouts:

``spark-bench``   the article's per-cell records (one JSON object per cell, often one file per
                  cell): ``usage.completion_tokens``, ``elapsed_s``, a ``status`` string or a
                  ``timeout`` flag; start from ``started_at``, else the end from
                  ``finished_at_unix_s`` (what ``examples/eval_runner.py`` writes) minus elapsed,
                  else the file's mtime minus elapsed when the file holds that one record
                  (Appendix D).
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

import math
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..._exceptions import ConfigError
from ...model import CellStatus

__all__ = [
    "BUILTIN_MAPPINGS",
    "DEFAULT_STATUS_VALUES",
    "FieldMapping",
    "check_path",
    "check_template",
    "load_mapping",
    "mapping_statuses",
]

DEFAULT_STATUS_VALUES: dict[str, CellStatus] = {
    **dict.fromkeys(("ok", "complete", "completed", "success", "succeeded", "done", "pass"), CellStatus.OK),
    **dict.fromkeys(
        ("timeout", "timed_out", "timedout", "deadline", "cutoff", "cut_off"), CellStatus.DEADLINE
    ),
    **dict.fromkeys(("length", "length_cap", "max_tokens", "truncated"), CellStatus.LENGTH_CAP),
    **dict.fromkeys(("error", "fail", "failed", "failure", "exception", "crashed"), CellStatus.ERROR),
}


class FieldMapping(BaseModel):
    """Where a record keeps each cell field. Paths are dotted (``usage.completion_tokens``);
    a value with ``{...}`` is a template over paths (``"{pr} {angle} run{run}"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the mapping's name, recorded on every cell it makes")
    description: str = ""
    cell_id: str = Field(description="path or template giving the cell's id; 'a || b' tries each in turn")
    eval_name: str | None = Field(default=None, description="path to the eval name; else --eval")
    engine: str | None = Field(default=None, description="path to the engine name; else --engine")
    prompt_tokens: str | None = None
    completion_tokens: str | None = None
    elapsed: str | None = Field(default=None, description="path to the cell's elapsed time")
    elapsed_unit: str = Field(
        default="s", pattern="^(s|ms|ns)$", description="the unit of every duration field"
    )
    first_token: str | None = Field(
        default=None, description="path to the time the cell waited for first tokens (TTFT, summed)"
    )
    decode: str | None = Field(default=None, description="path to the time the cell spent decoding")
    queue_wait: str | None = Field(
        default=None, description="path to the time the cell was held before it started (a harness queue)"
    )
    start: str | None = Field(default=None, description="path to the start time: ISO 8601, or Unix s/ms/ns")
    end: str | None = Field(default=None, description="path to the end time: ISO 8601, or Unix s/ms/ns")
    mtime_is_end: bool = Field(
        default=True, description="without start/end fields, the file's mtime is the end"
    )
    status: str | None = Field(default=None, description="path to a status string")
    status_values: dict[str, CellStatus] = Field(
        default_factory=dict, description="extra status strings (any case) and the cell status each means"
    )
    timeout_flag: str | None = Field(default=None, description="path to a boolean that is true for a timeout")
    deadline_s: str | float | None = Field(
        default=None, description="path to the per-cell ceiling, or a number"
    )
    workers: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict, description="attribute name -> path")

    @field_validator("status_values")
    @classmethod
    def _status_keys_as_records_are_read(cls, values: dict[str, CellStatus]) -> dict[str, CellStatus]:
        """A record's status is matched stripped and in lower case, so the keys are kept so too:
        ``{"Cut": "deadline"}`` matches ``cut``, ``CUT`` and ``Cut``."""
        out: dict[str, CellStatus] = {}
        for key, status in values.items():
            folded = key.strip().lower()
            if not folded:
                raise ValueError(f"{key!r} is an empty status string")
            if out.get(folded, status) != status:
                raise ValueError(
                    f"{key!r} means {status.value} and {out[folded].value} (status strings ignore case)"
                )
            out[folded] = status
        return out

    @field_validator("deadline_s")
    @classmethod
    def _deadline_is_seconds(cls, value: str | float | None) -> str | float | None:
        """A ceiling given as a number is finite seconds above 0 (NaN would land on every cell)."""
        if isinstance(value, float) and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{value!r} is not a number of seconds above 0")
        return value

    @model_validator(mode="after")
    def _paths_parse(self) -> FieldMapping:
        """Every path and template parses, so a typo (``"{unclosed"``) fails when the mapping is
        loaded, naming the field, instead of quietly matching no record."""
        for name in TEMPLATE_FIELDS:
            spec = getattr(self, name)
            if spec is not None:
                check_template(name, spec)
        for name in PATH_FIELDS:
            spec = getattr(self, name)
            if isinstance(spec, str):
                check_path(name, spec)
        for attribute, path in self.attributes.items():
            check_path(f"attributes.{attribute}", path)
        return self


TEMPLATE_FIELDS = ("cell_id", "eval_name", "engine")
"""Fields read as text: a path, a ``{path}`` template, or alternatives joined by ``||``."""
PATH_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "elapsed",
    "first_token",
    "decode",
    "queue_wait",
    "start",
    "end",
    "status",
    "timeout_flag",
    "deadline_s",
    "workers",
)
"""Fields read as one value: a dotted path."""
_SEGMENT = re.compile(r"[^.{}]+")


def check_path(field: str, path: str) -> None:
    """A dotted path (``usage.completion_tokens``; ``a.0.b`` indexes a list): else ValueError naming
    ``field``. Templates and ``||`` alternatives belong to the text fields only."""
    if "||" in path or "{" in path or "}" in path:
        raise ValueError(
            f"{field}: {path!r} is not a dotted path (templates and '||' work only in "
            f"{', '.join(TEMPLATE_FIELDS)})"
        )
    if not all(_SEGMENT.fullmatch(part.strip()) for part in path.split(".")):
        raise ValueError(f"{field}: {path!r} is not a dotted path (an empty name between dots)")


def check_template(field: str, spec: str) -> None:
    """A text field: alternatives joined by ``||``, each a path or a template of ``{path}``s."""
    for alternative in (part.strip() for part in spec.split("||")):
        if not alternative:
            raise ValueError(f"{field}: {spec!r} has an empty alternative around '||'")
        if "{" not in alternative and "}" not in alternative:
            check_path(field, alternative)
            continue
        depth, start = 0, 0
        for i, char in enumerate(alternative):
            if char == "{":
                if depth:
                    raise ValueError(f"{field}: template {alternative!r} opens a '{{' inside another")
                depth, start = 1, i
            elif char == "}":
                if not depth:
                    raise ValueError(f"{field}: template {alternative!r} closes a '}}' it never opened")
                depth = 0
                if not alternative[start + 1 : i].strip():
                    raise ValueError(f"{field}: template {alternative!r} has an empty '{{}}'")
                check_path(field, alternative[start + 1 : i])
        if depth:
            raise ValueError(f"{field}: template {alternative!r} has an unclosed '{{'")


def mapping_statuses(mapping: FieldMapping) -> dict[str, CellStatus]:
    """Every status string ``mapping`` knows: its own over the defaults."""
    return {**DEFAULT_STATUS_VALUES, **mapping.status_values}


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
    end="finished_at_unix_s",
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


def load_mapping(name_or_path: str) -> FieldMapping:
    """A built-in mapping by name, or a JSON file holding one; else `ConfigError` naming it."""
    if not isinstance(name_or_path, str):
        raise ConfigError(f"--mapping {name_or_path!r}: expected a built-in mapping's name or a file's path")
    if name_or_path in BUILTIN_MAPPINGS:
        return BUILTIN_MAPPINGS[name_or_path]
    path = Path(name_or_path)
    try:
        is_file = path.is_file()
    except (OSError, ValueError) as exc:  # a name too long for a path, say
        raise ConfigError(
            f"--mapping {_shorten(name_or_path)}: not a usable path: {getattr(exc, 'strerror', None) or exc}"
        ) from exc
    if not is_file:
        raise ConfigError(
            f"--mapping {_shorten(name_or_path)}: neither a built-in mapping "
            f"({', '.join(sorted(BUILTIN_MAPPINGS))}) nor a JSON file"
        )
    try:
        return FieldMapping.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, ValueError, OSError) as exc:
        raise ConfigError(f"{path}: not a valid field mapping: {_first_error(exc)}") from exc


def _shorten(text: str, most: int = 80) -> str:
    shown = repr(text)
    return shown if len(shown) <= most else shown[: most - 3] + "..."


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        # A key of the file's own (a status string, an attribute name) may hold anything: quoted
        # unless plain, so the message stays one line.
        where = ".".join(
            str(p) if isinstance(p, int) or (p.isprintable() and p.strip() == p and p) else repr(p)
            for p in err["loc"]
        )
        message = str(err["msg"]).removeprefix("Value error, ")
        return f"{where}: {message}" if where else message
    return str(exc)
