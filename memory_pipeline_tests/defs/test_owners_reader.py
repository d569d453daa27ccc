"""The per-partition row counts of a multi-owner run (``owner_fanout._OwnersReader``).

A run over many fanned-out owners has days that no owner of the run wrote (the 233-owner
RealPersonaChat build failed in ingest on one: the reader returned a table without columns
and the per-day audit figures asked for ``records_read``), and on object storage every
"does this owner have that day" is a request, so only the owners that took part in a day
may be asked about it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from memory_pipeline.core.common import schema as S
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import OwnerStore
from memory_pipeline.defs.owner_fanout import _OwnersReader

D1, D2, D3 = (dt.date(2022, 8, 1) + dt.timedelta(days=i) for i in range(3))


class CountingStore(OwnerStore):
    """An owner store that counts the existence checks asked of it."""

    asked = 0

    def has(self, name, day=None) -> bool:  # noqa: ANN001 - TableStore's signature
        self.asked += 1
        return super().has(name, day)


@dataclass
class Scope:
    store: OwnerStore
    days: list[dt.date] | None


def _audit(day: dt.date, read: int) -> pa.Table:
    return pa.table(
        {
            "partition_date": [day],
            "source": ["rpc"],
            "records_read": [read],
            "ingested": [read],
            "quarantined": [0],
        },
        schema=S.INGEST_AUDIT,
    )


def test_a_day_no_owner_wrote_reads_as_the_empty_schema(tmp_path: Path):
    a = CountingStore(tmp_path / "a", "a")
    a.write(T.INGEST_AUDIT, _audit(D1, 5), D1)
    reader = _OwnersReader([Scope(a, [D1, D2])])
    empty = reader.read(T.INGEST_AUDIT, [D2])
    assert empty.num_rows == 0
    assert empty.schema.names == S.INGEST_AUDIT.names  # the per-day figures read its columns
    assert reader.read(T.INGEST_AUDIT, [D2], columns=["source"]).schema.names == ["source"]


def test_only_the_owners_that_took_part_in_a_day_are_asked(tmp_path: Path):
    a, b, c = (CountingStore(tmp_path / o, o) for o in "abc")
    a.write(T.INGEST_AUDIT, _audit(D1, 5), D1)
    b.write(T.INGEST_AUDIT, _audit(D3, 7), D3)
    c.write(T.INGEST_AUDIT, _audit(D1, 2), D1)
    reader = _OwnersReader([Scope(a, [D1]), Scope(b, [D3]), Scope(c, None)])
    day1 = reader.read(T.INGEST_AUDIT, [D1])
    assert sorted(day1.column("records_read").to_pylist()) == [2, 5]  # a and c, not b
    assert b.asked == 0  # b took no part in D1: not asked
    assert c.asked == 1  # no days known: asked
    assert reader.read(T.INGEST_AUDIT, [D3]).column("records_read").to_pylist() == [7]
    assert reader.read(T.INGEST_AUDIT).num_rows == 3  # no days: every owner's rows
