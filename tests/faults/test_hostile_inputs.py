"""Files that are not files: a FIFO with no writer, a link to /dev/zero and a directory, given
wherever a command or the library expects a file. Each is refused at once by name and kind, in
one line with the command's exit code and no traceback, and is left as it was. A FIFO with no
writer blocked `rules check` and a governed runner's first cell forever; /dev/zero grew until
the kernel killed the process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.hostile_files import REPO, hostile_paths

from spark_otel._exceptions import ConfigError, InputError
from spark_otel.cli import main
from spark_otel.receivers.nsight import read_capture
from spark_otel.receivers.otlp_json import read_otlp_json
from spark_otel.records.probe_report import ProbeReport
from spark_otel.records.rules_file import load_rules
from spark_otel.store import Store

KINDS = ["FIFO", "character device", "directory"]


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert err.startswith("spark-otel: error: ")
    return err


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["rules", "check", "{path}"], 2),
        (["lanes", "--rules", "{path}", "--state", "{tmp}/state.sqlite"], 2),
        (["report", "--otlp-json", "{path}", "--out", "{tmp}/report"], 1),
        (["ingest-nsight", "{path}", "--store", "{tmp}/store.sqlite"], 1),
    ],
)
def test_each_command_refuses_a_path_that_is_not_a_regular_file_by_name_at_once(
    argv: list[str], code: int, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hostile_paths(tmp_path)[kind]
    given = [a.format(path=path, tmp=tmp_path) for a in argv]
    assert main(given) == code
    err = _one_error(capsys)
    assert f"{path}: is a {kind}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input-dir", "input-fifo", "input-zero"]


READERS: dict[str, tuple[Callable[[Path], Any], type[Exception]]] = {
    "rules file": (load_rules, ConfigError),
    "probe report": (ProbeReport.load_file, InputError),
    "OTLP JSON export": (lambda p: read_otlp_json([p]), InputError),
    "Nsight export": (read_capture, InputError),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("what", list(READERS))
def test_each_reader_of_the_library_refuses_it_naming_the_role_the_path_and_the_kind(
    what: str, kind: str, tmp_path: Path
) -> None:
    read, error = READERS[what]
    path = hostile_paths(tmp_path)[kind]
    with pytest.raises(error) as raised:
        read(path)
    assert type(raised.value) is error
    assert str(raised.value).startswith(f"{what} {path}: is a {kind}")


@pytest.mark.parametrize(
    ("what", "read", "cap"),
    [
        ("rules file", load_rules, "1.0 MiB"),
        ("probe report", ProbeReport.load_file, "64.0 MiB"),
    ],
)
def test_a_regular_file_past_its_cap_is_refused_with_the_cap_named(
    what: str, read: Callable[[Path], Any], cap: str, tmp_path: Path
) -> None:
    path = tmp_path / "big"
    with path.open("wb") as f:  # sparse: no disk spent on it
        f.truncate(65 * 1024 * 1024)
    with pytest.raises((ConfigError, InputError)) as raised:
        read(path)
    assert str(raised.value) == f"{what} {path}: 65.0 MiB is over the cap of {cap}"


@pytest.mark.parametrize("kind", [*KINDS, "not TOML"])
def test_a_governed_runner_whose_rules_file_is_not_one_runs_its_cell_and_warns_in_one_line(
    kind: str, tmp_path: Path
) -> None:
    """A runner with SPARK_OTEL_RULES naming a FIFO, /dev/zero, a directory or a broken file: its
    first cell is not held (fail-open), one warning names the file, and no traceback is printed."""
    if kind == "not TOML":
        rules = tmp_path / "rules.toml"
        rules.write_text("[[lane]\nengine =")
    else:
        rules = hostile_paths(tmp_path)[kind]
    runner = (
        "import spark_otel\n"
        "with spark_otel.cell('e', 'c1', engine='qwen') as c:\n"
        "    pass\n"
        "spark_otel.shutdown()\n"
        "print('cell done')\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))},
        "PYTHONPATH": str(REPO / "src"),
        "SPARK_OTEL_RULES": str(rules),
        "SPARK_OTEL_STORE": str(tmp_path / "store.sqlite"),
        "SPARK_OTEL_GOVERNOR_STATE": str(tmp_path / "governor.sqlite"),
    }
    done = subprocess.run(
        [sys.executable, "-c", runner], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "cell done\n"), done.stderr
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if str(rules) in line]
    assert len(warnings) == 1, done.stderr
    assert "governor rules" in warnings[0]
    assert ("not valid TOML" if kind == "not TOML" else f"is a {kind}") in warnings[0]
    with Store(tmp_path / "store.sqlite", read_only=True) as store:
        assert [c.cell_id for c in store.cells()] == ["c1"]


def test_rules_check_of_an_empty_file_warns_that_it_holds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.toml"
    path.write_bytes(b"")  # a rules file truncated to 0 bytes read as "valid, 0 rules" and nothing else
    assert main(["rules", "check", str(path)]) == 0
    assert capsys.readouterr().err == (
        f"spark-otel: warning: {path}: no rules: the governor holds no cell with this file\n"
    )
