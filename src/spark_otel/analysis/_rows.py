"""The analyses' result models: a frozen base, and per-cell rows built in bulk without
re-validating what is already valid.

An analysis of 100,000 cells returns 100,000 rows. Every value in a row comes from an already
validated `Cell` or from our own arithmetic, so validating each again (or running
``model_construct``'s per-field loop) would cost more than the analysis itself. `rows` fills
each instance's ``__dict__`` directly, exactly as ``model_construct`` does with every field
given; a test checks the result equals a validated instance, so a pydantic change that breaks
this fails loudly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

_M = TypeVar("_M", bound=BaseModel)


class Result(BaseModel):
    """Base of every analysis result: frozen, and strict about its fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def rows(model: type[_M], values: Iterable[dict[str, Any]]) -> list[_M]:
    """One ``model`` instance per dict; each dict must hold every field of ``model``."""
    # Frozen rows never change their fields-set, and `model_copy` copies it before updating, so
    # the rows share one: 100,000 fewer objects for the garbage collector to walk.
    fields_set = set(model.model_fields)
    new = model.__new__
    setattr_ = object.__setattr__
    out: list[_M] = []
    for value in values:
        obj = new(model)
        setattr_(obj, "__dict__", value)
        setattr_(obj, "__pydantic_fields_set__", fields_set)
        setattr_(obj, "__pydantic_extra__", None)
        setattr_(obj, "__pydantic_private__", None)
        out.append(obj)
    return out
