"""Where the demo's records go: a store of its own beside the report, replaced on each run, and
a short run tag no eval there carries yet."""

from __future__ import annotations

import secrets
from pathlib import Path

from .._exceptions import ConfigError

__all__ = ["STORE_FILE", "clear_own_store", "demo_store_path", "run_tag"]

STORE_FILE = "store.sqlite"


def demo_store_path(store_path: str | Path | None, out_dir: str | Path) -> Path:
    """``store_path`` when given, else the demo's own store in its output directory."""
    return Path(store_path) if store_path is not None else Path(out_dir) / STORE_FILE


def clear_own_store(path: Path) -> None:
    """Start the demo's own store afresh: an earlier run's model-time stamps overlap this one's
    (a run at speed S stamps times up to S times its length back), so its cells would read as
    load. Only a store the demo wrote is removed; any other file there is refused."""
    from ..store import Store

    if not path.exists():
        return
    with Store(path) as old:
        ours = bool(old.documents("demo")) and all(e.startswith("demo-") for e in old.eval_names())
    if not ours:
        raise ConfigError(
            f"{path} exists and was not written by spark-otel demo; pass --out with another "
            "directory, or --store to add the demo's records to that store"
        )
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def run_tag(path: Path) -> str:
    """A short tag no eval in the store already carries (``2e14``)."""
    from ..store import Store

    taken: set[str] = set()
    if path.exists():
        with Store(path, read_only=True) as store:
            taken = set(store.eval_names())
    while True:
        tag = secrets.token_hex(2)
        if not any(name.endswith(f"-{tag}") for name in taken):
            return tag
