"""The embedded store: one local SQLite file of cells, requests, load windows, metric samples
and result documents, and the OpenTelemetry exporters that fill it.

    embedded   the `Store` (WAL, several writing processes, keyed rows)
    versions   the store's schema versions: what each open accepts, and migrating an older store
    exporters  span and metric exporters that write into a `Store` off the hot path
"""

from __future__ import annotations

from .embedded import STORE_ENV, Store, default_store_path

__all__ = ["STORE_ENV", "Store", "default_store_path"]
