"""Hint lines (advice under a table, a verdict's reason, what to run next) wrap at the terminal's
width, at spaces: never inside a word, nor inside a `backticked` command, which a person copies
whole; continuation lines are indented two more than the first."""

from __future__ import annotations

import re
import textwrap

__all__ = ["wrap"]

_GLUE = "\u00a0"
"""Joins a command's words while a line is wrapped: never a space textwrap breaks at."""
_COMMAND = re.compile(r"`[^`]*`")
_NARROWEST = 20
"""Below this many columns a terminal is taken as this wide: a hint of one word a line helps no one."""


def wrap(text: str, width: int, *, indent: str = "") -> str:
    """``text`` wrapped to ``width`` columns (lines joined by newlines)."""
    glued = _COMMAND.sub(lambda m: m.group(0).replace(" ", _GLUE), text)
    wrapped = textwrap.fill(
        glued,
        width=max(width, _NARROWEST),
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return wrapped.replace(_GLUE, " ")
