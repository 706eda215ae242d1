"""`advise --write-rules` writes UTF-8 whatever the locale: a rules file names its store's path,
which may hold any character, and the governor reads the file as UTF-8 on every box."""

from __future__ import annotations

import locale
import sys
from pathlib import Path

import pytest
from tests.support.advise_store import advise_store
from tests.support.locales import ascii_locale

from spark_otel.cli import main
from spark_otel.records.rules_file import load_rules


@pytest.mark.skipif(bool(sys.flags.utf8_mode), reason="in UTF-8 mode every locale's text files are UTF-8")
def test_the_rules_file_is_utf8_under_an_ascii_locale(tmp_path: Path) -> None:
    store = advise_store(tmp_path / "mesures-été.sqlite")
    path = tmp_path / "rules.toml"
    with ascii_locale():
        assert locale.getencoding() != "UTF-8"  # else this test could not tell
        assert main(["advise", "--store", store, "--ceiling", "115", "--write-rules", str(path)]) == 0
    assert f'source = "{store}"\n' in path.read_text(encoding="utf-8")
    assert load_rules(path).source == store
