"""The backfill of one mapped file as it was before the column path (issue 38): every record read
on its own through `cell_from_record`, its file read by `read_records`, the warnings as the old
`file_warnings` made them from `Cell` records. What `backfill_files` must give, cell for cell,
error for error, warning for warning."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_otel._exceptions import InputError
from spark_otel.model import Cell
from spark_otel.receivers.backfill import FieldMapping, RecordError, cell_from_record, read_records
from spark_otel.receivers.backfill.mapping import mapping_statuses
from spark_otel.receivers.backfill.records import _CONSEQUENCES, CEILING_MULTIPLE, _check_layout, record_uid
from spark_otel.receivers.backfill.values import MISSING, Scope, shown, text_of


@dataclass
class Reference:
    cells: list[Cell]
    errors: list[RecordError]
    warnings: list[str]
    records: int


def backfill_one_by_one(
    path: Path, mapping: FieldMapping, *, eval_name: str | None, engine: str | None = None
) -> Reference:
    """One file through ``mapping``, a record at a time, as `_mapped_file` read it before."""
    out = Reference([], [], [], 0)
    data = path.read_bytes()
    mtime_ns = path.stat().st_mtime_ns
    try:
        if data.startswith(b"PK\x03\x04"):
            raise InputError(f"{path}: a zip file")
        records = list(read_records(path, data, root=mapping.records))
        first = next((record for _, record, _ in records if not isinstance(record, InputError)), None)
        _check_layout(path, first, mapping)
    except InputError as exc:
        out.errors.append(RecordError(str(path), None, str(exc).removeprefix(f"{path}: ")))
        return out
    statuses = mapping_statuses(mapping)
    resolved = path.resolve()
    scopes = []
    for position, record, document in records:
        out.records += 1
        if isinstance(record, InputError):
            out.errors.append(RecordError(str(path), position, str(record)))
            continue
        if isinstance(record, dict):
            scopes.append(Scope(record, document))
        try:
            out.cells.append(
                cell_from_record(
                    record,
                    mapping,
                    uid=record_uid(resolved, position),
                    eval_name=eval_name,
                    engine=engine,
                    file_mtime_ns=mtime_ns,
                    file_records=len(records),
                    statuses=statuses,
                    document=document,
                )
            )
        except ValueError as exc:
            out.errors.append(RecordError(str(path), position, str(exc).splitlines()[0]))
    fallbacks = [name for name, given in (("eval_name", eval_name), ("engine", engine)) if given]
    out.warnings = _old_file_warnings(path, out.cells, mapping, scopes, fallbacks=fallbacks)
    return out


def _old_file_warnings(
    path: Path, cells: Sequence[Cell], mapping: FieldMapping, scopes: Sequence[Scope], *, fallbacks: list[str]
) -> list[str]:
    if not cells:
        return []
    quiet = {*mapping.optional, *fallbacks}
    warnings = []
    for name, spec in mapping.mapped_fields():
        if name in quiet or any(text_of(spec, scope) is not MISSING for scope in scopes):
            continue
        consequence = _CONSEQUENCES.get(name, f"its cells have no {name}")
        warnings.append(
            f"{path}: no record has {name} ({shown(spec)!r}): check the mapping's path ({consequence})"
        )
    long = [c for c in cells if c.deadline_s and c.elapsed_s > CEILING_MULTIPLE * c.deadline_s]
    if long:
        worst = max(long, key=lambda c: c.elapsed_s / (c.deadline_s or 1.0))
        warnings.append(
            f"{path}: {len(long)} of {len(cells)} cells ran more than {CEILING_MULTIPLE:g}x their own "
            f"ceiling (e.g. {worst.cell_id}: {worst.elapsed_s:,.0f} s against {worst.deadline_s:,.0f} s); "
            f"is elapsed_unit ({mapping.elapsed_unit!r}) right?"
        )
    return warnings
