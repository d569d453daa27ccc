"""A refresh with nothing new tokenizes nothing: chunk and turn documents come from the cache.

The turn index (two documents per message: the largest corpus a refresh indexes) used to be
tokenized from scratch on every refresh; now it goes through the token cache like the chunk
representations, and ingest re-parses no unchanged export (core/ingest/file_cache.py).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg

from memory_pipeline.core.indexes.parts import parts_root
from memory_pipeline.core.ingest.file_cache import cache_root
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import INDEX_KEYS, INGEST_KEYS, Runner, build_all

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]


def _bm25_meta(result: dg.ExecuteInProcessResult) -> dict:
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("bm25_index")
    ]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_a_second_refresh_tokenizes_nothing_and_ingest_reuses_parsed_exports(tmp_path):
    runner = Runner(ROOT / "memory_pipeline.toml", tmp_path / "out")
    build_all(runner, DAYS)
    entries = sorted(cache_root(runner.cfg.cache_path.parent).rglob("*.parquet"))
    assert len(entries) == len(runner.cfg.sources)  # one parsed-record entry per source
    stamps = [p.stat().st_mtime_ns for p in entries]
    again = _bm25_meta(runner.run(INDEX_KEYS, []))
    assert again["tokens_computed"] == 0
    assert again["turn_tokens_computed"] == 0
    # every partition's token lists come from its part file (core/indexes/parts.py), and
    # none was rewritten or pruned
    parts = sorted(parts_root(runner.cfg.cache_path.parent).rglob("*.arrow"))
    assert again["turn_tokens_cached"] == 0 and again["tokens_cached"] == 0
    assert again["turn_parts"] == again["chunk_parts"] > 0
    assert again["turn_parts_computed"] == again["chunk_parts_computed"] == 0
    assert again["turn_parts_pruned"] == again["chunk_parts_pruned"] == 0
    assert len(parts) == again["turn_parts"] + again["chunk_parts"]
    before = runner.tables()["raw_messages"]
    runner.run(INGEST_KEYS, DAYS[-2:])  # a nightly ingest: served from the entries
    assert [p.stat().st_mtime_ns for p in entries] == stamps
    assert runner.tables()["raw_messages"].equals(before)


def _lookups(runner: Runner) -> tuple:
    """The current version's chunk, message (by id) and session lookups, and whether the
    first two are links of the store's files."""
    import pyarrow.compute as pc

    from memory_pipeline.core.indexes.publish import LOOKUP_LINKS, current_version, read_lookups

    version = current_version(runner.cfg.storage_root)
    assert (version / LOOKUP_LINKS).is_dir()
    chunks, messages, sessions = read_lookups(version)
    return chunks, messages.take(pc.sort_indices(messages.column("message_id"))), sessions


def _index_files(runner: Runner) -> dict[str, bytes]:
    """The published BM25 and turn index files (the npz as arrays: zip entries carry times)
    and the store's postings table (the version no longer carries a copy)."""
    import numpy as np

    from memory_pipeline.core.indexes.publish import current_version
    from memory_pipeline.core.indexes.turns import MESSAGE_TOKENS

    version = current_version(runner.cfg.storage_root)
    out = {}
    for sub in ("bm25", "turns"):
        for p in sorted((version / sub).rglob("*")):
            if p.is_file() and p.name != MESSAGE_TOKENS:
                out[str(p.relative_to(version))] = p.read_bytes()
    with np.load(version / "turns" / MESSAGE_TOKENS) as z:
        out["indptr"], out["ids"] = z["indptr"].tobytes(), z["ids"].tobytes()
    out["postings"] = Path(runner.store.path("bm25_postings")).read_bytes()
    return out


def test_nightly_refreshes_publish_the_files_of_a_full_rebuild(tmp_path):
    """Any build order equals a full rebuild: nightly runs over D-1..D, each followed by the
    refresh (which reuses the parts of every other day), publish the very index files of one
    build over every day; so does a refresh that must recompute every part (after forget).
    That parts equal the per-document build is tested in core/indexes/test_parts.py."""
    full = Runner(ROOT / "memory_pipeline.toml", tmp_path / "full")
    build_all(full, DAYS)
    nightly = Runner(ROOT / "memory_pipeline.toml", tmp_path / "nightly")
    build_all(nightly, DAYS[:10])
    for i in range(10, len(DAYS)):
        build_all(nightly, DAYS[i - 1 : i + 1])
    meta = _bm25_meta(nightly.run(INDEX_KEYS, []))
    assert meta["turn_parts_computed"] == meta["chunk_parts_computed"] == 0
    files = _index_files(nightly)
    assert files == _index_files(full)
    # the lookups (links of the store's files) read the same rows too
    for got, want in zip(_lookups(nightly), _lookups(full), strict=True):
        assert got.equals(want)
    # the same files without any part: drop them and refresh again
    import shutil

    shutil.rmtree(parts_root(full.cfg.cache_path.parent))
    meta = _bm25_meta(full.run(INDEX_KEYS, []))
    assert meta["turn_parts_computed"] == meta["turn_parts"] > 0
    assert _index_files(full) == files
