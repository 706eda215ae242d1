"""Loading a field mapping: the whole message for each way a name, a file or a path goes wrong.

A mapping is the one thing a person writes by hand for a backfill, so each refusal names the
input and the problem in full: the field, the path or template, the file's key quoted when it
is not plain, a name cut to one line at exactly 80 characters. These pin the whole texts (the
older tests in test_backfill.py check their beginnings).
"""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_otel import ConfigError
from spark_otel.receivers.backfill import FieldMapping, cell_from_record, load_mapping

BUILTINS = "generic-csv, inspect, openai-usage, spark-bench"


def _refusal(tmp_path: Path, obj: object) -> str:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_mapping(str(path))
    prefix = f"{path}: not a valid field mapping: "
    message = str(caught.value)
    assert message.startswith(prefix)
    return message.removeprefix(prefix)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        # a brace alone, either one, is a template's, not a path's
        (
            {"completion_tokens": "usage{n"},
            "completion_tokens: 'usage{n' is not a dotted path (templates and '||' work only in "
            "cell_id, eval_name, engine)",
        ),
        (
            {"completion_tokens": "usage}n"},
            "completion_tokens: 'usage}n' is not a dotted path (templates and '||' work only in "
            "cell_id, eval_name, engine)",
        ),
        (
            {"elapsed": "a || b"},
            "elapsed: 'a || b' is not a dotted path (templates and '||' work only in "
            "cell_id, eval_name, engine)",
        ),
        # a text field's plain path and a template's inner path are checked under the field's name
        (
            {"engine": "model..name"},
            "engine: 'model..name' is not a dotted path (an empty name between dots)",
        ),
        ({"engine": "{ab..c}"}, "engine: 'ab..c' is not a dotted path (an empty name between dots)"),
        (
            {"attributes": {" my attr ": 5}},
            "attributes.' my attr ': Input should be a valid string",
        ),
        ({"attributes": {"\t": 5}}, "attributes.'\\t': Input should be a valid string"),
        ({"attributes": {"": 5}}, "attributes.'': Input should be a valid string"),
        ({"attributes": {"plain": 5}}, "attributes.plain: Input should be a valid string"),
    ],
)
def test_a_bad_field_is_named_with_the_whole_problem(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    assert _refusal(tmp_path, {"name": "m", "cell_id": "id", **fields}) == message


def test_a_mapping_file_that_is_not_utf8_is_refused_with_the_decoders_reason(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(b'\xff{"name": "m", "cell_id": "id"}')
    with pytest.raises(ConfigError) as caught:
        load_mapping(str(path))
    assert str(caught.value) == (
        f"{path}: not a valid field mapping: 'utf-8' codec can't decode byte 0xff in position 0: "
        "invalid start byte"
    )


def test_single_letter_template_names_are_paths_like_any_other() -> None:
    mapping = FieldMapping(name="m", cell_id="{a}-{b} || id", eval_name="{e}", engine="x")
    cell = cell_from_record(
        {"a": "p", "b": 7, "e": "ev", "start": "2026-09-17T10:00:00Z"},
        mapping.model_copy(update={"start": "start", "end": "start"}),
        uid="0123456789abcdef",
        eval_name=None,
    )
    assert (cell.cell_id, cell.eval_name) == ("p-7", "ev")


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("a" * 78, "'" + "a" * 78 + "'"),  # its repr is 80 characters: shown whole
        ("a" * 79, "'" + "a" * 76 + "..."),  # 81: cut to 77 and an ellipsis
    ],
)
def test_an_unknown_mapping_name_is_shown_whole_up_to_80_characters(name: str, shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_mapping(name)
    assert str(caught.value) == f"--mapping {shown}: neither a built-in mapping ({BUILTINS}) nor a JSON file"


def test_a_name_too_long_for_a_path_says_so_in_the_systems_words() -> None:
    with pytest.raises(ConfigError) as caught:
        load_mapping("a" * 5000)
    assert str(caught.value) == f"--mapping '{'a' * 76}...: not a usable path: File name too long"


@pytest.mark.parametrize(("name", "shown"), [(5, "5"), (None, "None"), (b"spark-bench", "b'spark-bench'")])
def test_a_mapping_name_that_is_not_text_is_named(name: object, shown: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_mapping(name)  # type: ignore[arg-type]
    assert str(caught.value) == f"--mapping {shown}: expected a built-in mapping's name or a file's path"


def test_a_mapping_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """On a machine whose locale is not UTF-8 (Windows' cp1252, a bare C locale), a mapping with
    an accented description still loads: the file is read as UTF-8, never in the locale's codec."""
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps({"name": "m", "cell_id": "id", "description": "données"}, ensure_ascii=False),
        encoding="utf-8",
    )
    assert load_mapping(str(path)).description == "données"  # in this process
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    code = (
        "import locale, sys; from spark_otel.receivers.backfill import load_mapping; "
        "print(locale.getpreferredencoding(False)); "
        "sys.stdout.buffer.write(load_mapping(sys.argv[1]).description.encode('utf-8'))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, str(path)], env=env, capture_output=True, check=False, timeout=60
    )
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    encoding, description = ran.stdout.decode("utf-8").split("\n")
    assert codecs.lookup(encoding).name == "ascii"  # the child's locale really is not UTF-8
    assert description == "données"
