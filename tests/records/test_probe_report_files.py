"""A saved probe report that is not JSON (`records.probe_report`): refused as bad input that names
the file, whether its bytes are not UTF-8 or its text is not JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel._exceptions import InputError
from spark_otel.records.probe_report import ProbeReport


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe{}"], ids=["not JSON", "not UTF-8"])
def test_a_report_file_that_is_not_json_is_refused_naming_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "probe.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as caught:
        ProbeReport.load_file(path)
    assert str(path) in str(caught.value)
