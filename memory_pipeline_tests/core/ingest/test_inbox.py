"""The inbox store and reader (core/ingest/inbox.py, sources/inbox.py), without a server:
durable appends, idempotency across processes, torn lines, forget, and the ingest entrance
over the inbox as a source (records read = ingested + quarantined)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_pipeline.core.common.forget_list import ForgetList, forgotten_record
from memory_pipeline.core.common.records import Message, QuarantineRecord
from memory_pipeline.core.ingest.inbox import (
    InboxStore,
    clear_markers,
    inbox_dir,
    inbox_spec,
    migrate_inbox,
    pending_days,
    pending_markers,
    with_inbox,
)
from memory_pipeline.core.ingest.sources.inbox import (
    Refused,
    file_rel,
    parse_entry,
    read_inbox,
    source_ref,
)
from memory_pipeline.core.ingest.stage import read_all_tables

TZ = "Asia/Tokyo"
DAY = dt.date(2024, 3, 2)


def _raw(cid: str, text: str = "hello", conv: str = "maria", sender: str = "Maria", h: int = 20):
    return {
        "id": cid,
        "conversation": conv,
        "sender": sender,
        "time": f"2024-03-02T{h:02d}:00:00+09:00",
        "text": text,
    }


def _entries(*raws: dict):
    return [parse_entry(r) for r in raws]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"time": "2024-03-02T20:00:00"}, "bad_timestamp"),  # no offset
        ({"time": ""}, "missing_timestamp"),
        ({"text": " "}, "empty_text"),
        ({"text": "x" * 20_001}, "too_large"),
        ({"type": "hologram"}, "unknown_type"),
        ({"owner": "bob"}, "unknown_field"),
        ({"id": 7}, "missing_field"),
        ({"conversation": "a\nb"}, "missing_field"),
        ({"sender": "s" * 257}, "too_large"),
    ],
)
def test_a_bad_message_is_refused_with_its_reason(change, reason):
    with pytest.raises(Refused) as exc:
        parse_entry({**_raw("m"), **change})
    assert exc.value.reason == reason and "xxxxx" not in exc.value.detail


def test_appends_are_idempotent_conflicts_refused_and_files_private(tmp_path):
    store = InboxStore(tmp_path / "inbox", TZ)
    first = store.append(_entries(_raw("a"), _raw("b", "hi", h=21)))
    assert first.results == ["accepted", "accepted"] and first.days == {DAY}
    again = store.append(_entries(_raw("a"), _raw("b", "hi", h=21), _raw("b", "hi", h=21)))
    assert again.results == ["duplicate"] * 3 and again.days == set()
    # the same instant written with another offset is the same message
    same = {**_raw("a"), "time": "2024-03-02T11:00:00Z"}
    assert store.append(_entries(same)).results == ["duplicate"]
    [clash] = store.append(_entries(_raw("a", "other"))).results
    assert isinstance(clash, Refused) and clash.reason == "id_conflict"
    path = tmp_path / "inbox" / file_rel("maria", DAY)
    lines = path.read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["a", "b"]
    assert "maria" not in str(path.relative_to(tmp_path))  # no name in a path
    for p in (tmp_path / "inbox").rglob("*"):
        assert p.stat().st_mode & 0o077 == 0, p


def test_another_process_sees_the_ids_and_a_torn_line_stays_one_bad_line(tmp_path):
    root = tmp_path / "inbox"
    store = InboxStore(root, TZ)
    store.append(_entries(_raw("a")))
    code = (
        "import sys; from memory_pipeline.core.ingest.inbox import InboxStore;"
        "from memory_pipeline.core.ingest.sources.inbox import parse_entry;"
        f"s = InboxStore({str(root)!r}, {TZ!r});"
        "r = s.append([parse_entry(dict(id='a', conversation='maria', sender='Maria',"
        " time='2024-03-02T20:00:00+09:00', text='hello')), parse_entry(dict(id='c',"
        " conversation='maria', sender='Maria', time='2024-03-02T22:00:00+09:00', text='c'))]);"
        "print(r.results)"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "['duplicate', 'accepted']", done.stderr
    path = root / file_rel("maria", DAY)
    with path.open("ab") as f:
        f.write(b'{"id": "torn", "conversation": "ma')  # a crash mid-write: never acknowledged
    assert store.append(_entries(_raw("c", "c", h=22), _raw("d", h=23))).results == [
        "duplicate",
        "accepted",
    ]
    records = list(read_inbox(inbox_spec(tmp_path, TZ, "Yuki"), None))
    kinds = [(type(r).__name__, getattr(r, "reason", None)) for r in records]
    assert kinds == [
        ("Message", None),
        ("Message", None),
        ("QuarantineRecord", "malformed_json"),
        ("Message", None),
    ]
    assert [r.source_ref for r in records if isinstance(r, Message)] == [
        source_ref("a"),
        source_ref("c"),
        source_ref("d"),
    ]


def test_the_inbox_is_a_source_of_the_ingest_entrance(tmp_path):
    store = InboxStore(inbox_dir(tmp_path), TZ)
    store.append(_entries(_raw("a"), _raw("b", "hi", sender="Yuki", h=21), _raw("c", h=23)))
    (inbox_dir(tmp_path) / file_rel("maria", DAY)).open("ab").write(b"not json\n")
    spec = inbox_spec(tmp_path, TZ, "Yuki")
    assert with_inbox((), tmp_path, TZ, "Yuki") == (spec,)
    assert with_inbox((), tmp_path / "elsewhere", TZ, "Yuki") == ()
    result = read_all_tables([spec], [DAY], dt.date(2024, 3, 1))
    msgs = result.messages.to_pylist()
    assert [m["source_ref"] for m in msgs] == ["inbox:a", "inbox:b", "inbox:c"]
    assert [m["is_owner"] for m in msgs] == [False, True, False]
    assert {m["contact_id"] for m in msgs} == {"maria"}
    assert [q.reason for q in result.quarantine] == ["malformed_json"]
    assert sum(result.read_counts.values()) == len(msgs) + len(result.quarantine)


def test_forget_scrubs_the_inbox_and_ingest_accounts_the_text_free_lines(tmp_path):
    store = InboxStore(inbox_dir(tmp_path), TZ)
    store.append(_entries(_raw("k", "Ken's secret quokka", "ken", "Ken"), _raw("m", "Maria")))
    forget = ForgetList(salt=b"s" * 32)
    forget.add("conversation", "ken", DAY)
    assert store.scrub(forget) == 1
    text = "".join(p.read_text() for p in inbox_dir(tmp_path).rglob("*.jsonl"))
    assert "quokka" not in text and "Maria" in text
    assert store.lookup("k").fingerprint is None  # its status: forgotten
    # refused again, never written: a retry is still forgotten
    assert store.append(_entries(_raw("k", "Ken's secret quokka", "ken", "Ken"))).results == [
        "forgotten"
    ]
    records = list(read_inbox(inbox_spec(tmp_path, TZ, "Yuki"), None))
    gone = [r for r in records if isinstance(r, QuarantineRecord)]
    want = forgotten_record(forget, "inbox", "ken", file_rel("ken", DAY), source_ref("k"), DAY)
    assert [(q.reason, q.record_ref, q.raw) for q in gone] == [("forgotten", want.record_ref, "")]


def test_refresh_intents_are_durable_files_cleared_by_name(tmp_path):
    store = InboxStore(inbox_dir(tmp_path), TZ)
    made = store.mark_pending([DAY, DAY + dt.timedelta(days=1)])
    assert inbox_dir(tmp_path).stat().st_mode & 0o077 == 0  # made first: the owner's only
    later = store.mark_pending([DAY])
    assert pending_days(inbox_dir(tmp_path)) == {DAY, DAY + dt.timedelta(days=1)}
    assert len(pending_markers(inbox_dir(tmp_path), [DAY])) == 2
    clear_markers(made)  # a refresh clears what it saw; a later post's intent stays
    assert pending_markers(inbox_dir(tmp_path)) == later
    assert all(isinstance(p, Path) for p in later)


def test_retention_deletes_the_inbox_days_before_the_cutoff(tmp_path):
    from memory_pipeline.core.privacy.retention import apply_retention, plan_retention

    store = InboxStore(inbox_dir(tmp_path), TZ)
    old = {**_raw("old", "an old secret"), "time": "2024-01-05T10:00:00+09:00"}
    store.append(_entries(old, _raw("new", "a recent note")))
    # the inbox is in the state folder, apart from the output
    output = tmp_path / "output"
    apply_retention(plan_retention(output, dt.date(2024, 2, 1), state_dir=tmp_path))
    text = "".join(p.read_text() for p in inbox_dir(tmp_path).rglob("*.jsonl"))
    assert "old secret" not in text and "recent note" in text
    assert store.lookup("old") is None and store.lookup("new") is not None


def test_an_inbox_in_the_output_moves_into_the_state_once(tmp_path):
    old, new = inbox_dir(tmp_path / "output"), inbox_dir(tmp_path / "state")
    InboxStore(old, TZ).append(_entries(_raw("a"), _raw("b", h=21)))
    InboxStore(old, TZ).mark_pending([DAY])
    said = migrate_inbox(old, new)
    assert said == [f"moved the inbox (messages apps posted) from {old} to {new}"]
    assert not old.exists() and migrate_inbox(old, new) == []
    assert pending_days(new) == {DAY}
    # an old inbox reappearing beside the moved one (a restored output): merged, no line twice
    InboxStore(old, TZ).append(_entries(_raw("b", h=21), _raw("c", h=22), _raw("d", conv="ken")))
    assert len(migrate_inbox(old, new)) == 1 and not old.exists()
    assert sorted(InboxStore(new, TZ).ids()) == ["a", "b", "c", "d"]
    lines = (new / file_rel("maria", DAY)).read_text().splitlines()
    assert len(lines) == 3
