"""`spark-otel cells` as a separate process: the cells another process recorded, a broken store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# No OTLP or store variable from the environment reaches the processes these tests start.
pytestmark = pytest.mark.usefixtures("clean_env")


def test_cells_recorded_in_one_process_are_listed_by_the_cli_in_another(tmp_path: Path) -> None:
    path = tmp_path / "round.sqlite"
    recorder = textwrap.dedent(
        f"""
        import spark_otel
        spark_otel.configure(store={str(path)!r})
        for i in range(3):
            with spark_otel.cell("golden", f"B#{{i}}", engine="qwen", workers=1) as c:
                c.add_tokens(prompt=100, completion=10 * (i + 1))
        """
    )
    subprocess.run([sys.executable, "-c", recorder], check=True, timeout=60)
    out = subprocess.run(
        [sys.executable, "-m", "spark_otel", "cells", "--store", str(path), "--json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    cells = json.loads(out.stdout)
    assert sorted(c["cell_id"] for c in cells) == ["B#0", "B#1", "B#2"]
    assert sorted(c["completion_tokens"] for c in cells) == [10, 20, 30]
    table = subprocess.run(
        [sys.executable, "-m", "spark_otel", "cells", "--store", str(path)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "B#2" in table.stdout
    assert "golden" in table.stdout


def test_cli_reports_a_broken_store_in_one_line(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"\x00garbage" * 512)
    out = subprocess.run(
        [sys.executable, "-m", "spark_otel", "cells", "--store", str(bogus)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stderr.startswith("spark-otel: error: ")
    assert "bogus.sqlite" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_read_command_on_a_missing_store_fails_clearly_and_creates_nothing(tmp_path, capsys) -> None:
    from spark_otel.cli import main

    path = tmp_path / "typo.sqlite"
    for command in (["cells"], ["concurrency"], ["advise"], ["neighbour-cost", "--eval", "e"], ["report"]):
        assert main([*command, "--store", str(path)]) == 1, command
        err = capsys.readouterr().err
        assert f"{path}: no such store" in err, command
        assert not path.exists(), command


def test_cells_show_each_cells_energy_as_the_store_keeps_it(tmp_path: Path, capsys) -> None:
    from tests.support.energy_samples import energy_store
    from tests.support.printed import rows_of

    from spark_otel.cli import main

    path = tmp_path / "e.sqlite"
    energy_store(path)  # 40 W; s1, s2 alone 20 s each; p1, p2 side by side; early unsampled
    assert main(["cells", "--store", str(path), "--json"]) == 0
    energy = {c["uid"]: c["energy"] for c in json.loads(capsys.readouterr().out)}
    assert energy["s1"] == {"box_j": 800.0, "share_j": 800.0, "j_per_token": 2.0, "estimated": False}
    assert energy["p1"] == {"box_j": 800.0, "share_j": 400.0, "j_per_token": 1.0, "estimated": False}
    assert energy["early"] is None
    assert main(["cells", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    joules = {row[1]: row[9] for row in rows_of(out)}  # the 10th column, "energy J"
    assert joules == {"s1": "800.0", "s2": "800.0", "p1": "400.0", "p2": "400.0", "early": "-"}
    assert "energy J: the cell's share of the box's GPU energy over its lifetime" in " ".join(out.split())
    assert "energy: no GPU readings" not in out


def test_cells_without_gpu_readings_say_how_to_measure_their_energy(tmp_path: Path, capsys) -> None:
    from tests.support.energy_samples import cell

    from spark_otel.cli import main
    from spark_otel.store import Store

    path = tmp_path / "e.sqlite"
    with Store(path) as store:
        store.write_cells([cell("a", 0, 10, 10)])
    assert main(["cells", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    assert "energy: no GPU readings in the store cover these cells; measure with " in out
    assert "`spark-otel receive --engine NAME=URL --gpu auto --interval 1`" in out
