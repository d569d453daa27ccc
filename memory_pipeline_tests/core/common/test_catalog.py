"""The warehouse for apps: refresh while a reader holds it, views that open from anywhere."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common import catalog
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.catalog import TMP_MARK, refresh_catalog

READER = textwrap.dedent(
    """
    import sys, duckdb
    db, folder = sys.argv[1], sys.argv[2]
    con = duckdb.connect(db, read_only=True, config={"file_search_path": folder})

    def views():
        q = "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
        return ",".join(r[0] for r in con.execute(q).fetchall())

    print("open", views(), flush=True)
    sys.stdin.readline()  # the test refreshes the warehouse meanwhile
    n = con.execute("SELECT count(*) FROM %s" % sys.argv[3]).fetchone()[0]
    print("after", views(), n, flush=True)
    con.close()
    """
)


def _write(root: Path, table: T.Table, rows: int, day: str = "2024-03-01") -> None:
    folder = root / "parquet" / table.name
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"n": list(range(rows))}), folder / f"{day}.parquet")


def _views(db: Path) -> list[str]:
    con = catalog.connect(db)
    try:
        q = "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
        return [r[0] for r in con.execute(q).fetchall()]
    finally:
        con.close()


def _count(db: Path, table: T.Table) -> int:
    con = catalog.connect(db)
    try:
        return con.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0]
    finally:
        con.close()


def test_refresh_succeeds_while_another_process_holds_a_read_only_connection(tmp_path: Path):
    out = tmp_path / "out"
    db = out / "warehouse.duckdb"
    _write(out, T.SESSIONS, 3)
    assert refresh_catalog(db, out / "parquet") == [T.SESSIONS.name]
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db), str(out), T.SESSIONS.name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().split() == ["open", T.SESSIONS.name]
        _write(out, T.CHUNKS, 5)  # a new table appears
        _write(out, T.SESSIONS, 4, "2024-03-02")  # and a new partition of an old one
        # DuckDB locks its file even against read-only openers: rewriting it in place
        # failed here with a lock error; the swap does not touch the reader's file
        assert refresh_catalog(db, out / "parquet") == [T.SESSIONS.name, T.CHUNKS.name]
        assert _views(db) == sorted([T.SESSIONS.name, T.CHUNKS.name])  # a new connection
        assert _count(db, T.CHUNKS) == 5
        reader.stdin.write("go\n")
        reader.stdin.flush()
        after = reader.stdout.readline().split()
        # the reader keeps the catalog it opened; its views still read today's files
        assert after == ["after", T.SESSIONS.name, "7"], reader.stderr.read()
    finally:
        reader.kill()
        reader.wait(timeout=10)
    assert reader.returncode is not None
    assert not list(out.glob(f"warehouse.duckdb{TMP_MARK}*"))


def test_moving_the_output_folder_then_refreshing_points_the_views_at_the_new_place(
    tmp_path: Path,
):
    """The views hold absolute paths (so plain DuckDB opens them from anywhere); a moved
    folder's views are rewritten by the next refresh (the warehouse asset's settings hold
    the path, see test_warehouse_fingerprint)."""
    out = tmp_path / "out"
    _write(out, T.SESSIONS, 3)
    _write(out, T.CHUNKS, 2)
    refresh_catalog(out / "warehouse.duckdb", out / "parquet")
    moved = tmp_path / "elsewhere" / "memory"
    moved.parent.mkdir()
    shutil.move(out, moved)
    assert not out.exists()
    db = moved / "warehouse.duckdb"
    refresh_catalog(db, moved / "parquet")
    assert _count(db, T.SESSIONS) == 3 and _count(db, T.CHUNKS) == 2
    con = catalog.connect(db)
    try:
        rows = con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()
        definitions = " ".join(r[0] for r in rows)
    finally:
        con.close()
    assert f"'{moved.resolve().as_posix()}/parquet/sessions/*.parquet'" in definitions
    assert f"{out.as_posix()}/" not in definitions


def test_plain_connect_works_from_any_working_directory(tmp_path: Path, monkeypatch):
    """Apps need no helper: a plain read-only connection from another directory reads the
    views (they held relative paths that resolved against the working directory)."""
    import duckdb

    out = tmp_path / "out"
    _write(out, T.SESSIONS, 3)
    refresh_catalog(out / "warehouse.duckdb", out / "parquet")
    for cwd in (tmp_path, out, Path("/")):
        monkeypatch.chdir(cwd)
        con = duckdb.connect(str(out / "warehouse.duckdb"), read_only=True)
        try:
            assert con.execute(f"SELECT count(*) FROM {T.SESSIONS.name}").fetchone()[0] == 3
        finally:
            con.close()


@pytest.mark.parametrize("name", ["o'brien", "chats[2024]", "all*", "a b"])
def test_a_folder_whose_name_is_not_plain(tmp_path: Path, name: str):
    """The absolute path is inside a SQL literal and a glob pattern: quotes and glob
    characters of the folder's name are escaped."""
    out = tmp_path / name / "out"
    _write(out, T.SESSIONS, 2)
    _write(tmp_path / f"{name}x" / "out", T.SESSIONS, 5)  # what an unescaped * would add
    refresh_catalog(out / "warehouse.duckdb", out / "parquet")
    assert _count(out / "warehouse.duckdb", T.SESSIONS) == 2


def test_refresh_drops_vanished_tables_and_leftovers(tmp_path: Path):
    out = tmp_path / "out"
    db = out / "warehouse.duckdb"
    _write(out, T.SESSIONS, 1)
    _write(out, T.CHUNKS, 1)
    refresh_catalog(db, out / "parquet")
    shutil.rmtree(out / "parquet" / T.CHUNKS.name)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    leftover = out / f"warehouse.duckdb{TMP_MARK}{dead.stdout.strip()}-0123456789ab"
    leftover.write_bytes(b"half written")
    assert refresh_catalog(db, out / "parquet") == [T.SESSIONS.name]
    assert _views(db) == [T.SESSIONS.name]
    assert not leftover.exists()
    shutil.rmtree(out / "parquet")
    assert refresh_catalog(db, out / "parquet") == [] and _views(db) == []


def test_refresh_never_removes_a_live_refreshs_temp_file(tmp_path: Path):
    """Two refreshes at once (a CLI run beside a Dagster run): each one's file is private
    until its rename. The sweep removed every ``<warehouse>.tmp-*`` before, including the
    other process's file in the middle of being written, and that run died."""
    out = tmp_path / "out"
    db = out / "warehouse.duckdb"
    _write(out, T.SESSIONS, 1)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = out / f"warehouse.duckdb{TMP_MARK}{live.pid}-0123456789ab"
        theirs.write_bytes(b"being written")
        unnamed = out / f"warehouse.duckdb{TMP_MARK}0123456789ab"  # older naming, fresh
        unnamed.write_bytes(b"being written")
        assert refresh_catalog(db, out / "parquet") == [T.SESSIONS.name]
        assert theirs.read_bytes() == b"being written"
        assert unnamed.exists()
    finally:
        live.kill()
        live.wait(timeout=10)
    refresh_catalog(db, out / "parquet")  # their process is gone now: a leftover
    assert not theirs.exists()
