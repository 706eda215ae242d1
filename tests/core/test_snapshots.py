"""The snapshot mechanism the output tests share: equal text passes, other text fails with a
diff naming the file, a missing file fails (never written silently), and updating rewrites."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.snapshots import Snapshot


def test_equal_text_passes_and_other_text_fails_with_a_diff_naming_the_file(tmp_path: Path) -> None:
    Snapshot(tmp_path, "t", update=True)("one\ntwo\n")
    kept = Snapshot(tmp_path, "t", update=False)
    kept("one\ntwo\n")
    with pytest.raises(pytest.fail.Exception) as failed:
        kept("one\nthree\n")
    assert "t.txt (kept)" in str(failed.value)
    assert "-two\n+three" in str(failed.value)


def test_a_missing_snapshot_fails_and_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="no snapshot"):
        Snapshot(tmp_path, "t", update=False)("text")
    assert list(tmp_path.iterdir()) == []


def test_each_name_is_a_file_of_its_own_and_odd_characters_are_folded(tmp_path: Path) -> None:
    snap = Snapshot(tmp_path, "test_x[8-sync]", update=True)
    snap("a", "first")
    snap("b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_x_8-sync_--first.txt", "test_x_8-sync_.txt"]
