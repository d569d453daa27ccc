"""The storage report measures each local partition once per file content."""

from __future__ import annotations

import datetime as dt

import pyarrow.compute as pc

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.quality import storage_report as SR
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table

DAYS = [dt.date(2024, 3, 1), dt.date(2024, 3, 2)]


def _write(store: TableStore, day: dt.date, texts: list[str]) -> None:
    messages = table(
        *[msg(f"{day} 1{i}:00", t, "AB"[i % 2], conv="c", order=i) for i, t in enumerate(texts)]
    )
    store.write(T.RAW_MESSAGES, messages, day)
    store.write(T.SESSIONS, sessionize(messages, 30), day)


def _figures(out, cache) -> tuple[int, int]:
    report = SR.storage_report(out, out / "dossiers", cache)
    rows = {r["component"]: r for r in report.to_pylist()}
    raw = rows["raw_text (UTF-8, logical)"]["bytes"]
    per = rows["raw_messages (parquet)"]
    return raw, round(per["bytes"] * 1000 / per["bytes_per_1000_sessions"])


def test_partitions_are_measured_once_per_file_content(tmp_path, monkeypatch):
    out, cache = tmp_path / "out", tmp_path / "cache"
    store = TableStore(out)
    _write(store, DAYS[0], ["京都", "hello"])  # 6 + 5 UTF-8 bytes, two sessions (gap 1 h)
    _write(store, DAYS[1], ["ok"])
    assert _figures(out, cache) == (13, 3)
    assert (cache / SR.MEASURES_FILE).is_file()
    reads: list = []
    real = TableStore.read
    monkeypatch.setattr(
        TableStore,
        "read",
        lambda self, name, days=None, columns=None: (
            reads.append((str(name), days)) or real(self, name, days, columns)
        ),
    )
    assert _figures(out, cache) == (13, 3)
    assert reads == []  # every partition known by its file's digest
    _write(store, DAYS[1], ["okay", "new", "day"])  # a rewritten partition only
    assert _figures(out, cache) == (6 + 5 + 4 + 3 + 3, 2 + 3)
    assert sorted({d for _, days in reads for d in days}) == [DAYS[1]]
    # the same figures as reading every partition, without the measures file
    (cache / SR.MEASURES_FILE).write_text("not json")
    text = store.read(T.RAW_MESSAGES, columns=["text"]).column("text")
    assert _figures(out, cache)[0] == pc.sum(pc.binary_length(text)).as_py()
