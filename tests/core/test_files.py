"""A file the user names is read only if it is a regular file under its cap."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from spark_otel._exceptions import ConfigError, InputError
from spark_otel._files import MIB, check_output, check_output_dir, is_regular, read_input, write_output


def test_a_regular_file_under_its_cap_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"x" * 100)
    assert read_input(path, what="backfill input", max_bytes=100) == b"x" * 100
    assert is_regular(path)


def test_a_file_over_its_cap_is_refused_with_the_cap_named(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * (2 * MIB))
    with pytest.raises(InputError) as caught:
        read_input(path, what="rules file", max_bytes=MIB)
    assert str(caught.value) == f"rules file {path}: 2.0 MiB is over the cap of 1.0 MiB"


def test_a_fifo_with_no_writer_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as caught:
        read_input(fifo, what="backfill input", max_bytes=MIB)
    assert str(caught.value) == (
        f"backfill input {fifo}: is a FIFO (named pipe), not a regular file; nothing was read"
    )
    assert not is_regular(fifo)


def test_a_device_that_never_ends_is_refused() -> None:
    with pytest.raises(InputError, match="is a character device, not a regular file"):
        read_input("/dev/zero", what="rules file", max_bytes=MIB)


def test_a_link_to_a_device_is_refused_as_the_device(tmp_path: Path) -> None:
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="is a character device"):
        read_input(link, what="rules file", max_bytes=MIB)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory, not a regular file"):
        read_input(tmp_path, what="backfill input", max_bytes=MIB)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(InputError, match="is a socket, not a regular file"):
            read_input(path, what="backfill input", max_bytes=MIB)
    finally:
        server.close()


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read_input(tmp_path / "nope", what="backfill input", max_bytes=MIB)
    assert str(caught.value) == f"backfill input {tmp_path / 'nope'}: no such file"


def test_an_output_is_written_whole_through_a_link_keeping_the_mode_of_the_file_it_replaces(
    tmp_path: Path,
) -> None:
    real = tmp_path / "report.html"
    real.write_text("before")
    real.chmod(0o640)
    link = tmp_path / "latest.html"
    link.symlink_to(real)
    assert write_output(link, "after") == real
    assert (real.read_text(), link.is_symlink(), real.stat().st_mode & 0o777) == ("after", True, 0o640)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.html", "report.html"]


def test_an_output_place_is_checked_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match=r"^--out .*/missing/x.json: .*/missing: no such directory$"):
        check_output(tmp_path / "missing" / "x.json", what="--out")
    with pytest.raises(ConfigError, match=r"^--out /dev/null: is a character device; give a file name$"):
        check_output("/dev/null", what="--out")
    with pytest.raises(ConfigError, match=r"is below .*/a-file, which is not a directory"):
        check_output_dir(tmp_path / "a-file" / "report", what="--out")
    assert check_output(tmp_path / "x.json", what="--out") == tmp_path / "x.json"
    assert check_output_dir(tmp_path / "new" / "deeper", what="--out") == tmp_path / "new" / "deeper"
