"""Content-addressed cache for provider outputs (embeddings, summaries), shared by all runs.

Keyed by (provider, model, params, text hash), so the same text embedded with the same
settings is paid for once, whichever partition, run or process asks. SQLite in WAL mode
with a busy timeout lets concurrent Dagster runs read while one writes and serializes the
writers; every batch is its own committed transaction, so a run that dies halfway keeps
what finished and its retry only asks the provider for the rest.

Errors are never cached: an input the provider rejected is retried on the next run (the
provider may have been fixed, or the rejection was about the batch, not the text). The
cost is one request per still-bad text per run, which bisection keeps small.

The database must live on a local filesystem (WAL needs shared memory; no NFS).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.common.parallel import imap_tasks, is_serial
from memory_pipeline.core.represent.providers.base import Embedder, Summarizer, chunk_indices
from memory_pipeline.core.represent.providers.llm import EmptyCompletionError
from memory_pipeline.core.represent.providers.retry import is_input_error

KIND_VECTOR = "vector"
KIND_TEXT = "text"
KIND_JSON = "json"
_IN_CHUNK = 500  # hashes per SELECT ... IN (...), well under SQLite's variable limit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache_keys (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    params TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cache_entries (
    key TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    kind TEXT NOT NULL,
    dim INTEGER,
    truncated INTEGER NOT NULL DEFAULT 0,
    payload BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (key, text_hash)
) WITHOUT ROWID;
"""


def params_json(params: Mapping[str, Any]) -> str:
    """Canonical JSON of provider params (sorted keys), so dict order never splits the cache."""
    return json.dumps(
        dict(params), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )


def key_for(provider: str, model: str, params: Mapping[str, Any]) -> str:
    """Readable, stable cache key: ``provider/model/<hash of params_json>``."""
    digest = hashlib.blake2b(params_json(params).encode("utf-8"), digest_size=8).hexdigest()
    return f"{provider}/{model}/{digest}"


class ContentCache:
    """SQLite-backed store of vectors and texts keyed by (key, text_hash).

    Safe across threads (one connection per process behind a lock) and processes (WAL,
    ``BEGIN IMMEDIATE`` writes, busy timeout); reopened automatically after ``fork``.
    """

    def __init__(self, path: Path | str, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._registered: set[str] = set()
        self._connect()

    # ----------------------------------------------------------------- connection

    def _connect(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                return self._conn
            conn = sqlite3.connect(
                str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            deadline = time.monotonic() + self.timeout
            while True:  # switching to WAL needs a moment without other writers
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._conn, self._pid = conn, os.getpid()
            self._registered = set()
            return conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One committed write transaction; taken IMMEDIATE so concurrent writers queue."""
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._connect().execute(sql, tuple(args)).fetchall()

    def close(self) -> None:
        """Close this process's connection (it is reopened on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn, self._pid = None, None

    def __enter__(self) -> ContentCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """Pickles as its path (connections and locks stay behind)."""
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], timeout=state["timeout"])

    # ----------------------------------------------------------------- keys

    def key_for(self, provider: str, model: str, params: Mapping[str, Any]) -> str:
        """``key_for(...)`` that also records provider/model/params for stats and export."""
        key = key_for(provider, model, params)
        if key not in self._registered:
            with self._write() as conn:
                conn.execute(
                    "INSERT OR IGNORE INTO cache_keys(key, provider, model, params)"
                    " VALUES (?, ?, ?, ?)",
                    (key, provider, model, params_json(params)),
                )
            self._registered.add(key)
        return key

    # ----------------------------------------------------------------- vectors

    def get_vector_entries(
        self, key: str, hashes: Sequence[str]
    ) -> dict[str, tuple[np.ndarray, bool]]:
        """Cached (vector, truncated) for those of ``hashes`` that are present."""
        found: dict[str, tuple[np.ndarray, bool]] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), _IN_CHUNK):
            part = unique[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(part))
            rows = self._read(
                "SELECT text_hash, dim, truncated, payload FROM cache_entries"
                f" WHERE key = ? AND kind = '{KIND_VECTOR}' AND text_hash IN ({marks})",
                [key, *part],
            )
            for h, dim, truncated, payload in rows:
                vec = np.frombuffer(payload, dtype="<f4").astype(np.float32)
                if vec.shape[0] == dim:
                    found[h] = (vec, bool(truncated))
        return found

    def get_vectors(self, key: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached float32 vectors for those of ``hashes`` that are present."""
        return {h: vec for h, (vec, _) in self.get_vector_entries(key, hashes).items()}

    def put_vectors(
        self,
        key: str,
        hashes: Sequence[str],
        vectors: np.ndarray,
        truncated: Sequence[bool] | None = None,
    ) -> int:
        """Store rows of ``vectors`` under ``hashes`` in one transaction; returns rows written."""
        arr = np.asarray(vectors, dtype="<f4")
        if arr.ndim != 2 or arr.shape[0] != len(hashes):
            raise ValueError(f"vectors shape {arr.shape} does not match {len(hashes)} hashes")
        flags = list(truncated) if truncated is not None else [False] * len(hashes)
        now = time.time()
        dim = int(arr.shape[1])
        rows = [
            (key, h, KIND_VECTOR, dim, int(bool(t)), arr[i].tobytes(), now)
            for i, (h, t) in enumerate(zip(hashes, flags, strict=True))
        ]
        return self._put_rows(rows)

    # ----------------------------------------------------------------- texts / JSON

    def get_texts(self, key: str, hashes: Sequence[str], *, kind: str = KIND_TEXT) -> dict:
        """Cached text payloads (or JSON-decoded values for ``kind="json"``)."""
        found: dict[str, Any] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), _IN_CHUNK):
            part = unique[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(part))
            rows = self._read(
                "SELECT text_hash, payload FROM cache_entries"
                f" WHERE key = ? AND kind = ? AND text_hash IN ({marks})",
                [key, kind, *part],
            )
            for h, payload in rows:
                text = bytes(payload).decode("utf-8")
                found[h] = json.loads(text) if kind == KIND_JSON else text
        return found

    def iter_texts(self, key: str, *, kind: str = KIND_TEXT) -> Iterator[tuple[str, str]]:
        """Every (hash, text) stored under ``key``: one range scan of the primary key, for
        callers that want most of a key (an index refresh reads every chunk's tokens)."""
        rows = self._read(
            "SELECT text_hash, payload FROM cache_entries WHERE key = ? AND kind = ?",
            [key, kind],
        )
        for h, payload in rows:
            yield h, bytes(payload).decode("utf-8")

    def put_texts(
        self,
        key: str,
        items: Mapping[str, Any] | Sequence[tuple[str, Any]],
        *,
        kind: str = KIND_TEXT,
    ) -> int:
        """Store {hash: text} (or JSON-able values for ``kind="json"``) in one transaction."""
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        now = time.time()
        rows = []
        for h, value in pairs:
            text = json.dumps(value, ensure_ascii=False) if kind == KIND_JSON else str(value)
            rows.append((key, h, kind, None, 0, text.encode("utf-8"), now))
        return self._put_rows(rows)

    def get_json(self, key: str, hashes: Sequence[str]) -> dict:
        """Cached JSON payloads for those of ``hashes`` that are present."""
        return self.get_texts(key, hashes, kind=KIND_JSON)

    def put_json(self, key: str, items: Mapping[str, Any]) -> int:
        """Store JSON-able values under their hashes in one transaction."""
        return self.put_texts(key, items, kind=KIND_JSON)

    def _put_rows(self, rows: list[tuple]) -> int:
        if not rows:
            return 0
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO cache_entries"
                "(key, text_hash, kind, dim, truncated, payload, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    # ----------------------------------------------------------------- inspection

    def stats(self) -> list[dict[str, Any]]:
        """Entries and payload bytes per provider/model/kind (for run metadata)."""
        rows = self._read(
            "SELECT COALESCE(k.provider, '?'), COALESCE(k.model, '?'), e.kind,"
            " COUNT(*), SUM(LENGTH(e.payload))"
            " FROM cache_entries e LEFT JOIN cache_keys k ON k.key = e.key"
            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        )
        return [
            {"provider": p, "model": m, "kind": kind, "entries": n, "bytes": int(b or 0)}
            for p, m, kind, n, b in rows
        ]

    def export_table(self) -> pa.Table:
        """The index (no payloads) as Arrow, for the DuckDB catalog."""
        rows = self._read(
            "SELECT k.provider, k.model, k.params, e.text_hash, e.kind, e.dim, e.created_at"
            " FROM cache_entries e LEFT JOIN cache_keys k ON k.key = e.key"
            " ORDER BY e.key, e.text_hash"
        )
        cols = list(zip(*rows, strict=True)) if rows else [()] * 7
        created = [int(round(t * 1000)) for t in cols[6]]
        return pa.table(
            {
                "provider": pa.array(cols[0], pa.string()),
                "model": pa.array(cols[1], pa.string()),
                "params": pa.array(cols[2], pa.string()),
                "text_hash": pa.array(cols[3], pa.string()),
                "kind": pa.array(cols[4], pa.string()),
                "dim": pa.array(cols[5], pa.int32()),
                "created_at": pa.array(created, pa.timestamp("ms", tz="UTC")),
            }
        )


# --------------------------------------------------------------------------- cached calls


class CachedEmbeddings(NamedTuple):
    """Result of ``cached_embed``; unpacks as (vectors, hit_mask, truncated, errors)."""

    vectors: np.ndarray
    hit_mask: np.ndarray
    truncated: list[bool]
    errors: list[str | None]


class CachedSummaries(NamedTuple):
    """Result of ``cached_summarize``; unpacks as (summaries, hit_mask, errors)."""

    summaries: list[str | None]
    hit_mask: np.ndarray
    errors: list[str | None]


def embed_key_params(embedder: Embedder, input_type: str) -> dict:
    """The params that key ``embedder``'s vectors for ``input_type``.

    Embedders may say which settings matter through ``key_params(input_type)``; otherwise
    ``input_type`` is assumed to change the vector (safe, at worst a duplicate entry).
    """
    key_params = getattr(embedder, "key_params", None)
    if callable(key_params):
        return dict(key_params(input_type))
    return {**embedder.params, "input_type": input_type}


def _embed_batch(embedder: Embedder, input_type: str, texts: list[str]) -> Any:
    """One provider batch: the work unit a Dask worker runs (module level, so it pickles)."""
    return embedder.embed(texts, input_type)


def cached_embed(
    cache: ContentCache,
    embedder: Embedder,
    texts: Sequence[str],
    input_type: str = "document",
    runner: Any = None,
) -> CachedEmbeddings:
    """Vectors for ``texts``, asking the provider only for cache misses.

    Identical texts are sent once; misses go out in provider-sized batches and each batch
    is committed as soon as it returns, so an exception (exhausted retries, auth) loses at
    most the batch in flight. Rows the provider rejected get ``errors[i]`` and a zero vector
    and are not cached. ``hit_mask[i]`` is True when row i came from the cache as it was
    before this call.

    ``runner`` (a Dask client, ``core/common/parallel.py``) computes the batches on the
    cluster for a local model, in the same batches as serially (so the vectors are the
    same bits); results come back in order and are committed here, as they arrive. Remote
    providers ignore it: they are latency-bound, and ``provider_api`` limits their rate.
    """
    texts = list(texts)
    n = len(texts)
    if getattr(embedder, "remote", False):
        runner = None
    key = cache.key_for(embedder.provider, embedder.model, embed_key_params(embedder, input_type))
    hashes = [text_hash(t) for t in texts]
    hits = cache.get_vector_entries(key, hashes)

    miss_texts: dict[str, str] = {}
    for h, t in zip(hashes, texts, strict=True):
        if h not in hits and h not in miss_texts:
            miss_texts[h] = t
    miss_hashes = list(miss_texts)
    miss_list = [miss_texts[h] for h in miss_hashes]

    fresh: dict[str, tuple[np.ndarray, bool, str | None]] = {}
    if miss_list:
        planner = getattr(embedder, "plan_batches", None)
        batches = (
            planner(miss_list)
            if callable(planner)
            else chunk_indices(len(miss_list), embedder.max_batch)
        )
        work = partial(_embed_batch, embedder, input_type)
        results = imap_tasks(work, [[miss_list[j] for j in b] for b in batches], runner)
        for batch, result in zip(batches, results, strict=True):
            if not is_serial(runner):
                embedder.calls += 1  # the worker's copy counted it
            ok = [k for k, err in enumerate(result.errors) if err is None]
            if ok:
                cache.put_vectors(
                    key,
                    [miss_hashes[batch[k]] for k in ok],
                    result.vectors[ok],
                    [result.truncated[k] for k in ok],
                )
            for k, j in enumerate(batch):
                fresh[miss_hashes[j]] = (
                    result.vectors[k],
                    bool(result.truncated[k]),
                    result.errors[k],
                )

    dim = int(embedder.dim)
    vectors = np.zeros((n, dim), dtype=np.float32)
    hit_mask = np.zeros(n, dtype=bool)
    truncated = [False] * n
    errors: list[str | None] = [None] * n
    for i, h in enumerate(hashes):
        if h in hits:
            vectors[i], truncated[i] = hits[h]
            hit_mask[i] = True
        else:
            vectors[i], truncated[i], errors[i] = fresh[h]
    return CachedEmbeddings(vectors, hit_mask, truncated, errors)


def cached_summarize(
    cache: ContentCache,
    summarizer: Summarizer,
    items: Sequence[tuple[str, str]],
    *,
    workers: int = 1,
) -> CachedSummaries:
    """Summaries for ``(raw_text, lang)`` items, calling the model only for cache misses.

    Each summary is committed as soon as it returns. ``workers`` > 1 runs that many
    requests at once (remote models are latency-bound). Permanent per-item failures (a 400
    for that text, an empty completion) become ``errors[i]`` and are not cached; anything
    else (exhausted retries, auth) is raised after the running requests finish, keeping
    what finished.
    """
    items = list(items)
    n = len(items)
    keys_by_lang: dict[str, str] = {}
    for _, lang in items:
        if lang not in keys_by_lang:
            params = {**summarizer.params, "lang": lang}
            keys_by_lang[lang] = cache.key_for(summarizer.provider, summarizer.model, params)
    hashes = [text_hash(text) for text, _ in items]

    by_lang: dict[str, list[str]] = {}
    for h, (_, lang) in zip(hashes, items, strict=True):
        by_lang.setdefault(lang, []).append(h)
    hits: dict[tuple[str, str], str] = {}
    for lang, hs in by_lang.items():
        for h, text in cache.get_texts(keys_by_lang[lang], hs).items():
            hits[(lang, h)] = text

    todo: dict[tuple[str, str], str] = {}
    for h, (text, lang) in zip(hashes, items, strict=True):
        if (lang, h) not in hits and (lang, h) not in todo:
            todo[(lang, h)] = text

    fresh: dict[tuple[str, str], tuple[str | None, str | None]] = {}

    def run(item: tuple[str, str]) -> None:
        lang, h = item
        try:
            summary = summarizer.summarize(todo[item], lang)
        except Exception as exc:
            if is_input_error(exc) or isinstance(exc, EmptyCompletionError):
                fresh[item] = (None, f"{type(exc).__name__}: {exc}"[:500])
                return
            raise
        cache.put_texts(keys_by_lang[lang], {h: summary})
        fresh[item] = (summary, None)

    if workers <= 1:
        for item in todo:
            run(item)
    elif todo:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run, item) for item in todo]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for f in pending:
                f.cancel()
            for f in done:
                f.result()  # re-raise the first failure, if any

    summaries: list[str | None] = [None] * n
    hit_mask = np.zeros(n, dtype=bool)
    errors: list[str | None] = [None] * n
    for i, (h, (_, lang)) in enumerate(zip(hashes, items, strict=True)):
        if (lang, h) in hits:
            summaries[i] = hits[(lang, h)]
            hit_mask[i] = True
        else:
            summaries[i], errors[i] = fresh[(lang, h)]
    return CachedSummaries(summaries, hit_mask, errors)
