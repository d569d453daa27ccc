"""Helpers the export-reader tests share: read a fixture, ingest it, check the counts."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

from memory_pipeline.core.common.records import Message, QuarantineRecord, Record
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import IngestResult
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline_tests.paths import FIXTURES

EXPORTS = FIXTURES / "exports"
START = dt.date(2020, 1, 1)


def spec(kind: str, path: Path, **options: object) -> SourceSpec:
    opts = {"owner_aliases": ["Yuki Tanaka", "田中 ゆき"], **options}
    return SourceSpec(name="s", kind=kind, path=path, timezone="Asia/Tokyo", owner="Yuki",
                      options=opts)  # fmt: skip


def read(kind: str, path: Path, **options: object) -> list[Record]:
    return list(read_source(spec(kind, path, **options)))


def messages(recs: list[Record]) -> list[Message]:
    return [r for r in recs if isinstance(r, Message)]


def quarantined(recs: list[Record]) -> list[QuarantineRecord]:
    return [r for r in recs if isinstance(r, QuarantineRecord)]


def merged(kind: str, path: Path, **options: object) -> IngestResult:
    return ingest(read_source(spec(kind, path, **options)), start_date=START)


def reconciles(result: IngestResult, n_records: int) -> None:
    """Records read = ingested + quarantined, per partition and in total."""
    rows = result.audit_rows()
    assert sum(r["records_read"] for r in rows) == n_records
    for r in rows:
        assert r["records_read"] == r["ingested"] + r["quarantined"]
    assert len(result.messages) + len(result.quarantine) == n_records


def reasons(result: IngestResult | list[Record]) -> Counter[str]:
    qs = result.quarantine if isinstance(result, IngestResult) else quarantined(result)
    return Counter(q.reason for q in qs)
