"""Where a mapping field's value comes from: a dotted path of the record, a template, alternatives,
or a `Source` (a path given as segments, a path of the enclosing document, a sum, a literal).

A field written as a string means what it always meant: a dotted path (``usage.completion_tokens``,
``a.0.b`` indexes a list), a template of ``{path}``s, or alternatives joined by ``||``. Everything
new is written as a JSON object, which no earlier mapping could hold, so an old mapping reads as it
did: ``{"path": ["model_usage", "openai/qwen3.8", "output_tokens"]}`` (a key holding dots),
``{"document": "eval.task"}`` (the document the records are nested in), ``{"sum":
"model_usage.*.output_tokens"}`` (``*`` matches every key or element), ``{"value": "qwen"}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = [
    "MISSING",
    "WILDCARD",
    "FieldSpec",
    "Scope",
    "Source",
    "check_path",
    "check_template",
    "segments",
    "shown",
    "text_of",
    "value_of",
]

MISSING: Any = object()
"""What a path that matches nothing gives (a null or blank value counts as nothing)."""
WILDCARD = "*"
"""In a sum's path, the segment that matches every key of an object or element of a list."""

_SEGMENT = re.compile(r"[^.{}]+")
_TEMPLATE = re.compile(r"\{([^{}]+)\}")

SegmentedPath = str | tuple[str, ...]
"""A dotted path, or its segments as a list (a segment may then hold dots)."""


class Source(BaseModel):
    """A field's value written as an object: exactly one of ``path``, ``document``, ``sum``, ``value``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: SegmentedPath | None = None
    document: SegmentedPath | None = None
    sum: str | tuple[SegmentedPath, ...] | None = None
    value: str | int | float | bool | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Source:
        given = [k for k in ("path", "document", "sum", "value") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "a field written as an object holds exactly one of 'path', 'document', 'sum', 'value'"
                + (f" (this one holds {', '.join(given)})" if given else "")
            )
        for kind in ("path", "document"):
            spec = getattr(self, kind)
            if spec is not None:
                _check_segments(kind, spec, wildcard=False)
        for one in self.sum_paths():
            _check_segments("sum", one, wildcard=True)
        return self

    def sum_paths(self) -> tuple[SegmentedPath, ...]:
        """The sum's paths: a string is one dotted path; a list holds several, each a dotted string
        or a list of segments."""
        if self.sum is None:
            return ()
        return (self.sum,) if isinstance(self.sum, str) else self.sum


FieldSpec = str | Source
"""A mapping field as written: a string (path, template, alternatives) or a `Source`."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What a field is read from: the record, and the document it was found in (the record itself
    when the records are not nested in one)."""

    record: Any
    document: Any


@lru_cache(maxsize=4096)
def segments(path: SegmentedPath) -> tuple[str, ...]:
    """A path's segments: a dotted string split at its dots (each stripped), a list as it is
    (cached: a mapping has a few paths, read for every record)."""
    if isinstance(path, str):
        return tuple(part.strip() for part in path.split("."))
    return path


def _check_segments(field: str, path: SegmentedPath, *, wildcard: bool) -> None:
    parts = segments(path)
    if isinstance(path, str):
        check_path(field, path)
    elif not parts or any(not part for part in parts):
        raise ValueError(f"{field}: {list(path)!r} is not a path (an empty segment)")
    if not wildcard and WILDCARD in parts:
        raise ValueError(f"{field}: '*' matches several values; add them up with {{\"sum\": ...}}")


def check_path(field: str, path: str) -> None:
    """A dotted path (``usage.completion_tokens``; ``a.0.b`` indexes a list): else ValueError naming
    ``field``. Templates and ``||`` alternatives belong to the text fields only."""
    if "||" in path or "{" in path or "}" in path:
        raise ValueError(
            f"{field}: {path!r} is not a dotted path (templates and '||' work only in "
            "cell_id, eval_name, engine)"
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


@lru_cache(maxsize=4096)
def shown(spec: FieldSpec) -> str:
    """The spec as its mapping wrote it, for a message (cached: a field's label is made for every
    record it is read from)."""
    if isinstance(spec, str):
        return spec
    return json.dumps(spec.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


def _step(value: Any, part: str) -> Any:
    if isinstance(value, dict) and part in value:
        return value[part]
    if isinstance(value, list) and part.isascii() and part.isdigit() and int(part) < len(value):
        return value[int(part)]
    return MISSING


def _present(value: Any) -> Any:
    return MISSING if value is None or (isinstance(value, str) and not value.strip()) else value


def lookup(root: Any, parts: tuple[str, ...]) -> Any:
    """The value at ``parts`` under ``root``, or `MISSING`."""
    value = root
    for part in parts:
        value = _step(value, part)
        if value is MISSING:
            return MISSING
    return _present(value)


def _lookup_all(root: Any, parts: tuple[str, ...]) -> list[Any]:
    """Every value ``parts`` matches, ``*`` matching every key or element."""
    found = [root]
    for part in parts:
        if part == WILDCARD:
            found = [
                v
                for f in found
                for v in (f.values() if isinstance(f, dict) else f if isinstance(f, list) else ())
            ]
        else:
            found = [v for v in (_step(f, part) for f in found) if v is not MISSING]
    return [v for v in (_present(f) for f in found) if v is not MISSING]


def value_of(spec: FieldSpec, scope: Scope) -> Any:
    """The one value ``spec`` gives in ``scope`` (a string is a dotted path of the record), or
    `MISSING`. A sum adds every number its paths match (a value that is not a number raises);
    it is `MISSING` only when they match nothing."""
    if isinstance(spec, str):
        return lookup(scope.record, segments(spec))
    if spec.value is not None:
        return spec.value
    if spec.path is not None:
        return lookup(scope.record, segments(spec.path))
    if spec.document is not None:
        return lookup(scope.document, segments(spec.document))
    total: int | float = 0
    matched = False
    for path in spec.sum_paths():
        for value in _lookup_all(scope.record, segments(path)):
            total += _addend(value, spec)
            matched = True
    return total if matched else MISSING


def _addend(value: Any, spec: Source) -> int | float:
    """A number a sum adds: a JSON number, or text that reads as one (a CSV's cells are text)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value.strip())
            except ValueError:
                continue
    shown_value = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise ValueError(f"{shown(spec)} adds up {shown_value}, not a number")


def text_of(spec: FieldSpec, scope: Scope) -> Any:
    """A text field's value as a string, or `MISSING`: a path, a template, ``a || b`` (each in turn)
    or a `Source`."""
    if not isinstance(spec, str):
        found = value_of(spec, scope)
        return found if found is MISSING else str(found)
    if "||" in spec:
        for alternative in spec.split("||"):
            found = text_of(alternative.strip(), scope)
            if found is not MISSING:
                return found
        return MISSING
    if "{" not in spec:
        value = lookup(scope.record, segments(spec))
        return value if value is MISSING else str(value)
    parts = {p: lookup(scope.record, segments(p)) for p in _TEMPLATE.findall(spec)}
    if any(v is MISSING for v in parts.values()):
        return MISSING
    return _TEMPLATE.sub(lambda m: str(parts[m.group(1)]), spec)
