"""A file the user names: read only if it is a regular file under a stated cap, written whole or not at all.

A FIFO with no writer would block the read forever, a device such as ``/dev/zero`` never ends and
a directory is not a file: each is refused by name before any byte is read. The cap is named in
the refusal, so the user knows what the limit is and that nothing was read.

An output (a report, a probe document, a rules file) is checked before the work that fills it
(a missing directory is named before a probe measures for minutes), then written to a temporary
file beside it and renamed over it: a full disk leaves the earlier file as it was, never half of
a new one. `disk_full` tells a full disk from other failures, the store's included.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import tempfile
from pathlib import Path

from spark_otel._exceptions import ConfigError, InputError

__all__ = [
    "MIB",
    "check_output",
    "check_output_dir",
    "check_regular",
    "disk_full",
    "is_regular",
    "read_input",
    "write_output",
]

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


def check_regular(path: str | os.PathLike[str], *, what: str) -> Path:
    """``path`` when it is a regular file, without opening it (SQLite opens it itself, and reads only
    the pages it needs): a missing file, a directory, a FIFO or a device is `InputError` by name."""
    shown = os.fspath(path)
    try:
        mode = os.stat(shown).st_mode
    except FileNotFoundError:
        raise InputError(f"{what} {shown}: no such file") from None
    except OSError as exc:
        raise InputError(f"{what} {shown}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise InputError(f"{what} {shown}: is {kind}, not a regular file; nothing was read")
    return Path(shown)


def check_output(path: str | os.PathLike[str], *, what: str) -> Path:
    """``path`` when a file can be written there: its directory exists and takes files, and the
    path is not a directory or a device. `ConfigError` naming ``what`` otherwise, before any work."""
    target = Path(path).expanduser()
    parent = target.parent
    if not parent.is_dir():
        missing = "no such directory" if not parent.exists() else "not a directory"
        raise ConfigError(f"{what} {path}: {parent}: {missing}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: the directory {parent} is not writable")
    try:
        mode = target.stat().st_mode
    except OSError:
        return target
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise ConfigError(f"{what} {path}: is {kind}; give a file name")
    return target


def check_output_dir(path: str | os.PathLike[str], *, what: str) -> Path:
    """``path`` when files can be written into it: a directory, or a path its nearest existing
    ancestor (a directory that takes files) can create. `ConfigError` naming ``what`` otherwise."""
    target = Path(path).expanduser()
    existing = next(p for p in (target, *target.parents) if p.exists() or p == p.parent)
    if not existing.is_dir():
        where = "is" if existing == target else f"is below {existing}, which is"
        raise ConfigError(f"{what} {path}: {where} not a directory; nothing was written")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: the directory {existing} is not writable")
    return target


def write_output(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all: to a temporary file in the
    same directory, then renamed over ``path``. A failure (a full disk) raises the `OSError` and
    leaves whatever ``path`` held before untouched, with no temporary file left behind. A symbolic
    link is written through (the file it names is replaced; the link stays)."""
    target = Path(path).expanduser()
    if target.is_symlink():
        target = target.resolve()
    body = data.encode("utf-8") if isinstance(data, str) else data
    try:
        _write_whole(target, body)
    except OSError as exc:  # named by the file the user asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    return target


def _write_whole(target: Path, body: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        with os.fdopen(fd, "wb") as file:
            file.write(body)
            os.fchmod(file.fileno(), mode)  # mkstemp's 0600 would hide a report from its readers
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (only read by setting it: set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from or during, is a full disk (or a quota or
    file-size limit reached): an `OSError` ENOSPC, EDQUOT or EFBIG, or SQLite's SQLITE_FULL.
    SQLite may roll back by itself on a full disk, so the error that surfaces can be the failed
    ROLLBACK after it; the chain is walked."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL_ERRNOS:
            return True
        if isinstance(current, sqlite3.Error) and (
            getattr(current, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "database or disk is full" in str(current)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n} bytes"


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file, without opening it (a FIFO is not)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False
