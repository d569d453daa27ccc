"""Owners in core: the owner-stamping store, owner ids, the API's folder rule, the fan-out."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common import tables as T
from memory_pipeline.core.common.owners import (
    OWNER_COLUMN,
    OwnerError,
    OwnerMismatch,
    OwnerStore,
    discover_owner_ids,
    fan_out_by_speaker,
    input_fingerprint,
    map_owners,
    owner_dir,
    owner_slug,
    owner_store,
    resolve_owner_dir,
    valid_owner_id,
    write_marker,
)
from memory_pipeline.core.common.records import Message, QuarantineRecord
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import messages_table
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline_tests.paths import FIXTURES

DAY = dt.date(2024, 3, 1)


def _sessions(n: int, prefix: str = "s") -> pa.Table:
    """``n`` rows in the sessions schema (values are irrelevant to the store)."""
    schema = T.SESSIONS.schema
    cols = {}
    for f in schema:
        if pa.types.is_string(f.type):
            cols[f.name] = pa.array([f"{prefix}{i}" for i in range(n)], f.type)
        else:
            cols[f.name] = pa.nulls(n, f.type)
    return pa.table(cols, schema=schema)


def test_owner_store_stamps_and_hides_the_owner_column(tmp_path: Path):
    store = OwnerStore(tmp_path, "alice")
    path = store.write(T.SESSIONS, _sessions(3), DAY)
    on_disk = pq.read_table(path)
    assert on_disk.column(OWNER_COLUMN).to_pylist() == ["alice"] * 3
    back = store.read(T.SESSIONS, [DAY])
    assert back.schema == T.SESSIONS.schema  # what stages see is unchanged
    assert back.num_rows == 3
    # the plain store reads the same file too (it selects the registry's columns)
    assert TableStore(tmp_path).read(T.SESSIONS, [DAY]).num_rows == 3
    # an empty read is the registry schema as well
    assert store.read(T.SESSIONS, [DAY + dt.timedelta(days=9)]).schema == T.SESSIONS.schema


def test_owner_store_refuses_rows_of_another_owner(tmp_path: Path):
    alice, bob = OwnerStore(tmp_path / "a", "alice"), OwnerStore(tmp_path / "b", "bob")
    alice.write(T.SESSIONS, _sessions(2), DAY)
    bob.write(T.SESSIONS, _sessions(1, "bob"), DAY + dt.timedelta(days=1))
    # bob's file copied into alice's folder (a bad restore, a path bug): reads fail loudly
    shutil.copy(bob.path(T.SESSIONS, DAY + dt.timedelta(days=1)), alice.table_dir(T.SESSIONS))
    with pytest.raises(OwnerMismatch, match="1 rows do not belong to owner 'alice'"):
        alice.read(T.SESSIONS)
    assert alice.read(T.SESSIONS, [DAY]).num_rows == 2  # her own partition still reads


def test_owner_store_refuses_files_without_the_column(tmp_path: Path):
    TableStore(tmp_path).write(T.SESSIONS, _sessions(2), DAY)  # unstamped
    with pytest.raises(OwnerMismatch, match="owner_id"):
        OwnerStore(tmp_path, "alice").read(T.SESSIONS)


def test_a_single_owner_folder_reads_files_written_before_owners(tmp_path: Path):
    """Not strict (one owner's folder): unstamped files are the owner's, stamped files of
    another owner are still refused; old and new files of a run-dependent table mix."""
    TableStore(tmp_path).write(T.SESSIONS, _sessions(2), DAY)  # before owners existed
    single = OwnerStore(tmp_path, "default", strict=False)
    single.write(T.SESSIONS, _sessions(3), DAY + dt.timedelta(days=1))
    assert single.read(T.SESSIONS).num_rows == 5
    assert single.read(T.SESSIONS, columns=["session_id"]).column_names == ["session_id"]
    TableStore(tmp_path).write(T.CHUNK_EMBEDDINGS, pa.table({"chunk_id": ["c0"]}), DAY)
    single.write(T.CHUNK_EMBEDDINGS, pa.table({"chunk_id": ["c1"]}), DAY + dt.timedelta(days=1))
    assert single.read(T.CHUNK_EMBEDDINGS).column("chunk_id").to_pylist() == ["c0", "c1"]
    OwnerStore(tmp_path, "bob").write(T.SESSIONS, _sessions(1), DAY + dt.timedelta(days=2))
    with pytest.raises(OwnerMismatch, match="do not belong to owner 'default'"):
        single.read(T.SESSIONS)
    assert owner_store(tmp_path).strict is False  # no marker: a single-owner folder


def test_owner_store_stamps_run_dependent_tables(tmp_path: Path):
    store = OwnerStore(tmp_path, "bob")
    data = pa.table({"chunk_id": ["c1", "c2"], "vector": [[0.1], [0.2]]})
    path = store.write(T.CHUNK_EMBEDDINGS, data, DAY)
    assert set(pq.read_table(path).column(OWNER_COLUMN).to_pylist()) == {"bob"}
    assert store.read(T.CHUNK_EMBEDDINGS).column_names == ["chunk_id", "vector"]
    with pytest.raises(OwnerMismatch):
        OwnerStore(tmp_path, "alice").read(T.CHUNK_EMBEDDINGS)


@pytest.mark.parametrize(
    ("owner_id", "ok"),
    [
        ("alice", True),
        ("a", True),
        ("rpc-aa_1", True),
        ("Alice", False),
        ("../x", False),
        ("-a", False),
        ("", False),
        ("a" * 64, True),
        ("a" * 65, False),
        ("a b", False),
    ],
)
def test_owner_ids_are_slugs(owner_id: str, ok: bool):
    assert valid_owner_id(owner_id) is ok
    if not ok:
        with pytest.raises(ValueError):
            owner_dir(Path("/x"), owner_id)


def test_owner_slug_never_merges_different_names():
    assert owner_slug("AA") == "aa"
    assert owner_slug("aa") == "aa"
    assert owner_slug("Ken Sato") != owner_slug("Ken-Sato")  # lossy: a hash keeps them apart
    assert owner_slug("佐藤") != owner_slug("鈴木")
    assert all(valid_owner_id(owner_slug(n)) for n in ("佐藤", "Ken Sato", "x/../y", "AA"))
    assert owner_slug("AB", "rpc-") == "rpc-ab"


def test_resolve_owner_dir_requires_the_owner_when_several_exist(tmp_path: Path):
    assert resolve_owner_dir(tmp_path, None) == tmp_path  # single owner: the folder itself
    assert resolve_owner_dir(tmp_path, "default") == tmp_path
    with pytest.raises(OwnerError, match="holds one owner, 'default'"):
        resolve_owner_dir(tmp_path, "bob")
    for oid in ("bob", "alice"):
        write_marker(owner_dir(tmp_path, oid), oid, oid.title())
    (tmp_path / "owners" / "stray").mkdir()  # no marker: not an owner
    assert discover_owner_ids(tmp_path) == ["alice", "bob"]
    with pytest.raises(OwnerError, match=r"2 owners .*owners: alice, bob"):
        resolve_owner_dir(tmp_path, None)
    with pytest.raises(OwnerError, match="unknown owner 'stray'"):
        resolve_owner_dir(tmp_path, "stray")
    assert resolve_owner_dir(tmp_path, "bob") == tmp_path / "owners" / "bob"
    assert owner_store(tmp_path / "owners" / "bob").owner_id == "bob"


def test_input_fingerprint_changes_only_with_the_files(tmp_path: Path):
    store = OwnerStore(tmp_path, "alice")
    store.write(T.SESSIONS, _sessions(2), DAY)
    first = input_fingerprint(store, [T.SESSIONS, T.CHUNKS], "cfg")
    assert first == input_fingerprint(store, [T.SESSIONS, T.CHUNKS], "cfg")
    assert first != input_fingerprint(store, [T.SESSIONS, T.CHUNKS], "other cfg")
    store.write(T.SESSIONS, _sessions(3), DAY + dt.timedelta(days=1))
    assert first != input_fingerprint(store, [T.SESSIONS, T.CHUNKS], "cfg")


def test_map_owners_is_a_plain_ordered_map():
    assert map_owners(lambda o: o * 2, [1, 2, 3]) == [2, 4, 6]


# ----------------------------------------------------------------------------- fan-out

RPC = FIXTURES / "rpc"


def _spec(owner: str | None) -> SourceSpec:
    return SourceSpec(
        name="rpc", kind="realpersonachat", path=RPC, timezone="Asia/Tokyo", owner=owner
    )


def test_fan_out_equals_an_owner_read_for_every_speaker():
    """One read of every dialogue, split by speaker, gives each speaker exactly the messages
    (ids, contacts, is_owner) a read with ``owner = <speaker>`` gives."""
    records = list(read_source(_spec(None)))
    fan = fan_out_by_speaker(records)
    speakers = sorted(fan.records)
    assert speakers == ["AA", "AB", "AC"]
    for speaker in speakers:
        fanned = ingest(fan.records[speaker], start_date=dt.date(2000, 1, 1))
        alone = ingest(read_source(_spec(speaker)), start_date=dt.date(2000, 1, 1))
        got = messages_table(fanned.messages).sort_by("message_id")
        want = messages_table(alone.messages).sort_by("message_id")
        assert got.num_rows > 0
        assert got.equals(want), speaker
        # quarantine records of the speaker's dialogues follow them too (a dialogue without
        # one readable utterance names no speaker: its records are counted as unassigned)
        readable = set(got.column("conversation_id").to_pylist())
        conv = {q.conversation_id for q in alone.quarantine if q.conversation_id in readable}
        assert conv
        assert conv <= {q.conversation_id for q in fanned.quarantine}
    # a dialogue belongs to both of its speakers, never to a third
    for rec in records:
        if isinstance(rec, Message):
            holders = {
                s
                for s in speakers
                if any(r.conversation_id == rec.conversation_id for r in fan.records[s])
            }
            assert holders == set(rec.contact_id.split("+"))
    # bad lines and dialogues without a readable utterance: counted, given to no one
    readable = {r.conversation_id for r in records if isinstance(r, Message)}
    assert fan.unassigned == sum(
        1 for r in records if isinstance(r, QuarantineRecord) and r.conversation_id not in readable
    )
    assert fan.unassigned > 0


def test_fan_out_can_keep_only_some_speakers():
    fan = fan_out_by_speaker(read_source(_spec(None)), speakers=["AB"])
    assert list(fan.records) == ["AB"]
    assert all(
        r.contact_id != "" and "AB" not in r.contact_id
        for r in fan.records["AB"]
        if isinstance(r, Message)
    )
