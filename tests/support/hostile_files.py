"""Paths that are not the regular file a command expects, and a real full filesystem.

`hostile_paths` makes a FIFO with no writer, a link to ``/dev/zero`` (a device that never ends) and
a directory, each under the name a user would give. `on_a_full_disk` runs a Python script in a
mount namespace of its own (``unshare -rm``: no root needed where user namespaces are allowed)
with a small tmpfs mounted at ``$FULL_DIR``: writes there meet ENOSPC for real, the way a full
disk answers, and the tmpfs goes away with the script.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def hostile_paths(tmp_path: Path) -> dict[str, Path]:
    """``{"FIFO": ..., "device": ..., "directory": ...}``, each named ``input-<kind>``; the word each
    refusal names it by is the key's kind ("FIFO", "character device", "directory")."""
    fifo = tmp_path / "input-fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "input-zero"
    zero.symlink_to("/dev/zero")
    directory = tmp_path / "input-dir"
    directory.mkdir()
    return {"FIFO": fifo, "character device": zero, "directory": directory}


def full_disk_available() -> bool:
    """Whether this machine lets a test mount a tmpfs in a namespace of its own."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d"'],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def on_a_full_disk(
    script: str, *, size_kib: int = 1024, timeout_s: float = 120, env: dict[str, str] | None = None
) -> str:
    """Run ``script`` (Python) with ``$FULL_DIR`` a fresh tmpfs of ``size_kib`` KiB; its stdout.
    Skips the test where no tmpfs can be mounted. The script sees this checkout's ``src``, and
    runs commands it starts there too (``sys.executable -m spark_otel``)."""
    if not full_disk_available():
        pytest.skip("no tmpfs can be mounted here (unshare -rm is refused); the mocked full disk still runs")
    mount_point = Path(
        subprocess.run(["mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip()
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))},
        **(env or {}),
        "FULL_DIR": str(mount_point),
        "PYTHONPATH": str(REPO / "src"),
    }
    try:
        done = subprocess.run(
            [
                "unshare",
                "-rm",
                "sh",
                "-c",
                f'mount -t tmpfs -o size={size_kib}k tmpfs "$FULL_DIR" && exec "$0" -c "$1"',
                sys.executable,
                textwrap.dedent(script),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    finally:
        mount_point.rmdir()
    assert done.returncode == 0, done.stderr
    return done.stdout


FILL = """
import errno, os
def fill(directory, leave_bytes):
    '''Fill the filesystem of ``directory``, then free ``leave_bytes`` of it again.'''
    path = os.path.join(directory, "filler")
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    size = os.path.getsize(path)
    os.truncate(path, max(0, size - leave_bytes))
"""
"""Python source defining ``fill(directory, leave_bytes)``, for a script run `on_a_full_disk`."""
