"""Reading the command line's tables back: body rows as cells, a fake terminal on stderr, and the
phases a spinner showed on it."""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager


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
