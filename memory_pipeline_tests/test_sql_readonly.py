"""The SQL surface (``memory-pipeline sql``, ``catalog.connect``) is read-only and confined to
the project's tables.

Before: the connection was only opened read-only, so ``COPY … TO`` overwrote a stored
partition, ``EXPORT DATABASE`` wrote anywhere and ``read_text('/etc/passwd')`` read any file.
Each hostile statement below must now be refused with one ``error:`` line and exit 2, leave
every byte of the output folder as it was and create nothing outside it, while ordinary
SELECTs over the views keep working.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memory_pipeline import cli
from memory_pipeline.core.common import catalog
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.catalog import StatementRefused, refresh_catalog
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline_tests.factories import msg, table

CONFIG = """\
[pipeline]
owner = "Me"
timezone = "UTC"
start_date = "2024-03-01"
output_dir = "out"

[[sources]]
name = "chats"
kind = "line_json"
path = "src"
"""
SECRET = "top-secret-outside-the-tables"


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> dict[str, Path]:
    """A tiny output (raw_messages on two days + a view each), a config pointing at it,
    files outside the tables that must stay unreadable, and a cwd inside the tables."""
    (tmp_path / "src").mkdir()
    (tmp_path / "m.toml").write_text(CONFIG, encoding="utf-8")
    out = tmp_path / "out"
    store = TableStore(out)
    for d in (1, 2):
        day = dt.date(2024, 3, d)
        rows = table(msg(f"{day} 10:00", "hi"), msg(f"{day} 11:00", "see you"))
        store.write(T.RAW_MESSAGES, rows, day)
    refresh_catalog(out / "warehouse.duckdb", store.parquet_root)
    (tmp_path / "secret.txt").write_text(SECRET, encoding="utf-8")
    (tmp_path / "secret.json").write_text(f'{{"s": "{SECRET}"}}', encoding="utf-8")
    (tmp_path / "other").mkdir()
    pq.write_table(pa.table({"s": [SECRET]}), tmp_path / "other" / "x.parquet")
    (out / "fingerprints").mkdir(exist_ok=True)
    (out / "fingerprints" / "note.txt").write_text(SECRET, encoding="utf-8")  # not a table
    # relative paths: from inside a table's folder, '../../../secret.txt' is tmp_path's
    monkeypatch.chdir(out / "parquet" / T.RAW_MESSAGES.name)
    return {"tmp": tmp_path, "out": out, "config": tmp_path / "m.toml"}


def _hash_tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (name -> sha256): what "untouched" means."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _hostile(tmp: Path, out: Path) -> list[str]:
    part = out / "parquet" / T.RAW_MESSAGES.name / "2024-03-01.parquet"
    tables = out / "parquet" / T.RAW_MESSAGES.name
    return [
        # writing: over a stored partition, beside it, anywhere else
        f"COPY raw_messages TO '{part}' (FORMAT parquet)",
        f"COPY (SELECT 1 AS n) TO '{tables}/2099-01-01.parquet' (FORMAT parquet)",
        f"COPY (SELECT 1 AS n) TO '{tmp}/evil.csv'",
        "COPY (SELECT 1 AS n) TO 'evil-relative.csv'",
        f"EXPORT DATABASE '{tmp}/export'",
        f"EXPORT DATABASE '{tables}' (FORMAT parquet)",
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS n) TO '{tmp}/evil-explain.csv'",
        # reading files that are not the project's tables
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_text('file:///etc/passwd')",
        f"SELECT * FROM read_blob('{tmp}/secret.txt')",
        f"SELECT * FROM read_csv('{tmp}/secret.txt')",
        f"SELECT * FROM read_json('{tmp}/secret.json')",
        f"SELECT * FROM read_parquet('{tmp}/other/x.parquet')",
        f"SELECT * FROM parquet_metadata('{tmp}/other/x.parquet')",
        f"SELECT * FROM '{tmp}/secret.txt'",
        f"SELECT * FROM read_text('{out}/fingerprints/note.txt')",
        f"SELECT * FROM read_text('{out}/parquet/../../secret.txt')",
        "SELECT * FROM read_text('../../../secret.txt')",
        "SELECT * FROM read_csv('../../../secret.txt')",
        "SELECT * FROM sniff_csv('/etc/passwd')",
        "SELECT * FROM glob('/etc/*')",
        f"SELECT * FROM glob('{tmp}/*')",
        "SELECT * FROM glob('../../../*')",
        # other databases, extensions
        f"ATTACH '{tmp}/new.duckdb' AS other",
        f"ATTACH '{tables}/new.duckdb' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        # changing the configuration back
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "RESET allowed_directories",
        f"SET allowed_directories = ['{tmp}/']",
        "SET threads = 1",
        "PRAGMA enable_profiling",
        f"SET profiling_output = '{tmp}/profile.json'",
        "CALL enable_logging()",
        # creating or changing objects (temp ones too)
        "CREATE TEMP TABLE t AS SELECT 1 AS n",
        "CREATE TEMP VIEW v AS SELECT * FROM read_text('/etc/passwd')",
        "CREATE MACRO m() AS 1",
        "DROP VIEW raw_messages",
        "INSERT INTO raw_messages SELECT * FROM raw_messages",
        # a harmless statement first
        f"SELECT 1; COPY (SELECT 1 AS n) TO '{tmp}/evil-second.csv'",
        f"SELECT * FROM query('COPY (SELECT 1 AS n) TO ''{tmp}/evil-query.csv''')",
    ]


def _run_sql(config: Path, *args: str) -> int:
    return cli.main(["--config", str(config), "sql", *args])


def test_hostile_statements_are_refused_and_touch_nothing(site, capsys):
    tmp, out = site["tmp"], site["out"]
    before, outside = _hash_tree(out), sorted(p.name for p in tmp.iterdir())
    refused = []
    for statement in _hostile(tmp, out):
        code = _run_sql(site["config"], statement)
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert code == 2, (statement, captured.out)
        assert len(lines) == 1 and lines[0].startswith("error: "), (statement, captured.err)
        assert "Traceback" not in captured.err
        assert SECRET not in captured.out + captured.err, statement
        assert "root:" not in captured.out, statement
        refused.append(lines[0])
    assert _hash_tree(out) == before  # every stored byte as it was, nothing added
    assert sorted(p.name for p in tmp.iterdir()) == outside
    assert not (out / "parquet" / T.RAW_MESSAGES.name / "evil-relative.csv").exists()
    # both layers answer: the statement check, and DuckDB's own settings for a SELECT
    assert any("COPY statements are not allowed" in r for r in refused)
    assert any("disabled by configuration" in r for r in refused)


def test_a_hostile_file_is_refused_like_an_inline_statement(site, capsys):
    part = site["out"] / "parquet" / T.RAW_MESSAGES.name / "2024-03-01.parquet"
    bad = site["tmp"] / "bad.sql"
    bad.write_text(f"-- looks harmless\nCOPY raw_messages TO '{part}' (FORMAT parquet);\n")
    before = _hash_tree(site["out"])
    assert _run_sql(site["config"], "--file", str(bad)) == 2
    assert capsys.readouterr().err.startswith("error: COPY statements are not allowed")
    assert _hash_tree(site["out"]) == before


def test_selects_over_the_views_keep_working(site, capsys):
    out = site["out"]
    ok = [
        ("SELECT count(*) AS n FROM raw_messages", "4"),
        ("FROM raw_messages SELECT count(DISTINCT conversation_id) AS c", "1"),
        ("SELECT count(*) FROM raw_messages WHERE text = $t", "2"),
        ("SHOW TABLES", "raw_messages"),
        ("DESCRIBE raw_messages", "conversation_id"),
        ("SUMMARIZE SELECT text FROM raw_messages", "text"),
        # the tables' own files are the project's tables: readable directly too (a relative
        # path resolves against the warehouse's folder)
        (f"SELECT count(*) FROM read_parquet('{out}/parquet/raw_messages/*.parquet')", "4"),
        ("SELECT count(*) FROM read_parquet('parquet/raw_messages/*.parquet')", "4"),
    ]
    for statement, expected in ok:
        params = ["-p", "t=see you"] if "$t" in statement else []
        code = _run_sql(site["config"], statement, *params)
        captured = capsys.readouterr()
        assert code == 0, (statement, captured.err)
        assert expected in captured.out, (statement, captured.out)


def test_connect_is_confined_by_duckdb_settings_not_only_by_the_statement_check(site):
    """The settings are the defence: on the raw DuckDB connection under the wrapper (no
    statement check at all), reading or writing outside the tables and undoing the
    settings still fail."""
    tmp, out = site["tmp"], site["out"]
    con = catalog.connect(out / "warehouse.duckdb")
    raw = con._con  # what a bypass of the statement check would reach
    try:
        settings = dict(
            raw.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ('access_mode', "
                "'enable_external_access', 'lock_configuration', 'autoload_known_extensions', "
                "'autoinstall_known_extensions')"
            ).fetchall()
        )
        assert settings == {
            "access_mode": "read_only",
            "enable_external_access": "false",
            "lock_configuration": "true",
            "autoload_known_extensions": "false",
            "autoinstall_known_extensions": "false",
        }
        for statement in (
            "SELECT * FROM read_text('/etc/passwd')",
            f"COPY (SELECT 1 AS n) TO '{tmp}/raw-evil.csv'",
            f"EXPORT DATABASE '{tmp}/raw-export'",
            f"ATTACH '{tmp}/raw.duckdb'",
            "SET enable_external_access = true",
            "SET lock_configuration = false",
        ):
            with pytest.raises(duckdb.Error):
                raw.execute(statement)
        assert con.execute("SELECT count(*) FROM raw_messages").fetchone() == (4,)
        with pytest.raises(StatementRefused):
            con.execute("CREATE TEMP TABLE t AS SELECT 1")
    finally:
        con.close()
    assert not list(tmp.glob("raw*"))
    with pytest.raises(ValueError):
        catalog.connect(out / "warehouse.duckdb", read_only=False)


def test_plain_duckdb_reads_the_warehouse_from_any_directory(site, tmp_path):
    """A plain ``duckdb.connect(path, read_only=True)``, in another process and another
    working directory, counts the rows: the views hold absolute paths."""
    db = site["out"] / "warehouse.duckdb"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import sys, duckdb\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(con.execute('SELECT count(*) FROM raw_messages').fetchone()[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(db)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4"
