"""The parsed-record cache: warm ingest = cold ingest, changes invalidate, privacy scrubs it."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common.forget_list import ForgetList
from memory_pipeline.core.ingest import batches, file_cache
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.ingest.stage import read_all, read_all_tables, split_ingest
from memory_pipeline_tests.paths import SAMPLE

START = dt.date(2024, 3, 1)
DAYS = [START + dt.timedelta(days=i) for i in range(14)]
TZ = "Asia/Tokyo"


@pytest.fixture
def specs(tmp_path: Path) -> list[SourceSpec]:
    """The bundled sample plus hostile files, so the cache also carries quarantine rows."""
    src = tmp_path / "src"
    shutil.copytree(SAMPLE / "line_json", src / "line_json")
    shutil.copytree(SAMPLE / "line_txt", src / "line_txt")
    kenta = src / "line_json" / "kenta"
    (kenta / "2024-03-02.json").write_text("{not json", encoding="utf-8")  # malformed
    # dated before start_date: out_of_range quarantine in the start partition
    shutil.copy(kenta / "2024-03-01.json", kenta / "2024-02-20.json")
    (src / "line_txt" / "notes.txt").write_bytes(b"\xff\xfe not an export\n")
    return [
        SourceSpec("sample_line_json", "line_json", src / "line_json", TZ, "Yuki"),
        SourceSpec("sample_line_txt", "line_txt", src / "line_txt", TZ, "Yuki"),
    ]


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """Names of the sources the cache had to parse (its calls into the readers)."""
    calls: list[str] = []
    real = batches.read_source  # the reader step the cache wraps

    def spy(spec, dates=None):
        calls.append(spec.name)
        return real(spec, dates)

    monkeypatch.setattr(batches, "read_source", spy)
    return calls


def tables(specs, days, cache=None, forget=None, retain_from=None, columnar=False) -> dict:
    """Per-day (messages, quarantine, audit): through the cache, or (``cache=None``) from an
    unhinted read of every source, what a cold full read gives for these days. ``columnar``:
    through ``read_all_tables`` (what the ingest asset runs) instead of ``read_all``."""
    if cache is None:
        records = [r for spec in specs for r in read_source(spec, None)]
        result = ingest(
            records, start_date=START, dates=days, forget=forget, retain_from=retain_from
        )
    else:
        read = read_all_tables if columnar else read_all
        result = read(specs, days, START, forget, retain_from, cache_dir=cache)
    return {d: (t.messages, t.quarantine, t.audit) for d, t in split_ingest(result, days).items()}


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for day in a:
        for name, x, y in zip(("messages", "quarantine", "audit"), a[day], b[day], strict=True):
            assert x.equals(y), f"{name} of {day} differ"


def cached_strings(cache: Path) -> str:
    """Every string value of every cached file, joined (what a privacy scan would see)."""
    out = []
    for path in sorted(file_cache.cache_root(cache).rglob("*")):
        if path.is_file():
            out.append(path.read_bytes().decode("utf-8", "replace"))
            t = pq.read_table(path)
            for col in t.columns:
                out.extend(v for v in col.to_pylist() if isinstance(v, str))
    return "\x00".join(out)


def entries(cache: Path) -> list[Path]:
    return sorted(file_cache.cache_root(cache).rglob("*.parquet"))


@pytest.mark.parametrize(
    "days", [DAYS, [START], [dt.date(2024, 3, 6), dt.date(2024, 3, 7)], [dt.date(2024, 3, 14)]]
)
def test_warm_ingest_equals_an_uncached_one_and_reads_no_source(specs, reads, tmp_path, days):
    cache = tmp_path / "cache"
    plain = tables(specs, days)
    n = len(reads)
    cold = tables(specs, days, cache)
    assert sorted(reads[n:]) == ["sample_line_json", "sample_line_txt"]
    warm = tables(specs, days, cache)
    assert len(reads) == n + 2, "the warm run parsed a source again"
    assert_same(plain, cold)
    assert_same(plain, warm)
    quarantined = sum(q.num_rows for _, q, _ in warm.values())
    assert quarantined >= (3 if START in days else 0)
    assert len(entries(cache)) == 2


@pytest.mark.parametrize(
    "days", [DAYS, [START], [dt.date(2024, 3, 6), dt.date(2024, 3, 7)], [dt.date(2024, 3, 14)]]
)
def test_the_columnar_ingest_takes_the_cache_with_the_same_tables(specs, reads, tmp_path, days):
    """``read_all_tables(cache_dir=...)`` (the ingest asset's path) serves the cached records
    into the columnar ingest: cold and warm equal an uncached read, warm parses nothing."""
    cache = tmp_path / "cache"
    plain = tables(specs, days)
    n = len(reads)
    cold = tables(specs, days, cache, columnar=True)
    assert sorted(reads[n:]) == ["sample_line_json", "sample_line_txt"]
    warm = tables(specs, days, cache, columnar=True)
    assert len(reads) == n + 2, "the warm run parsed a source again"
    assert_same(plain, cold)
    assert_same(plain, warm)
    # with a forget list and a retention cutoff too (text-free rows from the cache)
    contact, _ = _sam(specs)
    forget = ForgetList(salt=b"s" * 32)
    forget.add("contact", contact, dt.date(2024, 4, 1))
    cutoff = dt.date(2024, 3, 8)
    kept = [d for d in days if d >= cutoff] or [cutoff]
    assert_same(
        tables(specs, kept, None, forget, cutoff),
        tables(specs, kept, cache, forget, cutoff, columnar=True),
    )


def test_a_warm_run_of_other_days_equals_a_cold_one(specs, reads, tmp_path):
    cache = tmp_path / "cache"
    tables(specs, DAYS, cache)  # the full build fills the cache
    nightly = [dt.date(2024, 3, 13), dt.date(2024, 3, 14)]
    n = len(reads)
    warm = tables(specs, nightly, cache)
    assert len(reads) == n
    assert_same(tables(specs, nightly), warm)


def test_a_too_early_file_is_accounted_in_the_start_partition_on_a_short_run(specs, tmp_path):
    """A file named before start_date is accounted in the start partition, with or without
    the cache: when the start partition is wanted no reader skips a file by its date (a
    plain ingest of [start] used to lose those records)."""
    hinted = read_all(specs, [START], START)
    early = [q for q in hinted.quarantine if q.source_file == "kenta/2024-02-20.json"]
    assert len(early) == 11
    warm = tables(specs, [START], tmp_path / "cache")
    files = warm[START][1]["source_file"].to_pylist()
    assert files.count("kenta/2024-02-20.json") == 11  # one per message entry of the file


def test_a_changed_file_re_parses_its_source_and_drops_the_old_entry(specs, reads, tmp_path):
    cache = tmp_path / "cache"
    tables(specs, DAYS, cache)
    sam = specs[1].path / "sam.txt"
    text = sam.read_text(encoding="utf-8")
    lines = text.splitlines()
    # a new message after the last line of the export (same format as the line before)
    last = next(ln for ln in reversed(lines) if "\t" in ln)
    clock, sender, _ = last.split("\t", 2)
    sam.write_text(text.rstrip("\n") + f"\n{clock}\t{sender}\tzanzibar marmalade\n", "utf-8")
    before = len(reads)
    warm = tables(specs, DAYS, cache)
    assert reads[before:] == ["sample_line_txt"], "only the changed source is parsed again"
    assert_same(tables(specs, DAYS), warm)
    texts = {t for m, _, _ in warm.values() for t in m["text"].to_pylist()}
    assert "zanzibar marmalade" in texts
    assert len(entries(cache)) == 2  # the old version of the source is gone


def test_a_new_file_and_a_changed_option_invalidate(specs, reads, tmp_path):
    cache = tmp_path / "cache"
    tables(specs, DAYS, cache)
    conv = specs[0].path / "kenta"
    shutil.copy(conv / "2024-03-01.json", conv / "2024-03-03.json")
    plain = tables(specs, DAYS)
    n = len(reads)
    assert_same(plain, tables(specs, DAYS, cache))
    assert reads[n:] == ["sample_line_json"]
    other = [SourceSpec(s.name, s.kind, s.path, "UTC", s.owner) for s in specs]
    plain = tables(other, DAYS)
    n = len(reads)
    assert_same(plain, tables(other, DAYS, cache))
    assert len(reads) - n == 2  # timezone is part of the key


def _sam(specs) -> tuple[str, set[str]]:
    """Sam's contact id and texts (8+ characters: what a scan can match)."""
    msgs = [m for m, _, _ in tables(specs, DAYS).values()]
    cols = ["contact_id", "source_file", "text", "type"]
    rows = [r for t in msgs for r in t.select(cols).to_pylist() if r["type"] == "text"]
    mine = [r for r in rows if r["source_file"] == "sam.txt"]
    contact = mine[0]["contact_id"]
    texts = {r["text"] for r in rows if r["contact_id"] == contact and len(r["text"]) >= 8}
    assert len(texts) > 5
    return contact, texts


def test_forget_scrubs_the_cache_and_warm_equals_cold(specs, reads, tmp_path):
    cache = tmp_path / "cache"
    contact, texts = _sam(specs)
    tables(specs, DAYS, cache)
    assert any(t in cached_strings(cache) for t in texts), "the scan must see them first"
    forget = ForgetList(salt=b"s" * 32)
    forget.add("contact", contact, dt.date(2024, 4, 1))
    assert file_cache.scrub(cache, forget) == 2
    blob = cached_strings(cache)
    assert not [t for t in texts if t in blob]
    for path in entries(cache):  # nor their contact id or file name
        t = pq.read_table(path, columns=["contact_id", "source_file"])
        assert contact not in t["contact_id"].to_pylist()
        assert "sam.txt" not in t["source_file"].to_pylist()
    n = len(reads)
    warm = tables(specs, DAYS, cache, forget)
    assert len(reads) == n, "scrubbed in place: no re-parse"
    assert_same(tables(specs, DAYS, None, forget), warm)
    reasons = {r for _, q, _ in warm.values() for r in q["reason"].to_pylist()}
    assert "forgotten" in reasons


def test_a_read_with_a_grown_forget_list_scrubs_without_being_told(specs, reads, tmp_path):
    cache = tmp_path / "cache"
    contact, texts = _sam(specs)
    tables(specs, DAYS, cache)
    forget = ForgetList(salt=b"s" * 32)
    forget.add("contact", contact, dt.date(2024, 4, 1))
    days = [dt.date(2024, 3, 9)]
    assert_same(tables(specs, days, None, forget), tables(specs, days, cache, forget))
    assert not [t for t in texts if t in cached_strings(cache)]
    # a shorter list (an entry removed) cannot get the texts back from the cache: re-parsed
    plain = tables(specs, DAYS)
    n = len(reads)
    assert_same(plain, tables(specs, DAYS, cache))
    assert len(reads) > n


def test_retention_scrubs_old_records_and_an_earlier_cutoff_re_parses(specs, reads, tmp_path):
    cache = tmp_path / "cache"
    cutoff = dt.date(2024, 3, 8)
    msgs = [m for m, _, _ in tables(specs, DAYS).values()]
    old = {
        r["text"]
        for t in msgs
        for r in t.select(["local_date", "text", "type"]).to_pylist()
        if r["local_date"] < cutoff and len(r["text"]) >= 8 and r["type"] == "text"
    }
    assert old
    tables(specs, DAYS, cache)
    forget = ForgetList(salt=b"s" * 32)  # the folder's salt, no entries
    assert file_cache.scrub(cache, forget, cutoff) == 2
    assert not [t for t in old if t in cached_strings(cache)]
    kept = [d for d in DAYS if d >= cutoff]
    n = len(reads)
    warm = tables(specs, kept, cache, forget, cutoff)
    assert len(reads) == n
    assert_same(tables(specs, kept, None, forget, cutoff), warm)
    assert "expired" in warm[cutoff][1]["reason"].to_pylist()
    # a later cutoff is applied on read; an earlier one needs the dropped records: re-parse
    later = dt.date(2024, 3, 10)
    part = [d for d in DAYS if d >= later]
    assert_same(tables(specs, part, None, forget, later), tables(specs, part, cache, forget, later))
    assert len(reads) == n
    earlier = dt.date(2024, 3, 5)
    part = [d for d in DAYS if d >= earlier]
    warm = tables(specs, part, cache, forget, earlier)
    assert len(reads) == n + 2
    assert_same(tables(specs, part, None, forget, earlier), warm)


def test_forgetting_a_contact_whose_old_records_expired_re_parses(specs, reads, tmp_path):
    """An expired row keeps no conversation: whether it is now forgotten cannot be told."""
    cache = tmp_path / "cache"
    contact, _ = _sam(specs)
    cutoff = dt.date(2024, 3, 8)
    forget = ForgetList(salt=b"s" * 32)
    kept = [d for d in DAYS if d >= cutoff]
    tables(specs, kept, cache, forget, cutoff)
    forget.add("contact", contact, dt.date(2024, 4, 1))
    file_cache.scrub(cache, forget, cutoff)
    n = len(reads)
    warm = tables(specs, kept, cache, forget, cutoff)
    assert len(reads) > n
    assert_same(tables(specs, kept, None, forget, cutoff), warm)


def test_an_unreadable_entry_is_re_parsed(specs, reads, tmp_path):
    cache = tmp_path / "cache"
    tables(specs, DAYS, cache)
    for p in entries(cache):
        p.write_bytes(b"garbage")
    plain = tables(specs, DAYS)
    n = len(reads)
    assert_same(plain, tables(specs, DAYS, cache))
    assert len(reads) == n + 2
    assert pc.sum(pq.read_table(entries(cache)[0])["seq"]).as_py() > 0


def test_another_salt_re_parses(specs, reads, tmp_path):
    """Expired rows carry salted refs: a folder with a new salt cannot reuse them."""
    cache = tmp_path / "cache"
    cutoff = dt.date(2024, 3, 8)
    kept = [d for d in DAYS if d >= cutoff]
    tables(specs, kept, cache, ForgetList(salt=b"s" * 32), cutoff)
    other = ForgetList(salt=b"t" * 32)
    n = len(reads)
    warm = tables(specs, kept, cache, other, cutoff)
    assert len(reads) == n + 2
    assert_same(tables(specs, kept, None, other, cutoff), warm)
