"""Published search indexes: BM25 per representation, dense matrices (+ HNSW), time metadata,
and the chunk and message lookups a search reads.

A build writes a new version folder and then swaps ``CURRENT`` (one atomic rename), so a
reader (the search API, the CLI) sees either the previous complete version or the new one,
never a half-written index. The last two versions are kept.

On object storage (an ``s3://`` output) there is no rename: a version is built in a local
staging folder, uploaded file by file under ``indexes/<version>/``, then its
``MANIFEST.json`` (every file and its size) is written, and ``CURRENT`` *last*. A reader
follows ``CURRENT`` to a version that has a manifest, downloads it into a local cache
folder (``fs.cache_dir``), checks every file against the manifest and only then loads it;
an interrupted publish leaves ``CURRENT`` naming the previous version, and a version
without a manifest is never read. Versions are immutable, so a cached copy stays valid.

A version is self-contained: the searcher reads only its folder, never the live ``chunks``
and ``raw_messages`` tables, so a session re-chunked (or a table rewritten) after the build
cannot make index N point at rows of N+1.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.storage import link_partitions, read_files, still_linked
from memory_pipeline.core.common.tables import CHUNKS, RAW_MESSAGES
from memory_pipeline.core.indexes import hnsw as H
from memory_pipeline.core.indexes.bm25 import Bm25Index, build_index, postings
from memory_pipeline.core.indexes.bm25_text import DEFAULT_PREFIX, bm25_raw_texts
from memory_pipeline.core.indexes.ivf import build_ivf, save_ivf
from memory_pipeline.core.indexes.segments import (
    DensePart,
    RepRows,
    SplitChunk,
    assemble,
    same_as_previous,
)
from memory_pipeline.core.indexes.token_cache import CachedTokenizer
from memory_pipeline.core.indexes.tokenize import ParallelTokenizer, Tokenizer, get_tokenizer
from memory_pipeline.core.represent.cache import ContentCache

CURRENT = "CURRENT"
MANIFEST = "MANIFEST.json"  # object storage: written after a version's files, before CURRENT
KEEP_VERSIONS = 2
# the lookups of a version (files inside its folder) and the columns search reads from them
CHUNK_LOOKUP = "chunks.parquet"
MESSAGE_LOOKUP = "messages.parquet"
SESSION_LOOKUP = "session_meta.parquet"
CHUNK_LOOKUP_COLUMNS = (
    "chunk_id",
    "session_id",
    "chunk_index",
    "conversation_id",
    "contact_id",
    "speakers",
    "message_ids",
    "raw_text",
    "start_ts",
    "end_ts",
)
MESSAGE_LOOKUP_COLUMNS = ("message_id", "sender", "local_ts", "text", "source_ref")
# The lookups as links (a local store): ``<version>/lookup/{chunks,raw_messages}/<date>.parquet``
# are hard links of the store's partition files the version was built from (link_lookups);
# the two files above are written instead on object storage and by older versions.
LOOKUP_LINKS = "lookup"


def index_root(output_dir: Location) -> Location:
    return fs.join(output_dir, "indexes")


def new_version(root: Location) -> Path:
    """A fresh, private folder to build the next version in (local staging for a remote
    root: the build tools write local files; ``publish`` uploads them)."""
    name = f"v-{uuid.uuid4().hex[:12]}"
    if fs.is_remote(root):
        path = fs.cache_dir(root) / "staging" / name
        path.mkdir(parents=True)
        return path
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.mkdir()
    return path


def publish(root: Location, version: Path) -> None:
    """Make ``version`` current atomically, then drop versions older than the last two."""
    if fs.is_remote(root):
        _publish_remote(str(root), Path(version))
        return
    root = Path(root)
    tmp = root / f".{CURRENT}.{uuid.uuid4().hex}"
    tmp.write_text(version.name, encoding="utf-8")
    os.replace(tmp, root / CURRENT)
    versions = sorted((p for p in root.glob("v-*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for old in versions[:-KEEP_VERSIONS]:
        if old.name != version.name:
            shutil.rmtree(old, ignore_errors=True)


def _publish_remote(root: str, version: Path) -> None:
    """Upload, manifest, then pointer; then delete complete versions other than the new and
    the previous one. The staging folder becomes the local cached copy of the version."""
    previous = _pointer(root)
    remote = fs.join(root, version.name)
    files = fs.upload_tree(version, remote)
    manifest = {"version": version.name, "files": dict(files)}
    fs.write_text_atomic(fs.join(remote, MANIFEST), json.dumps(manifest, sort_keys=True))
    fs.write_text_atomic(fs.join(root, CURRENT), version.name)  # the commit point
    for name in fs.list_dirs(root):
        if name.startswith("v-") and name not in (version.name, previous):
            # only complete versions: one without a manifest may be another run's upload
            if fs.is_file(fs.join(root, name, MANIFEST)):
                fs.delete_tree(fs.join(root, name))
    cached = fs.cache_dir(root) / "versions" / version.name
    (version / MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        os.replace(version, cached)
    _prune_cache(root, keep={version.name, previous or ""})


def _pointer(root: Location) -> str | None:
    try:
        return fs.read_text(fs.join(root, CURRENT)).strip() or None
    except FileNotFoundError:
        return None


def current_version(output_dir: Location) -> Path | None:
    """The published version folder, or None before the first index build (for a remote
    output: a verified local copy of it)."""
    root = index_root(output_dir)
    if fs.is_remote(root):
        return _fetch_remote(str(root))
    try:
        name = (Path(root) / CURRENT).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    path = Path(root) / name
    return path if path.is_dir() else None


def _fetch_remote(root: str) -> Path | None:
    """The local copy of the version ``CURRENT`` names, downloaded and checked against its
    manifest on first use (into a temp folder renamed into place: a reader never loads a
    half-downloaded copy); None when nothing complete is published."""
    name = _pointer(root)
    if name is None:
        return None
    try:
        manifest = json.loads(fs.read_text(fs.join(root, name, MANIFEST)))
    except FileNotFoundError:
        return None
    cached = fs.cache_dir(root) / "versions" / name
    if cached.is_dir():
        return cached
    tmp = cached.with_name(f".{name}.{uuid.uuid4().hex}")
    try:
        got = dict(fs.download_tree(fs.join(root, name), tmp))
        got.pop(MANIFEST, None)
        if got != manifest["files"]:
            raise OSError(f"index version {name} under {root} does not match its manifest")
        try:
            os.replace(tmp, cached)
        except OSError:  # another reader renamed its copy first
            if not cached.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune_cache(root, keep={name})
    return cached


def _prune_cache(root: str, keep: set[str]) -> None:
    """Drop local copies of versions no longer published (they hold forgotten data too)."""
    folder = fs.cache_dir(root) / "versions"
    for p in folder.glob("v-*") if folder.is_dir() else []:
        if p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)


def drop_local_copies(root: Location) -> None:
    """Delete every local copy and staging folder of a remote index root (forget: the
    copies hold the contact's texts); nothing for a local root."""
    if fs.is_remote(root):
        for sub in ("versions", "staging"):
            shutil.rmtree(fs.cache_dir(root) / sub, ignore_errors=True)


def list_versions(root: Location) -> list[Location]:
    """Every version folder under ``root`` (complete or not), by name."""
    if not fs.is_remote(root):
        root = Path(root)
        return sorted(p for p in root.glob("v-*") if p.is_dir()) if root.is_dir() else []
    return [fs.join(root, n) for n in fs.list_dirs(root) if n.startswith("v-")]


def sorted_by(table: pa.Table, column: str) -> pa.Table:
    """``table.sort_by(column)``, or ``table`` itself when it is in that order already (no
    nulls, non-decreasing: the stable sort would give the same rows).

    Why: sorting takes every column; the chunks carry ~50 MB of text, and a refresh sorts
    them once by id for the lookups, the representations and the analyzer sample instead of
    once each (copies that held the main thread of the refresh)."""
    col = table.column(column)
    n = len(col)
    if n < 2 or (
        col.null_count == 0 and pc.all(pc.less_equal(col.slice(0, n - 1), col.slice(1))).as_py()
    ):
        return table
    return table.sort_by(column)


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


ANN_KINDS = ("hnsw", "ivf")  # the graph's code and parameters: hnsw.py


# the chunk_embeddings columns build_dense reads (the vectors are ~93 % of the table's bytes,
# but the rest is decoded on every refresh too when read)
DENSE_COLUMNS = ("chunk_id", "representation", "piece", "provider", "model", "dim", "vector")


def build_dense(
    embeddings: pa.Table | Sequence[DensePart],
    folder: Path,
    hnsw_threshold: int = 50_000,
    ann_kind: str = "hnsw",
    previous: Path | None = None,
) -> dict:
    """Per representation: an (n, dim) float32 matrix (exact search), and an approximate
    index when n >= ``hnsw_threshold``: the HNSW graph (``ann_kind="hnsw"``, usearch, int8,
    re-scored exactly) or an IVF index (``"ivf"``, ``ivf.py``: faster to build, lower recall
    on USE vectors; kept for measurement). Rows with a provider error are left out. A chunk
    whose text exceeded the model window has one row per piece (its id repeats in
    ``<rep>.ids.json``; search scores it by its best piece). The metadata records provider,
    model, dimension and, for a packaged local model, its window, so queries are embedded by
    the same model.

    ``embeddings`` is one table (its rows in (chunk_id, piece) order, one segment) or the
    stored partitions as :class:`~memory_pipeline.core.indexes.segments.DensePart` (monthly
    segments, ``segments.py``): with ``previous`` (the published version folder, only read)
    a refresh decodes and writes only the changed days, and a representation whose previous
    graph was built alike is updated from it (the new and gone pieces only) instead of
    rebuilt: the nightly refresh adds ~1 % of the pieces. ``<rep>_ann_build`` in the stats
    says which ("full"/"incremental", with the counts and, for a full build, why)."""
    from memory_pipeline.core.represent.providers.factory import local_model_info

    if ann_kind not in ANN_KINDS:
        raise ValueError(f"ann_kind must be one of {ANN_KINDS}, got {ann_kind!r}")
    dense = folder / "dense"
    dense.mkdir(parents=True, exist_ok=True)
    if isinstance(embeddings, pa.Table):
        table = embeddings
        parts = [DensePart("all", None, lambda: table)]
    else:
        parts = list(embeddings)
    try:
        rows, stats = assemble(parts, dense, previous, H.piece_keys)
    except SplitChunk:  # a chunk in two partitions: one table, one segment, as before parts
        for stale in dense.iterdir():
            stale.unlink()
        table = pa.concat_tables([p.load() for p in parts]) if parts else None
        rows, stats = assemble([DensePart("all", None, lambda: table)], dense, None, H.piece_keys)
    meta = {}
    for rep, r in sorted(rows.items()):
        (dense / f"{rep}.ids.json").write_text(json.dumps(r.ids), encoding="utf-8")
        np.save(dense / f"{rep}{H.KEYS_SUFFIX}", r.keys)
        ann = None
        if len(r.ids) >= hnsw_threshold:  # too big to scan per query
            t0, c0 = time.perf_counter(), time.process_time()
            if ann_kind == "ivf":
                ann = save_ivf(build_ivf(np.asarray(r.matrix)), dense, rep)
            else:
                ann = _dense_graph(r, dense, rep, previous)
                shown = ("build", "added", "removed", "removed_since_full", "pending")
                shown += ("full_reason",)
                stats |= {f"{rep}_ann_{k}": ann[k] for k in shown if k in ann}
            stats[f"{rep}_ann_build_s"] = round(time.perf_counter() - t0, 3)
            stats[f"{rep}_ann_build_cpu_s"] = round(time.process_time() - c0, 3)
        info = local_model_info(r.model) if r.provider == "local" else None
        meta[rep] = {
            "count": len(r.ids),
            "chunks": len(set(r.ids)),
            "split_chunks": _split_chunks(r.ids),
            "dim": r.dim,
            "provider": r.provider,
            "model": r.model,
            "window": info[1] if info else None,
            "hnsw": bool(ann) and ann["kind"] == "hnsw",
            "ann": ann,
        }
        stats[f"{rep}_vectors"] = len(r.ids)
    (dense / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    stats["hnsw_threshold"] = hnsw_threshold
    return stats


def _split_chunks(ids: Sequence[str]) -> int:
    """Chunks with more than one piece (a chunk's pieces are consecutive rows): the runs
    of equal ids longer than one, counted on whole columns (a Python loop over every piece
    held the GIL for the other threads of the refresh)."""
    same = same_as_previous(pa.array(ids, pa.string()))
    # a run starts where a row equals the one before and that one did not equal its own
    starts = same.copy()
    starts[1:] &= ~same[:-1]
    return int(starts.sum())


def _dense_graph(r: RepRows, dense: Path, rep: str, previous: Path | None) -> dict:
    """``rep``'s HNSW graph with stable piece keys, carried over from ``previous`` when it
    can be (``hnsw.save_graph``: same parameters and identity, i.e. provider, model and
    dim; only the rows decoded this build are compared); returns the ann metadata. Keys
    that collide (a repeated (chunk_id, piece)) fall back to row keys and a full build, as
    before stable keys."""
    if len(np.unique(r.keys)) != len(r.keys):
        (dense / f"{rep}{H.KEYS_SUFFIX}").unlink(missing_ok=True)
        ann = H.save_full(r.matrix, dense / f"{rep}.usearch")
        return ann | {"build": "full", "full_reason": "duplicate piece keys"}
    identity = {"dim": r.dim, "provider": r.provider, "model": r.model}
    prev, why = H.usable_previous(previous, rep, identity)
    ann = H.save_graph(r.matrix, r.keys, dense / f"{rep}.usearch", prev, r.fresh)
    return ann | {"full_reason": why} if prev is None else ann


def write_lookups(version: Path, chunks: pa.Table, messages: pa.Table) -> dict:
    """Write the chunk and message lookups search needs into the version folder (call before
    ``publish``): the chunks that were indexed, in chunk_id order, and every message with
    the fields hits show (sender, local time, text, source_ref)."""
    chunk_rows = sorted_by(chunks.select(list(CHUNK_LOOKUP_COLUMNS)), "chunk_id")
    message_rows = messages.select(list(MESSAGE_LOOKUP_COLUMNS)).sort_by("message_id")
    pq.write_table(chunk_rows, version / CHUNK_LOOKUP, compression="zstd")
    pq.write_table(message_rows, version / MESSAGE_LOOKUP, compression="zstd")
    return {"lookup_chunks": chunk_rows.num_rows, "lookup_messages": message_rows.num_rows}


def link_lookups(version: Path, store: Any) -> dict[str, dict[str, tuple]] | None:
    """Hard-link the store's ``chunks`` and ``raw_messages`` files into ``version/lookup``
    (call before reading them for the build); {table: {file: identity}} for
    :func:`finish_lookups`, or None (nothing linked) where links cannot be made.

    Why: the lookups are the rows the version was built from. Written as copies (sorted,
    zstd) they were ~1.1 CPU s of every refresh's ~10 for ~36 MB of Parquet that the store
    already holds; a link of each immutable partition file costs a directory entry."""
    links = version / LOOKUP_LINKS
    out: dict[str, dict[str, tuple]] = {}
    for t in (CHUNKS, RAW_MESSAGES):
        linked = link_partitions(store, t, links / t.name)
        if linked is None:
            shutil.rmtree(links, ignore_errors=True)
            return None
        out[t.name] = linked
    return out


def finish_lookups(
    version: Path,
    store: Any,
    linked: Mapping[str, dict[str, tuple]] | None,
    chunks: pa.Table,
    messages: pa.Table,
) -> dict:
    """The version's lookups once ``chunks`` and ``messages`` (every stored row) are read:
    the links of :func:`link_lookups` when the store's files are still the linked ones (so
    the links hold exactly the rows read), else copies (:func:`write_lookups`)."""
    if linked is not None and all(
        still_linked(store, t, linked[t.name]) for t in (CHUNKS, RAW_MESSAGES)
    ):
        return {
            "lookup_chunks": chunks.num_rows,
            "lookup_messages": messages.num_rows,
            "lookups_linked": True,
        }
    shutil.rmtree(version / LOOKUP_LINKS, ignore_errors=True)
    return write_lookups(version, chunks, messages) | {"lookups_linked": False}


def has_lookups(version: Path) -> bool:
    """Whether the version carries its lookups (versions built before they existed do not)."""
    linked = (version / LOOKUP_LINKS).is_dir()
    return (version / SESSION_LOOKUP).is_file() and (
        linked or all((version / f).is_file() for f in (CHUNK_LOOKUP, MESSAGE_LOOKUP))
    )


def read_lookups(version: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(chunks in chunk_id order, messages, session metadata) of a published version."""
    links = version / LOOKUP_LINKS
    if links.is_dir():
        chunks = _linked(links, CHUNKS, CHUNK_LOOKUP_COLUMNS).sort_by("chunk_id")
        messages = _linked(links, RAW_MESSAGES, MESSAGE_LOOKUP_COLUMNS)
    else:
        chunks = pq.read_table(version / CHUNK_LOOKUP).sort_by("chunk_id")
        messages = pq.read_table(version / MESSAGE_LOOKUP)
    sessions = pq.read_table(version / SESSION_LOOKUP)
    return chunks, messages, sessions


def _linked(links: Path, t: Any, columns: Sequence[str]) -> pa.Table:
    """``columns`` of the partition files linked for table ``t``, in date order."""
    return read_files(sorted((links / t.name).glob("*.parquet")), t, columns)


def load_bm25(version: Path, reps: Sequence[str] = REPRESENTATIONS) -> dict[str, Bm25Index]:
    """The BM25 indexes of a published version (memory-mapped)."""
    return {
        r: Bm25Index.load(version / "bm25" / r, mmap=True)
        for r in reps
        if (version / "bm25" / r).is_dir()
    }
