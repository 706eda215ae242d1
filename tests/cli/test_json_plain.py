"""`print_json(..., plain=True)`, pydantic's encoder for answers that hold only JSON's own types:
the same layout as Python's indented encoder, byte for byte where no float is under 1e-4 and all
text is ASCII, and the same document where not; long lists of rows written a row at a time in
the same layout as the whole."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pytest

from spark_otel.cli._common import print_json

VALUE = {
    "eval_name": "serial-review",
    "engines": [
        {
            "n_cells": 3,
            "rate": {"median": 12.345678901234567, "p10": None, "ci": [1.5, 2e20]},
            "flags": [True, False],
            "empty_list": [],
            "empty_dict": {},
            "big": 1_700_000_000_000_000_000,
            "negative": -0.25,
        }
    ],
    "energy": None,
}
ROWS = {
    "engines": [
        {"engine": "q", "cells": [{"uid": f"c{k}", "rate": {"median": k / 7, "n": k}} for k in range(300)]},
        {"engine": "n", "cells": [], "runs": [[k, None] for k in range(400)], "levels": [1, 2]},
    ],
    "top": [{"n": k} for k in range(257)],
    "short": [{"n": 1}],
}


def printed(capsys: pytest.CaptureFixture[str], value: object, *, plain: bool) -> str:
    print_json(value, plain=plain)
    return capsys.readouterr().out


def test_plain_json_is_python_encoders_text_byte_for_byte(capsys: pytest.CaptureFixture[str]) -> None:
    fast = printed(capsys, VALUE, plain=True)
    assert fast == printed(capsys, VALUE, plain=False)
    assert fast == json.dumps(VALUE, indent=2) + "\n"


def test_long_lists_are_written_a_row_at_a_time_in_the_same_layout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    buffer = sys.stdout.buffer
    write = buffer.write

    def counting(data: bytes) -> int:
        writes.append(len(data))
        return write(data)

    monkeypatch.setattr(buffer, "write", counting)
    fast = printed(capsys, ROWS, plain=True)
    assert len(writes) == 1  # under some thousand pieces: one write, not one per row
    assert fast == json.dumps(ROWS, indent=2) + "\n"
    assert fast == printed(capsys, ROWS, plain=False)


def test_small_floats_and_other_scripts_are_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    value = {"cost": -3.4657046614094966e-05, "eval_name": "évaluation 評価", "share": 1e-300}
    fast = printed(capsys, value, plain=True)
    assert json.loads(fast) == value
    assert '"cost": -0.000034657046614094966' in fast  # decimals where Python writes an exponent
    assert '"eval_name": "évaluation 評価"' in fast  # UTF-8 where Python escapes
    assert json.loads(printed(capsys, value, plain=False)) == value


def test_a_stdout_without_bytes_gets_the_same_text() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_json(VALUE, plain=True)
    assert out.getvalue() == json.dumps(VALUE, indent=2) + "\n"
