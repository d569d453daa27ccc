"""[privacy] retain_days on the bundled sample: old partitions purged everywhere, durably.

Reuses the forget test's harness and decoded scan (Parquet through pyarrow, SQLite and
DuckDB through their readers, every file as bytes too).
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.compute as pc
import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.privacy import retention
from memory_pipeline.defs.forget_run import rebuild_after_forget
from memory_pipeline_tests.defs.test_forget_pipeline import DAYS, Built, _full_build, _tree, scan
from memory_pipeline_tests.pipeline_helpers import Runner

RETAIN_DAYS = 10
EXPIRED_DATES = 4  # the first four sample dates fall before the cutoff
TODAY = DAYS[0] + dt.timedelta(days=EXPIRED_DATES + RETAIN_DAYS)
CUTOFF = DAYS[EXPIRED_DATES]


def _old_partitions(b: Built) -> list[str]:
    store = b.runner.store
    return [
        f"{t.name}/{d}" for t in T.REGISTRY if t.partitioned for d in store.dates(t) if d < CUTOFF
    ]


@pytest.fixture(scope="module")
def retained(tmp_path_factory):
    """The sample built, then purged with retain_days, then rebuilt from the same exports."""
    b = Built(tmp_path_factory.mktemp("retention"))
    _full_build(b.runner, b.instance)
    msgs = b.runner.store.read(T.RAW_MESSAGES)
    msgs = msgs.filter(pc.equal(msgs["type"], "text"))
    old = msgs.filter(pc.less(msgs["local_date"], CUTOFF))
    kept = set(msgs.filter(pc.greater_equal(msgs["local_date"], CUTOFF))["text"].to_pylist())
    assert old.num_rows > 5
    b.texts = {t for t in old["text"].to_pylist() if t not in kept}  # only the old words
    b.old_rows = old.num_rows
    b.before = scan(b.roots(), b.texts)
    b.old_before = _old_partitions(b)
    snapshot = _tree(b.roots())
    b.off = retention.purge_expired(b.cfg.output_dir, None, cache_path=b.cfg.cache_path, on=TODAY)
    b.unchanged = _tree(b.roots()) == snapshot
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(retention, "today", lambda: TODAY)
        mp.setenv("MEMORY_PIPELINE_RETAIN_DAYS", str(RETAIN_DAYS))
        b.runner = Runner(b.config, b.cfg.output_dir)  # the config as loaded with the override
        assert b.runner.cfg.retain_days == RETAIN_DAYS
        b.entry = retention.purge_expired(
            b.cfg.output_dir,
            RETAIN_DAYS,
            cache_path=b.cfg.cache_path,
            dossier_dir=b.cfg.dossiers_path,
        )
        # what `memory-pipeline run` does next: rebuild the memories and dossiers it deleted
        b.runner.run(["memories", "dossiers"], DAYS[EXPIRED_DATES:], instance=b.instance)
        assert rebuild_after_forget(b.cfg, b.instance, b.runner.providers)
        b.after = scan(b.roots(), b.texts)
        b.old_after = _old_partitions(b)
        # the same exports again over the retained range, as `memory-pipeline run` plans it
        for keys in (["raw_messages", "quarantine", "ingest_audit"], ["sessions"], ["chunks"]):
            b.runner.run(keys, DAYS[EXPIRED_DATES:], instance=b.instance)
        b.runner.run(
            ["chunk_summaries", "embedding_texts", "session_enrichment"],
            DAYS[EXPIRED_DATES:],
            instance=b.instance,
        )
        b.runner.run(["chunk_embeddings"], DAYS[EXPIRED_DATES:], instance=b.instance)
        b.runner.run(["memories", "dossiers"], DAYS[EXPIRED_DATES:], instance=b.instance)
        assert rebuild_after_forget(b.cfg, b.instance, b.runner.providers)
        b.second = retention.purge_expired(
            b.cfg.output_dir,
            RETAIN_DAYS,
            cache_path=b.cfg.cache_path,
            dossier_dir=b.cfg.dossiers_path,
        )
        b.rerun = scan(b.roots(), b.texts)
        b.old_rerun = _old_partitions(b)
        b.tables_rerun = b.runner.tables()
    b.log_text = (b.cfg.output_dir / "privacy" / retention.LOG_FILE).read_text(encoding="utf-8")
    return b


def test_the_scan_finds_the_old_texts_before_the_purge(retained):
    assert any("/parquet/raw_messages/" in f for f in retained.before)
    assert any("/indexes/v-" in f for f in retained.before)
    assert retained.old_before


def test_retention_off_changes_nothing(retained):
    assert retained.off is None and retained.unchanged


def test_no_partition_before_the_cutoff_and_no_old_text_remains(retained):
    assert retained.old_after == []
    assert retained.after == {}
    assert (retained.cfg.output_dir / "indexes" / "CURRENT").is_file()


def test_rerunning_keeps_the_old_dates_out(retained):
    assert retained.old_rerun == [] and retained.rerun == {}
    assert retained.second is None  # the re-run wrote nothing old, so nothing to purge


def test_old_records_are_expired_rows_without_text_and_conservation_holds(retained):
    t = retained.tables_rerun
    q = t["quarantine"].filter(pc.equal(t["quarantine"]["reason"], R.R_EXPIRED))
    # readers skip files of unrequested dates, so old records may never be read at all;
    # any that are read (a whole-chat .txt export) become expired rows at the cutoff
    assert set(q["partition_date"].to_pylist()) <= {CUTOFF}
    assert set(q["raw"].to_pylist()) <= {""} and set(q["source_file"].to_pylist()) <= {""}
    assert set(q["conversation_id"].to_pylist()) <= {""}
    audit = t["ingest_audit"]
    read = pc.sum(audit["records_read"]).as_py()
    assert read == pc.sum(audit["ingested"]).as_py() + pc.sum(audit["quarantined"]).as_py()


def test_the_log_records_counts_only(retained):
    entry = retained.entry
    assert entry["cutoff"] == CUTOFF.isoformat() and entry["ran_on"] == TODAY.isoformat()
    assert entry["dates"] == [d.isoformat() for d in DAYS[:EXPIRED_DATES]]
    assert entry["rows"]["raw_messages"] >= retained.old_rows
    assert all(isinstance(n, int) for n in entry["rows"].values())
    assert retention.retention_log(retained.cfg.output_dir) == [entry]
    assert json.loads(retained.log_text) == {"purges": [entry]}
    assert not [t for t in retained.texts if t in retained.log_text]
