"""The mapping language's additions (issue 36), on small real files: a records root, fields of the
enclosing document, literals, paths whose keys hold dots, sums over several keys; and a path that
no record of a file matches is warned once, naming it and the file, never left silently empty.
Old mappings mean what they meant: a string is always a path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_otel._exceptions import ConfigError
from spark_otel.cli import main
from spark_otel.receivers.backfill import BUILTIN_MAPPINGS, FieldMapping, backfill_files, load_mapping

RUN = {
    "task": "golden-review",
    "config": {"max_connections": 4, "time_limit": 1800},
    "samples": [
        {
            "id": "B#265",
            "started_at": "2026-09-19T01:00:00Z",
            "completed_at": "2026-09-19T01:02:00Z",
            "usage": {
                "openai/qwen3.8": {"input_tokens": 100, "output_tokens": 1000},
                "openai/grader-1.5": {"input_tokens": 40, "output_tokens": 20},
            },
        },
        {
            "id": "B#266",
            "started_at": "2026-09-19T01:00:30Z",
            "completed_at": "2026-09-19T01:01:30Z",
            "usage": {"openai/qwen3.8": {"input_tokens": 80, "output_tokens": 600}},
        },
    ],
}

NESTED = {
    "name": "nested",
    "records": "samples",
    "cell_id": "id",
    "eval_name": {"document": "task"},
    "engine": {"value": "qwen"},
    "workers": {"document": "config.max_connections"},
    "deadline_s": {"document": ["config", "time_limit"]},
    "prompt_tokens": {"sum": "usage.*.input_tokens"},
    "completion_tokens": {"path": ["usage", "openai/qwen3.8", "output_tokens"]},
    "start": "started_at",
    "end": "completed_at",
    "attributes": {
        "all.output": {"sum": [["usage", "openai/qwen3.8", "output_tokens"], "usage.*.output_tokens"]}
    },
}


def _mapping(tmp_path: Path, body: dict[str, Any]) -> FieldMapping:
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(body))
    mapping = load_mapping(str(path))
    assert isinstance(mapping, FieldMapping)
    return mapping


def test_records_nested_under_a_key_read_with_the_documents_fields_literals_dotted_keys_and_sums(
    tmp_path: Path,
) -> None:
    records = tmp_path / "run.json"
    records.write_text(json.dumps(RUN))
    result = backfill_files([records], _mapping(tmp_path, NESTED), eval_name=None)
    assert (result.errors, result.warnings, result.records) == ([], [], 2)
    first, second = result.cells
    assert (first.cell_id, first.eval_name, first.engine, first.workers, first.deadline_s) == (
        "B#265",
        "golden-review",
        "qwen",
        4,
        1800.0,
    )
    assert (first.prompt_tokens, first.completion_tokens) == (140, 1000)
    assert (second.prompt_tokens, second.completion_tokens) == (80, 600)
    assert (first.elapsed_s, second.elapsed_s) == (120.0, 60.0)
    # the qwen model's tokens once on their own, then again among every model's
    assert (first.attributes["all.output"], second.attributes["all.output"]) == (2020, 1200)


def test_a_sum_adds_csv_columns_and_refuses_what_is_not_a_number(tmp_path: Path) -> None:
    rows = tmp_path / "cells.csv"
    rows.write_text(
        "cell_id,start,elapsed_s,out_main,out_tools\n"
        "a,2026-09-19T01:00:00Z,10,100,5\n"
        "b,2026-09-19T01:00:00Z,10,100,\n"
        "c,2026-09-19T01:00:00Z,10,lots,5\n"
    )
    mapping = _mapping(
        tmp_path,
        {
            "name": "csv-sum",
            "cell_id": "cell_id",
            "engine": {"value": "qwen"},
            "start": "start",
            "elapsed": "elapsed_s",
            "completion_tokens": {"sum": ["out_main", "out_tools"]},
        },
    )
    result = backfill_files([rows], mapping, eval_name="e")
    assert [(c.cell_id, c.completion_tokens) for c in result.cells] == [("a", 105), ("b", 100)]
    assert [(e.line, e.message) for e in result.errors] == [
        (4, """{"sum": ["out_main", "out_tools"]} adds up 'lots', not a number""")
    ]


def test_a_document_field_in_json_lines_is_the_line_itself(tmp_path: Path) -> None:
    lines = tmp_path / "cells.jsonl"
    lines.write_text(
        json.dumps({"id": "a", "t": {"start": 1_758_243_600, "end": 1_758_243_610}, "engine": "qwen"}) + "\n"
    )
    mapping = _mapping(
        tmp_path,
        {
            "name": "lines",
            "cell_id": "id",
            "engine": {"document": "engine"},
            "start": "t.start",
            "end": "t.end",
            "optional": ["completion_tokens"],
            "completion_tokens": "tokens",
        },
    )
    result = backfill_files([lines], mapping, eval_name="e")
    assert [(c.cell_id, c.engine, c.elapsed_s) for c in result.cells] == [("a", "qwen", 10.0)]
    assert result.warnings == []


def test_a_string_is_still_a_path_and_one_that_matches_nothing_is_warned_once_naming_it_and_the_file(
    tmp_path: Path,
) -> None:
    """The trial's mapping wrote ``"engine": "qwen"`` meaning the name: it stays a path (an old
    mapping means what it meant), and since no record has a key ``qwen`` each file says so once."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (first, second):
        path.write_text(
            "".join(
                json.dumps({"id": i, "start": "2026-09-19T01:00:00Z", "elapsed_s": 5, "tokens": 50}) + "\n"
                for i in range(3)
            )
        )
    body = {
        "name": "trial",
        "cell_id": "id",
        "engine": "qwen",
        "start": "start",
        "elapsed": "elapsed_s",
        "completion_tokens": "tokens",
        "workers": "max_connections",
    }
    result = backfill_files([first, second], _mapping(tmp_path, body), eval_name="e")
    assert {c.engine for c in result.cells} == {None}
    assert result.warnings == [
        f"{path}: no record has {field} ({path_!r}): check the mapping's path ({consequence})"
        for path in (first, second)
        for field, path_, consequence in (
            (
                "engine",
                "qwen",
                'its cells have no engine; give --engine NAME, or write a fixed name as {"value": "NAME"}',
            ),
            ("workers", "max_connections", "its cells have no worker count"),
        )
    ]
    # --engine gives them one (no warning for it); listed as optional, workers goes quiet too
    quiet = backfill_files(
        [first], _mapping(tmp_path, body | {"optional": ["workers"]}), eval_name="e", engine="q"
    )
    assert (quiet.warnings, {c.engine for c in quiet.cells}) == ([], {"q"})
    # written as a literal, it is the name
    literal = backfill_files([first], _mapping(tmp_path, body | {"engine": {"value": "qwen"}}), eval_name="e")
    assert {c.engine for c in literal.cells} == {"qwen"}


def test_a_built_in_mapping_warns_of_a_missing_engine_only_without_engine(tmp_path: Path) -> None:
    rows = tmp_path / "cells.csv"
    rows.write_text("cell_id,start,elapsed_s,completion_tokens\na,2026-09-19T01:00:00Z,10,100\n")
    generic = BUILTIN_MAPPINGS["generic-csv"]
    assert backfill_files([rows], generic, eval_name="e", engine="qwen").warnings == []
    [warning] = backfill_files([rows], generic, eval_name="e").warnings
    assert warning.startswith(f"{rows}: no record has engine ('engine')")


def test_a_records_root_that_holds_no_list_or_meets_json_lines_is_an_error_naming_the_file(
    tmp_path: Path,
) -> None:
    document, lines = tmp_path / "run.json", tmp_path / "run.jsonl"
    document.write_text(json.dumps({"samples": {"a": 1}}))
    lines.write_text(json.dumps(RUN) + "\n")
    mapping = _mapping(tmp_path, NESTED)
    result = backfill_files([document, lines], mapping, eval_name=None)
    assert [(e.file, e.line, e.message) for e in result.errors] == [
        (str(document), None, "the mapping's records root 'samples' holds dict, not a list of records"),
        (
            str(lines),
            None,
            "the mapping's records root ('samples') applies to a JSON document, and this is JSON Lines",
        ),
    ]
    missing = tmp_path / "other.json"
    missing.write_text(json.dumps({"rows": []}))
    [error] = backfill_files([missing], mapping, eval_name=None).errors
    assert error.message == "the mapping's records root 'samples' holds nothing, not a list of records"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"engine": {"value": "qwen", "path": "model"}},
            "engine: a field written as an object holds exactly one of 'path', 'document', 'sum', "
            "'value' (this one holds path, value)",
        ),
        ({"engine": {"valu": "qwen"}}, "engine.valu: Extra inputs are not permitted"),
        (
            {"engine": {}},
            "engine: a field written as an object holds exactly one of 'path', 'document', 'sum', 'value'",
        ),
        (
            {"completion_tokens": {"path": "usage.*.output_tokens"}},
            """completion_tokens: path: '*' matches several values; add them up with {"sum": ...}""",
        ),
        (
            {"completion_tokens": {"sum": "usage..x"}},
            "completion_tokens: sum: 'usage..x' is not a dotted path (an empty name between dots)",
        ),
        ({"records": ["samples", ""]}, "records: ['samples', ''] is not a path (an empty segment)"),
        ({"optional": ["engin"]}, "optional: 'engin' is not a field this mapping reads (cell_id)"),
    ],
)
def test_a_mistake_in_the_new_forms_is_named_when_the_mapping_loads(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"name": "m", "cell_id": "id", **fields}))
    with pytest.raises(ConfigError) as caught:
        load_mapping(str(path))
    assert str(caught.value) == f"{path}: not a valid field mapping: {message}"


def test_the_command_line_loads_a_nested_file_through_a_mapping_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records, mapping = tmp_path / "run.json", tmp_path / "nested.json"
    records.write_text(json.dumps(RUN))
    mapping.write_text(json.dumps(NESTED))
    assert main(["backfill", str(records), "--mapping", str(mapping), "--dry-run", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(c["cell_id"], c["completion_tokens"], c["workers"]) for c in printed["cells"]] == [
        ("B#265", 1000, 4),
        ("B#266", 600, 4),
    ]
