"""Options and output shared by several commands: the store, JSON output, tables."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store import Store


@dataclass(frozen=True)
class Bounds:
    """Where an option's number must lie: a NaN, an infinity or a 0 interval would spin or hang a
    loop instead of failing, and a value past any sensible range is a typo."""

    above: float | None = None
    at_least: float | None = None
    at_most: float | None = None
    whole: bool = False

    def check(self, option: str, value: float | None) -> None:
        """`ConfigError` naming ``option`` and the bounds when ``value`` is outside them; None (an
        option not given) passes."""
        from .._exceptions import ConfigError

        if value is None:
            return
        if (
            not math.isfinite(value)
            or (self.whole and value != int(value))
            or (self.above is not None and not value > self.above)
            or (self.at_least is not None and not value >= self.at_least)
            or (self.at_most is not None and not value <= self.at_most)
        ):
            raise ConfigError(f"{option} must be {self}, got {value:g}")

    def __str__(self) -> str:
        low = (
            f"> {_bound(self.above)}"
            if self.above is not None
            else f">= {_bound(self.at_least)}"
            if self.at_least is not None
            else ""
        )
        high = f"<= {_bound(self.at_most)}" if self.at_most is not None else ""
        limits = " and ".join(part for part in (low, high) if part)
        return ("a whole number" if self.whole else "a finite number") + (f" {limits}" if limits else "")


def _bound(value: float) -> str:
    """A bound as written: whole ones in full with separators (2**53 - 1 is not 9.007e+15)."""
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 2**63 else f"{value:,.10g}"


INTERVAL_S = Bounds(above=0, at_most=86_400)
"""Seconds between two scrapes or samples: above 0 (0 would spin), at most a day."""
TIMEOUT_S = Bounds(above=0, at_most=3_600)
"""Seconds to wait for one answer: above 0 (0 fails every request), at most an hour."""
DURATION_S = Bounds(at_least=0, at_most=31_536_000)
"""Seconds to run for: 0 stops at once; at most a year (longer than a thread can wait for)."""
FRACTION = Bounds(at_least=0, at_most=1)
"""A share, 0 to 1."""
MAX_OPTION_COUNT = 1_000_000_000
COUNT = Bounds(at_least=1, at_most=MAX_OPTION_COUNT, whole=True)
"""How many of something (cells to list, workers): 1 to a billion. Past it is a typo (a 23-digit
number is past what SQLite can take at all), never a count anyone meant."""


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    from ..store import default_store_path

    parser.add_argument(
        "--store",
        metavar="PATH",
        default=None,
        help=f"embedded store file (default: $SPARK_OTEL_STORE or {default_store_path()})",
    )


def add_advisor_arguments(parser: argparse.ArgumentParser, *, ceiling: bool = True) -> None:
    """--ceiling (unless ``ceiling`` is False) and --threshold, defaulting to `AdvisorConfig`'s, so
    advise, report and neighbour-cost agree on them."""
    from ..analysis.advisor import AdvisorConfig

    fields = AdvisorConfig.model_fields
    if ceiling:
        default_ceiling = fields["ceiling_s"].default
        parser.add_argument(
            "--ceiling",
            type=float,
            default=default_ceiling,
            metavar="SECONDS",
            help="per-cell ceiling in seconds; model seconds for cells recorded under a model clock",
        )
    default_threshold = fields["threshold"].default
    parser.add_argument(
        "--threshold",
        type=float,
        default=default_threshold,
        metavar="FRACTION",
        help="neighbour cost past which a load is flagged, as a fraction (0.2 is 20%%)",  # %% is %
    )


def check_advisor_arguments(args: argparse.Namespace) -> None:
    """`add_advisor_arguments`' options within their bounds (a NaN or infinite ceiling would pass
    the advisor's own check), as `ConfigError` naming the option."""
    if getattr(args, "ceiling", None) is not None:
        Bounds(above=0).check("--ceiling", args.ceiling)
    FRACTION.check("--threshold", args.threshold)


def open_store(args: argparse.Namespace, *, write: bool = False) -> Store:
    """The store ``--store`` names (else the default). A command that only reads opens it read
    only: a missing file or one that is not a spark-otel store is an error, never created."""
    from ..store import Store

    path = getattr(args, "store", None) or None
    return Store(path, read_only=not write)


_JSON_PIECES_PER_WRITE = 8192


def print_json(value: Any, *, plain: bool = False) -> None:
    """``value`` as indented JSON.

    ``plain``: ``value`` holds only JSON's own types with text keys (a `model_dump(mode="json")`,
    lists and dicts of them), which pydantic's Rust encoder writes six times as fast as Python's
    indented encoder (`_plain_pieces`). The same document and layout; some floats under 1e-4 are
    written in decimals rather than with an exponent, and text outside ASCII as UTF-8 rather than
    escapes. Otherwise Python's encoder writes it (``default=str`` for any other type) in pieces of
    some thousand of its chunks: `json.dump` writes each chunk (a key, a comma) on its own, four
    times as slow as encoding."""
    if plain:
        _write_plain(value)
        return
    pieces: list[str] = []
    for chunk in json.JSONEncoder(indent=2, default=str).iterencode(value):
        pieces.append(chunk)
        if len(pieces) >= _JSON_PIECES_PER_WRITE:
            sys.stdout.write("".join(pieces))
            pieces.clear()
    pieces.append("\n")
    sys.stdout.write("".join(pieces))


_ROWS = 256
"""A list longer than this is rows: `_plain_pieces` encodes it a row at a time."""


def _holds_rows(value: Any) -> bool:
    """Whether ``value`` (a list or dict) holds a list of rows, at any depth."""
    items = value.values() if isinstance(value, dict) else value
    return any(
        (isinstance(v, list) and len(v) > _ROWS) or (isinstance(v, (list, dict)) and v and _holds_rows(v))
        for v in items
    )


def _plain_pieces(value: Any, depth: int) -> Iterator[bytes]:
    """``value`` as `json.dumps(indent=2)` lays it out at ``depth``, in pieces: one
    `pydantic_core.to_json` call per row of a long list (and per part holding none), so the
    text of a 71 MB answer is never whole in memory besides the value itself."""
    from pydantic_core import to_json

    pad = b"\n" + b"  " * depth
    rows = isinstance(value, list) and len(value) > _ROWS
    if rows or (isinstance(value, (list, dict)) and value and _holds_rows(value)):
        inner = pad + b"  "
        opening, closing = (b"{", b"}") if isinstance(value, dict) else (b"[", b"]")
        yield opening
        items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for k, (key, item) in enumerate(items):
            yield (inner if k == 0 else b"," + inner) + (b"" if key is None else to_json(key) + b": ")
            if rows:
                yield to_json(item, indent=2).replace(b"\n", inner)
            else:
                yield from _plain_pieces(item, depth + 1)
        yield pad + closing
    else:
        yield to_json(value, indent=2).replace(b"\n", pad) if depth else to_json(value, indent=2)


def _write_plain(value: Any) -> None:
    """`_plain_pieces` of ``value`` to stdout, as bytes where stdout takes them (UTF-8, which no
    locale can fail to encode), some thousand pieces a write."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    pieces: list[bytes] = []
    for piece in _plain_pieces(value, 0):
        pieces.append(piece)
        if len(pieces) >= _JSON_PIECES_PER_WRITE:
            _write_bytes(buffer, b"".join(pieces))
            pieces.clear()
    pieces.append(b"\n")
    _write_bytes(buffer, b"".join(pieces))
    if buffer is not None:
        buffer.flush()


def _write_bytes(buffer: Any, data: bytes) -> None:
    if buffer is not None:
        buffer.write(data)
    else:
        sys.stdout.write(data.decode())


def print_hint(text: str, *, indent: str = "") -> None:
    """A line of advice or explanation, wrapped at the terminal's width (``COLUMNS``, else the
    terminal's) as `views.hints.wrap` wraps it."""
    import shutil

    from ..views.hints import wrap

    print(wrap(text, shutil.get_terminal_size().columns, indent=indent))


def rich_module(name: str) -> Any:
    """A module of ``rich``, which draws the tables and progress of the CLI (the ``cli`` extra):
    the core install that `instrument()` needs leaves it out, so a command that would draw one
    without it says which extra to install."""
    import importlib

    try:
        return importlib.import_module(f"rich.{name}")
    except ImportError:
        from .._exceptions import ConfigError

        raise ConfigError(
            "this command draws tables with rich, which the core install leaves out: "
            "pip install 'spark-otel[cli]' (or use --json where the command has it)"
        ) from None


_explained: set[str] = set()  # terms already noted under a table in this command run
_held: list[list[str]] = []  # while `tables_held` runs: tables laid out, not yet written


def reset_notes() -> None:
    """A new command run: every term is explained again under the first table that uses it."""
    _explained.clear()


def print_table(
    title: str | None,
    columns: list[str],
    rows: list[list[Any]],
    *,
    notes: Mapping[str, str] | None = None,
    priorities: Sequence[int] | None = None,
    wide: bool = False,
) -> None:
    """A table in the article's style on stdout, as wide as the terminal or ``COLUMNS`` says
    (rich's default where neither does). Text columns are left-aligned and numeric ones
    right-aligned, from their values. No column is narrower than its longest word: text wraps at
    spaces (headers first), a name is never cut. Where not even the words fit side by side, each
    row is printed as one "header  value" line per column instead. Under it, one line for each
    term of `GLOSSARY` (or ``notes``) a header uses that no earlier table of the run explained.
    Every text prints as written: rich's markup is not read (a GPU's "[fa2a1d7d-…]" stays, a
    "[/x]" in a file name is no error).

    A list (``priorities``: one per column, 0 always shown) keeps one line per row instead: the
    columns that do not fit are left out by priority (`views.layout.fit_columns`), and a line
    under it names them; ``wide`` shows every column.
    """
    from ..views.tables import GLOSSARY

    Console = rich_module("console").Console
    Text = rich_module("text").Text

    cells = [["" if v is None else str(v) for v in row] for row in rows]
    console = Console()
    left_out: list[str] = []
    if priorities is not None and not wide:
        from ..views.layout import fit_columns

        fit = fit_columns(columns, cells, console.width, priorities)
        left_out = [columns[i] for i in fit.hidden]
        columns = [columns[i] for i in fit.shown]
        cells = [[row[i] for i in fit.shown] for row in cells]
    fits, widths = _fitted_widths(console.width, columns, cells)
    drawn = _table(title, columns, cells, widths) if fits else _records(title, columns, cells)
    glossary = {**GLOSSARY, **(notes or {})}
    lines = []
    if left_out:
        from ..views.hints import wrap

        said = f"left out to fit {console.width} columns: {', '.join(left_out)} (--wide shows them)"
        lines.append(Text(wrap(said, console.width)))
    for column in columns:
        if column in glossary and column not in _explained:
            _explained.add(column)
            lines.append(Text(f"{column}: {glossary[column]}"))
    if not _held:
        for renderable in (*drawn, *lines):
            console.print(renderable)
        return
    with console.capture() as captured:  # laid out now, exactly as it would print
        for renderable in (*drawn, *lines):
            console.print(renderable)
    _held[-1].append(captured.get())


def _table(
    title: str | None, columns: list[str], cells: list[list[str]], widths: list[int] | None
) -> list[Any]:
    Table = rich_module("table").Table
    Text = rich_module("text").Text
    table = Table(title=None if title is None else Text(title), show_lines=False)
    for i, column in enumerate(columns):
        numeric = _numeric_column(row[i] for row in cells if i < len(row))
        table.add_column(
            Text(column),
            justify="right" if numeric else "left",
            width=None if widths is None else widths[i],
            overflow="fold",
        )
    for row in cells:
        table.add_row(*map(Text, row))
    return [table]


def _records(title: str | None, columns: list[str], cells: list[list[str]]) -> list[Any]:
    """A table too wide for the terminal, one row at a time: a "header  value" line per column
    (both wrapped at spaces, a word wider than its column folded, so a long header never pushes
    its value off the line), rows apart by a blank line."""
    Table = rich_module("table").Table
    Text = rich_module("text").Text
    drawn: list[Any] = [] if title is None else [Text(title)]
    for k, row in enumerate(cells):
        grid = Table.grid(padding=(0, 2))
        grid.add_column(overflow="fold")
        grid.add_column(overflow="fold")
        for column, value in zip(columns, row, strict=False):
            grid.add_row(Text(column), Text(value))
        if k or title is not None:
            drawn.append(Text(""))
        drawn.append(grid)
    return drawn


@contextmanager
def tables_held() -> Iterator[None]:
    """Tables printed in the block are laid out in it (with thousands of rows, the slow part: let
    a spinner run meanwhile) and written to stdout, unchanged, once the block is done."""
    _held.append([])
    try:
        yield
    finally:
        text = "".join(_held.pop())
    if _held:
        _held[-1].append(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


_NUMBER = r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
# A number, perhaps with a unit sign, then perhaps a mark, a range, an aside or one unit word
# after a space: "4.7x", "54 !", "2 #2", "10.20 to 10.25", "11.51 (10.5 to 11.7)", "1,800 s".
# Not "2026-09-17", "06:39 to 07:00" nor a name that starts with a count ("1 more qwen stream").
_NUMERIC = re.compile(rf"{_NUMBER}(?:%|x)?(?:\s(?:!|#\d+|to\s.*|\(.*\)|[^\s\d]+))?", re.DOTALL)
_MISSING = ("", "-")


def _numeric_column(values: Iterable[str]) -> bool:
    """Whether a column reads as numbers: most of its filled cells are (placeholders aside)."""
    numbers = texts = missing = 0
    for value in values:
        if value in _MISSING:
            missing += 1
        elif _NUMERIC.fullmatch(value):
            numbers += 1
        else:
            texts += 1
    if numbers == texts == 0:
        return missing > 0  # only "-": missing numbers (fmt_number's placeholder)
    return numbers >= texts


def _fitted_widths(
    width: int, columns: Sequence[str], cells: Sequence[Sequence[str]]
) -> tuple[bool, list[int] | None]:
    """Whether the table fits ``width`` with no word cut, and each column's width then (None: as
    rich lays it out, when it fits as it is)."""
    from rich.cells import cell_len

    def longest_word(values: Iterable[str]) -> int:
        return max((cell_len(word) for text in values for word in text.split()), default=1)

    def longest_line(values: Iterable[str]) -> int:
        return max((cell_len(line) for text in values for line in text.splitlines()), default=1)

    n = len(columns)
    room = width - (3 * n + 1)  # a space each side of every column, n + 1 borders
    texts = [[row[i] for row in cells if i < len(row)] for i in range(n)]
    body = [longest_line(texts[i]) for i in range(n)]
    longest = [max(body[i], longest_line([columns[i]])) for i in range(n)]
    if sum(longest) <= room:
        return True, None
    words = [max(longest_word(texts[i]), longest_word([columns[i]])) for i in range(n)]
    # Headers wrap first, then the cells' text, every word whole.
    for floor in ([max(w, b) for w, b in zip(words, body, strict=True)], words):
        if sum(floor) <= room:
            return True, _narrowed(longest, floor, room)
    return False, None


def _narrowed(widths: list[int], floor: list[int], room: int) -> list[int]:
    """``widths`` narrowed to total ``room`` a column at a time, the widest first, none below its
    ``floor`` (whose total fits ``room``)."""
    widths = [max(w, f) for w, f in zip(widths, floor, strict=True)]
    for _ in range(sum(widths) - room):
        widest = max((i for i in range(len(widths)) if widths[i] > floor[i]), key=lambda i: widths[i])
        widths[widest] -= 1
    return widths
