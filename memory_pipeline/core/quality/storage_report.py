"""What keeping each layer costs on disk, per 1,000 sessions.

The Lore finding is that reading the source beats reading only extracted memories; this
report is the other side of that trade: how many bytes the raw text, each index, the vectors,
the memories and the dossiers take, normalised by sessions so corpora of different sizes
compare.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common import fs
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.fs import Location
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.schema import STORAGE_REPORT
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.common.tables import Table
from memory_pipeline.core.indexes.publish import current_version

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


def storage_report(
    output_dir: Location, dossier_dir: Location, cache_dir: Path | None = None
) -> pa.Table:
    """One row per component; ``raw_text`` is the logical UTF-8 size of the message texts.

    Table and dossier sizes are listed through ``fs`` (on object storage: the objects'
    sizes); the index sizes are those of the published version's files; the provider cache
    is in ``cache_dir`` (default ``<output_dir>/cache``, a local folder)."""
    store = TableStore(output_dir)
    # only the columns used: the report is refreshed after every night, over every partition
    sessions = (
        store.read(T.SESSIONS, columns=["session_id"]).num_rows if store.dates(T.SESSIONS) else 0
    )
    rows: list[tuple[str, str, int, int]] = []
    texts = (
        store.read(T.RAW_MESSAGES, columns=["text"]).column("text")
        if store.dates(T.RAW_MESSAGES)
        else None
    )
    text_bytes = int(pc.sum(pc.binary_length(texts)).as_py() or 0) if texts is not None else 0
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
