"""How TARGET_INFO_GPU names a GPU, row by row: the id it gets, the name it keeps, the rows left out.

The other tests read a GPU row that has every column (or a text ``pwGpuId``); these pin the
branches they never take: a text device ``id`` is a bad row like a text ``pwGpuId``, a bad row
does not hide the rows after it, a GPU without a uuid is named by its device id, and a name
stored as a blob is no name.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.nsight import damaged

from spark_otel.receivers.nsight import read_capture

GPU = "fa2a1d7d-0000-4000-8000-0000000000b1"  # the uuid of the one GPU the captures list
SM_ISSUE = "SM Issue [Throughput %]"


def test_a_text_device_id_is_left_out_and_the_next_row_still_names_the_gpu(
    captures: dict[str, Path], tmp_path: Path
) -> None:
    path = damaged(
        captures,
        tmp_path,
        "plain",
        "UPDATE TARGET_INFO_GPU SET id = 'x', pwGpuId = 5;"  # row 1: bad, and on another GPU anyway
        "INSERT INTO TARGET_INFO_GPU (vmId, id, name, pwGpuId, uuid) "
        "VALUES (0, 0, 'Second GB10', 0, 'GPU-2')",
    )
    capture = read_capture(path)
    assert capture.skipped == [
        f"{path}: TARGET_INFO_GPU row 1: id is 'x', not an integer (1 row of 2 left out)"
    ]
    assert capture.gpu_names == {"GPU-2": "Second GB10"}
    issue = capture.summary.metric(SM_ISSUE)
    assert (issue.gpu_id, issue.gpu_name, issue.samples) == ("GPU-2", "Second GB10", 50)


def test_a_gpu_without_a_uuid_is_named_by_its_device_id(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", "UPDATE TARGET_INFO_GPU SET uuid = NULL, id = 4")
    capture = read_capture(path)
    assert capture.skipped == []
    assert capture.gpu_names == {"4": "NVIDIA GB10"}  # found by pwGpuId 0, named by id 4
    assert {m.gpu_id for m in capture.summary.metrics} == {"4"}


def test_a_gpu_name_stored_as_a_blob_is_no_name(captures: dict[str, Path], tmp_path: Path) -> None:
    path = damaged(captures, tmp_path, "plain", "UPDATE TARGET_INFO_GPU SET name = X'4742'")
    capture = read_capture(path)
    assert capture.skipped == []
    assert capture.gpu_names == {GPU: None}
    assert capture.summary.metric(SM_ISSUE).gpu_name is None
