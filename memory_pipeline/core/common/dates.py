"""Date helpers every stage shares: one day, a closed date range, per-date splits and counts."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DAY = dt.timedelta(days=1)

_EPOCH = dt.date(1970, 1, 1)


def date_range(lo: dt.date, hi: dt.date) -> list[dt.date]:
    return [lo + dt.timedelta(days=i) for i in range((hi - lo).days + 1)]


def split_by_date(table: pa.Table, column: str, days: list[dt.date]) -> dict[dt.date, pa.Table]:
    """Rows per date, each in its original order (one stable sort, then slices)."""
    ordered = table.take(pc.sort_indices(table, [(column, "ascending")]))
    keys = ordered.column(column).cast(pa.int32()).to_numpy(zero_copy_only=False)
    out = {}
    for d in days:
        ordinal = (d - _EPOCH).days
        lo, hi = np.searchsorted(keys, ordinal, "left"), np.searchsorted(keys, ordinal, "right")
        out[d] = ordered.slice(lo, hi - lo)
    return out


def count_by(table: pa.Table, date_col: str, weight: str | None = None) -> dict[tuple, int]:
    """{(date, source): rows or sum of ``weight``}, grouped in Arrow (fast at 400k rows)."""
    if table.num_rows == 0:
        return {}
    agg = (weight, "sum") if weight else ("source", "count")
    grouped = table.group_by([date_col, "source"]).aggregate([agg])
    counts = grouped.column(f"{agg[0]}_{agg[1]}").to_pylist()
    return dict(
        zip(
            zip(
                grouped.column(date_col).to_pylist(),
                grouped.column("source").to_pylist(),
                strict=True,
            ),
            counts,
            strict=True,
        )
    )
