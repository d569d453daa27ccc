"""Re-exports merge: overlapping exports of one chat give each message once, with one id.

The fixture folder holds three exports of one LINE chat with Maria, saved on different days
under different file names, one from the Japanese UI: 21 message lines, 10 distinct messages,
among them a genuine repeat ("ok" twice at 10:00 on 3/6) that must stay two messages.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from pathlib import Path

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.ids import stable_id
from memory_pipeline.core.common.records import Message
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import message_id
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline_tests.factories import msg
from memory_pipeline_tests.paths import FIXTURES

REEXPORTS = FIXTURES / "line_txt_reexports"
START = dt.date(2024, 3, 1)
DISTINCT = 10
READ = 21


def spec(path: Path, name: str = "txt", kind: str = "line_txt") -> SourceSpec:
    return SourceSpec(name=name, kind=kind, path=path, timezone="Asia/Tokyo", owner="Yuki")


def merged(path: Path = REEXPORTS):
    return ingest(read_source(spec(path)), start_date=START)


def test_three_overlapping_exports_give_each_message_once() -> None:
    result = merged()
    got = [(m.local_ts, m.sender, m.text) for _, m in result.messages]
    assert len(got) == DISTINCT
    assert Counter(got)[(dt.datetime(2024, 3, 6, 10, 0), "Maria", "ok")] == 2  # a real repeat
    assert len(set(got)) == DISTINCT - 1
    assert {(m.conversation_id, m.contact_id) for _, m in result.messages} == {("maria", "Maria")}
    reasons = Counter(q.reason for q in result.quarantine)
    assert reasons == {R.R_DUPLICATE_EXPORT: READ - DISTINCT}
    kept = {mid for mid, _ in result.messages}
    for q in result.quarantine:
        assert q.detail.removeprefix("duplicate of ") in kept
        assert q.conversation_id == "maria"
    rows = result.audit_rows()
    assert sum(r["records_read"] for r in rows) == READ
    for r in rows:
        assert r["records_read"] == r["ingested"] + r["quarantined"]


def test_a_message_has_the_same_id_in_every_export() -> None:
    """Each export alone gives its messages the ids the merge gives them."""
    merged_ids = {mid for mid, _ in merged().messages}
    union: set[str] = set()
    for path in sorted(REEXPORTS.glob("*.txt")):
        alone = ingest(read_source(spec(path)), start_date=START)
        assert not alone.quarantine
        ids = {mid for mid, _ in alone.messages}
        assert len(ids) == len(alone.messages)
        assert ids <= merged_ids, path.name
        union |= ids
    assert union == merged_ids and len(union) == DISTINCT  # 21 lines, 10 ids


def test_merge_does_not_depend_on_file_names_or_order(tmp_path: Path) -> None:
    # rename so the reading order reverses; the kept copy changes, the messages do not
    names = sorted(p.name for p in REEXPORTS.glob("*.txt"))
    for i, name in enumerate(reversed(names)):
        shutil.copy(REEXPORTS / name, tmp_path / f"{i}_{name}")
    a, b = merged(), merged(tmp_path)
    assert [mid for mid, _ in a.messages] == [mid for mid, _ in b.messages]
    assert len(b.quarantine) == READ - DISTINCT


def test_id_rule_is_content_and_occurrence_not_position() -> None:
    m = msg("2024-03-01 10:00", "hi", order=7)
    assert message_id(m) == stable_id(
        "msg", m.conversation_id, m.local_ts.isoformat(), m.sender, m.type, m.text, 0
    )
    moved = msg("2024-03-01 10:00", "hi", order=3)
    assert message_id(moved) == message_id(m)
    assert message_id(m, 1) != message_id(m)


def test_same_file_repeat_at_same_position_is_still_a_plain_duplicate() -> None:
    other_file = msg("2024-03-01 10:00", "ok", order=9)
    other_file.source_file = "c1 (2).json"
    result = ingest(
        [
            msg("2024-03-01 10:00", "ok", order=0),
            msg("2024-03-01 10:00", "ok", order=1),  # a repeat: a second message
            msg("2024-03-01 10:00", "ok", order=0),  # the first read again
            other_file,  # the first, in a re-export
        ],
        start_date=START,
    )
    assert len(result.messages) == 2
    assert sorted(q.reason for q in result.quarantine) == [R.R_DUPLICATE, R.R_DUPLICATE_EXPORT]


def test_line_json_reexport_in_another_folder_merges_by_conversation_id(tmp_path: Path) -> None:
    def day_file(folder: str, texts: list[str]) -> None:
        doc = {
            "conversation_id": "maria",
            "contact": "Maria",
            "messages": [
                {"time": f"10:0{i}", "sender": "Maria", "text": t} for i, t in enumerate(texts)
            ],
        }
        (tmp_path / folder).mkdir(exist_ok=True)
        path = tmp_path / folder / "2024-03-05.json"
        path.write_text(json.dumps(doc), encoding="utf-8")

    day_file("maria", ["one", "two"])
    day_file("maria_reexport", ["one", "two", "three"])
    result = ingest(read_source(spec(tmp_path, kind="line_json")), start_date=START)
    assert [m.text for _, m in result.messages] == ["one", "two", "three"]
    assert [q.reason for q in result.quarantine] == [R.R_DUPLICATE_EXPORT] * 2


def test_txt_and_json_of_one_chat_merge_across_sources(tmp_path: Path) -> None:
    """A message is the same across sources when conversation, minute, sender, type and text
    agree (LINE .txt has no seconds, so a JSON time with seconds is another message)."""
    folder = tmp_path / "json" / "whatever"
    folder.mkdir(parents=True)
    doc = {
        "conversation_id": "maria",
        "messages": [
            {"time": "19:02", "sender": "Maria", "text": "Are you free next Saturday?"},
            {"time": "19:03:30", "sender": "Yuki", "text": "I think so, why?"},
        ],
    }
    (folder / "2024-03-05.json").write_text(json.dumps(doc), encoding="utf-8")
    records = [
        *read_source(spec(tmp_path / "json", name="json", kind="line_json")),
        *read_source(spec(REEXPORTS / "Maria.txt")),
    ]
    result = ingest(records, start_date=START)
    assert len(result.messages) == 6 + 1  # the 19:03:30 message is not the txt's 19:03
    dup = [q for q in result.quarantine if q.reason == R.R_DUPLICATE_EXPORT]
    assert [(q.source, q.source_line) for q in dup] == [("txt", 5)]
    assert all(isinstance(m, Message) for _, m in result.messages)
