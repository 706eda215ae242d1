"""`spark-otel report`'s own part, word for word: each input's phases on the spinner, the
backfilled records' skipped lines and warnings, the one line it prints, the options it hands on
(--eval and --engine to the backfill, --ceiling and --threshold to the advisor, the records'
names as the page's source, the default --out), and each refusal.

One full report (backfilled records, on a terminal) carries the figures; every other case is
refused before the plots are drawn, so the file stays fast. The page's sections have their own
tests (tests/report/); here they only show what the command passed on.

Records (spark-bench layout), in a.jsonl: nine cells of an eval that names neither its eval
nor its engine (--eval serial --engine qwen name them), 1,000 s each, back to back: six alone
at 11.5 tok/s, three at 5.25 tok/s while b.jsonl's eval "cards" (four cells on nemotron,
with no token counts) ran; then six lines that are not records, each with its own error.
Cost of cards: 1 - 5.25 / 11.5 = 54%, past the 35% threshold given."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.support.printed import stderr_on_a_terminal

from spark_otel.cli import main
from spark_otel.store import Store, default_store_path

T0_S = 1_790_000_000  # 2026-09-21 14:13:20 UTC
NOT_RECORDS = ["{broken", "[1, 2]", "nope", '{"a": }', '"text"', "42"]
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SPINNER = re.compile(r"[\u2800-\u28ff] ")


def drawn(terminal: str) -> tuple[list[str], list[str]]:
    """What a terminal showed: the spinner's phases in order (each once), and the other lines."""
    phases: list[str] = []
    lines: list[str] = []
    for frame in re.split(r"[\r\n]", _CONTROL.sub("", terminal)):
        if _SPINNER.match(frame):
            if not phases or phases[-1] != frame[2:]:
                phases.append(frame[2:])
        elif frame:
            lines.append(frame)
    return phases, lines


def _record(
    i: int, start_s: float, elapsed_s: float, tokens: int | None, **named: object
) -> dict[str, object]:
    record: dict[str, object] = {
        "cell_id": f"c{i}",
        "started_at": T0_S + start_s,
        "elapsed_s": elapsed_s,
        "workers": 1,
        "deadline_s": 1800,
        "status": "ok",
    }
    if tokens is not None:
        record["usage"] = {"completion_tokens": tokens, "prompt_tokens": 4000}
    return record | named


def _write_records(folder: Path) -> None:
    serial = [_record(i, i * 1000.0, 1000.0, 11_500) for i in range(6)]
    serial += [_record(6 + i, 6000.0 + i * 1000.0, 1000.0, 5_250) for i in range(3)]
    cards = [
        _record(100 + i, 6000.0 + i * 900, 880.0, None, eval="cards", engine="nemotron", workers=4)
        for i in range(4)
    ]
    (folder / "a.jsonl").write_text("\n".join([*(json.dumps(r) for r in serial), *NOT_RECORDS]) + "\n")
    (folder / "b.jsonl").write_text("\n".join(json.dumps(r) for r in cards) + "\n")


def _without_images(page: str) -> str:
    return re.sub(r"<img[^>]*>", "<img>", page)


NEIGHBOUR_SECTION = (
    "<h3>serial</h3><p>Baseline over 6 cells overlapping no other load: median 11.50 tok/s, p10 11.50 tok/s, "
    "p90 11.50 tok/s. 0 of 9 cells timed out and 0 failed (listed, kept out of rates).</p><table><thead><tr>"
    '<th>load elsewhere on the box</th><th>kind</th><th>engine</th><th class="num">cells</th>'
    '<th class="num">timeouts</th><th class="num">failed</th><th class="num">median tok/s</th>'
    '<th class="num">range tok/s</th><th class="num">cost %</th></tr></thead><tbody><tr>'
    "<td>cards eval, 4 workers on nemotron</td><td>eval</td><td>nemotron</td>"
    '<td class="num">3</td><td class="num">0</td><td class="num">0</td><td class="num">5.25</td>'
    '<td class="num">5.25 to 5.25</td><td class="num">54 !</td></tr></tbody></table><ul class="terms">'
    "<li><b>cost %</b>: 1 - that median over the baseline median; ! past the advisor&#x27;s threshold "
    "(35%)</li></ul>"
)


def test_backfilled_records_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The phases, the first five skipped lines and a count of the rest, the file whose records
    have no token counts, and the page in ./spark-otel-report (the default --out)."""
    _write_records(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["report", "--records", "a.jsonl", "b.jsonl", "--mapping", "spark-bench", "--eval", "serial"]
    with stderr_on_a_terminal() as terminal:
        code = main([*argv, "--engine", "qwen", "--ceiling", "900", "--threshold", "0.35"])
    assert code == 0
    assert capsys.readouterr().out == "wrote spark-otel-report/report.html\n"
    phases, lines = drawn(terminal.getvalue())
    assert phases == [
        "reading the records",
        "backfilling a.jsonl, b.jsonl",
        "computing the analyses over 13 cells",
        "drawing the plots and writing spark-otel-report",
    ]
    assert lines == [
        "spark-otel: warning: skipped a.jsonl:10: not valid JSON: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)",
        "spark-otel: warning: skipped a.jsonl:11: a record must be an object, got list",
        "spark-otel: warning: skipped a.jsonl:12: not valid JSON: Expecting value: line 1 column 1 (char 0)",
        "spark-otel: warning: skipped a.jsonl:13: not valid JSON: Expecting value: line 1 column 7 (char 6)",
        "spark-otel: warning: skipped a.jsonl:14: a record must be an object, got str",
        "spark-otel: warning: skipped ... and 1 more errors "
        "(spark-otel backfill --dry-run --json on these files lists every one)",
        "spark-otel: warning: b.jsonl: no record has completion_tokens ('usage.completion_tokens'): check "
        "the mapping's path (its cells have no decode rate)",
    ]
    out = tmp_path / "spark-otel-report"
    assert sorted(p.name for p in out.iterdir()) == [
        "concurrency.png",
        "instrument-1-qwen-cells--decode-rate.png",
        "neighbour-serial.png",
        "report.html",
        "timeline-serial.png",
    ]
    page = _without_images((out / "report.html").read_text())
    assert "<h1>spark-otel report: serial</h1>" in page
    [source] = re.findall(r"<p[^>]*>From ([^;]*);", page)
    assert source == "a.jsonl, b.jsonl: 13 cells, 0 load windows, 0 probe runs (eval serial)"
    assert NEIGHBOUR_SECTION in page
    rules = page[page.index("<h2>Queue rules</h2>") :]
    assert rules.startswith(
        '<h2>Queue rules</h2><p class="note">Under a 900 s per-cell ceiling; cross-engine loads flagged '
        "past a 35% neighbour cost (as spark-otel advise).</p>"
    )
    assert re.findall(r"<tr><td>([^<]*)</td>", rules) == [
        "Measure qwen first: no worker count for serial cells on qwen yet",
        "qwen: no lane cap yet, measure past 1 stream",
        "nemotron yields while serial runs on qwen",
    ]


NOTHING = (
    "no cells, load windows or probe runs to report on; nothing is recorded there: instrument an eval "
    "(spark_otel.instrument(), with spark_otel.cell() per cell) or run `spark-otel backfill` first"
)


def test_a_store_and_an_export_each_name_their_phase_before_the_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store given as ~/s.sqlite is the home folder's (it exists: read, and found empty); an
    export of no spans is read, and found empty."""
    monkeypatch.setenv("HOME", str(tmp_path))
    Store(tmp_path / "s.sqlite").close()
    (tmp_path / "none.json").write_text('{"resourceSpans": []}\n')
    (tmp_path / "empty.json").write_text("")
    out = str(tmp_path / "never")
    exports = [str(tmp_path / "none.json"), str(tmp_path / "empty.json")]
    with stderr_on_a_terminal() as terminal:
        assert main(["report", "--store", "~/s.sqlite", "--out", out]) == 1
    assert drawn(terminal.getvalue()) == (
        ["reading the records", f"reading {tmp_path / 's.sqlite'}", "computing the analyses over 0 cells"],
        [f"spark-otel: error: {tmp_path / 's.sqlite'}: {NOTHING}"],
    )
    with stderr_on_a_terminal() as terminal:
        assert main(["report", "--otlp-json", *exports, "--out", out]) == 1
    assert drawn(terminal.getvalue()) == (
        ["reading the records", f"reading {', '.join(exports)}", "computing the analyses over 0 cells"],
        [f"spark-otel: error: {', '.join(exports)}: {NOTHING}"],
    )
    assert capsys.readouterr().out == ""
    assert not Path(out).exists()


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["report", *argv])
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err


@pytest.mark.parametrize(
    "inputs",
    [
        ["--store", "s.sqlite", "--records", "r.jsonl"],
        ["--otlp-json", "t.json", "--records", "r.jsonl"],
        ["--store", "s.sqlite", "--otlp-json", "t.json", "--records", "r.jsonl"],
    ],
)
def test_more_than_one_input_is_refused(inputs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _refusal(inputs, capsys) == (
        2,
        "spark-otel: error: choose one input: --store, --otlp-json or --records\n",
    )


def test_each_refusal_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    Path("empty.jsonl").write_text("")
    Path("x.jsonl").write_text("{broken\n")
    Path("y.jsonl").write_text("[1]\n")
    mapped = ["--mapping", "spark-bench", "--out", "never"]
    assert _refusal(["--threshold", "2"], capsys) == (
        2,
        "spark-otel: error: --threshold must be a finite number >= 0 and <= 1, got 2\n",
    )
    assert _refusal(["--ceiling", "0"], capsys) == (
        2,
        "spark-otel: error: --ceiling must be a finite number > 0, got 0\n",
    )
    assert _refusal(["--store", "~/none.sqlite"], capsys) == (
        1,
        "spark-otel: error: ~/none.sqlite: no such store file\n",
    )
    assert _refusal(["--records", "x.jsonl"], capsys) == (
        2,
        "spark-otel: error: --records needs --mapping (the record layout; see spark-otel backfill --help)\n",
    )
    assert _refusal(["--records", "empty.jsonl", *mapped], capsys) == (
        1,
        "spark-otel: error: empty.jsonl: no record could be read as a cell\n",
    )
    assert _refusal(["--records", "x.jsonl", "y.jsonl", *mapped], capsys) == (
        1,
        "spark-otel: warning: skipped x.jsonl:1: not valid JSON: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)\n"
        "spark-otel: warning: skipped y.jsonl:1: a record must be an object, got list\n"
        "spark-otel: error: x.jsonl, y.jsonl: no record could be read as a cell: x.jsonl:1: not valid JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\n",
    )
    assert not Path("never").exists()
    assert not Path("none.sqlite").exists()


def test_the_options_as_help_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert " ".join(out[out.index("options:") :].split()) == (
        "options: -h, --help show this help message and exit "
        f"--store PATH embedded store file (default: $SPARK_OTEL_STORE or {default_store_path()}) "
        "--otlp-json FILE [FILE ...] OTLP JSON trace export(s) to read "
        "--records FILE [FILE ...] eval records to backfill and report "
        "--mapping M backfill mapping for --records (see spark-otel backfill) "
        "--engine ENGINE engine of --records that do not name one "
        "--eval EVAL_NAME report on this eval only (and name --records' eval) "
        "--ceiling SECONDS per-cell ceiling in seconds; model seconds for cells recorded under a model clock "
        "(default: 1800.0) "
        "--threshold FRACTION neighbour cost past which a load is flagged, as a fraction (0.2 is 20%) "
        "(default: 0.2) "
        "--out DIR output directory (report.html and PNGs) (default: spark-otel-report)"
    )
