"""Values a rules file should refuse no longer pass as valid (issue 40 item 5): two rules that hold
the same cells with different caps, a non-finite number, an engine URL that is not an http(s) URL.
Each is refused naming the file, the key and the value, by `rules check` (exit 2, one line) and
by the library (`ConfigError`), so a governed runner fails open on it in one line as on any
invalid file. The same rule twice, and an IPv6 engine as the store gives its URL, still load."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel._exceptions import ConfigError
from spark_otel.cli import main
from spark_otel.records.rules_file import load_rules, parse_rules
from spark_otel.store import Store

LANE = "[[lane]]\nengine = 'q'\ncells = {cells}\n"
LIMIT = "[[limit]]\nengine = 'q'\neval = 'e'\ncells = {cells}\n"
CROSS = "[[cross_engine]]\nengine = 'q'\nwhile_engine = 'g'\ncells = {cells}\n"

CONFLICTS = {
    "lane": (LANE, "lane[0] and lane[1]", "q lane at most 1 cell; q lane at most 3 cells"),
    "limit": (
        LIMIT,
        "limit[0] and limit[1]",
        "e cells on q at most 1 at once; e cells on q at most 3 at once",
    ),
    "cross_engine": (
        CROSS,
        "cross_engine[0] and cross_engine[1]",
        "q admits at most 1 cell while a cell with a ceiling runs on g; "
        "q admits at most 3 cells while a cell with a ceiling runs on g",
    ),
}


@pytest.mark.parametrize("table", CONFLICTS)
def test_two_rules_for_the_same_cells_with_different_caps_are_refused_naming_both(
    table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rule, which, both = CONFLICTS[table]
    path = tmp_path / "rules.toml"
    path.write_text(rule.format(cells=1) + rule.format(cells=3))
    message = (
        f"{path}: rules: Value error, {which} hold the same cells with different caps ({both}): keep one"
    )
    with pytest.raises(ConfigError) as refused:
        load_rules(path)
    assert str(refused.value) == message
    assert main(["rules", "check", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"spark-otel: error: {message}"]


def test_the_same_rule_twice_and_rules_that_hold_other_cells_load() -> None:
    text = LANE.format(cells=2) * 2 + LIMIT.format(cells=1) + LIMIT.replace("'e'", "'f'").format(cells=2)
    text += "[[limit]]\nengine = 'q'\neval = 'e'\ncell_class = 'short'\ncells = 4\n"
    rules = parse_rules(text, where="t")
    assert [r.describe() for r in rules.rules] == [
        "q lane at most 2 cells",
        "q lane at most 2 cells",
        "e cells on q at most 1 at once",
        "f cells on q at most 2 at once",
        "e short cells on q at most 4 at once",
    ]


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ("ceiling_s = inf", "ceiling_s"),
        ("ceiling_s = nan", "ceiling_s"),
        ("ceiling_bound_fraction = inf", "ceiling_bound_fraction"),
        ("version = 2\nslowdown = { q = inf }", "slowdown.q"),
        (
            "version = 2\n[[history]]\nengine = 'q'\nfamily = 'e'\nn_cells = 3\nshare = 1.0\n"
            "p90_alone_s = inf",
            "history[0].p90_alone_s",
        ),
    ],
)
def test_a_number_that_is_not_finite_is_refused_naming_its_key(setting: str, key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_rules(setting + "\n" + LANE.format(cells=1), where="rules.toml")
    assert str(refused.value) == f"rules.toml: {key}: Input should be a finite number"


@pytest.mark.parametrize("url", ["not a url", "ftp://box:8011", "http://:8011", "http://box:0"])
def test_an_engine_url_that_is_not_one_is_refused_as_the_command_line_refuses_it(url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_rules(f"[engines.q]\nurl = '{url}'\n" + LANE.format(cells=1), where="rules.toml")
    assert str(refused.value).startswith(f"rules.toml: engines.q.url: Value error, engine URL '{url}': ")


def test_the_url_the_store_gives_an_ipv6_engine_is_one_a_rules_file_takes(tmp_path: Path) -> None:
    from spark_otel.model import Request

    with Store(tmp_path / "s.sqlite") as store:
        store.write_requests(
            [
                Request(
                    uid="1", operation="chat", engine="q", server_address="::1", server_port=8011,
                    start_unix_ns=1, end_unix_ns=2,
                )
            ]
        )  # fmt: skip
        url = store.engine_urls()["q"]
    rules = parse_rules(f"[engines.q]\nurl = '{url}'\n" + LANE.format(cells=1), where="t")
    assert rules.engines["q"].url == "http://[::1]:8011"
