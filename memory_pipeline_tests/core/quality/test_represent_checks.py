"""Representation checks: pass on what core.represent builds, fail on each broken table."""

from __future__ import annotations

import pyarrow as pa
import pytest

from memory_pipeline.core.quality import represent_checks as rc
from memory_pipeline.core.represent.build import embedding_texts, enrich_sessions, summarize_chunks
from memory_pipeline.core.sessions.chunking import chunk_sessions
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import series, table

REPS = ("raw_text", "summary")


@pytest.fixture(scope="module")
def built() -> dict[str, pa.Table]:
    """Two sessions of one conversation, chunked, summarized, with embedding texts and titles."""
    messages = table(
        *series("c", "2024-03-01 10:00", [1] * 12), *series("c", "2024-03-01 20:00", [1] * 3)
    )
    sessions = sessionize(messages, 180)
    chunks = chunk_sessions(sessions, messages, size=6, stride=4)
    summaries = summarize_chunks(chunks)
    return {
        "messages": messages,
        "sessions": sessions,
        "chunks": chunks,
        "summaries": summaries,
        "texts": embedding_texts(chunks, summaries),
        "enrichment": enrich_sessions(sessions, messages),
    }


def replace(t: pa.Table, name: str, values: list) -> pa.Table:
    i = t.schema.get_field_index(name)
    return t.set_column(i, t.field(i), pa.array(values, t.field(i).type))


def vectors(rows: list[tuple[str, str, list[float] | None]], error: str | None = None) -> pa.Table:
    """A chunk_embeddings-like table: (chunk_id, representation, vector or None)."""
    return pa.table(
        {
            "chunk_id": [r[0] for r in rows],
            "representation": [r[1] for r in rows],
            "dim": [len(r[2]) if r[2] is not None else 2 for r in rows],
            "vector": pa.array([r[2] for r in rows], pa.list_(pa.float32())),
            "error": [None if r[2] is not None else error for r in rows],
        }
    )


# ----------------------------------------------------------------------------- summaries


def test_summaries_cover_chunks_passes_on_built_summaries(built):
    ok, meta = rc.summaries_cover_chunks(built["summaries"], built["chunks"])
    n = built["chunks"].num_rows
    assert ok and meta == {"chunks": n, "summaries": n, "empty": 0}


def test_summaries_cover_chunks_fails_on_missing_duplicate_or_empty(built):
    summaries, chunks = built["summaries"], built["chunks"]
    ok, meta = rc.summaries_cover_chunks(summaries.slice(1), chunks)
    assert not ok and meta["summaries"] == chunks.num_rows - 1
    doubled = pa.concat_tables([summaries, summaries.slice(0, 1)])
    assert not rc.summaries_cover_chunks(doubled, chunks)[0]
    blank = replace(summaries, "summary", [" "] + summaries.column("summary").to_pylist()[1:])
    ok, meta = rc.summaries_cover_chunks(blank, chunks)
    assert not ok and meta["empty"] == 1


def test_summaries_within_target_counts_the_summaries_outside():
    good = pa.table({"within_target": [True, True]})
    assert rc.summaries_within_target(good) == (
        True,
        {"outside_length_target": 0, "summaries": 2},
    )
    bad = pa.table({"within_target": [True, False, False]})
    assert rc.summaries_within_target(bad) == (
        False,
        {"outside_length_target": 2, "summaries": 3},
    )


# ----------------------------------------------------------------------------- embedding texts


def test_embedding_texts_valid_passes_on_built_texts(built):
    ok, meta = rc.embedding_texts_valid(built["texts"], built["chunks"], built["summaries"])
    assert ok and meta == {"rows": built["chunks"].num_rows, "missing_summary_or_excerpt": 0}


def test_embedding_texts_valid_fails_without_summary_or_excerpt_or_a_row(built):
    texts, chunks, summaries = built["texts"], built["chunks"], built["summaries"]
    values = texts.column("embedding_text").to_pylist()
    other_summary = replace(summaries, "summary", ["something else"] * summaries.num_rows)
    ok, meta = rc.embedding_texts_valid(texts, chunks, other_summary)
    assert not ok and meta["missing_summary_or_excerpt"] == texts.num_rows
    cut = replace(texts, "embedding_text", [values[0][:40], *values[1:]])
    ok, meta = rc.embedding_texts_valid(cut, chunks, summaries)
    assert not ok and meta["missing_summary_or_excerpt"] == 1
    ok, meta = rc.embedding_texts_valid(texts.slice(1), chunks, summaries)
    assert not ok and meta == {"rows": texts.num_rows - 1, "missing_summary_or_excerpt": 0}


# ----------------------------------------------------------------------------- titles


def test_titles_cover_sessions_passes_on_built_enrichment(built):
    ok, meta = rc.titles_cover_sessions(built["enrichment"], built["sessions"])
    assert ok and meta == {"sessions_without_title": 0, "empty_titles": 0}


def test_titles_cover_sessions_fails_on_a_missing_or_blank_title(built):
    enrichment, sessions = built["enrichment"], built["sessions"]
    ok, meta = rc.titles_cover_sessions(enrichment.slice(1), sessions)
    assert not ok and meta == {"sessions_without_title": 1, "empty_titles": 0}
    blank = replace(enrichment, "title", ["", *enrichment.column("title").to_pylist()[1:]])
    ok, meta = rc.titles_cover_sessions(blank, sessions)
    assert not ok and meta == {"sessions_without_title": 0, "empty_titles": 1}
    doubled = pa.concat_tables([enrichment, enrichment.slice(0, 1)])
    assert not rc.titles_cover_sessions(doubled, sessions)[0]


# ----------------------------------------------------------------------------- vectors


CHUNKS = pa.table({"chunk_id": ["a", "b"]})
UNIT = [0.6, 0.8]


def test_vectors_valid_passes_on_unit_vectors_and_tolerates_provider_errors():
    good = vectors([(c, r, UNIT) for c in ("a", "b") for r in REPS])
    ok, meta = rc.vectors_valid(good, CHUNKS, REPS)
    assert ok and meta["vectors"] == 4
    assert set(meta["problems"].values()) == {0}
    # a permanently bad input is recorded (null vector + error), not fatal
    failed = vectors(
        [("a", "raw_text", None), ("a", "summary", UNIT)] + [("b", r, UNIT) for r in REPS],
        error="bad_request",
    )
    ok, meta = rc.vectors_valid(failed, CHUNKS, REPS)
    assert ok and meta["problems"]["provider_errors"] == 1


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ([("a", "raw_text", UNIT), ("a", "summary", UNIT), ("b", "raw_text", UNIT)], "missing"),
        (
            [(c, r, UNIT) for c in ("a", "b") for r in REPS] + [("x", "summary", UNIT)],
            "unexpected",
        ),
        ([(c, r, UNIT) for c in ("a", "b") for r in REPS] + [("a", "summary", UNIT)], "duplicates"),
        (
            [("a", "raw_text", [1.0, 1.0])]
            + [("a", "summary", UNIT)]
            + [("b", r, UNIT) for r in REPS],
            "norm_not_1",
        ),
        (
            [("a", "raw_text", [float("nan"), 0.0])]
            + [("a", "summary", UNIT)]
            + [("b", r, UNIT) for r in REPS],
            "nan",
        ),
    ],
)
def test_vectors_valid_fails_on_each_problem(rows, problem):
    ok, meta = rc.vectors_valid(vectors(rows), CHUNKS, REPS)
    assert not ok
    assert meta["problems"][problem] >= 1


def test_vectors_valid_fails_on_mixed_dimensions():
    rows = [(c, r, UNIT) for c in ("a", "b") for r in REPS]
    table_ = vectors(rows)
    i = table_.schema.get_field_index("dim")
    mixed = table_.set_column(i, "dim", pa.array([2, 2, 2, 3]))
    ok, meta = rc.vectors_valid(mixed, CHUNKS, REPS)
    assert not ok and meta["problems"]["dimensions"] == 1
