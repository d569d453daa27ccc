"""The state folder, upgrades and state-only backups, on an output of the previous release.

``fixtures/upgrade_format0`` is an output written before the state folder existed (format 0:
the forget list, its salt and the key file inside the output), from the bundled sample with
Sam forgotten. Everything here is file work and one ingest of the sample: fast. The build
with a deleted output and the backup of a built output are in defs/test_forget_pipeline.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import stat
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memory_pipeline import cli
from memory_pipeline.config import ConfigError, load_config, parse_config
from memory_pipeline.core.common import state as S
from memory_pipeline.core.common.forget_list import load_forget_list
from memory_pipeline.service.keys import KeyStore
from memory_pipeline.state import keys_path, prepare_state, version_line
from memory_pipeline_tests.paths import ROOT, SAMPLE

FIXTURE = Path(__file__).parent / "fixtures" / "upgrade_format0" / "output"
KEY = "mpk_rkCpJD7JjsaAc2sBYMxAobadiBNgr89KkcXpSAAV3jY"  # the fixture's test-only key
KEY_ID = "k-714e31e0"


def _cli(config: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--config", str(config), *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def old_project(tmp_path: Path, monkeypatch) -> Path:
    """The sample's project with the previous release's output in data/output."""
    shutil.copytree(SAMPLE, tmp_path / "data" / "sample")
    shutil.copy(ROOT / "memory_pipeline.toml", tmp_path / "memory_pipeline.toml")
    shutil.copytree(FIXTURE, tmp_path / "data" / "output")
    for var in ("DAGSTER_HOME", "MEMORY_PIPELINE_CONFIG", "MEMORY_PIPELINE_KEYS"):
        monkeypatch.setenv(var, "")  # restored after the test (the CLI sets DAGSTER_HOME)
        monkeypatch.delenv(var)
    for var in ("MEMORY_PIPELINE_OUTPUT_DIR", "MEMORY_PIPELINE_STATE_DIR"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "memory_pipeline.toml"


def _ingest(cfg):
    """The sample's ingest with the forget list the state folder holds."""
    from memory_pipeline.core.ingest.stage import read_all_tables

    days = sorted({p.stem for p in (FIXTURE / "parquet" / "raw_messages").glob("*.parquet")})
    import datetime as dt

    dates = [dt.date.fromisoformat(d) for d in days]
    return read_all_tables(cfg.sources, dates, cfg.start_date, load_forget_list(cfg.state_root))


def test_an_older_output_is_migrated_once_and_keeps_its_forget_list_and_keys(old_project):
    cfg = load_config(old_project)
    state = old_project.parent / "data" / "state"
    assert cfg.state_root == state  # `state` beside `output`
    salt = (FIXTURE / "privacy" / "forget_salt").read_text().strip()

    code, out, err = _cli(old_project, "keys", "list")
    assert code == 0 and KEY_ID in out
    notes = err.splitlines()
    assert len(notes) == 2 and all(n.startswith("note: moved the ") for n in notes), err
    code, out, err = _cli(old_project, "forget", "--list")
    assert code == 0 and err == ""  # migrated once: no notice the second time
    assert "3 forgotten" in out
    listed = json.loads((FIXTURE / "privacy" / "forget_list.json").read_text())["entries"]
    assert all(e["hash"] in out for e in listed)
    # moved, not copied: the output holds no state any more
    assert (state / "privacy" / "forget_salt").read_text().strip() == salt
    assert not (cfg.output_dir / "privacy").exists()
    assert not (cfg.output_dir / "service").exists()
    body = json.loads((cfg.output_dir / S.FORMAT_FILE).read_text())
    assert body["output_format"] == S.OUTPUT_FORMAT
    assert body["salt_id"] == S.salt_id(bytes.fromhex(salt))
    assert json.loads((state / S.FORMAT_FILE).read_text())["state_format"] == S.STATE_FORMAT
    # the key still opens the service, from the state folder, readable by its owner only
    path = keys_path(cfg)
    assert path == state / "service" / "keys.json"
    assert KeyStore(path).verify(KEY).key_id == KEY_ID
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    # the migrated list forgets exactly what the previous release forgot: a fresh ingest of
    # the sample gives the fixture's messages and its forgotten rows, position for position
    fresh = _ingest(cfg)
    old_msgs = pq.read_table(FIXTURE / "parquet" / "raw_messages")
    assert set(fresh.messages["message_id"].to_pylist()) == set(
        old_msgs["message_id"].to_pylist()
    )
    assert "Sam" not in set(fresh.messages["contact_id"].to_pylist())
    old_q = pq.read_table(FIXTURE / "parquet" / "quarantine")
    forgotten = {q.record_ref for q in fresh.quarantine if q.reason == "forgotten"}
    assert forgotten and forgotten == set(old_q["record_ref"].to_pylist())


def _post(folder: Path, cid: str, text: str) -> None:
    """What ``POST /v1/messages`` stores, through the core inbox API."""
    from memory_pipeline.core.ingest.inbox import InboxStore
    from memory_pipeline.core.ingest.sources.inbox import parse_entry

    raw = {"id": cid, "conversation": "maria", "sender": "Maria", "text": text}
    entry = parse_entry({**raw, "time": "2024-03-02T20:00:00+09:00"})
    assert InboxStore(folder, "Asia/Tokyo").append([entry]).results == ["accepted"]


def test_the_inbox_lives_in_the_state_and_outlives_the_output(old_project):
    """An older output's inbox moves into the state (one notice); a posted message then
    survives deleting the output, and the next build's ingest reads it."""
    import datetime as dt

    from memory_pipeline.core.ingest.inbox import inbox_dir
    from memory_pipeline.core.ingest.stage import read_all_tables

    cfg = load_config(old_project)
    state = old_project.parent / "data" / "state"
    assert cfg.inbox_path == state / "inbox"
    _post(inbox_dir(cfg.output_dir), "old-1", "posted before the move")  # an older release's
    cfg = load_config(old_project)
    assert [s.path for s in cfg.sources if s.kind == "inbox"] == [state / "inbox"]
    notes: list[str] = []
    prepare_state(cfg, say=notes.append)
    assert [n for n in notes if "the inbox" in n] == [
        f"moved the inbox (messages apps posted) from {cfg.output_dir / 'inbox'} to "
        f"{state / 'inbox'}"
    ]
    assert not (cfg.output_dir / "inbox").exists()
    notes.clear()
    prepare_state(cfg, say=notes.append)
    assert not [n for n in notes if "the inbox" in n]  # once
    _post(cfg.inbox_path, "new-1", "posted after the move")

    shutil.rmtree(cfg.output_dir)  # the documented reset
    cfg = load_config(old_project)
    spec = [s for s in cfg.sources if s.kind == "inbox"]
    assert [s.path for s in spec] == [state / "inbox"]
    day = dt.date(2024, 3, 2)
    got = read_all_tables(spec, [day], cfg.start_date, load_forget_list(cfg.state_root))
    assert sorted(got.messages["source_ref"].to_pylist()) == ["inbox:new-1", "inbox:old-1"]


def test_several_owners_have_their_inbox_in_their_state_folder(tmp_path):
    from memory_pipeline.config import OwnerSpec
    from memory_pipeline.core.ingest.inbox import inbox_dir
    from memory_pipeline.state import migrate_inboxes

    (tmp_path / "src").mkdir()
    owner = _cfg(tmp_path).for_owner(OwnerSpec("ann", "Ann"))
    assert owner.inbox_path == tmp_path / "data" / "state" / "owners" / "ann" / "inbox"
    remote = _cfg(tmp_path, output_dir="s3://bkt/memory/out")
    assert remote.inbox_path == tmp_path / "state" / "inbox"  # the local part of the state
    ann = remote.for_owner(OwnerSpec("ann", "Ann"))
    assert ann.inbox_path == tmp_path / "state" / "owners" / "ann" / "inbox"
    _post(inbox_dir(owner.output_dir), "a-1", "Ann's")
    assert len(migrate_inboxes(owner)) == 1
    assert [p.name for p in owner.inbox_path.rglob("*.jsonl")] == ["2024-03-02.jsonl"]


def test_an_output_without_its_state_is_refused_in_one_line(old_project):
    cfg = load_config(old_project)
    prepare_state(cfg, say=None)
    shutil.rmtree(cfg.state_root)  # the state is lost; the output remembers its salt
    for args in (("run", "--quiet"), ("status",)):
        code, out, err = _cli(old_project, *args)
        assert code == 2, args
        [line] = err.splitlines()
        assert "has no forget list" in line and "would bring forgotten people back" in line
        assert str(cfg.output_dir) in line and "Traceback" not in err
    assert not list((cfg.output_dir / "parquet").glob("sessions"))  # nothing was built
    # another state (another salt) is refused the same way
    S.ensure_state(cfg.state_root)
    (cfg.state_root / "privacy").mkdir(parents=True, exist_ok=True)
    (cfg.state_root / "privacy" / "forget_salt").write_text("00" * 32)
    with pytest.raises(S.StateError, match="holds another forget list"):
        prepare_state(cfg, say=None)


def test_a_newer_output_or_state_is_refused(old_project):
    cfg = load_config(old_project)
    prepare_state(cfg, say=None)
    newer = {"output_format": S.OUTPUT_FORMAT + 1}
    (cfg.output_dir / S.FORMAT_FILE).write_text(json.dumps(newer))
    code, _, err = _cli(old_project, "status")
    assert code == 2 and "written by a newer memory-pipeline" in err
    assert len(err.splitlines()) == 1
    (cfg.output_dir / S.FORMAT_FILE).unlink()
    (cfg.state_root / S.FORMAT_FILE).write_text(json.dumps({"state_format": 99}))
    with pytest.raises(S.StateError, match="state format 99"):
        prepare_state(cfg, say=None)


def test_a_format_step_that_rebuilds_says_so_and_deletes_only_derived_parts(
    old_project, monkeypatch
):
    """A later release that changes a derived layout declares the parts it rebuilds: a
    reading command asks for a run, a writing one deletes them (the run rebuilds them)."""
    cfg = load_config(old_project)
    prepare_state(cfg, say=None)  # format 0 -> 1
    (cfg.output_dir / "warehouse.duckdb").write_bytes(b"old layout")
    (cfg.output_dir / "indexes").mkdir()
    monkeypatch.setattr(S, "OUTPUT_FORMAT", S.OUTPUT_FORMAT + 1)
    step = S.Upgrade(S.OUTPUT_FORMAT - 1, rebuild=("warehouse",), why="new views")
    monkeypatch.setitem(S.UPGRADES, S.OUTPUT_FORMAT - 1, step)
    with pytest.raises(S.StateError, match=r"rebuilding its warehouse: run `memory-pipeline run`"):
        prepare_state(cfg, say=None)
    said: list[str] = []
    done = prepare_state(cfg, writing=True, say=said.append)
    assert done.rebuild == ["warehouse"]
    assert said == [
        f"upgrade: {cfg.output_dir} had output format {S.OUTPUT_FORMAT - 1}; rebuilding its "
        "warehouse in this run (new views)"
    ]
    assert not (cfg.output_dir / "warehouse.duckdb").exists()
    assert (cfg.output_dir / "indexes").is_dir() and (cfg.output_dir / "parquet").is_dir()
    assert S.output_format(cfg.output_dir) == S.OUTPUT_FORMAT


def test_version_names_the_package_and_both_formats(capsys):
    import tomllib

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out.strip()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert out == version_line()
    assert out.startswith(f"memory-pipeline {pyproject['project']['version']} ")
    assert f"output format {S.OUTPUT_FORMAT}, state format {S.STATE_FORMAT}" in out


GOOD = {
    "pipeline": {"owner": "Y", "timezone": "UTC", "start_date": "2024-03-01"},
    "sources": [{"name": "s", "kind": "line_json", "path": "src"}],
}


def _cfg(tmp_path: Path, env: dict | None = None, **pipeline):
    raw = {**GOOD, "pipeline": {**GOOD["pipeline"], **pipeline}}
    origin = str(tmp_path / "memory_pipeline.toml")
    return parse_config(raw, base_dir=tmp_path, env=env or {}, origin=origin)


def test_state_dir_default_setting_and_checks(tmp_path):
    (tmp_path / "src").mkdir()
    assert _cfg(tmp_path).state_root == tmp_path / "data" / "state"
    assert _cfg(tmp_path, output_dir="o/out").state_root == tmp_path / "o" / "state"
    assert _cfg(tmp_path, state_dir="keep").state_root == tmp_path / "keep"
    env = {"MEMORY_PIPELINE_STATE_DIR": "elsewhere"}
    assert _cfg(tmp_path, env).state_root == tmp_path / "elsewhere"
    with pytest.raises(ConfigError, match=r"state_dir: .* is inside the output"):
        _cfg(tmp_path, state_dir="data/output/state")
    remote = _cfg(tmp_path, output_dir="s3://bkt/memory/out")
    assert remote.state_root == "s3://bkt/memory/state"
    assert remote.local_state_dir == tmp_path / "state"  # keys and the instance stay local
    with pytest.raises(ConfigError, match="whole bucket"):
        _cfg(tmp_path, output_dir="s3://bkt")
    assert _cfg(tmp_path, output_dir="s3://bkt", state_dir="s3://keep/s").state_root == (
        "s3://keep/s"
    )
    from memory_pipeline.config import OwnerSpec

    owner = _cfg(tmp_path).for_owner(OwnerSpec("ann", "Ann"))
    assert owner.state_root == tmp_path / "data" / "state" / "owners" / "ann"
    assert owner.local_state_dir == tmp_path / "data" / "state"


def test_state_backup_restore_after_a_wipe(old_project, tmp_path):
    """backup -> the state folder deleted (refused) -> restore: forget list, salt and keys
    back, byte for byte; a damaged backup is refused before anything is written."""
    cfg = load_config(old_project)
    prepare_state(cfg, move_keys=True, say=None)
    _post(cfg.inbox_path, "kept-1", "a posted message is state")
    # a Dagster instance being written while the backup runs: SQLite's backup API copies
    # what is committed, never a torn page
    db = cfg.state_root / "dagster" / "storage" / "runs.db"
    db.parent.mkdir(parents=True)
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE runs (id TEXT)")
    writer.execute("INSERT INTO runs VALUES ('committed')")
    writer.commit()
    writer.execute("INSERT INTO runs VALUES ('in flight')")  # open transaction
    before = {
        p.relative_to(cfg.state_root): p.read_bytes()
        for p in cfg.state_root.rglob("*")
        if p.is_file() and p.parent.name != "storage"
    }
    dest = tmp_path / "backups" / "b1"
    code, out, err = _cli(old_project, "backup", str(dest), "--wait", "0")
    writer.rollback()
    writer.close()
    assert code == 0, err
    assert "backup of the state:" in out
    manifest = json.loads((dest / "MANIFEST.json").read_text())
    assert manifest["state_format"] == S.STATE_FORMAT and not manifest["include_derived"]
    assert "state/privacy/forget_salt" in manifest["files"]
    assert "config/memory_pipeline.toml" in manifest["files"]
    assert not [f for f in manifest["files"] if f.startswith("output/")]
    assert [f for f in manifest["files"] if f.startswith("state/inbox/") and ".json" in f]

    shutil.rmtree(cfg.state_root)
    assert _cli(old_project, "status")[0] == 2  # refused without it
    from memory_pipeline.state import instance_home

    instance_home(cfg)  # what a refused `run` leaves: a made dagster.yaml, not state
    damaged = tmp_path / "damaged"
    shutil.copytree(dest, damaged)
    (damaged / "state" / "privacy" / "forget_list.json").write_text("{}")
    code, _, err = _cli(old_project, "restore", str(damaged))
    assert code == 2 and "digest differs" in err
    assert not (cfg.state_root / "privacy").exists()  # nothing written

    code, out, err = _cli(old_project, "restore", str(dest))
    assert code == 0, err
    after = {
        p.relative_to(cfg.state_root): p.read_bytes()
        for p in cfg.state_root.rglob("*")
        if p.is_file() and p.parent.name != "storage"
    }
    assert {k: v for k, v in after.items() if k.name != "dagster.yaml"} == {
        k: v for k, v in before.items() if k.name != "dagster.yaml"
    }
    con = sqlite3.connect(cfg.state_root / "dagster" / "storage" / "runs.db")
    assert con.execute("SELECT id FROM runs").fetchall() == [("committed",)]
    con.close()
    assert KeyStore(keys_path(cfg)).verify(KEY).key_id == KEY_ID
    code, out, _ = _cli(old_project, "forget", "--list")
    assert code == 0 and "3 forgotten" in out
    # restoring over an existing state needs --force
    code, _, err = _cli(old_project, "restore", str(dest))
    assert code == 2 and "--force" in err


def test_the_instance_defaults_to_the_state_and_takes_the_old_run_history(old_project):
    """DAGSTER_HOME unset: ``<state>/dagster``, its dagster.yaml made from the repository's
    with every storage folder inside it; the previous default's history is copied once."""
    import os

    import yaml

    from memory_pipeline.state import DEFAULT_INSTANCE, instance_home

    legacy = old_project.parent / "data" / "dagster" / "storage"
    legacy.mkdir(parents=True)
    con = sqlite3.connect(legacy / "runs.db")
    con.execute("CREATE TABLE runs (id TEXT)")
    con.execute("INSERT INTO runs VALUES ('r1')")
    con.commit()
    con.close()
    shutil.copy(ROOT / "dagster.yaml", old_project.parent / "dagster.yaml")
    cfg = load_config(old_project)
    home = instance_home(cfg)
    assert home == cfg.state_root / "dagster" and os.environ["DAGSTER_HOME"] == str(home)
    body = yaml.safe_load((home / "dagster.yaml").read_text())
    assert body["storage"]["custom"]["config"]["base_dir"] == str(home / "storage")
    assert body["storage"]["custom"]["module"] == "memory_pipeline.defs.dagster_sqlite"
    assert body["compute_logs"]["config"]["base_dir"] == str(home / "compute_logs")
    shipped = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    for key in ("concurrency", "run_monitoring", "telemetry"):
        assert body[key] == shipped[key]  # the repository's settings, as they are
        assert DEFAULT_INSTANCE[key] == shipped[key]  # and those of a config without one
    con = sqlite3.connect(home / "storage" / "runs.db")
    assert con.execute("SELECT id FROM runs").fetchall() == [("r1",)]
    con.close()
    assert instance_home(cfg) == home  # once: the copy is not repeated
