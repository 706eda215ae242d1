"""Reading what the command line printed: tables' body rows as cells, lines without rich's
padding, the text read back line by line, a fake terminal on stderr, and the phases a spinner
showed on it."""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def rows_of(out: str) -> list[list[str]]:
    """Every table body row in ``out`` (lines drawn between │ borders), as stripped cells."""
    return [
        [cell.strip() for cell in line.strip()[1:-1].split("│")]
        for line in out.splitlines()
        if line.startswith("│")
    ]


def row_starting(out: str, first: str) -> list[str]:
    """The one body row whose first cell is ``first``."""
    [row] = [r for r in rows_of(out) if r[0] == first]
    return row


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal, to stand for stderr on one."""

    def isatty(self) -> bool:
        return True


@contextmanager
def stderr_on_a_terminal() -> Iterator[FakeTerminal]:
    """sys.stderr a terminal while the block runs (stdout as it was: captured, not one). Set in the
    test itself: pytest puts its own capture back on sys.stderr before each test phase."""
    fake, saved, term = FakeTerminal(), sys.stderr, os.environ.get("TERM")
    sys.stderr, os.environ["TERM"] = fake, "xterm-256color"
    try:
        yield fake
    finally:
        sys.stderr = saved
        if term is None:
            del os.environ["TERM"]
        else:
            os.environ["TERM"] = term


_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def phases(drawn: str) -> list[str]:
    """The phases a spinner showed on a terminal, in order, each once."""
    frames = [_CONTROL.sub("", f)[2:] for f in re.split(r"[\r\n]", drawn)]
    shown = [f for f in frames if f]
    return [p for i, p in enumerate(shown) if i == 0 or shown[i - 1] != p]


def unpadded_lines(out: str) -> list[str]:
    """``out``'s lines without the spaces rich pads a table's lines (and a centred title) with."""
    return [line.rstrip() for line in out.splitlines()]


def unpadded(out: str) -> str:
    """``out`` as `unpadded_lines` reads it, each line ending in a newline."""
    return "".join(f"{line}\n" for line in unpadded_lines(out))


def drawn_lines(drawn: str) -> list[str]:
    """What a terminal showed, in order: each spinner frame's text (the spinner's dot cut off)
    and each printed line, once where frames repeat it."""
    frames = [_CONTROL.sub("", frame) for frame in re.split(r"[\r\n]", drawn)]
    texts = [frame[2:] if frame[:1] in _SPINNER_DOTS else frame for frame in frames if frame]
    return [text for i, text in enumerate(texts) if i == 0 or text != texts[i - 1]]


_SPINNER_DOTS = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def read_back(out: str) -> list[object]:
    """The printed text line by line: a table's header and body rows as lists of stripped cells
    (its rules left out), every other line stripped of rich's padding."""
    lines: list[object] = []
    for line in out.splitlines():
        if line.startswith(("┃", "│")):
            lines.append([cell.strip() for cell in line[1:-1].replace("┃", "│").split("│")])
        elif not line.startswith(("┏", "┡", "└")):
            lines.append(line.strip())
    return lines


def read_back_without_blanks(out: str) -> list[str | list[str]]:
    """Every line of ``out`` but blanks and borders: table rows (headers too) as stripped cells,
    other lines stripped."""
    lines: list[str | list[str]] = []
    for line in out.splitlines():
        text = line.strip()
        if not text or text[0] in "┏┡└":
            continue
        if text[0] in "┃│":
            lines.append([c.strip() for c in text[1:-1].replace("┃", "│").split("│")])
        else:
            lines.append(text)
    return lines


def stdout_unpadded(capsys: pytest.CaptureFixture[str]) -> str:
    """stdout without the spaces rich pads a table's title with."""
    return "\n".join(line.rstrip() for line in capsys.readouterr().out.split("\n"))
