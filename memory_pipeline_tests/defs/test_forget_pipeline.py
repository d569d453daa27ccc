"""Forgetting a contact of the bundled sample: no trace anywhere, durable, the rest intact.

The scan decodes what a byte scan cannot see: Parquet through pyarrow (every column, nested
lists included), DuckDB and SQLite files through their readers (every table, every column);
every other file (and the database files too) as raw UTF-8 bytes. It runs over the output
folder (tables, index versions, provider cache, warehouse, evaluation), the dossier folder
and DAGSTER_HOME, and it is shown to find the texts before the forget.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import re
import shutil
import sqlite3
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import memory_pipeline
from memory_pipeline import cli
from memory_pipeline.core.common import catalog
from memory_pipeline.core.common import records as R
from memory_pipeline.core.privacy.forget import apply_forget
from memory_pipeline.defs.forget import plan_for
from memory_pipeline.defs.forget_run import rebuild_after_forget
from memory_pipeline_tests.paths import ROOT, SAMPLE
from memory_pipeline_tests.pipeline_helpers import Runner, write_config

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
CONTACT = "Sam"
SAM_FILE = Path("line_txt") / "sam.txt"


def _leaves(value: object):
    """Every string inside a (nested) Python value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield str(value)


def _decoded(path: Path) -> list[str]:
    """The file's content as text: through its reader when it has one, plus its raw bytes."""
    raw = path.read_bytes()
    out = [raw.decode("utf-8", "replace")]
    if path.suffix == ".parquet":
        t = pq.read_table(path)
        out.extend(s for col in t.columns for s in _leaves(col.to_pylist()))
    elif raw.startswith(b"SQLite format 3\x00"):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = [
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for name in tables:
                for row in con.execute(f'SELECT * FROM "{name}"'):
                    out.extend(_leaves(list(row)))
        finally:
            con.close()
    elif path.suffix == ".duckdb":
        # the warehouse through the apps' confined connection (it reads only the tables'
        # folder beside it); another DuckDB file (eval's) directly
        if path.name == "warehouse.duckdb":
            con = catalog.connect(path)
        else:
            con = duckdb.connect(str(path), read_only=True)
        try:
            names = [
                r[0]
                for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
            ]
            for name in names:
                for row in con.execute(f'SELECT * FROM "{name}"').fetchall():
                    out.extend(_leaves(list(row)))
        finally:
            con.close()
    return out


def scan(roots: list[Path], texts: set[str]) -> dict[str, list[str]]:
    """file -> the texts found in it (decoded); empty when no file holds any."""
    needles = sorted(t for t in texts if len(t) >= 8)
    hits: dict[str, list[str]] = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            blob = "\x00".join(_decoded(path))
            found = [t for t in needles if t in blob]
            if found:
                hits[str(path)] = found
    return hits


def _project(root: Path, *, without_sam: bool) -> Path:
    shutil.copytree(SAMPLE, root / "data" / "sample")
    if without_sam:
        (root / "data" / "sample" / SAM_FILE).unlink()
    write_config(root, (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8"))
    return root / "memory_pipeline.toml"


def _full_build(runner: Runner, instance: dg.DagsterInstance) -> None:
    for keys in (
        ["raw_messages", "quarantine", "ingest_audit"],
        ["sessions"],
        ["chunks"],
        ["chunk_summaries", "embedding_texts", "session_enrichment"],
        ["chunk_embeddings"],
        ["memories", "dossiers"],
    ):
        runner.run(keys, DAYS, instance=instance)
    assert rebuild_after_forget(runner.cfg, instance, runner.providers)


class Built:
    """The sample's project in ``root``, with a Dagster instance in ``root/dagster_home``.

    ``in_memory=True`` gives an in-memory instance instead (one for every run of the build,
    its history kept in this process): for builds whose event log no test reads. Writing the
    events of a build to SQLite files in DAGSTER_HOME costs about as much as the build itself
    (Dagster opens an engine and commits per event); the assets never read the instance, so
    the tables are the same either way."""

    def __init__(self, root: Path, *, without_sam: bool = False, in_memory: bool = False) -> None:
        self.root = root
        self.home = root / "dagster_home"
        self.home.mkdir()
        self.instance = (
            dg.DagsterInstance.ephemeral()
            if in_memory
            else dg.DagsterInstance.local_temp(str(self.home))
        )
        self.config = _project(root, without_sam=without_sam)
        # the config's own output folder, so the CLI and the API see the same build
        self.runner = Runner(self.config, root / "data" / "output")
        self.cfg = self.runner.cfg

    def roots(self) -> list[Path]:
        return [
            self.cfg.output_dir,
            self.cfg.dossiers_path,
            self.cfg.cache_path.parent,
            self.home,
            self.cfg.state_root,  # the forget list and its salt: hashes only
        ]


def _tree(roots: list[Path]) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for r in roots for p in sorted(r.rglob("*")) if p.is_file()}


def _cli(config: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--config", str(config), *args])
    return code, out.getvalue(), err.getvalue()


def _cache_hits(path: Path, hashes: set[str]) -> int:
    con = sqlite3.connect(str(path))
    try:
        return sum(1 for (h,) in con.execute("SELECT text_hash FROM cache_entries") if h in hashes)
    finally:
        con.close()


@pytest.fixture(scope="module")
def forgotten(tmp_path_factory):
    """The sample built, scanned, Sam forgotten, scanned, rebuilt from the same exports."""
    b = Built(tmp_path_factory.mktemp("forget"))
    _full_build(b.runner, b.instance)
    msgs = b.runner.store.read("raw_messages")
    msgs = msgs.filter(pc.equal(msgs["type"], "text"))  # not media markers like [Sticker]
    mine = msgs.filter(pc.equal(msgs["contact_id"], CONTACT))
    assert mine.num_rows > 5
    b.texts = set(mine["text"].to_pylist())
    b.all_texts = set(msgs["text"].to_pylist())
    b.before = scan(b.roots(), b.texts)
    b.home_before = scan([b.home], b.all_texts)
    snapshot = _tree(b.roots())
    b.dry_run = _cli(b.config, "forget", "--contact", "Sam")
    b.api_dry_run = memory_pipeline.forget(contact="Sam", config=b.config, dry_run=True)
    b.unknown = _cli(b.config, "forget", "--contact", "Nobody")
    after_dry_run = _tree(b.roots())
    b.changed = sorted(
        k for k in set(snapshot) | set(after_dry_run) if snapshot.get(k) != after_dry_run.get(k)
    )
    plan = plan_for(b.cfg, "sam")  # display name, any case
    b.plan_lines = plan.summary_lines()
    b.dossier_files = plan.dossier_files
    b.cache_hits_before = _cache_hits(b.cfg.cache_path, plan.text_hashes)
    apply_forget(plan)
    b.cache_hits_after = _cache_hits(b.cfg.cache_path, plan.text_hashes)
    assert rebuild_after_forget(b.cfg, b.instance, b.runner.providers)
    b.after = scan(b.roots(), b.texts)
    b.tables_after = b.runner.tables()
    b.listed = _cli(b.config, "forget", "--list")
    # the most common reset: delete the whole output, then build from the same exports again;
    # the forget list is in the state folder beside it, so they stay forgotten
    b.state_files = sorted(p.name for p in b.cfg.state_root.rglob("*") if p.is_file())
    shutil.rmtree(b.cfg.output_dir)
    _full_build(b.runner, b.instance)
    b.rerun = scan(b.roots(), b.texts)
    b.tables_rerun = b.runner.tables()
    return b


@pytest.fixture(scope="module")
def never_had_sam(tmp_path_factory) -> Built:
    # its tables are compared and its runs are not scanned: the instance can be in memory
    b = Built(tmp_path_factory.mktemp("no_sam"), without_sam=True, in_memory=True)
    _full_build(b.runner, b.instance)
    return b


def test_the_scan_finds_the_contacts_texts_before_the_forget(forgotten):
    found = set(forgotten.before)
    # in the tables, an index version, the provider cache, the warehouse and the dossier file
    assert any("/parquet/raw_messages/" in f for f in found)
    assert any("/indexes/v-" in f for f in found)
    # the offline cache holds vectors only: its entries are found by the texts' hashes
    assert forgotten.cache_hits_before > 0
    # the dossier paraphrases: its file is checked by name (it existed, then it is gone)
    assert [p.name for p in forgotten.dossier_files] == ["Sam.md"]


def test_after_forget_no_file_holds_any_of_their_texts(forgotten):
    assert forgotten.after == {}
    assert forgotten.cache_hits_after == 0
    assert not [p for p in forgotten.dossier_files if p.exists()]
    assert (forgotten.cfg.output_dir / "indexes" / "CURRENT").is_file()  # search works again


def test_deleting_the_output_and_rerunning_keeps_them_forgotten(forgotten):
    """Every byte of the rebuilt output, the dossiers, the instance and the state is
    scanned; the rebuilt tables equal the ones the forget left."""
    assert {"forget_list.json", "forget_salt", "FORMAT.json"} <= set(forgotten.state_files)
    assert not (forgotten.cfg.output_dir / "privacy" / "forget_salt").exists()
    assert forgotten.rerun == {}
    assert forgotten.tables_rerun.keys() == forgotten.tables_after.keys()
    for name, t in forgotten.tables_after.items():
        assert forgotten.tables_rerun[name].equals(t), name


def test_forgotten_records_are_counted_and_carry_no_text(forgotten):
    t = forgotten.tables_rerun
    q = t["quarantine"].filter(pc.equal(t["quarantine"]["reason"], R.R_FORGOTTEN))
    assert q.num_rows >= len(forgotten.texts)
    assert set(q["raw"].to_pylist()) == {""} and set(q["source_file"].to_pylist()) == {""}
    audit = t["ingest_audit"]
    read = pc.sum(audit["records_read"]).as_py()
    assert read == pc.sum(audit["ingested"]).as_py() + pc.sum(audit["quarantined"]).as_py()


def _without_forgotten(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The forget build's tables as a build that never read the contact would have them."""
    out = dict(tables)
    q = tables["quarantine"]
    forgot = pc.equal(q["reason"], R.R_FORGOTTEN)
    out["quarantine"] = q.filter(pc.invert(forgot))
    counts: dict[tuple, int] = {}
    for r in q.filter(forgot).select(["partition_date", "source"]).to_pylist():
        counts[(r["partition_date"], r["source"])] = (
            counts.get((r["partition_date"], r["source"]), 0) + 1
        )
    rows = []
    for r in tables["ingest_audit"].to_pylist():
        n = counts.get((r["partition_date"], r["source"]), 0)
        r = {**r, "records_read": r["records_read"] - n, "quarantined": r["quarantined"] - n}
        if r["records_read"] or r["ingested"] or r["quarantined"]:
            rows.append(r)
    out["ingest_audit"] = pa.Table.from_pylist(rows, schema=tables["ingest_audit"].schema)
    return out


def test_other_contacts_tables_equal_a_build_that_never_had_the_contact(forgotten, never_had_sam):
    expected = never_had_sam.runner.tables()
    got = _without_forgotten(forgotten.tables_after)
    assert got.keys() == expected.keys()
    for name, t in expected.items():
        assert got[name].equals(t), name


def test_dagster_event_log_carries_no_message_text(forgotten):
    assert list(forgotten.home.rglob("*.db")), "the instance stored runs in DAGSTER_HOME"
    assert forgotten.home_before == {}
    assert scan([forgotten.home], forgotten.all_texts) == {}


def test_the_dry_run_plan_names_counts_not_texts(forgotten):
    text = "\n".join(forgotten.plan_lines)
    assert "table raw_messages:" in text and "index versions:" in text
    assert not [t for t in forgotten.texts if len(t) >= 8 and t in text]


def test_cli_without_yes_shows_the_plan_and_changes_nothing(forgotten):
    code, out, _ = forgotten.dry_run
    assert code == 0 and forgotten.changed == []
    assert "table raw_messages:" in out and "nothing was changed" in out
    assert forgotten.api_dry_run == forgotten.plan_lines


def test_cli_unknown_contact_is_an_error(forgotten):
    code, _, err = forgotten.unknown
    assert code == 2 and "Nobody" in err


def test_cli_list_shows_hashes_and_dates_only(forgotten):
    code, out, _ = forgotten.listed
    assert code == 0
    assert "contact" in out and "conversation" in out and "file" in out
    assert re.search(r"^\d{4}-\d\d-\d\d  contact +[0-9a-f]{32}$", out, flags=re.M)
    assert "sam" not in out.lower()


def test_the_dagster_job_forgets_a_contact(never_had_sam):
    """Last in the module: it changes the never-had-Sam build (forgets another contact)."""
    from memory_pipeline.core.common.forget_list import load_forget_list
    from memory_pipeline.defs.forget import forget_contact_job
    from memory_pipeline.defs.resources import PipelineResource

    b = never_had_sam
    msgs = b.runner.store.read("raw_messages")
    contact = sorted(set(msgs["contact_id"].to_pylist()))[0]
    result = forget_contact_job.execute_in_process(
        run_config={"ops": {"forget_contact_op": {"config": {"contact": contact}}}},
        resources={
            "pipeline": PipelineResource(
                config_file=str(b.config), output_dir=str(b.cfg.output_dir)
            )
        },
        instance=b.instance,
    )
    assert result.success
    left = b.runner.store.read("raw_messages")
    assert contact not in set(left["contact_id"].to_pylist())
    assert left.num_rows > 0  # the others stay
    assert load_forget_list(b.cfg.state_root).has("contact", contact)
    assert not list((b.cfg.output_dir / "indexes").glob("v-*"))


def test_backup_wipe_restore_gives_the_same_answers_keys_and_forget_list(
    forgotten, tmp_path, monkeypatch
):
    """`backup --include-derived`, the state and the output deleted (a lost disk), `restore`:
    the same search results, the same key, and Sam still forgotten on the next ingest."""
    from memory_pipeline.config import load_config
    from memory_pipeline.core.common.forget_list import load_forget_list
    from memory_pipeline.core.ingest.stage import read_all_tables
    from memory_pipeline.service.keys import KeyStore
    from memory_pipeline.state import keys_path

    for var in ("DAGSTER_HOME", "MEMORY_PIPELINE_KEYS", "MEMORY_PIPELINE_OUTPUT_DIR"):
        monkeypatch.setenv(var, "")  # restored afterwards (the CLI sets DAGSTER_HOME)
        monkeypatch.delenv(var)
    # a copy of the built project: the module's other tests keep theirs
    root = tmp_path / "project"
    shutil.copytree(forgotten.root, root, ignore=shutil.ignore_patterns("dagster_home"))
    config = root / "memory_pipeline.toml"
    cfg = load_config(config)
    _, token = KeyStore(keys_path(cfg)).create("default")

    def answers() -> list[tuple[str, float]]:
        memory_pipeline._SEARCHERS.clear()  # read the files again, not a cached searcher
        hits = memory_pipeline.search("Kyoto camera trip", 8, config=config).chunks
        return [(h.chunk_id, round(h.score, 6)) for h in hits]

    before, listed = answers(), load_forget_list(cfg.state_root).entries
    assert before
    code, out, err = _cli(config, "backup", str(tmp_path / "backup"), "--include-derived")
    assert code == 0, err
    shutil.rmtree(cfg.output_dir)
    shutil.rmtree(cfg.state_root)
    code, out, err = _cli(config, "restore", str(tmp_path / "backup"))
    assert code == 0, err
    assert answers() == before
    assert KeyStore(keys_path(cfg)).verify(token) is not None
    restored = load_forget_list(cfg.state_root)
    assert restored.entries == listed and restored.has("contact", CONTACT)
    fresh = read_all_tables(cfg.sources, DAYS, cfg.start_date, restored)
    assert CONTACT not in set(fresh.messages["contact_id"].to_pylist())
    assert scan([cfg.output_dir, cfg.state_root], forgotten.texts) == {}
