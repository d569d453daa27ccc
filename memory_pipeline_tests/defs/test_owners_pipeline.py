"""Many owners in one deployment, strictly isolated: the whole graph over three owners.

The three owners are built to collide: the same contact names and conversation ids, and
the same message texts at the same times (so the same content-derived message ids), plus
one secret word each. The properties are asserted for every owner: no row, index entry,
SQL view row or dossier line of one owner is reachable from another's folder, API call or
warehouse; a new day of one owner rebuilds only that owner's indexes; forgetting a contact
of one owner leaves the other owners' folders byte for byte as they were.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import memory_pipeline
from memory_pipeline import cli
from memory_pipeline.core.common import catalog
from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import (
    OWNER_COLUMN,
    OwnerMismatch,
    discover_owner_ids,
    owner_store,
)
from memory_pipeline.core.indexes.publish import current_version
from memory_pipeline_tests.pipeline_helpers import Runner, build_all, write_config

OWNERS = {"alice": "Alice", "bob": "Bob", "carol": "Carol"}
SECRET = {"alice": "kiwialpha", "bob": "mangobravo", "carol": "lycheecharlie"}
FIRST = dt.date(2024, 3, 1)
DAYS = [FIRST, FIRST + dt.timedelta(days=1)]
NEW_DAY = FIRST + dt.timedelta(days=2)
CONTACTS = {"maria": "Maria", "ken": "Ken"}  # every owner talks to a Maria and a Ken


def _day_file(folder: Path, conv: str, day: dt.date, owner: str, oid: str, extra: str) -> None:
    """One line_json file: Maria's / Ken's lines are identical for every owner."""
    contact = CONTACTS[conv]
    messages = [
        {"time": "19:00:00", "sender": contact, "text": "Are we still on for the Kyoto trip?"},
        {"time": "19:01:00", "sender": owner, "text": "Yes, I booked the hotel by the station."},
        {"time": "19:02:00", "sender": contact, "text": "Great, see you at 7 on Saturday."},
        {"time": "19:03:00", "sender": owner, "text": f"My locker code word is {SECRET[oid]}."},
        {"time": "19:04:00", "sender": contact, "text": f"Noted {extra}."},
    ]
    path = folder / conv / f"{day.isoformat()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "date": day.isoformat(),
                "conversation_id": conv,
                "contact": contact,
                "messages": messages,
            }
        ),
        encoding="utf-8",
    )


def _write_owner(root: Path, oid: str, days: list[dt.date]) -> None:
    for day in days:
        for conv in CONTACTS:
            _day_file(root / "chats" / oid, conv, day, OWNERS[oid], oid, day.isoformat())


CONFIG = """
[pipeline]
owner = "Alice"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
end_date = "2024-03-05"
output_dir = "out"

[[sources]]
name = "alice_chats"
kind = "line_json"
path = "chats/alice"

[[sources]]
name = "carol_chats"
kind = "line_json"
path = "chats/carol"

[[owners]]
id = "alice"
owner = "Alice"
sources = ["alice_chats"]

[[owners]]
id = "bob"
owner = "Bob"
[[owners.sources]]
name = "bob_chats"
kind = "line_json"
path = "chats/bob"

[[owners]]
id = "carol"
owner = "Carol"
sources = ["carol_chats"]
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    root = tmp_path_factory.mktemp("owners")
    _write_owner(root, "alice", DAYS)
    _write_owner(root, "bob", DAYS)
    _write_owner(root, "carol", DAYS[:1])
    config = write_config(root, CONFIG)
    runner = Runner(config, root / "out")
    build_all(runner, DAYS)
    for keys in (["storage_report"], ["evaluation"], ["warehouse"]):
        runner.run(keys, [])
    return runner


def _out(runner: Runner) -> Path:
    return runner.cfg.output_dir


def _folder(runner: Runner, oid: str) -> Path:
    return _out(runner) / "owners" / oid


def _texts(path: Path) -> str:
    """A file's content as text: Parquet decoded (every column), anything else as bytes."""
    if path.suffix == ".parquet":
        return json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
    return path.read_bytes().decode("utf-8", "replace")


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_each_owner_has_a_folder_and_nothing_is_shared(built: Runner):
    out = _out(built)
    assert discover_owner_ids(out) == sorted(OWNERS)
    assert not (out / "parquet").exists()  # no deployment-wide table
    for oid in OWNERS:
        folder = _folder(built, oid)
        for sub in ("parquet", "indexes", "dossiers", "cache"):
            assert (folder / sub).is_dir(), (oid, sub)
        assert (folder / "warehouse.duckdb").is_file()
        assert current_version(folder) is not None


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_every_stored_row_carries_its_owner(built: Runner, oid: str):
    files = sorted((_folder(built, oid) / "parquet").rglob("*.parquet"))
    tables = {p.parent.name for p in files}
    assert {t.name for t in T.REGISTRY} <= tables  # every table exists for every owner
    for path in files:
        stamp = pq.read_table(path, columns=[OWNER_COLUMN]).column(0).to_pylist()
        assert set(stamp) <= {oid}, path


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_no_file_of_an_owner_holds_another_owners_secret(built: Runner, oid: str):
    """Tables, index versions (BM25 vocabularies, lookups), dossiers, caches, warehouse,
    evaluation: every file of the owner's folder, decoded."""
    others = [SECRET[o] for o in OWNERS if o != oid]
    seen_own = False
    for path in _folder(built, oid).rglob("*"):
        if not path.is_file():
            continue
        text = _texts(path)
        seen_own |= SECRET[oid] in text
        for secret in others:
            assert secret not in text, (oid, path, secret)
    assert seen_own  # the scan does see the owner's own secret


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_search_and_context_answer_from_the_owners_memory_only(built: Runner, oid: str):
    config = built.cfg.config_path
    own = set(owner_store(_folder(built, oid)).read(T.CHUNKS).column("chunk_id").to_pylist())
    for query_owner in OWNERS:
        result = memory_pipeline.search(
            f"locker code word {SECRET[query_owner]}", 5, config=config, owner=oid
        )
        # what came back from the memory (the echoed query holds the word it asked for)
        hits = {**result.to_dict(), "query": "", "notes": [], "filters": []}
        dump = json.dumps(hits, default=str, ensure_ascii=False)
        assert result.chunks  # the owner's own chats answer (same words)
        assert {hit.chunk_id for hit in result.chunks} <= own
        for other in OWNERS:
            if other != oid:
                assert SECRET[other] not in dump
        pack = memory_pipeline.context(
            f"What is the code word {SECRET[query_owner]}?", 4000, config=config, owner=oid
        )
        rendered = "\n".join(p.render() for p in pack.pieces)
        assert pack.pieces
        for other in OWNERS:
            if other != oid:
                assert SECRET[other] not in rendered
    hit = memory_pipeline.search(f"code word {SECRET[oid]}", 3, config=config, owner=oid)
    assert SECRET[oid] in json.dumps(hit.to_dict()["chunks"], default=str, ensure_ascii=False)


def test_the_owner_is_required_and_checked(built: Runner, capsys: pytest.CaptureFixture):
    config = built.cfg.config_path
    with pytest.raises(ValueError, match="3 owners .*owners: alice, bob, carol"):
        memory_pipeline.search("Kyoto", config=config)
    with pytest.raises(ValueError, match="unknown owner 'dave'"):
        memory_pipeline.context("Kyoto", config=config, owner="dave")
    with pytest.raises(ValueError, match="unknown owner '..'"):
        memory_pipeline.search("Kyoto", config=config, owner="..")
    assert cli.main(["--config", str(config), "search", "Kyoto"]) == cli.EXIT_USAGE
    assert "pass owner= (--owner ID)" in capsys.readouterr().err
    assert cli.main(["--config", str(config), "search", "Kyoto", "--owner", "bob"]) == 0
    assert "Maria" in capsys.readouterr().out


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_sql_an_app_reads_is_the_owners_only(built: Runner, oid: str):
    store = owner_store(_folder(built, oid))
    con = catalog.connect(_folder(built, oid) / "warehouse.duckdb")
    try:
        for name in ("raw_messages", "sessions", "chunks", "memories", "dossiers"):
            owners = con.execute(f"SELECT DISTINCT {OWNER_COLUMN} FROM {name}").fetchall()
            assert owners == [(oid,)], name
            [(n,)] = con.execute(f"SELECT count(*) FROM {name}").fetchall()
            assert n == store.read(name).num_rows
        for other in OWNERS:
            if other == oid:
                continue
            [(n,)] = con.execute(
                "SELECT count(*) FROM raw_messages WHERE text LIKE ?", [f"%{SECRET[other]}%"]
            ).fetchall()
            assert n == 0
    finally:
        con.close()


def test_a_stray_file_of_another_owner_is_refused_and_filtered(built: Runner):
    """Defence in depth: bob's partition copied into alice's folder under another date."""
    alice, bob = _folder(built, "alice"), _folder(built, "bob")
    stray = alice / "parquet" / "raw_messages" / "2024-03-05.parquet"
    shutil.copy(bob / "parquet" / "raw_messages" / "2024-03-01.parquet", stray)
    try:
        with pytest.raises(OwnerMismatch, match="do not belong to owner 'alice'"):
            owner_store(alice).read(T.RAW_MESSAGES)
        con = catalog.connect(alice / "warehouse.duckdb")
        try:
            [(n,)] = con.execute(
                "SELECT count(*) FROM raw_messages WHERE text LIKE ?", [f"%{SECRET['bob']}%"]
            ).fetchall()
        finally:
            con.close()
        assert n == 0  # the view's mandatory owner filter hides the stray rows
    finally:
        stray.unlink()


@pytest.mark.parametrize("oid", sorted(OWNERS))
def test_dossiers_are_the_owners_own(built: Runner, oid: str):
    folder = _folder(built, oid) / "dossiers"
    pages = sorted(folder.glob("*.md"))
    assert len(pages) == len(CONTACTS)  # one page per contact, named like everyone else's
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for other in OWNERS:
            if other != oid:
                assert SECRET[other] not in text
                assert f"{OWNERS[other]}:" not in text  # another owner never speaks here


def test_one_owners_new_day_rebuilds_only_that_owners_indexes(built: Runner):
    root = _out(built).parent
    before = {oid: current_version(_folder(built, oid)).name for oid in OWNERS}
    untouched = {oid: _digest(_folder(built, oid)) for oid in ("bob", "carol")}
    alice_warehouse = _folder(built, "alice") / "warehouse.duckdb"
    stamp = alice_warehouse.stat().st_mtime_ns
    _write_owner(root, "alice", [NEW_DAY])
    build_all(built, [NEW_DAY])
    result = built.run(["warehouse"], [])
    after = {oid: current_version(_folder(built, oid)).name for oid in OWNERS}
    assert after["alice"] != before["alice"]
    assert after["bob"] == before["bob"] and after["carol"] == before["carol"]
    for oid, digest in untouched.items():  # not one byte of the others changed
        assert _digest(_folder(built, oid)) == digest, oid
    [mat] = result.asset_materializations_for_node("warehouse")
    assert mat.metadata["owners"].value == 1 and mat.metadata["owners_skipped"].value == 2
    # alice's views read the files live: her new day is in them without a rewrite
    assert alice_warehouse.stat().st_mtime_ns == stamp
    alice = owner_store(_folder(built, "alice"))
    assert NEW_DAY in alice.dates(T.RAW_MESSAGES)
    con = catalog.connect(_folder(built, "alice") / "warehouse.duckdb")
    try:
        [(n,)] = con.execute(
            "SELECT count(*) FROM raw_messages WHERE local_date = ?", [NEW_DAY]
        ).fetchall()
    finally:
        con.close()
    assert n == alice.read(T.RAW_MESSAGES, [NEW_DAY]).num_rows > 0


def test_forget_works_per_owner_and_never_touches_another(built: Runner):
    config = built.cfg.config_path
    untouched = {oid: _digest(_folder(built, oid)) for oid in ("bob", "carol")}
    lines = memory_pipeline.forget("Ken", config=config, owner="alice")
    assert lines
    alice = owner_store(_folder(built, "alice"))
    contacts = set(alice.read(T.RAW_MESSAGES).column("contact_id").to_pylist())
    assert contacts == {"Maria"}  # Ken is gone, Maria is kept
    for oid, digest in untouched.items():
        assert _digest(_folder(built, oid)) == digest, oid
        contacts = owner_store(_folder(built, oid)).read(T.RAW_MESSAGES).column("contact_id")
        assert set(contacts.to_pylist()) == {"Maria", "Ken"}
    hits = memory_pipeline.search("Kyoto trip", 5, config=config, owner="alice")
    assert hits.chunks and all(h.contact_id == "Maria" for h in hits.chunks)
    with pytest.raises(ValueError, match="owners: alice, bob, carol"):
        memory_pipeline.forget("Ken", config=config)


# ----------------------------------------------------------------------------- fan-out

RPC_DIALOGUES = [  # (dialogue id, speakers, day): AA talks to AB and AC, AB also to AC
    (1, ("AA", "AB"), "2022-08-06"),
    (2, ("AC", "AA"), "2022-08-06"),
    (3, ("AB", "AC"), "2022-08-07"),
]


def _rpc_file(folder: Path) -> None:
    import gzip

    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "dialogues.jsonl.gz", "wt", encoding="utf-8") as f:
        for did, (a, b), day in RPC_DIALOGUES:
            utts = [
                {
                    "utterance_id": i,
                    "interlocutor_id": who,
                    "text": f"{who} line {i} of {did}",
                    "timestamp": f"{day}T10:0{i}:00",
                }
                for i, who in enumerate((a, b, a, b))
            ]
            f.write(
                json.dumps({"dialogue_id": did, "interlocutors": [a, b], "utterances": utts}) + "\n"
            )


def test_a_corpus_fans_out_to_its_speakers_in_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from memory_pipeline.defs import ingest as ingest_defs

    _rpc_file(tmp_path / "rpc")
    config = write_config(
        tmp_path,
        """
[pipeline]
owner = "nobody"
timezone = "Asia/Tokyo"
start_date = "2022-08-06"
end_date = "2022-08-07"
output_dir = "out"

[[sources]]
name = "rpc"
kind = "realpersonachat"
path = "rpc"
owners = "speakers"
owner_prefix = "rpc-"
""",
    )
    reads = []
    real = ingest_defs.read_source
    monkeypatch.setattr(
        ingest_defs,
        "read_source",
        lambda spec, days=None: reads.append(spec.name) or real(spec, days),
    )
    runner = Runner(config, tmp_path / "out")
    days = [dt.date(2022, 8, 6), dt.date(2022, 8, 7)]
    build_all(runner, days)
    assert reads == ["rpc"]  # one read pass for every owner
    out = runner.cfg.output_dir
    assert discover_owner_ids(out) == ["rpc-aa", "rpc-ab", "rpc-ac"]
    for speaker in ("AA", "AB", "AC"):
        oid = f"rpc-{speaker.lower()}"
        store = owner_store(out / "owners" / oid)
        msgs = store.read(T.RAW_MESSAGES)
        mine = {did for did, people, _ in RPC_DIALOGUES if speaker in people}
        assert set(msgs.column("conversation_id").to_pylist()) == {f"rpc-{d}" for d in mine}
        assert msgs.num_rows == 4 * len(mine)
        assert speaker not in set(msgs.column("contact_id").to_pylist())
        senders = msgs.column("sender").to_pylist()
        assert msgs.column("is_owner").to_pylist() == [s == speaker for s in senders]
        # an owner takes part only in the days they talked on: AA has no 08-07 partition
        assert store.dates(T.RAW_MESSAGES) == sorted(
            {dt.date.fromisoformat(day) for _, people, day in RPC_DIALOGUES if speaker in people}
        )
        assert current_version(out / "owners" / oid) is not None
    hits = memory_pipeline.search("line 1 of 3", 3, config=config, owner="rpc-aa")
    assert hits.chunks
    assert all(h.conversation_id in {"rpc-1", "rpc-2"} for h in hits.chunks)


def test_the_cli_runs_and_answers_per_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    """``memory-pipeline run`` builds every owner; status, sql and forget take --owner."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MEMORY_PIPELINE_CONFIG", raising=False)
    for oid in OWNERS:
        _write_owner(tmp_path, oid, DAYS)
    config = str(write_config(tmp_path, CONFIG))
    assert cli.main(["--config", config, "run", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "3 owners under" in out and "<owner>/parquet/raw_messages" in out
    assert cli.main(["--config", config, "status"]) == cli.EXIT_USAGE
    assert "owners: alice, bob, carol" in capsys.readouterr().err
    assert cli.main(["--config", config, "status", "--owner", "bob"]) == 0
    status = capsys.readouterr().out
    assert "owners/bob" in status and status.count("PASS") == 5
    sql = "SELECT count(*) AS n, count(DISTINCT owner_id) AS owners FROM raw_messages"
    assert cli.main(["--config", config, "sql", "--owner", "carol", sql, "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row == {"n": 20, "owners": 1}  # 2 days x 2 contacts x 5 messages, carol's only
    bob = _digest(tmp_path / "out" / "owners" / "bob")
    argv = ["--config", config, "forget", "--owner", "alice", "--contact", "Ken", "--yes"]
    assert cli.main(argv) == 0
    assert _digest(tmp_path / "out" / "owners" / "bob") == bob
    alice = owner_store(tmp_path / "out" / "owners" / "alice").read(T.RAW_MESSAGES)
    assert set(alice.column("contact_id").to_pylist()) == {"Maria"}
