"""The BM25 side of an index version: the texts each representation indexes, the bm25s
indexes and their postings (built per partition part, so a refresh re-tokenizes only what
changed), and loading them back.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.tables import CHUNKS
from memory_pipeline.core.indexes.bm25 import Bm25Index, build_index, postings
from memory_pipeline.core.indexes.bm25_text import DEFAULT_PREFIX, bm25_raw_texts
from memory_pipeline.core.indexes.publish_lookups import sorted_by
from memory_pipeline.core.indexes.token_cache import CachedTokenizer
from memory_pipeline.core.indexes.tokenize import ParallelTokenizer, Tokenizer, get_tokenizer
from memory_pipeline.core.represent.cache import ContentCache


def representation_table(
    chunks: pa.Table, summaries: pa.Table, texts: pa.Table, raw_prefix: str = DEFAULT_PREFIX
) -> dict[str, tuple[list[str], list[str]]]:
    """{representation: (chunk_ids, texts)} in chunk_id order: the texts BM25 indexes.

    ``raw_text`` is handed over with its message headers reduced as ``raw_prefix`` says
    (core/indexes/bm25_text.py: the timestamps are not content). Python lists; the refresh
    uses :func:`representation_arrays` (the same values, kept in Arrow).
    """
    arrays = representation_arrays(chunks, summaries, texts, raw_prefix)
    ids = arrays["raw_text"][0].to_pylist()
    return {rep: (ids, col.to_pylist()) for rep, (_, col) in arrays.items()}


def representation_arrays(
    chunks: pa.Table, summaries: pa.Table, texts: pa.Table, raw_prefix: str = DEFAULT_PREFIX
) -> dict[str, tuple[pa.Array, pa.Array]]:
    """:func:`representation_table` as Arrow string arrays (one ``ids`` array shared by
    every representation; a chunk without a summary or embedding text gets "").

    Why: a refresh handed ~40 MB of chunk texts from Arrow to Python lists and back to
    Arrow for the part digests, on the refresh's critical path; the joins here are hash
    lookups on the ids and one take per column."""
    chunks = sorted_by(chunks.select(["chunk_id", "raw_text"]), "chunk_id")
    ids = chunks.column("chunk_id").combine_chunks()
    raw = chunks.column("raw_text").combine_chunks()
    if raw_prefix != "full":  # bm25_raw_texts refuses an unknown prefix
        raw = pa.array(bm25_raw_texts(raw.to_pylist(), raw_prefix), pa.string())

    def joined(table: pa.Table, column: str) -> pa.Array:
        at = pc.index_in(ids, value_set=table.column("chunk_id").combine_chunks())
        taken = table.column(column).combine_chunks().take(at)
        return pc.if_else(pc.is_null(at), "", taken) if at.null_count else taken

    return {
        "raw_text": (ids, raw),
        "summary": (ids, joined(summaries, "summary")),
        "embedding_text": (ids, joined(texts, "embedding_text")),
    }


@dataclass
class Bm25Build:
    postings: pa.Table  # representation, token, chunk_id, score
    stats: dict


def build_bm25(
    reps: dict[str, tuple[Sequence[str], Sequence[str]]],
    folder: Path,
    tokenizer: str | Tokenizer = "auto",
    cache: ContentCache | None = None,
    runner: object = None,
    parts: Path | None = None,
    days: Sequence[object] | None = None,
    sources: Mapping[dt.date, str] | None = None,
) -> Bm25Build:
    """One bm25s index per representation in ``folder/bm25/<rep>``, plus their postings.

    ``auto`` picks the analyzer once, from the raw texts, so every representation and every
    query are tokenized the same way. With a ``cache``, tokens are read back by content hash
    and only texts never seen are tokenized (``token_cache.py``): a refresh after one new
    day tokenizes that day's chunks, not the corpus. With a ``runner`` (a Dask client,
    ``core/common/parallel.py``) the texts to tokenize go to the cluster in batches; the
    cache and the files stay here.

    With ``parts`` (a folder) and ``days`` (each document's partition, aligned with the ids
    every representation shares), each partition's token lists are kept as one part file
    by content hash (``parts.py``) and the matrices are built from their token ids: the same
    index files, and a refresh reads back, converts and tokenizes only changed partitions.
    ``reps`` holds Python lists or Arrow string arrays (:func:`representation_arrays`;
    ``days`` then may be a date32 array): the part files are built from Arrow either way.
    ``sources`` ({partition date: a string that decides its texts}, the caller's promise:
    defs/indexes.py gives the digests of the files the texts are read from) keys those
    partitions' parts by that string and their ids instead of hashing every text, so an
    unchanged partition's texts are not even gathered; other partitions keep the content key.
    """
    raw_texts = reps["raw_text"][1]
    # a name ("auto" samples the raw texts), or resolved by the caller (search_indexes
    # shares the analyzer with the turn index)
    named = isinstance(tokenizer, str)
    tok = get_tokenizer(tokenizer, sample_texts=raw_texts) if named else tokenizer
    work = ParallelTokenizer(tok, runner) if runner is not None else tok
    cached = CachedTokenizer(work, cache) if cache is not None else None
    tables, stats = [], {"tokenizer": tok.name}
    prebuilt = (
        _bm25_from_parts(reps, days, cached or work, Path(parts) / CHUNKS.name, stats, sources)
        if parts is not None and days is not None
        else {}
    )
    for rep, (ids, texts) in reps.items():
        index = prebuilt.get(rep) or build_index(
            _as_list(ids), _as_list(texts), tokenizer=cached or work
        )
        index.tokenizer = tok  # the index answers queries with the plain tokenizer
        index.save(folder / "bm25" / rep)
        post = postings(index)
        tables.append(
            pa.table(
                {
                    "representation": pa.repeat(pa.scalar(rep, pa.string()), post.num_rows),
                    "token": post.column("token"),
                    "chunk_id": post.column("doc_id"),
                    "score": post.column("score"),
                }
            )
        )
        stats[f"{rep}_docs"] = len(ids)
        stats[f"{rep}_vocabulary"] = len(index.vocab)
    # the postings are the store's bm25_postings table (the SQL surface), written once
    # after publish; the version's searcher counts its idf on the index itself
    table = pa.concat_tables(tables)
    stats["postings"] = table.num_rows
    if cached is not None:
        stats["tokens_cached"] = cached.hits
        stats["tokens_computed"] = cached.misses
    return Bm25Build(table, stats)


def _as_list(values: Sequence[str] | pa.Array | pa.ChunkedArray) -> list:
    """Python values of a list or an Arrow array (the per-document path takes lists)."""
    return values.to_pylist() if hasattr(values, "to_pylist") else list(values)


def _as_strings(values: Sequence[object] | pa.Array | pa.ChunkedArray) -> pa.Array:
    """A string array of Python strings or of an Arrow array (dates as ISO strings)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values if pa.types.is_string(values.type) else pc.cast(values, pa.string())
    return pa.array([v.isoformat() if isinstance(v, dt.date) else v for v in values], pa.string())


def _bm25_from_parts(
    reps: dict[str, tuple[Sequence[str], Sequence[str]]],
    days: Sequence[object],
    tokenizer: object,
    folder: Path,
    stats: dict,
    sources: Mapping[dt.date, str] | None = None,
) -> dict[str, Bm25Index]:
    """The representations' indexes from per-partition part files ({} when the inputs are
    not one id list shared by every representation, or an index has no token: the caller
    then builds per document). A partition listed in ``sources`` is keyed by its source
    string and its ids (``build_bm25``), any other by all its texts."""
    from memory_pipeline.core.indexes import parts as P
    from memory_pipeline.core.indexes.bm25 import fast_index_ids, new_retriever

    names = list(reps)
    ids = _as_strings(reps[names[0]][0])
    if (
        len(days) != len(ids)
        or not len(ids)
        or pc.count_distinct(ids).as_py() != len(ids)
        or any(
            reps[r][0] is not reps[names[0]][0] and not _as_strings(reps[r][0]).equals(ids)
            for r in names
        )
    ):
        return {}
    table = pa.table({"chunk_id": ids} | {r: _as_strings(reps[r][1]) for r in names})
    day_col = _as_strings(days)
    identity = {"kind": CHUNKS.name, "tokenizer": tokenizer.name, "params": tokenizer.params}
    built, keys, computed, by_files = [], [], 0, 0
    # partitioned by row position only: a partition's texts are gathered (a copy of every
    # text: most of a warm refresh's main thread with the hash) only when it is keyed by
    # content or computed
    positions = pa.table({"row": pa.array(np.arange(len(ids), dtype=np.int64)), "day": day_col})
    for label, at in P.by_partition(positions, "day"):
        day = dt.date.fromisoformat(label) if label is not None else None
        source = sources.get(day) if sources is not None and day is not None else None
        rows = None
        if source is not None:
            part_ids = table.column("chunk_id").take(at.column("row"))
            files = [identity, names, {"texts": "files"}]
            key = P.part_key(day, P.digest(files, [part_ids, pa.array([source], pa.string())]))
            by_files += 1
        else:
            rows = table.take(at.column("row"))
            key = P.part_key(
                day, P.digest([identity, names], [rows.column(c) for c in table.column_names])
            )
        part = P.read_part(folder, key)
        if part is None:
            rows = rows if rows is not None else table.take(at.column("row"))
            part = pa.table(
                {"chunk_id": rows.column("chunk_id")}
                | {
                    r: P.token_list_array(tokenizer.tokenize_many(rows.column(r).to_pylist()))
                    for r in names
                }
            )
            P.write_part(folder, key, part)
            computed += 1
        built.append(part)
        keys.append(key)
    whole = pa.concat_tables(built)
    order = pc.sort_indices(whole, [("chunk_id", "ascending")])
    if not whole.column("chunk_id").take(order).combine_chunks().equals(ids):
        return {}
    # documents in chunk_id order as ranges of token codes (a take of the token lists
    # copied every token string): the same token sequence, so the same first-seen ids
    order = order.to_numpy(zero_copy_only=False)
    out, doc_ids = {}, ids.to_pylist()
    for r in names:
        lists = whole.column(r).combine_chunks()
        encoded = pc.list_flatten(lists).dictionary_encode()
        part_lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
        part_lengths = part_lengths.astype(np.int64)
        starts = np.cumsum(part_lengths) - part_lengths
        lengths = part_lengths[order]
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes = codes[P.gather_ranges(starts[order], lengths)]
        vocab, rank = P.first_seen_ids(codes, encoded.dictionary)
        retriever = new_retriever()
        if not fast_index_ids(retriever, vocab, rank[codes], lengths):
            return {}
        out[r] = Bm25Index(doc_ids=list(doc_ids), tokenizer=tokenizer, retriever=retriever)
    stats["chunk_parts"] = len(keys)
    stats["chunk_parts_computed"] = computed
    stats["chunk_parts_keyed_by_files"] = by_files
    stats["chunk_parts_pruned"] = P.prune(folder, keys)
    return out


def load_bm25(version: Path, reps: Sequence[str] = REPRESENTATIONS) -> dict[str, Bm25Index]:
    """The BM25 indexes of a published version (memory-mapped)."""
    return {
        r: Bm25Index.load(version / "bm25" / r, mmap=True)
        for r in reps
        if (version / "bm25" / r).is_dir()
    }
