"""`spark-otel rules check`, whole: the two tables, the --json and the warnings, for a rules file
with every kind of rule and each state an engine's check can end in, and the command's help.

The engines are asked over real HTTP on 127.0.0.1: a /metrics page naming two models (so "q",
measured on another, is stale, and "k", measured on one of them, is current), and an engine,
"s", that answers only after 1.5 s, past the --timeout of 0.75 s given: it reads unchecked
(with the default 2 s it would answer). "n" has no [engines] entry at all."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.support.metrics_server import MetricsServer

from spark_otel.cli import main, rules

METRICS = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="qwen3.8-27b"} 1\n'
    'vllm:num_requests_running{model_name="qwen-alias"} 0\n'
)
SLOW_S = 1.5
TIMEOUT = "0.75"


@pytest.fixture
def slow_engine() -> Iterator[str]:
    """An engine whose /v1/models answers (serving "slow-model") only after `SLOW_S`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(SLOW_S)
            body = json.dumps({"object": "list", "data": [{"id": "slow-model"}]}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the client gave up first, as it should
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def rules_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metrics_server: MetricsServer, slow_engine: str
) -> str:
    monkeypatch.chdir(tmp_path)  # a relative path: the table's title is the same on every run
    monkeypatch.setenv("COLUMNS", "96")  # the tables as printed fit a line of this file
    metrics_server.set_text(METRICS)
    url = metrics_server.url
    Path("rules.toml").write_text(
        "computed_at = 2026-12-01T09:30:00Z\n"
        "unmeasured = ['qwen long-context: spark-otel probe --engine q=http://q:8000 --streams 1,2', "
        "'nemotron beside qwen: spark-otel neighbour-cost']\n\n"
        f"[engines.q]\nmodel = 'qwen3.6-27b'\nurl = '{url}'\n\n"
        f"[engines.k]\nmodel = 'qwen3.8-27b'\nurl = '{url}'\n\n"
        f"[engines.s]\nmodel = 'slow-model'\nurl = '{slow_engine}'\n\n"
        "[[lane]]\nengine = 'q'\ncells = 8\nevidence = 'aggregate peaks at 8 streams'\n"
        "measured_at = 2026-11-30T08:05:59Z\nfigures = {streams = 8}\n\n"
        "[[limit]]\nengine = 'k'\neval = 'review'\ncell_class = 'generation-heavy'\ncells = 1\n\n"
        "[[cross_engine]]\nengine = 'n'\nwhile_engine = 'k'\ncells = 0\n"
        "evidence = 'costs k 40%'\n\n"
        "[[cross_engine]]\nengine = 's'\nwhile_engine = 'q'\nwhile_eval = 'ev'\ncells = 2\n"
    )
    return url


def _stale(url: str) -> str:
    return (
        "measured on qwen3.6-27b, now serves qwen-alias, qwen3.8-27b: stale (still applied); re-measure "
        f"with `spark-otel probe --engine q={url} --streams 1,2,4,8`, "
        "then `spark-otel advise --write-rules FILE`"
    )


def _lines(*lines: str) -> str:
    return "".join(f"{line}\n" for line in lines)


def test_rules_check_json_has_every_rule_and_every_engine_check(
    rules_file: str, slow_engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = rules_file
    assert main(["rules", "check", "rules.toml", "--timeout", TIMEOUT, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "file": "rules.toml",
        "valid": True,
        "version": 1,
        "form": "mixed",
        "rules": [
            {
                "engine": "q",
                "evidence": "aggregate peaks at 8 streams",
                "measured_at": "2026-11-30T08:05:59Z",
                "figures": {"streams": 8},
                "kind": "lane",
                "cells": 8,
            },
            {
                "engine": "k",
                "evidence": "",
                "measured_at": None,
                "figures": {},
                "kind": "limit",
                "eval": "review",
                "cell_class": "generation-heavy",
                "ceiling_bound": None,
                "cells": 1,
            },
            {
                "engine": "n",
                "evidence": "costs k 40%",
                "measured_at": None,
                "figures": {},
                "kind": "cross_engine",
                "cells": 0,
                "while_engine": "k",
                "while_eval": None,
                "while_ceiling_bound": False,
            },
            {
                "engine": "s",
                "evidence": "",
                "measured_at": None,
                "figures": {},
                "kind": "cross_engine",
                "cells": 2,
                "while_engine": "q",
                "while_eval": "ev",
                "while_ceiling_bound": False,
            },
        ],
        "unmeasured": [
            "qwen long-context: spark-otel probe --engine q=http://q:8000 --streams 1,2",
            "nemotron beside qwen: spark-otel neighbour-cost",
        ],
        "engines": [
            {
                "engine": "k",
                "measured_model": "qwen3.8-27b",
                "serving": ["qwen-alias", "qwen3.8-27b"],
                "stale": False,
                "problem": None,
            },
            {
                "engine": "n",
                "measured_model": None,
                "serving": None,
                "stale": False,
                "problem": "no url in [engines]: not checked",
            },
            {
                "engine": "q",
                "measured_model": "qwen3.6-27b",
                "serving": ["qwen-alias", "qwen3.8-27b"],
                "stale": True,
                "problem": _stale(url),
            },
            {
                "engine": "s",
                "measured_model": "slow-model",
                "serving": None,
                "stale": False,
                "problem": f"{slow_engine} did not say what it serves: not checked",
            },
        ],
    }
    assert err == ""


def test_rules_check_prints_the_rules_the_engines_and_what_is_not_covered(
    rules_file: str, slow_engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each rule described, with its evidence and when it was measured (to the minute, UTC), under
    a title with the file, the count and when the file was computed; each engine with the model
    it was measured on, what it serves now and its state; a warning per engine not current."""
    url = rules_file
    assert main(["rules", "check", "rules.toml", "--timeout", TIMEOUT]) == 0
    out, err = capsys.readouterr()
    assert out == _lines(
        "rules.toml: 4 rules, valid, mixed (version 1, computed 2026-12-01 09:30 UTC)".center(96),
        "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┓",
        "┃ rule                                       ┃ evidence                     ┃ measured (UTC)   ┃",
        "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━┩",
        "│ q lane at most 8 cells                     │ aggregate peaks at 8 streams │ 2026-11-30 08:05 │",
        "│ review generation-heavy cells on k at most │ -                            │ -                │",
        "│ 1 at once                                  │                              │                  │",
        "│ n yields while a cell with a ceiling runs  │ costs k 40%                  │ -                │",
        "│ on k                                       │                              │                  │",
        "│ s admits at most 2 cells while ev runs on  │ -                            │ -                │",
        "│ q                                          │                              │                  │",
        "└────────────────────────────────────────────┴──────────────────────────────┴──────────────────┘",
        " " * 27 + "engines" + " " * 28,
        "┏━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━┓",
        "┃ engine ┃ measured on ┃ serving now             ┃ state     ┃",
        "┡━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━┩",
        "│ k      │ qwen3.8-27b │ qwen-alias, qwen3.8-27b │ current   │",
        "│ n      │ -           │ -                       │ unchecked │",
        "│ q      │ qwen3.6-27b │ qwen-alias, qwen3.8-27b │ stale     │",
        "│ s      │ slow-model  │ -                       │ unchecked │",
        "└────────┴─────────────┴─────────────────────────┴───────────┘",
        "not covered yet: qwen long-context: spark-otel probe --engine q=http://q:8000 --streams 1,2",
        "not covered yet: nemotron beside qwen: spark-otel neighbour-cost",
    )
    assert err == (
        "spark-otel: warning: n: no url in [engines]: not checked\n"
        f"spark-otel: warning: q: {_stale(url)}\n"
        f"spark-otel: warning: s: {slow_engine} did not say what it serves: not checked\n"
    )


def test_rules_check_of_a_bare_file_says_what_it_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No computed_at, no evidence, no measured_at, no [engines]: each shown as unknown or "-"."""
    monkeypatch.chdir(tmp_path)
    Path("bare.toml").write_text("[[lane]]\nengine = 'q'\ncells = 1\n")
    assert main(["rules", "check", "bare.toml"]) == 0
    out, err = capsys.readouterr()
    assert out == _lines(
        " " * 4 + "bare.toml: 1 rule, valid, general (version 1," + " " * 4,
        " " * 18 + "computed unknown)" + " " * 18,
        "┏━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━━┓",
        "┃ rule                  ┃ evidence ┃ measured (UTC) ┃",
        "┡━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━┩",
        "│ q lane at most 1 cell │        - │              - │",
        "└───────────────────────┴──────────┴────────────────┘",
        " " * 21 + "engines" + " " * 22,
        "┏━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━┓",
        "┃ engine ┃ measured on ┃ serving now ┃ state     ┃",
        "┡━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━┩",
        "│ q      │           - │           - │ unchecked │",
        "└────────┴─────────────┴─────────────┴───────────┘",
    )
    assert err == "spark-otel: warning: q: no url in [engines]: not checked\n"


def _help(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    monkeypatch.setenv("COLUMNS", "96")
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_rules_help_names_its_one_action(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _help(monkeypatch, capsys, "rules", "--help") == (
        "usage: spark-otel rules [-h] ACTION ...\n\n"
        f"{rules.__doc__.strip()}\n\n"
        "positional arguments:\n"
        "  ACTION\n"
        "    check     validate a rules file and check its engines' models\n\n"
        "options:\n"
        "  -h, --help  show this help message and exit\n"
    )


def test_rules_check_help_shows_the_timeouts_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As every command's --help does (`spark_otel.cli.HelpFormatter`): `rules check` once left
    the default out, its parser made without the command line's formatter."""
    assert _help(monkeypatch, capsys, "rules", "check", "--help") == (
        "usage: spark-otel rules check [-h] [--timeout SECONDS] [--json] [--store PATH]\n"
        "                              [--recent HOURS]\n"
        "                              FILE\n\n"
        "positional arguments:\n"
        "  FILE               the rules file (TOML)\n\n"
        "options:\n"
        "  -h, --help         show this help message and exit\n"
        "  --timeout SECONDS  per engine (default: 2.0)\n"
        "  --json             print JSON instead of tables\n"
        "  --store PATH       also show which of this store's recent cells each rule would catch\n"
        "  --recent HOURS     with --store: the cells that started this long before the store's newest\n"
        "                     cell (default 24)\n"
    )


def test_rules_without_an_action_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["rules"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "usage: spark-otel rules [-h] ACTION ...\n"
        "spark-otel rules: error: the following arguments are required: ACTION\n"
    )
