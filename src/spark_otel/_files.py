"""Reading a file the user named: a regular file only, and never more than a stated cap.

A FIFO with no writer would block the read forever, a device such as ``/dev/zero`` never ends and
a directory is not a file: each is refused by name before any byte is read. The cap is named in
the refusal, so the user knows what the limit is and that nothing was read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from spark_otel._exceptions import InputError

__all__ = ["MIB", "is_regular", "read_input"]

MIB = 1024 * 1024

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def read_input(path: str | os.PathLike[str], *, what: str, max_bytes: int) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``; ``InputError`` otherwise.

    ``what`` names the file's role in the message ("backfill input", "rules file"). The file is
    opened non-blocking, so a FIFO is seen for what it is instead of waiting for a writer.
    """
    shown = os.fspath(path)
    try:
        fd = os.open(shown, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{what} {shown}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # what opening a socket file gives
            raise InputError(f"{what} {shown}: is a socket, not a regular file") from None
        raise InputError(f"{what} {shown}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise InputError(f"{what} {shown}: is {kind}, not a regular file; nothing was read")
        if info.st_size > max_bytes:
            raise InputError(f"{what} {shown}: {_size(info.st_size)} is over the cap of {_size(max_bytes)}")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while it was read
        raise InputError(f"{what} {shown}: more than the cap of {_size(max_bytes)}")
    return data


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n} bytes"


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file, without opening it (a FIFO is not)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False
