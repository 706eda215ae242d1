"""Fuzzing field mappings (`load_mapping`): random bytes, random mapping objects, hostile names.

`load_mapping` returns a `FieldMapping` or raises `ConfigError` naming the file (and, for a
field that does not fit, the field); a mapping it returns never makes `backfill_files` raise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.support.backfill_checks import backfill
from tests.support.backfill_records import SERIAL
from tests.support.fuzzing import FUZZ, HOSTILE_NUMBERS, HOSTILE_TEXT, JSON_VALUES, timed

from spark_otel import ConfigError
from spark_otel.model import CellStatus
from spark_otel.receivers.backfill import BUILTIN_MAPPINGS, FieldMapping, load_mapping


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-mapping")


def load(path: Path | str) -> FieldMapping | ConfigError:
    """`load_mapping`'s mapping, or the `ConfigError` it raised (any other exception fails)."""
    try:
        return timed(lambda: load_mapping(str(path)), f"load_mapping({str(path)[:40]!r})")
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message, message
        return exc


@FUZZ
@given(data=st.binary(max_size=2000))
@example(data=b"\xff")
@example(data=b"[" * 5000)
def test_random_bytes_are_a_mapping_or_a_config_error_naming_the_file(workdir: Path, data: bytes) -> None:
    path = workdir / "random.json"
    path.write_bytes(data)
    outcome = load(path)
    if isinstance(outcome, ConfigError):
        assert str(outcome).startswith(f"{path}: not a valid field mapping: ")


PATHS = st.sampled_from(["cell_id", "usage.completion_tokens", "a.0.b", "elapsed_s", "started_at", "x.²"])
TEMPLATES = st.sampled_from(["{pr} {angle} run{run}", "cell_id || id", "{a}}", "{{a}", "{}", "||", "a..b"])
FIELD_VALUES = st.one_of(PATHS, TEMPLATES, HOSTILE_TEXT, JSON_VALUES)
MAPPING_KEYS = [*FieldMapping.model_fields, "bogus"]


@st.composite
def mapping_objects(draw: st.DrawFn) -> dict[str, object]:
    """A JSON object shaped like a mapping: a name and cell id, then random fields, any values."""
    obj: dict[str, object] = {
        "name": draw(st.text(min_size=1, max_size=10)),
        "cell_id": draw(PATHS | TEMPLATES),
    }
    for key in draw(st.lists(st.sampled_from(MAPPING_KEYS), max_size=6, unique=True)):
        if key == "status_values":
            obj[key] = draw(
                st.dictionaries(HOSTILE_TEXT, st.sampled_from([s.value for s in CellStatus]) | JSON_VALUES)
            )
        elif key == "attributes":
            obj[key] = draw(st.dictionaries(st.text(max_size=8), PATHS | TEMPLATES | JSON_VALUES, max_size=3))
        elif key == "deadline_s":
            obj[key] = draw(HOSTILE_NUMBERS | PATHS | JSON_VALUES)
        else:
            obj[key] = draw(FIELD_VALUES)
    return obj


@FUZZ
@given(obj=mapping_objects())
@example(obj={"name": "m", "cell_id": "id", "deadline_s": float("nan")})  # NaN deadline on every cell
@example(obj={"name": "m", "cell_id": "id", "deadline_s": float("inf")})
@example(obj={"name": "m", "cell_id": "id", "deadline_s": -5})
@example(obj={"name": "m", "cell_id": "id", "deadline_s": 10**400})
@example(obj={"name": "m", "cell_id": "id", "status_values": {"\t\n": None}})  # a message of two lines
def test_a_random_mapping_object_loads_or_names_its_field_and_never_breaks_a_backfill(
    workdir: Path, obj: dict[str, object]
) -> None:
    path = workdir / "mapping.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    outcome = load(path)
    if isinstance(outcome, ConfigError):
        message = str(outcome)
        assert message.startswith(f"{path}: not a valid field mapping: ")
        return
    assert isinstance(outcome.deadline_s, str | None) or 0 < outcome.deadline_s < float("inf")
    records = workdir / "records.jsonl"
    records.write_bytes(SERIAL.read_bytes())
    backfill(records, outcome)


@settings(FUZZ, max_examples=FUZZ.max_examples // 2)
@given(
    name=st.one_of(
        st.text(max_size=30),
        st.sampled_from(["", ".", "/", "\x00", "a" * 5000, "/" + "a" * 300, "spark-bench ", "SPARK-BENCH"]),
    )
)
@example(name="a" * 5000)  # OSError: file name too long, from Path.is_file
def test_any_name_is_a_builtin_a_file_or_a_config_error(name: str) -> None:
    outcome = load(name)
    if isinstance(outcome, FieldMapping):
        assert name in BUILTIN_MAPPINGS or Path(name).is_file()


@pytest.mark.parametrize("name", [None, 5, b"spark-bench", ["spark-bench"]])
def test_a_mapping_name_that_is_not_text_is_a_config_error(name: object) -> None:
    with pytest.raises(ConfigError, match="mapping"):
        load_mapping(name)  # type: ignore[arg-type]


@FUZZ
@given(
    key=st.text(alphabet="abcXYZ_ -", min_size=1, max_size=8).filter(str.strip),
    status=st.sampled_from(list(CellStatus)),
    spelled=st.sampled_from([str.lower, str.upper, str.title, lambda s: f"  {s} "]),
)
@example(key="Cut", status=CellStatus.DEADLINE, spelled=str.lower)  # an upper-case key never matched
def test_a_status_value_matches_records_however_either_is_cased(
    workdir: Path, key: str, status: CellStatus, spelled: object
) -> None:
    mapping = FieldMapping(
        name="m", cell_id="id", start="start", elapsed="elapsed", status="status", status_values={key: status}
    )
    path = workdir / "status.jsonl"
    record = {"id": "c", "start": "2026-09-17T06:39:00Z", "elapsed": 5, "status": spelled(key)}  # type: ignore[operator]
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    result = backfill(path, mapping)
    assert [c.status for c in result.cells] == [status], result.errors
