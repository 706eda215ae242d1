"""The rules file the demo writes for Act 5 (`_write_rules`): into an output directory that does
not exist yet (with ``--store``, nothing has written into it before) or one that does (a rerun),
as `advise --write-rules` would, with the plan's eval gap, and as UTF-8 whatever the locale says
(the rules' source names the store's path, which may not be ASCII; the governor reads UTF-8)."""

from __future__ import annotations

import locale
import sys
from pathlib import Path

import pytest
from tests.support.locales import ascii_locale

from spark_otel.analysis.advisor.advice_model import Advice, AdvisorConfig
from spark_otel.demo import DemoPlan
from spark_otel.demo.run import _write_rules
from spark_otel.records.rules_file import RulesFile, load_rules
from spark_otel.report import ReportContent
from spark_otel.views.rules_file import dump_rules

PLAN = DemoPlan.quick(500.0)
SOURCE = "/données/store.sqlite (demo run ab12)"


def _content() -> ReportContent:
    return ReportContent(
        source=SOURCE,
        eval_name=None,
        n_cells=0,
        n_windows=0,
        probes=[],
        curves=[],
        concurrency=None,
        neighbours=[],
        outcomes=[],
        advice=Advice(config=AdvisorConfig(ceiling_s=600.0), classes=[], rules=[]),
    )


def _check(path: Path, out: Path) -> None:
    assert path == out / "rules.toml"
    rules = load_rules(path)
    assert rules == RulesFile(
        version=1,  # the demo governs its own evals by name (by_eval)
        computed_at=rules.computed_at,
        source=SOURCE,
        ceiling_s=600.0,
        eval_gap_s=PLAN.governed_eval_gap_s,
    )
    assert path.read_bytes().decode("utf-8") == dump_rules(rules)


def test_the_rules_go_into_a_new_directory_under_one_not_made_yet(tmp_path: Path) -> None:
    out = tmp_path / "not-yet" / "demo"
    _check(_write_rules(_content(), out, PLAN), out)


def test_a_rerun_writes_the_rules_again_into_the_directory_it_made(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "rules.toml").write_text("an earlier run's rules", encoding="utf-8")
    _check(_write_rules(_content(), out, PLAN), out)


@pytest.mark.skipif(bool(sys.flags.utf8_mode), reason="in UTF-8 mode every locale's text files are UTF-8")
def test_the_rules_are_utf8_under_an_ascii_locale(tmp_path: Path) -> None:
    with ascii_locale():
        assert locale.getencoding() != "UTF-8"  # else this test could not tell
        path = _write_rules(_content(), tmp_path, PLAN)
    _check(path, tmp_path)
