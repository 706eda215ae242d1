"""The C locale for a test: its default text encoding is ASCII (a server's bare ``LANG=C``), so a
file written or read without an explicit encoding shows."""

from __future__ import annotations

import locale
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def ascii_locale() -> Iterator[None]:
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)
