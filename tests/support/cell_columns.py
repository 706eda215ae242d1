"""Two `CellColumns` compared column by column, values and types, for the tests of the columnar
read and the analyses over columns."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from spark_otel.records.cell_columns import CellColumns


def column_differences(got: CellColumns, want: CellColumns) -> list[str]:
    """The names of the columns that differ (values, or an array's dtype); empty when all agree."""
    out = []
    for field in fields(CellColumns):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if isinstance(b, np.ndarray):
            same = (
                isinstance(a, np.ndarray)
                and a.dtype == b.dtype
                and np.array_equal(a, b, equal_nan=b.dtype.kind == "f")
            )
        else:
            same = a == b
        if not same:
            out.append(field.name)
    return out
