"""Look at the embedded store, or migrate an older one in place.

    spark-otel store info [--store PATH]       schema version and rows per table (reads only)
    spark-otel store migrate [--store PATH]    bring an older store to this spark-otel's schema

Read commands never migrate a store; every command that records (backfill, ingest-nsight, probe,
receive, an instrumented eval) migrates it on first use, in one transaction. `migrate` does the
same without recording anything, so an older store can be read again at once. A store written by
a newer spark-otel is refused by both, naming both versions. --json prints the same for scripts.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from urllib.parse import quote

from ._common import add_store_argument, open_store, print_json, print_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    for name, help_text in (
        ("info", "the store's schema version and rows per table (reads only)"),
        ("migrate", "migrate an older store to this spark-otel's schema, in place"),
    ):
        action = sub.add_parser(name, help=help_text, description=help_text)
        add_store_argument(action)
        action.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _version_as_written(path: Path) -> int | None:
    """The schema the file is at before a writer opens it (read-only, as every open reads it; 1 for
    a store from before the version was recorded); None where it is not a schema number."""
    from ..store import versions

    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    try:
        text = versions.read_shape(conn, path).version_text
    finally:
        conn.close()
    try:
        return int(text) if text is not None else 1
    except ValueError:
        return None  # not a schema; the writer's open says so


def run(args: argparse.Namespace) -> int:
    from ..store.versions import SCHEMA_VERSION

    if args.store_command == "migrate":
        return _migrate(args)
    with open_store(args) as store:
        version, counts, path = store.schema_version(), store.row_counts(), store.path
    if args.json:
        print_json({"store": str(path), "schema_version": version, "rows": counts})
        return 0
    print_table(
        f"{path}: store schema {version} (this spark-otel reads and writes {SCHEMA_VERSION})",
        ["table", "rows"],
        [[name, f"{n:,}"] for name, n in counts.items()],
    )
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from .._exceptions import StoreError
    from ..store import Store
    from ..store.embedded import default_store_path

    path = Path(args.store).expanduser() if args.store else default_store_path()
    if not path.is_file():
        raise StoreError(f"{path}: no store there; nothing to migrate (recording creates one)")
    before = _version_as_written(path)
    with Store(path) as store:  # a writer: migrates an older store, refuses a newer one or another file
        after, counts = store.schema_version(), store.row_counts()
    changed = before is not None and before != after
    if args.json:
        print_json({"store": str(path), "from_schema": before, "schema_version": after, "migrated": changed})
        return 0
    if changed:
        print(f"{path}: migrated from store schema {before} to {after}; {counts['cells']:,} cells kept")
    else:
        print(f"{path}: already at store schema {after}; nothing changed")
    return 0
