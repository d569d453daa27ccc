"""Index-version checks: pass on a real build, fail on each broken output."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.indexes.bm25 import Bm25Index
from memory_pipeline.core.indexes.publish import Bm25Build, build_bm25
from memory_pipeline.core.quality import index_checks as ic

IDS = ["c1", "c2", "c3", "c4"]
RAW = [
    "coffee at the station before work",
    "the new job starts on monday",
    "coffee again, and a latte for the walk",
    "moving house next month, boxes everywhere",
]


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[Bm25Build, dict[str, Bm25Index]]:
    folder = tmp_path_factory.mktemp("version")
    reps = {
        "raw_text": (IDS, RAW),
        "summary": (IDS, [t.split(",")[0] for t in RAW]),
        "embedding_text": (IDS, [f"Summary: {t}" for t in RAW]),
    }
    built = build_bm25(reps, folder, tokenizer="english")
    indexes = {r: Bm25Index.load(Path(folder) / "bm25" / r) for r in REPRESENTATIONS}
    return built, indexes


# ----------------------------------------------------------------------------- BM25


def test_bm25_covers_passes_on_a_build(build):
    built, _ = build
    ok, meta = ic.bm25_covers(built.stats, REPRESENTATIONS, len(IDS))
    assert ok
    assert meta["chunks"] == len(IDS) and meta["raw_text_docs"] == len(IDS)


def test_bm25_covers_fails_on_a_missing_chunk_or_an_empty_vocabulary(build):
    built, _ = build
    assert not ic.bm25_covers(built.stats, REPRESENTATIONS, len(IDS) + 1)[0]
    assert not ic.bm25_covers({**built.stats, "summary_vocabulary": 0}, REPRESENTATIONS, 4)[0]
    # an empty corpus has no vocabulary and is fine
    empty = {f"{r}_{k}": 0 for r in REPRESENTATIONS for k in ("docs", "vocabulary")}
    assert ic.bm25_covers(empty, REPRESENTATIONS, 0)[0]


def test_postings_agree_with_bm25s_on_a_build(build):
    built, indexes = build
    ok, meta = ic.postings_agree(built.postings, indexes)
    assert ok, meta
    assert meta["queries_checked"] == 20 * len(REPRESENTATIONS)
    assert meta["max_abs_difference"] < 1e-3


def test_postings_agree_fails_when_scores_drift(build):
    built, indexes = build
    scores = pc.multiply(built.postings.column("score"), pa.scalar(1.5, pa.float32()))
    i = built.postings.schema.get_field_index("score")
    drifted = built.postings.set_column(i, built.postings.field(i), scores)
    ok, meta = ic.postings_agree(drifted, indexes, samples=5)
    assert not ok
    assert meta["queries_checked"] == 5 * len(REPRESENTATIONS)
    assert meta["max_abs_difference"] > 1e-3


def test_postings_agree_fails_when_postings_lose_a_document(build):
    built, indexes = build
    post = built.postings
    kept = post.filter(pc.not_equal(post.column("chunk_id"), "c1"))
    assert not ic.postings_agree(kept, indexes)[0]


def test_postings_of_one_representation_sliced_or_filtered_alike(build):
    """The check reads a representation's rows as a slice when they are one run (as a build
    writes them) and filters otherwise (rows in any order): the same rows, the same verdict."""
    built, indexes = build
    post = built.postings
    shuffled = post.take(
        pa.array(list(range(1, post.num_rows, 2)) + list(range(0, post.num_rows, 2)))
    )
    for rep in REPRESENTATIONS:
        want = post.filter(pc.equal(post.column("representation"), rep))
        assert ic._rows_of(post, rep).equals(want)  # one run: a slice
        got = ic._rows_of(shuffled, rep)
        assert got.num_rows == want.num_rows
        assert got.sort_by([("token", "ascending"), ("chunk_id", "ascending")]).equals(
            want.sort_by([("token", "ascending"), ("chunk_id", "ascending")])
        )
    assert ic._rows_of(post, "nope").num_rows == 0
    assert ic.postings_agree(shuffled, indexes)[0]
    scores = pc.multiply(shuffled.column("score"), pa.scalar(1.5, pa.float32()))
    drifted = shuffled.set_column(shuffled.schema.get_field_index("score"), "score", scores)
    assert not ic.postings_agree(drifted, indexes, samples=5)[0]


# ----------------------------------------------------------------------------- dense


def embeddings(errors: list[str | None]) -> pa.Table:
    return pa.table(
        {
            "vector": pa.array(
                [None if e else [1.0, 0.0] for e in errors], pa.list_(pa.float32(), 2)
            ),
            "error": errors,
        }
    )


def test_vectors_indexed_passes_when_the_index_holds_every_valid_vector():
    table = embeddings([None, "bad_request", None])
    assert ic.vectors_indexed(table, {"raw_text_vectors": 1, "summary_vectors": 1, "dim": 2}) == (
        True,
        {"indexed": 2, "vectors": 2},
    )
    # no embeddings yet: nothing to index
    assert ic.vectors_indexed(None, {}) == (True, {"indexed": 0, "vectors": 0})


def test_vectors_indexed_fails_on_a_count_mismatch():
    table = embeddings([None, None])
    assert ic.vectors_indexed(table, {"raw_text_vectors": 1}) == (
        False,
        {"indexed": 1, "vectors": 2},
    )


# ----------------------------------------------------------------------------- timeline


T0 = dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def timeline(rows: list[tuple[str, dt.datetime, dt.datetime | None]]) -> pa.Table:
    return pa.table(
        {
            "memory_id": [r[0] for r in rows],
            "valid_from": pa.array([r[1] for r in rows], pa.timestamp("us", tz="UTC")),
            "valid_to": pa.array([r[2] for r in rows], pa.timestamp("us", tz="UTC")),
        }
    )


MEMORIES = pa.table({"memory_id": ["m1", "m2"]})


def test_timeline_valid_passes_on_closed_and_open_intervals():
    good = timeline([("m2", T0 + HOUR, None), ("m1", T0, T0 + HOUR)])
    assert ic.timeline_valid(MEMORIES, good) == (
        True,
        {
            "memories": 2,
            "timeline_rows": 2,
            "superseded": 1,
            "intervals_ending_before_start": 0,
        },
    )


def test_timeline_valid_fails_on_a_lost_memory_or_a_backwards_interval():
    ok, meta = ic.timeline_valid(MEMORIES, timeline([("m1", T0, None)]))
    assert not ok and meta["timeline_rows"] == 1
    ok, meta = ic.timeline_valid(MEMORIES, timeline([("m1", T0, T0 - HOUR), ("m2", T0, None)]))
    assert not ok and meta["intervals_ending_before_start"] == 1
