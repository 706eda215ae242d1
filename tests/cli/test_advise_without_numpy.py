"""The advisor reads cells as numpy columns (and bootstraps with numpy), which the `cli` extra
brings and the core install leaves out: without it `advise` says which extra to install, with
--json or without."""

from __future__ import annotations

import sys

import pytest

from spark_otel.cli import main


@pytest.fixture
def no_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "numpy" or m.startswith("numpy.")] + ["numpy"]:
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: the import fails


@pytest.mark.usefixtures("no_numpy")
@pytest.mark.parametrize("json", [["--json"], []])
def test_advise_without_numpy_names_the_extra(
    article_store: str, json: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["advise", "--store", article_store, *json]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "spark-otel: error: the advisor reads cells as numpy columns, which the core install leaves out: "
        "pip install 'spark-otel[cli]'\n"
    )
