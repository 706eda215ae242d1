"""The rules file: what the governor enforces, as data a person can read, edit and check.

TOML, validated by `RulesFile` (unknown keys rejected, the key named). Three kinds of rule,
each with the evidence it came from and when it was measured:

``[[lane]]``          at most ``cells`` cells in flight on ``engine`` (where its aggregate stopped
                      gaining: the article's "Nemotron lane at most 8 streams").
``[[limit]]``         at most ``cells`` cells of a cell class (and, in version 2, of the
                      ceiling-bound ones or the others), or of one eval, in flight on ``engine``
                      ("Qwen3.8 generation-heavy cells batch to 8").
``[[cross_engine]]``  while a ceiling-bound cell (``while_ceiling_bound``, version 2), a cell of
                      ``while_eval``, or (with neither) any cell with a per-cell ceiling runs on
                      ``while_engine``, ``engine`` admits at most ``cells`` (0: it yields; 1: no
                      batching), the article's "no batched Nemotron job beside a ceiling-bound
                      Qwen3.8 eval".

``[engines.NAME]`` records the model each engine served when the rules were measured (and its
URL), so a rule whose engine now serves another model can be reported stale.

Version 2 adds what the governor needs to know a cell's class and whether it is ceiling-bound at
admission, whatever its eval is called this time: ``[[history]]`` (per engine, eval family and
class: how long the cells ran alone), ``slowdown`` (per engine: how much longer its cells take
beside the costliest neighbour measured), ``ceiling_bound_fraction`` and
``long_context_prompt_tokens`` (`spark_otel.governor.classing` applies them). A version 1 file
loads and means what it meant: its rules name evals, or hold while any cell with a ceiling runs.

The admission decision over these rules is the governor's (`spark_otel.governor.decision`).
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .._exceptions import ConfigError, InputError
from .._files import MIB, read_input
from .._urls import check_engine_url

__all__ = [
    "RULES_MAX_BYTES",
    "RULES_VERSION",
    "CrossEngineRule",
    "EngineInfo",
    "History",
    "LaneRule",
    "LimitRule",
    "RulesFile",
    "load_rules",
    "parse_rules",
]

RULES_VERSION = 2
_V2_RULE_KEYS = {"ceiling_bound", "while_ceiling_bound"}
_V2_FILE_KEYS = {"history", "slowdown", "ceiling_bound_fraction", "long_context_prompt_tokens"}
RULES_MAX_BYTES = MIB
"""The largest rules file read: the advisor writes a few kB; past this it is not a rules file."""


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str = Field(min_length=1, description="the engine whose cells the rule limits")
    evidence: str = Field(default="", description="the measured figures the rule came from")
    measured_at: datetime | None = Field(default=None, description="when those figures were measured")
    figures: dict[str, Any] = Field(default_factory=dict, description="the figures, for scripts")

    @property
    def by_eval(self) -> bool:
        """The narrow form: the rule names an eval, so it holds that eval under that name only."""
        return False


def _cells(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"


class LaneRule(_Rule):
    """At most ``cells`` cells in flight on ``engine``, whatever their eval."""

    kind: Literal["lane"] = "lane"
    cells: int = Field(ge=1)

    def describe(self) -> str:
        return f"{self.engine} lane at most {_cells(self.cells)}"


class LimitRule(_Rule):
    """At most ``cells`` cells of ``eval``, ``cell_class`` and/or (version 2) the ceiling-bound
    ones (``ceiling_bound = true``) or the others (``false``) in flight on ``engine``."""

    kind: Literal["limit"] = "limit"
    eval: str | None = Field(default=None, min_length=1)
    cell_class: str | None = Field(default=None, min_length=1)
    ceiling_bound: bool | None = Field(
        default=None, description="only the cells ceiling-bound at admission (true) or the others (false)"
    )
    cells: int = Field(ge=1)

    @model_validator(mode="after")
    def _selects_something(self) -> LimitRule:
        if self.eval is None and self.cell_class is None and self.ceiling_bound is None:
            raise ValueError("a limit names the eval, the cell_class or the ceiling_bound cells it holds")
        return self

    @property
    def by_eval(self) -> bool:
        """The narrow form: it names an eval, so it holds that eval's runs under that name only."""
        return self.eval is not None

    def selects(self, eval_name: str, cell_class: str | None, ceiling_bound: bool) -> bool:
        return (
            (self.eval is None or self.eval == eval_name)
            and (self.cell_class is None or self.cell_class == cell_class)
            and (self.ceiling_bound is None or self.ceiling_bound == ceiling_bound)
        )

    def describe(self) -> str:
        bound = {True: "ceiling-bound", False: "not ceiling-bound", None: None}[self.ceiling_bound]
        who = " ".join(x for x in (self.eval, bound, self.cell_class) if x)
        return f"{who} cells on {self.engine} at most {self.cells} at once"


class CrossEngineRule(_Rule):
    """While a ceiling-bound cell (``while_ceiling_bound``), a cell of ``while_eval``, or (with
    neither) any cell with a ceiling runs on ``while_engine``, ``engine`` admits at most
    ``cells`` cells."""

    kind: Literal["cross_engine"] = "cross_engine"
    cells: int = Field(ge=0)
    while_engine: str = Field(min_length=1)
    while_eval: str | None = Field(default=None, min_length=1)
    while_ceiling_bound: bool = Field(
        default=False, description="holds while a cell ceiling-bound at admission runs on while_engine"
    )

    @model_validator(mode="after")
    def _two_engines(self) -> CrossEngineRule:
        if self.engine == self.while_engine:
            raise ValueError(
                f"engine and while_engine are both {self.engine!r}: a lane rule limits one engine"
            )
        if self.while_eval is not None and self.while_ceiling_bound:
            raise ValueError("while_eval and while_ceiling_bound: a rule holds while one or the other runs")
        return self

    @property
    def by_eval(self) -> bool:
        """The narrow form: it holds while one eval runs under that name only."""
        return self.while_eval is not None

    def describe(self) -> str:
        what = "yields" if self.cells == 0 else f"admits at most {_cells(self.cells)}"
        if self.while_eval is not None:
            who = self.while_eval
        else:
            who = "a ceiling-bound cell" if self.while_ceiling_bound else "a cell with a ceiling"
        return f"{self.engine} {what} while {who} runs on {self.while_engine}"


class EngineInfo(BaseModel):
    """What an engine served when its rules were measured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(default=None, description="the model id it served")
    url: str | None = Field(default=None, description="its base URL, where `rules check` asks what it serves")

    @field_validator("url")
    @classmethod
    def _a_url(cls, url: str | None) -> str | None:
        """An http(s) URL with a host, as ``--engine`` takes one: anything else was never asked."""
        if url is None:
            return None
        try:
            return check_engine_url(url)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None


class History(BaseModel):
    """How an eval family's cells of one class ran on an engine when the rules were measured:
    what lets the governor class the next run's cells, whatever that run is called."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    engine: str = Field(min_length=1)
    family: str = Field(min_length=1, description="the eval's name without its run id (eval_family)")
    cell_class: str | None = Field(default=None, min_length=1)
    n_cells: int = Field(ge=1)
    share: float = Field(gt=0, le=1, description="of the family's measured cells on the engine, this class's")
    p90_alone_s: float = Field(ge=0, description="p90 predicted time of a cell alone on the engine (model s)")
    evals: list[str] = Field(default_factory=list, description="the evals measured")


Form = Literal["general", "by eval", "mixed", "no rules"]


class RulesFile(BaseModel):
    """A whole rules file. ``eval_gap_s``: an eval counts as running on its engine until this
    long (real seconds) after its last cell ended, so a serial runner's next cell, started a
    moment later, finds the eval still there."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # inf: a ceiling never met

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
    ceiling_bound_fraction: float = Field(
        default=0.75,
        gt=0,
        description="a cell is ceiling-bound when its slowed length reaches this of its ceiling",
    )
    long_context_prompt_tokens: int = Field(
        default=24_000, ge=1, description="a prompt this long: long-context"
    )
    slowdown: dict[str, float] = Field(
        default_factory=dict,
        description="per engine: its cells' length beside the costliest neighbour, over alone",
    )
    history: list[History] = Field(default_factory=list)

    @model_validator(mode="after")
    def _version_keys(self) -> RulesFile:
        if "version" in self.model_fields_set and self.version < 2:
            used = sorted(_V2_FILE_KEYS & self.model_fields_set)
            used += sorted(
                {k for r in (*self.limit, *self.cross_engine) for k in _V2_RULE_KEYS & r.model_fields_set}
            )
            if used:
                raise ValueError(f"version 1 has no {', '.join(used)}: set version = 2")
        for engine, factor in self.slowdown.items():
            if not factor >= 1:
                raise ValueError(f"slowdown.{engine} is {factor!r}: a factor of at least 1 (1: no slower)")
        return self

    @model_validator(mode="after")
    def _one_cap_each(self) -> RulesFile:
        """Two rules that hold the same cells with different caps: which was meant cannot be known
        (the same rule twice is harmless, and passes)."""
        tables: list[tuple[str, Sequence[LaneRule | LimitRule | CrossEngineRule]]] = [
            ("lane", self.lane),
            ("limit", self.limit),
            ("cross_engine", self.cross_engine),
        ]
        for table, rules in tables:
            first: dict[str, tuple[int, LaneRule | LimitRule | CrossEngineRule]] = {}
            for i, rule in enumerate(rules):
                held = repr(rule.model_dump(exclude={"cells", "evidence", "measured_at", "figures"}))
                j, other = first.setdefault(held, (i, rule))
                if other.cells != rule.cells:
                    raise ValueError(
                        f"{table}[{j}] and {table}[{i}] hold the same cells with different caps "
                        f"({other.describe()}; {rule.describe()}): keep one"
                    )
        return self

    @property
    def format_version(self) -> int:
        """The version the file says; one that says none is version 1 unless it uses a key of 2's."""
        if "version" in self.model_fields_set:
            return self.version
        v2 = _V2_FILE_KEYS & self.model_fields_set or any(
            _V2_RULE_KEYS & r.model_fields_set for r in (*self.limit, *self.cross_engine)
        )
        return 2 if v2 else 1

    def history_of(self, engine: str, family: str) -> list[History]:
        """The measured history of ``family`` on ``engine``, one entry per class (a few dozen
        entries at most: a scan costs microseconds)."""
        return [h for h in self.history if h.engine == engine and h.family == family]

    @property
    def form(self) -> Form:
        """Which form the rules take: general (by cell class and ceiling-bound cells, carrying to
        the next run), by eval (naming the measured evals), mixed, or no rules."""
        kinds = {r.by_eval for r in (*self.limit, *self.cross_engine)}
        if not self.rules:
            return "no rules"
        return "mixed" if len(kinds) > 1 else ("by eval" if kinds == {True} else "general")

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
