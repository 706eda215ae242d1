"""The core install leaves rich out: a command that draws a table says which extra brings it,
and its --json output needs none."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from spark_otel import Cell
from spark_otel.cli import main
from spark_otel.store import Store


@pytest.fixture
def no_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")] + ["rich", "rich.console"]:
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: the import fails


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.write_cells(
            [Cell(uid="u1", eval_name="e", cell_id="c1", start_unix_ns=10**18, end_unix_ns=10**18 + 10**9)]
        )
    return path


@pytest.mark.usefixtures("no_rich")
def test_a_table_without_rich_names_the_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cells", "--store", str(_store(tmp_path))])
    assert code == 2
    assert capsys.readouterr().err == (
        "spark-otel: error: this command draws tables with rich, which the core install leaves out: "
        "pip install 'spark-otel[cli]' (or use --json where the command has it)\n"
    )


@pytest.mark.usefixtures("no_rich")
def test_json_output_needs_no_rich(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cells", "--store", str(_store(tmp_path)), "--json"]) == 0
    [cell] = json.loads(capsys.readouterr().out)
    assert cell["cell_id"] == "c1"


@pytest.mark.usefixtures("no_rich")
def test_json_of_commands_with_a_spinner_needs_no_rich(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.backfill_records import SERIAL
    from tests.support.printed import stderr_on_a_terminal

    store = str(_store(tmp_path))
    with stderr_on_a_terminal() as terminal:  # a spinner would draw here, had rich been installed
        assert main(["concurrency", "--store", store, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["engines"]
        assert main(["backfill", str(SERIAL), "--mapping", "spark-bench", "--dry-run", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["counts"]["cells"] == 13
    assert terminal.getvalue() == ""
