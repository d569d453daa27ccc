"""What keeping each layer costs on disk, per 1,000 sessions.

The Lore finding is that reading the source beats reading only extracted memories; this
report is the other side of that trade: how many bytes the raw text, each index, the vectors,
the memories and the dossiers take, normalised by sessions so corpora of different sizes
compare.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.schema import STORAGE_REPORT
from memory_pipeline.core.common.storage import TableStore, write_text_atomic
from memory_pipeline.core.common.tables import Table
from memory_pipeline.core.indexes.publish import current_version

# {table: {partition date: [file sha256, value]}} in the cache folder: each local partition's
# session count and text bytes, measured once per file content
MEASURES_FILE = "storage_report_measures.json"
# Parquet tables by category (on-disk bytes of every partition file).
TABLE_CATEGORIES: dict[Table, str] = {
    T.RAW_MESSAGES: "source",
    T.QUARANTINE: "source",
    T.SESSIONS: "derived",
    T.CHUNKS: "derived",
    T.CHUNK_SUMMARIES: "derived",
    T.EMBEDDING_TEXTS: "derived",
    T.SESSION_ENRICHMENT: "derived",
    T.CHUNK_EMBEDDINGS: "vectors",
    T.BM25_POSTINGS: "index",
    T.SESSION_META: "index",
    T.MESSAGE_META: "index",
    T.MEMORIES: "memory",
    T.MEMORY_REJECTS: "memory",
    T.MEMORY_TIMELINE: "memory",
    T.DOSSIERS: "dossier",
}


def _size(paths: list[Path]) -> tuple[int, int]:
    files = [p for p in paths if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def _tree(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*")) if folder.is_dir() else []


def _rows(part: pa.Table) -> int:
    return part.num_rows


def _text_bytes(part: pa.Table) -> int:
    """UTF-8 bytes of the messages' text (the logical size of the raw text)."""
    return int(pc.sum(pc.binary_length(part.column("text"))).as_py() or 0)


def _load_measures(book: Path) -> dict:
    try:
        data = json.loads(book.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _measured(
    store: TableStore,
    name: Table,
    columns: list[str],
    measure: Callable[[pa.Table], int],
    known: dict,
    out: dict,
) -> int:
    """The sum of ``measure`` over the partitions of ``name`` (``columns`` read). A local
    partition is measured once per content: its value is kept in ``out`` under its date
    with the file's recorded digest (a stat) and reused from ``known`` while the digest
    holds. On object storage every partition is read (a digest would download it anyway)."""
    if store.remote:
        days = store.dates(name)
        return measure(store.read(name, columns=columns)) if days else 0
    before = known.get(name.name, {})
    now: dict[str, list] = {}
    for day in store.dates(name):
        sha = store.digest(name, day)
        hit = before.get(day.isoformat())
        if isinstance(hit, list) and len(hit) == 2 and hit[0] == sha:
            now[day.isoformat()] = hit
        else:
            now[day.isoformat()] = [sha, measure(store.read(name, [day], columns=columns))]
    out[name.name] = now
    return sum(int(v) for _, v in now.values())


def storage_report(
    output_dir: Location, dossier_dir: Location, cache_dir: Path | None = None
) -> pa.Table:
    """One row per component; ``raw_text`` is the logical UTF-8 size of the message texts.

    Table and dossier sizes are listed through ``fs`` (on object storage: the objects'
    sizes); the index sizes are those of the published version's files; the provider cache
    is in ``cache_dir`` (default ``<output_dir>/cache``, a local folder)."""
    store = TableStore(output_dir)
    # only the columns used, each local file measured once (the report is refreshed after
    # every night, over every partition: reading every message's text was most of it)
    book = Path(cache_dir or Path(output_dir) / "cache") / MEASURES_FILE
    known = _load_measures(book) if not store.remote else {}
    measured: dict[str, dict[str, list]] = {}
    sessions = _measured(store, T.SESSIONS, ["session_id"], _rows, known, measured)
    text_bytes = _measured(store, T.RAW_MESSAGES, ["text"], _text_bytes, known, measured)
    if not store.remote and measured != known:
        book.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(book, json.dumps(measured, sort_keys=True))
    rows: list[tuple[str, str, int, int]] = []
    rows.append(("raw_text (UTF-8, logical)", "source", text_bytes, 0))
    for table, category in TABLE_CATEGORIES.items():
        sizes = [n for _, n in store.files(table)]
        size, files = sum(sizes), len(sizes)
        if files:
            rows.append((f"{table} (parquet)", category, size, files))
    version = current_version(output_dir)
    if version is not None:
        for rep in REPRESENTATIONS:
            size, files = _size(_tree(version / "bm25" / rep))
            if files:
                rows.append((f"bm25 index: {rep}", "index", size, files))
            dense = [p for p in _tree(version / "dense") if p.name.startswith(f"{rep}.")]
            size, files = _size(dense)
            if files:
                rows.append((f"dense index: {rep}", "vectors", size, files))
        size, files = _size([version / "memory_timeline.parquet"])
        if files:
            rows.append(("memory timeline (published)", "memory", size, files))
    sizes = [n for _, n in fs.list_files(dossier_dir, ".md")]
    size, files = sum(sizes), len(sizes)
    if files:
        rows.append(("dossier files (.md, current)", "dossier", size, files))
    size, files = _size(_tree(cache_dir or Path(output_dir) / "cache"))
    if files:
        rows.append(("provider cache", "cache", size, files))
    on_disk = sum(b for name, _, b, _ in rows if not name.startswith("raw_text")) or 1
    per = 1000.0 / sessions if sessions else 0.0
    return pa.Table.from_pylist(
        [
            {
                "component": name,
                "category": category,
                "bytes": size,
                "files": files,
                "bytes_per_1000_sessions": round(size * per, 1),
                "share": 0.0 if name.startswith("raw_text") else round(size / on_disk, 4),
            }
            for name, category, size, files in rows
        ],
        schema=STORAGE_REPORT,
    )


def markdown_table(report: pa.Table) -> str:
    """The report as a Markdown table (Dagster metadata, the CLI)."""
    lines = [
        "| component | category | bytes | per 1,000 sessions | share |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['component']} | {r['category']} | {r['bytes']:,} | "
        f"{r['bytes_per_1000_sessions']:,.0f} | {r['share']:.1%} |"
        for r in report.to_pylist()
    ]
    return "\n".join(lines)
