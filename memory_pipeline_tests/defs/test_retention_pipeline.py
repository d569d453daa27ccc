"""[privacy] retain_days on the bundled sample: old partitions purged everywhere, durably.

Reuses the forget test's harness and decoded scan (Parquet through pyarrow, SQLite and
DuckDB through their readers, every file as bytes too).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.privacy import retention
from memory_pipeline.defs.forget_run import rebuild_after_forget
from memory_pipeline_tests.defs.test_forget_pipeline import DAYS, Built, _full_build, _tree, scan
from memory_pipeline_tests.pipeline_helpers import Runner, write_config

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
    b.log_text = (b.cfg.state_root / "privacy" / retention.LOG_FILE).read_text(encoding="utf-8")
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
    assert retention.retention_log(retained.cfg.state_root) == [entry]
    assert json.loads(retained.log_text) == {"purges": [entry]}
    assert not [t for t in retained.texts if t in retained.log_text]


# ---------------------------------------------------------------------------------------
# After a purge the pipeline keeps working: the cut dossier chain is refolded from the first
# retained day, whatever range the next runs ask for, and equals a clean build over only the
# retained data. A small corpus with quiet days between the days that have messages.

CHAT = {
    # contact -> dates with messages (quiet days in between)
    "kenta": ["2024-03-01", "2024-03-05", "2024-03-09"],
    "maria": ["2024-03-05", "2024-03-10"],
    "sora": ["2024-03-02"],
}
LINES = [
    "Let's meet in Shibuya on Tuesday at 7pm, I booked the ramen place",
    "My sister lives in Osaka and works at a bakery near the station",
    "I'm moving to Kyoto next month, the new flat is near the river",
    "I love hiking, we climbed Mount Takao last weekend with my brother",
]
FIRST, LAST = dt.date(2024, 3, 1), dt.date(2024, 3, 10)
SPAN = [FIRST + dt.timedelta(days=i) for i in range((LAST - FIRST).days + 1)]
SMALL_STAGES = [
    ["raw_messages", "quarantine", "ingest_audit"],
    ["sessions"],
    ["session_enrichment"],
    ["memories", "dossiers"],
]
SMALL_RETAIN = 5


def _small_corpus(root: Path) -> Path:
    """A line_json corpus of CHAT and its config (partitions 2024-03-01 .. 2024-03-12)."""
    for contact, days in CHAT.items():
        folder = root / "json" / contact
        folder.mkdir(parents=True, exist_ok=True)
        for n, day in enumerate(days):
            msgs = [
                {
                    "time": f"1{i}:0{n}:00",
                    "sender": contact if i % 2 == 0 else "Yuki",
                    "type": "text",
                    "text": f"{LINES[(i + n) % len(LINES)]} ({contact} {day})",
                    "source_order": i,
                }
                for i in range(4)
            ]
            body = {"date": day, "contact": contact, "messages": msgs}
            (folder / f"{day}.json").write_text(json.dumps(body), encoding="utf-8")
    return write_config(
        root,
        """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
end_date = "2024-03-12"
output_dir = "out"

[[sources]]
name = "chat"
kind = "line_json"
path = "json"
""",
    )


def _data_days(cutoff: dt.date) -> list[dt.date]:
    """The dates with messages on or after ``cutoff``: what `run` plans its range from."""
    days = {dt.date.fromisoformat(d) for ds in CHAT.values() for d in ds}
    return sorted(d for d in days if d >= cutoff)


def _build(runner: Runner, days: list[dt.date]) -> None:
    for keys in SMALL_STAGES:
        runner.run(keys, days)


def _dossier_state(runner: Runner) -> tuple[list, dict[str, str]]:
    """The dossier rows (date, contact, state, markdown) and the current .md files."""
    rows = []
    if runner.store.dates("dossiers"):
        t = runner.store.read("dossiers").sort_by(
            [("local_date", "ascending"), ("contact_id", "ascending")]
        )
        rows = [
            (r["local_date"], r["contact_id"], r["state"], r["markdown"]) for r in t.to_pylist()
        ]
    folder = Path(runner.cfg.dossiers_path)
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))}
    return rows, files


@pytest.fixture(scope="module")
def small_built(tmp_path_factory) -> Path:
    """The small corpus built once over every day (copied by each cut point's test)."""
    root = tmp_path_factory.mktemp("small_built")
    config = _small_corpus(root)
    runner = Runner(config, root / "out")
    _build(runner, SPAN)
    assert _dossier_state(runner)[0]
    return root


CUTS = {
    "before_all_data": dt.date(2024, 2, 20),  # nothing purged
    "quiet_days_then_data": dt.date(2024, 3, 3),  # two quiet days before the first kept one
    "on_a_data_day": dt.date(2024, 3, 5),
    "quiet_day_each_side": dt.date(2024, 3, 7),
    "after_all_data": dt.date(2024, 3, 11),  # everything purged
}


@pytest.mark.parametrize("cutoff", list(CUTS.values()), ids=list(CUTS))
def test_runs_after_a_purge_succeed_and_equal_a_clean_build(
    small_built, tmp_path, monkeypatch, cutoff
):
    shutil.copytree(small_built, tmp_path, dirs_exist_ok=True)
    config = tmp_path / "memory_pipeline.toml"
    today = cutoff + dt.timedelta(days=SMALL_RETAIN)
    monkeypatch.setattr(retention, "today", lambda: today)
    monkeypatch.setenv("MEMORY_PIPELINE_RETAIN_DAYS", str(SMALL_RETAIN))
    purged = Runner(config, tmp_path / "out")
    entry = retention.purge_expired(
        purged.cfg.storage_root,
        SMALL_RETAIN,
        cache_path=purged.cfg.cache_path,
        dossier_dir=purged.cfg.dossiers_path,
        work_dir=purged.cfg.output_dir,
    )
    kept = _data_days(cutoff)
    if kept:
        # the next run, planned as `run` plans it (the quiet days before are skipped) ...
        _build(purged, [kept[0], kept[-1]])
        # ... and a second one: the nightly window of the last two days
        _build(purged, kept[-2:] if len(kept) > 1 else kept)
    # a clean build over only the retained data: a fresh folder, the same exports and clock
    fresh = tmp_path / "clean"
    shutil.copytree(tmp_path / "json", fresh / "json")
    shutil.copy(config, fresh / config.name)
    clean = Runner(fresh / config.name, fresh / "out")
    if kept:
        _build(clean, [kept[0], kept[-1]])
    got, want = _dossier_state(purged), _dossier_state(clean)
    assert got == want
    assert bool(got[0]) == bool(kept)
    assert not [d for d in purged.store.dates("dossiers") if d < cutoff]
    if entry is None:
        assert cutoff <= FIRST
        return
    # the expired records are accounted: per purged partition and table, counts only
    parts = entry["partitions"]
    assert {p["date"] for p in parts} == {d.isoformat() for d in SPAN if d < cutoff}
    messages = sum(p["rows"] for p in parts if p["table"] == "raw_messages")
    expected = sum(4 for ds in CHAT.values() for d in ds if dt.date.fromisoformat(d) < cutoff)
    assert messages == expected == entry["records_expired"]
    assert entry["rows"]["raw_messages"] == messages


def test_cli_runs_and_the_nightly_job_succeed_after_a_purge(tmp_path, monkeypatch, capsys):
    """The reported sequence through the CLI: a run, then retain_days cutting between days
    with quiet days before the first kept one, then `run`, `run --start <cutoff>` and the
    nightly job (which purges again in the same run): every one succeeds and the surviving
    contacts have their dossiers. `run` stores only the days with data, so the purge counts
    those; the nightly covers calendar days, so it writes (empty) partitions of a quiet day."""
    import dagster as dg

    from memory_pipeline import cli
    from memory_pipeline.defs.build import build_definitions
    from memory_pipeline.defs.jobs import INGEST_JOB, range_tags

    config = _small_corpus(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv("MEMORY_PIPELINE_CONFIG", raising=False)
    clock = {"today": dt.date(2024, 3, 11)}
    monkeypatch.setattr(retention, "today", lambda: clock["today"])
    argv = ["--config", str(config), "run", "--quiet"]
    assert cli.main(argv) == 0
    monkeypatch.setenv("MEMORY_PIPELINE_RETAIN_DAYS", "5")  # cutoff 03-06: 03-06..08 quiet
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "retention: purged 3 partitions before 2024-03-06" in out  # 03-01, 03-02, 03-05
    assert "partitions: 2024-03-09 .. 2024-03-10" in out
    assert cli.main([*argv, "--start", "2024-03-06"]) == 0
    assert cli.main(argv) == 0
    runner = Runner(config, tmp_path / "out")
    files = sorted(p.name for p in Path(runner.cfg.dossiers_path).glob("*.md"))
    assert files == ["kenta.md", "maria.md"]  # sora spoke only before the cutoff
    # the nightly job on 03-12 (cutoff 03-07) over 03-10..03-11: it covers calendar days, so
    # it writes the quiet 03-11 too; nothing before the cutoff is stored any more
    clock["today"] = dt.date(2024, 3, 12)
    defs = build_definitions(runner.cfg)
    with dg.DagsterInstance.get() as instance:
        result = defs.resolve_job_def(INGEST_JOB).execute_in_process(
            instance=instance,
            tags=range_tags(dt.date(2024, 3, 10), dt.date(2024, 3, 11)),
            raise_on_error=False,
        )
    assert result.success
    assert runner.store.dates("dossiers") == [dt.date(2024, 3, d) for d in (9, 10, 11)]
    assert set(runner.store.dates("dossiers")) >= set(runner.store.dates("sessions"))
    [first] = retention.retention_log(runner.cfg.state_root)
    assert first["records_expired"] == 4 * 4  # four days of four messages each expired
