"""The parsed-record cache in columns (file_cache.cached_tables, what the ingest asset runs).

A cold build fills the entry from the columnar reader (no row reader, no object per message),
a warm one serves it as Arrow columns, and both give exactly the tables of the record path
(columnar.ingest over the row reader, no cache), which stays the reference. An entry either
path wrote serves the other.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common.forget_list import load_forget_list
from memory_pipeline.core.ingest import batches, file_cache
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.ingest.stage import read_all, read_all_tables, split_ingest
from memory_pipeline_tests.core.ingest.test_columnar import (
    CLEAN,
    DAYS,
    HOSTILE,
    START,
    line_sources,
    rpc,
    write,
)


@pytest.fixture
def calls(monkeypatch) -> dict[str, int]:
    """How often the cache called the row reader and the columnar reader."""
    seen = {"rows": 0, "columns": 0}
    real_rows = batches.read_source
    real_columns = dict(batches.TABLE_READERS)

    def rows(spec, dates=None):
        seen["rows"] += 1
        return real_rows(spec, dates)

    def wrap(fn):
        def columns(spec):
            seen["columns"] += 1
            return fn(spec)

        return columns

    # the cache wraps the reader step (core/ingest/batches.py): its calls into the readers
    monkeypatch.setattr(batches, "read_source", rows)
    monkeypatch.setattr(batches, "TABLE_READERS", {k: wrap(v) for k, v in real_columns.items()})
    return seen


def per_day(result: Any, days: list[dt.date]) -> dict[dt.date, list[list[dict]]]:
    return {
        d: [t.messages.to_pylist(), t.quarantine.to_pylist(), t.audit.to_pylist()]
        for d, t in split_ingest(result, days).items()
    }


def reference(
    specs: list[SourceSpec], days: list[dt.date], start: dt.date = START, **kw: Any
) -> dict:
    """The row readers' records (no cache, no columnar reader) through the ingest step:
    what every cached read must equal."""
    records = [r for spec in specs for r in read_source(spec, None)]
    return per_day(ingest(records, start_date=start, dates=days, **kw), days)


def columnar(specs, days, cache: Path, **kw: Any) -> dict:
    return per_day(read_all_tables(specs, days, START, cache_dir=cache, **kw), days)


def entry_meta(cache: Path) -> list[dict]:
    return [file_cache._meta(p) for p in sorted(file_cache.cache_root(cache).rglob("*.parquet"))]


SOME = [dt.date(2022, 8, 2), dt.date(2022, 8, 4)]


@pytest.mark.parametrize("days", [DAYS, [START], SOME])
def test_cold_fill_takes_the_columnar_reader_and_warm_reads_no_source(
    tmp_path: Path, calls: dict[str, int], days: list[dt.date]
) -> None:
    spec = rpc(write(tmp_path / "in", CLEAN))
    want = reference([spec], days)
    cache = tmp_path / "cache"
    before = dict(calls)
    assert columnar([spec], days, cache) == want
    assert calls["columns"] == before["columns"] + 1
    assert calls["rows"] == before["rows"], "the cold fill parsed with the row reader"
    assert [m[file_cache.META_COLUMNAR] for m in entry_meta(cache)] == [True]
    before = dict(calls)
    assert columnar([spec], days, cache) == want
    assert calls == before, "the warm read parsed the source again"
    # the record path takes the columnar-filled entry too (messages first, then quarantine)
    assert per_day(read_all([spec], days, START, cache_dir=cache), days) == want
    assert calls == before
    # a warm read of other days than the fill's
    assert columnar([spec], SOME, cache) == reference([spec], SOME)
    assert any(m for tables in want.values() for m in tables[1]), "no quarantine exercised"


def test_the_object_entrance_fills_the_one_entry_the_columnar_ingest_reads(
    tmp_path: Path, calls: dict[str, int]
) -> None:
    """read_all (messages as objects) takes the same road as read_all_tables: its cold read
    fills the entry from the columnar reader (no row parse), which then serves both."""
    spec = rpc(write(tmp_path / "in", CLEAN))
    cache = tmp_path / "cache"
    want = reference([spec], DAYS)
    assert per_day(read_all([spec], DAYS, START, cache_dir=cache), DAYS) == want
    assert [m[file_cache.META_COLUMNAR] for m in entry_meta(cache)] == [True]
    assert calls["rows"] == 0
    before = dict(calls)
    tables = file_cache.cached_batches(spec, DAYS, cache_dir=cache, start_date=START)
    assert tables.columnar  # filled by the columnar reader, and says so
    assert columnar([spec], DAYS, cache) == want
    assert calls == before


@pytest.mark.parametrize("kind", ["contact", "conversation", "retention"])
def test_forget_list_and_retention_on_a_columnar_fill(
    tmp_path: Path, calls: dict[str, int], kind: str
) -> None:
    """A columnar fill is scrubbed like a row fill: same tables as the record path, and the
    entry holds no text of a forgotten conversation."""
    spec = rpc(write(tmp_path / "in", CLEAN))
    forget = load_forget_list(tmp_path / "out", create=True)
    kw: dict[str, Any] = {"forget": forget}
    if kind == "retention":
        kw["retain_from"] = dt.date(2022, 8, 3)
    else:
        value = {"contact": "AA+AB", "conversation": "rpc-1"}[kind]
        forget.add(kind, value, dt.date(2022, 9, 1))
    days = DAYS if kind != "retention" else [d for d in DAYS if d >= kw["retain_from"]]
    cache = tmp_path / "cache"
    want = reference([spec], days, **kw)
    assert columnar([spec], days, cache, **kw) == want
    assert calls["rows"] == 0
    assert columnar([spec], days, cache, **kw) == want  # warm
    (path,) = sorted(file_cache.cache_root(cache).rglob("*.parquet"))
    texts = set(pq.read_table(path).column("text").to_pylist())
    assert "こんにちは" not in texts  # dialogue 1: forgotten (AA+AB, rpc-1) or expired (8/2)
    assert "still none" in texts  # dialogue 2 (AA+AC, 8/4) is kept by every case


def test_a_grown_forget_list_rescrubs_a_columnar_entry(tmp_path: Path, calls) -> None:
    spec = rpc(write(tmp_path / "in", CLEAN))
    cache = tmp_path / "cache"
    forget = load_forget_list(tmp_path / "out", create=True)
    columnar([spec], DAYS, cache, forget=forget)
    forget.add("conversation", "rpc-4", dt.date(2022, 9, 1))
    before = dict(calls)
    assert columnar([spec], DAYS, cache, forget=forget) == reference([spec], DAYS, forget=forget)
    assert calls == before  # scrubbed in place, not re-parsed
    (path,) = sorted(file_cache.cache_root(cache).rglob("*.parquet"))
    assert "last dialogue" not in pq.read_table(path).column("text").to_pylist()


@pytest.mark.parametrize("case", ["truncated line", "lone surrogate"])
def test_a_hostile_file_fills_from_the_row_reader(tmp_path: Path, calls, case: str) -> None:
    lines, ending = HOSTILE[case]
    spec = rpc(write(tmp_path / "in", lines, ending))
    cache = tmp_path / "cache"
    assert columnar([spec], DAYS, cache) == reference([spec], DAYS)
    assert calls["rows"] == 1
    assert [m[file_cache.META_COLUMNAR] for m in entry_meta(cache)] == [False]


def test_sources_without_a_columnar_reader(tmp_path: Path, calls) -> None:
    specs = [*line_sources(), rpc(write(tmp_path / "in", CLEAN))]
    start = dt.date(2024, 3, 1)
    days = [start + dt.timedelta(days=i) for i in range(14)] + DAYS
    want = reference(specs, days, start)
    got = per_day(read_all_tables(specs, days, start, cache_dir=tmp_path / "cache"), days)
    assert got == want
    assert calls["rows"] == len(specs) - 1 and calls["columns"] == 1
