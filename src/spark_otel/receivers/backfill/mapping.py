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
``inspect``       Inspect AI's logs (``.eval`` and ``.json``), read by code of their own
                  (`inspect_log`), not by a field mapping.

To write your own, save a JSON object with the `FieldMapping` fields and pass its path to
``--mapping``; see docs/receivers.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..._exceptions import ConfigError, InputError
from ..._files import MIB, read_input
from ...model import CellStatus
from .values import FieldSpec, SegmentedPath, Source, check_path, check_template, segments

__all__ = [
    "BUILTIN_MAPPINGS",
    "DEFAULT_STATUS_VALUES",
    "INSPECT",
    "LM_EVAL_NAME",
    "MAX_MAPPING_BYTES",
    "BuiltinReader",
    "FieldMapping",
    "Layout",
    "MappedField",
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
    a value with ``{...}`` is a template over paths (``"{pr} {angle} run{run}"``); a value written
    as an object is a `Source` (a path of segments, a path of the enclosing document, a sum, a
    literal; see `values`). ``records`` names where a JSON document nests its records."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the mapping's name, recorded on every cell it makes")
    description: str = ""
    records: SegmentedPath | None = Field(
        default=None,
        description="path to the list of records inside each JSON document (e.g. 'samples'); else the "
        "document is the record (or its array holds them)",
    )
    cell_id: FieldSpec = Field(
        description="path or template giving the cell's id; 'a || b' tries each in turn"
    )
    eval_name: FieldSpec | None = Field(default=None, description="path to the eval name; else --eval")
    engine: FieldSpec | None = Field(default=None, description="path to the engine name; else --engine")
    prompt_tokens: FieldSpec | None = None
    completion_tokens: FieldSpec | None = None
    elapsed: FieldSpec | None = Field(default=None, description="path to the cell's elapsed time")
    elapsed_unit: str = Field(
        default="s", pattern="^(s|ms|ns)$", description="the unit of every duration field"
    )
    first_token: FieldSpec | None = Field(
        default=None, description="path to the time the cell waited for first tokens (TTFT, summed)"
    )
    decode: FieldSpec | None = Field(default=None, description="path to the time the cell spent decoding")
    queue_wait: FieldSpec | None = Field(
        default=None, description="path to the time the cell was held before it started (a harness queue)"
    )
    start: FieldSpec | None = Field(
        default=None, description="path to the start time: ISO 8601, or Unix s/ms/ns"
    )
    end: FieldSpec | None = Field(default=None, description="path to the end time: ISO 8601, or Unix s/ms/ns")
    mtime_is_end: bool = Field(
        default=True, description="without start/end fields, the file's mtime is the end"
    )
    status: FieldSpec | None = Field(default=None, description="path to a status string")
    status_values: dict[str, CellStatus] = Field(
        default_factory=dict, description="extra status strings (any case) and the cell status each means"
    )
    timeout_flag: FieldSpec | None = Field(
        default=None, description="path to a boolean that is true for a timeout"
    )
    deadline_s: FieldSpec | float | None = Field(
        default=None, description="path to the per-cell ceiling, or a number"
    )
    workers: FieldSpec | None = None
    attributes: dict[str, FieldSpec] = Field(default_factory=dict, description="attribute name -> path")
    optional: tuple[str, ...] = Field(
        default=(),
        description="fields (and 'attributes.NAME') a file's records may all lack without a warning",
    )

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
    def _deadline_is_seconds(cls, value: FieldSpec | float | None) -> FieldSpec | float | None:
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
            if isinstance(spec, str):
                check_template(name, spec)
        for name in PATH_FIELDS:
            spec = getattr(self, name)
            if isinstance(spec, str):
                check_path(name, spec)
        for attribute, path in self.attributes.items():
            if isinstance(path, str):
                check_path(f"attributes.{attribute}", path)
        if isinstance(self.records, str):
            check_path("records", self.records)
        elif self.records is not None and not all(segments(self.records)):
            raise ValueError(f"records: {list(self.records)!r} is not a path (an empty segment)")
        known = {name for name, _ in self.mapped_fields()}
        for name in self.optional:
            if name not in known:
                raise ValueError(
                    f"optional: {name!r} is not a field this mapping reads ({', '.join(sorted(known))})"
                )
        return self

    def mapped_fields(self) -> list[MappedField]:
        """(name, spec) of every field this mapping reads from a record, attributes as
        ``attributes.NAME``; a ceiling given as a number is not read."""
        fields = [
            (name, spec)
            for name in (*TEMPLATE_FIELDS, *PATH_FIELDS)
            if isinstance(spec := getattr(self, name), str | Source)
        ]
        return fields + [(f"attributes.{name}", spec) for name, spec in self.attributes.items()]


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
"""Fields read as one value: a dotted path or a `Source`."""
MappedField = tuple[str, FieldSpec]
"""A field's name and where a record keeps it."""


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
    optional=(
        "elapsed",
        "start",
        "end",
        "status",
        "timeout_flag",
        "deadline_s",
        "workers",
        "prompt_tokens",
        "attributes.spark_otel.backfill.pr",
        "attributes.spark_otel.backfill.angle",
        "attributes.spark_otel.backfill.run",
    ),
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
    optional=("elapsed", "start", "end", "status", "timeout_flag", "deadline_s", "workers", "prompt_tokens"),
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
    optional=("elapsed", "start", "end", "status", "prompt_tokens"),
)


@dataclass(frozen=True)
class BuiltinReader:
    """A built-in layout read by code of its own rather than by a `FieldMapping`."""

    name: str
    description: str


INSPECT = BuiltinReader("inspect", "Inspect AI's logs (.eval and .json): one cell per sample and epoch")
LM_EVAL_NAME = "lm-eval"
"""Named as a mapping, lm-eval's ``--log_samples`` files are refused with what they lack."""

Layout = FieldMapping | BuiltinReader
"""What ``--mapping`` names: a field mapping or a built-in reader."""

BUILTIN_MAPPINGS: dict[str, Layout] = {m.name: m for m in (SPARK_BENCH, GENERIC_CSV, OPENAI_USAGE, INSPECT)}

MAX_MAPPING_BYTES = MIB
"""The cap on a mapping file: a mapping is a few hundred bytes."""


def load_mapping(name_or_path: str) -> Layout:
    """A built-in mapping or reader by name, or a JSON file holding a mapping; else `ConfigError`
    naming it."""
    from .lm_eval import LM_EVAL_SAMPLES

    if not isinstance(name_or_path, str):
        raise ConfigError(f"--mapping {name_or_path!r}: expected a built-in mapping's name or a file's path")
    if name_or_path in BUILTIN_MAPPINGS:
        return BUILTIN_MAPPINGS[name_or_path]
    if name_or_path == LM_EVAL_NAME:
        raise ConfigError(f"--mapping {LM_EVAL_NAME}: {LM_EVAL_SAMPLES}")
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
        text = read_input(path, what="--mapping", max_bytes=MAX_MAPPING_BYTES).decode("utf-8")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a valid field mapping: {exc}") from None
    try:
        return FieldMapping.model_validate_json(text)
    except (ValidationError, ValueError) as exc:
        raise ConfigError(f"{path}: not a valid field mapping: {_first_error(exc)}") from exc


def _shorten(text: str, most: int = 80) -> str:
    shown = repr(text)
    return shown if len(shown) <= most else shown[: most - 3] + "..."


_UNION_MEMBER = re.compile(r"str|float|int|bool|tuple\[.*\]|function-after\[.*\]")
"""How pydantic names the member of a union an error is about, in the error's location."""


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        # A field that takes a string or an object: an object's own error says what is wrong
        # with it; the string member's ("Input should be a valid string") only that it is one.
        err = next(
            (e for e in errors if e["type"] != "model_type" and any("Source" in str(p) for p in e["loc"])),
            errors[0],
        )
        loc = [
            p
            for i, p in enumerate(err["loc"])
            if not (
                i and err["loc"][i - 1] != "attributes" and isinstance(p, str) and _UNION_MEMBER.fullmatch(p)
            )
        ]
        # A key of the file's own (a status string, an attribute name) may hold anything: quoted
        # unless plain, so the message stays one line.
        where = ".".join(
            str(p) if isinstance(p, int) or (p.isprintable() and p.strip() == p and p) else repr(p)
            for p in loc
        )
        message = str(err["msg"]).removeprefix("Value error, ")
        return f"{where}: {message}" if where else message
    return str(exc)
