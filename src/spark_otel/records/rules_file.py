"""The rules file: what the governor enforces, as data a person can read, edit and check.

TOML, validated by `RulesFile` (unknown keys rejected, the key named). Three kinds of rule,
each with the evidence it came from and when it was measured:

``[[lane]]``          at most ``cells`` cells in flight on ``engine`` (where its aggregate stopped
                      gaining: the article's "Nemotron lane at most 8 streams").
``[[limit]]``         at most ``cells`` cells of one eval (or cell class) in flight on ``engine``
                      ("Qwen3.8 generation-heavy cells batch to 8").
``[[cross_engine]]``  while a cell of ``while_eval`` (or, without it, any cell with a per-cell
                      ceiling) runs on ``while_engine``, ``engine`` admits at most ``cells``
                      (0: it yields; 1: no batching), the article's "the Nemotron lane yields
                      while any Qwen3.8 eval with a per-cell ceiling is in flight".

``[engines.NAME]`` records the model each engine served when the rules were measured (and its
URL), so a rule whose engine now serves another model can be reported stale.

The admission decision over these rules is the governor's (`spark_otel.governor.decision`).
"""

from __future__ import annotations

import difflib
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._exceptions import ConfigError, InputError
from .._files import MIB, read_input

__all__ = [
    "RULES_MAX_BYTES",
    "RULES_VERSION",
    "CrossEngineRule",
    "EngineInfo",
    "LaneRule",
    "LimitRule",
    "RulesFile",
    "load_rules",
    "parse_rules",
]

RULES_VERSION = 1
RULES_MAX_BYTES = MIB
"""The largest rules file read: the advisor writes a few kB; past this it is not a rules file."""


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str = Field(min_length=1, description="the engine whose cells the rule limits")
    evidence: str = Field(default="", description="the measured figures the rule came from")
    measured_at: datetime | None = Field(default=None, description="when those figures were measured")
    figures: dict[str, Any] = Field(default_factory=dict, description="the figures, for scripts")


def _cells(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"


class LaneRule(_Rule):
    """At most ``cells`` cells in flight on ``engine``, whatever their eval."""

    kind: Literal["lane"] = "lane"
    cells: int = Field(ge=1)

    def describe(self) -> str:
        return f"{self.engine} lane at most {_cells(self.cells)}"


class LimitRule(_Rule):
    """At most ``cells`` cells of ``eval`` (and/or ``cell_class``) in flight on ``engine``."""

    kind: Literal["limit"] = "limit"
    eval: str | None = Field(default=None, min_length=1)
    cell_class: str | None = Field(default=None, min_length=1)
    cells: int = Field(ge=1)

    @model_validator(mode="after")
    def _selects_something(self) -> LimitRule:
        if self.eval is None and self.cell_class is None:
            raise ValueError("a limit names the eval or the cell_class it holds (or both)")
        return self

    def selects(self, eval_name: str, cell_class: str | None) -> bool:
        return (self.eval is None or self.eval == eval_name) and (
            self.cell_class is None or self.cell_class == cell_class
        )

    def describe(self) -> str:
        who = " ".join(x for x in (self.eval, self.cell_class) if x)
        return f"{who} cells on {self.engine} at most {self.cells} at once"


class CrossEngineRule(_Rule):
    """While ``while_eval`` (or any cell with a ceiling) runs on ``while_engine``, ``engine``
    admits at most ``cells`` cells."""

    kind: Literal["cross_engine"] = "cross_engine"
    cells: int = Field(ge=0)
    while_engine: str = Field(min_length=1)
    while_eval: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _two_engines(self) -> CrossEngineRule:
        if self.engine == self.while_engine:
            raise ValueError(
                f"engine and while_engine are both {self.engine!r}: a lane rule limits one engine"
            )
        return self

    def describe(self) -> str:
        what = "yields" if self.cells == 0 else f"admits at most {_cells(self.cells)}"
        who = self.while_eval or "a ceiling-bound eval"
        return f"{self.engine} {what} while {who} runs on {self.while_engine}"


class EngineInfo(BaseModel):
    """What an engine served when its rules were measured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(default=None, description="the model id it served")
    url: str | None = Field(default=None, description="its base URL, where `rules check` asks what it serves")


class RulesFile(BaseModel):
    """A whole rules file. ``eval_gap_s``: an eval counts as running on its engine until this
    long (real seconds) after its last cell ended, so a serial runner's next cell, started a
    moment later, finds the eval still there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(default=RULES_VERSION, ge=1, le=RULES_VERSION)
    computed_at: datetime | None = Field(default=None, description="when the advisor wrote the rules")
    source: str | None = Field(default=None, description="what the rules were computed from")
    ceiling_s: float | None = Field(default=None, gt=0, description="the per-cell ceiling they assume")
    eval_gap_s: float = Field(default=2.0, ge=0, le=3600)
    engines: dict[str, EngineInfo] = Field(default_factory=dict)
    lane: list[LaneRule] = Field(default_factory=list)
    limit: list[LimitRule] = Field(default_factory=list)
    cross_engine: list[CrossEngineRule] = Field(default_factory=list)
    unmeasured: list[str] = Field(
        default_factory=list,
        description="what the advisor could not answer yet, with the command to measure it",
    )

    @property
    def rules(self) -> list[LaneRule | LimitRule | CrossEngineRule]:
        return [*self.lane, *self.limit, *self.cross_engine]

    def engines_governed(self) -> frozenset[str]:
        """Engines a rule names, as limited or as the one whose cells trigger a limit elsewhere:
        a cell on any other engine needs no admission at all."""
        names = {r.engine for r in self.rules}
        names |= {r.while_engine for r in self.cross_engine}
        return frozenset(names)

    def class_of(self, eval_name: str) -> str | None:
        """The cell class the rules give an eval (from a limit naming both), if any."""
        for r in self.limit:
            if r.eval == eval_name and r.cell_class is not None:
                return r.cell_class
        return None


def parse_rules(text: str, *, where: str) -> RulesFile:
    """A `RulesFile` from TOML text; `ConfigError` naming ``where`` and the first bad key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    try:
        return RulesFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_first_error(exc)}") from exc


def load_rules(path: str | Path) -> RulesFile:
    """The rules file at ``path``; `ConfigError` when it cannot be read or is not valid.

    Only a regular file of at most `RULES_MAX_BYTES` is read: a FIFO or a device is refused at
    once (a governed runner's first cell reads this file, and must never wait on it)."""
    file = Path(path)
    try:
        text = read_input(file, what="rules file", max_bytes=RULES_MAX_BYTES).decode("utf-8")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"rules file {file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_rules(text, where=str(file))


def _first_error(exc: ValidationError) -> str:
    """The error a person fixes first: an unknown key (most often a typo, named with the key it
    was probably meant to be), else the first one pydantic found."""
    errors = exc.errors()
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        err = unknown[0]
        parent = err["loc"][:-1]
        missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and e["loc"][:-1] == parent]
        close = difflib.get_close_matches(str(err["loc"][-1]), missing, n=1)
        return f"{_loc(err['loc'])}: unknown key" + (f" (did you mean {close[0]}?)" if close else "")
    err = errors[0]
    if err["type"] == "missing":
        return f"{_loc(err['loc'])}: missing"
    return f"{_loc(err['loc']) or 'rules'}: {err['msg']}"


def _loc(parts: tuple[int | str, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).removeprefix(".")
