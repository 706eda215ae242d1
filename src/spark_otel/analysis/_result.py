"""The base of every analysis result: a frozen pydantic model that refuses unknown fields.

Results are built through their typed constructors (checked by mypy's pydantic plugin and, at run
time, by pydantic), including the per-cell rows of an analysis of many cells.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Result"]


class Result(BaseModel):
    """Base of every analysis result: frozen, and strict about its fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")
