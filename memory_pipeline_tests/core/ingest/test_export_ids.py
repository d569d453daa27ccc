"""Re-exports of formats that carry stable message ids merge by those ids, not by content.

Per format: two overlapping exports of one chat, the later one with one message edited (same
id, new text). The content rule kept both versions; the id rule keeps one row, the newer
export's text, and quarantines the older version as ``duplicate_export``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import Message
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import export_message_id, message_id
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    read,
    reasons,
    reconciles,
)
from memory_pipeline_tests.core.ingest.sources.test_imessage import build

EDITED = "EDITED: the text after an edit"

# kind -> (fixture file or folder, a message text in it to edit)
JSON_FORMATS: dict[str, tuple[Path, str]] = {
    "telegram": (EXPORTS / "telegram" / "ChatExport_2024-03-01", "Привет! 👋"),
    "discord": (
        EXPORTS / "discord" / "Direct Messages - Private - kenta [1190000000000000777].json",
        "明日の集合、何時だっけ？",
    ),
    "slack": (EXPORTS / "slack" / "Acme Slack export Mar 1 2024", "Morning all!"),
    "chatgpt": (EXPORTS / "chatgpt" / "2024-03-01", "京都で雨の日に行ける場所を3つ教えて"),
    "claude": (
        EXPORTS / "claude" / "2024-03-01",
        "Kannst du diesen Absatz ins Englische übersetzen?",
    ),
}


def _edit(value: Any, old: str, new: str) -> tuple[Any, int]:
    """``value`` (parsed JSON) with every string that starts with ``old`` replaced."""
    if isinstance(value, str):
        return (new, 1) if value.startswith(old) else (value, 0)
    if isinstance(value, list):
        pairs = [_edit(v, old, new) for v in value]
        return [p[0] for p in pairs], sum(p[1] for p in pairs)
    if isinstance(value, dict):
        pairs = {k: _edit(v, old, new) for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, sum(p[1] for _, p in pairs.items())
    return value, 0


def _copy_edited(src: Path, dst: Path, old: str) -> None:
    """``src`` copied to ``dst`` with the message ``old`` edited in whichever JSON holds it."""
    if src.is_dir():
        shutil.copytree(src, dst)
        files = sorted(dst.rglob("*.json"))
    else:
        dst.parent.mkdir(parents=True)
        shutil.copy(src, dst)
        files = [dst]
    hits = 0
    for f in files:
        doc, n = _edit(json.loads(f.read_text("utf-8")), old, EDITED)
        if n:
            f.write_text(json.dumps(doc, ensure_ascii=False), "utf-8")
            hits += n
    assert hits, f"{old!r} is not in {src}"


def _two_exports(tmp_path: Path, src: Path, old: str) -> tuple[Path, Path, Path]:
    root = tmp_path / "exports"
    first = root / "2024-03-01" / src.name
    second = root / "2024-04-01" / src.name
    first.parent.mkdir(parents=True)
    if src.is_dir():
        shutil.copytree(src, first)
    else:
        shutil.copy(src, first)
    _copy_edited(src, second, old)
    return root, first, second


def _check(kind: str, root: Path, first: Path, second: Path, old: str) -> None:
    a, b = read(kind, first), read(kind, second)
    result = merged(kind, root)
    reconciles(result, len(a) + len(b))
    kept = [m for _, m in result.messages]
    # one row per message of the chat: the edit did not add one
    assert len(kept) == len(messages(a)) == len(messages(b))
    assert [m.text for m in kept if m.text.startswith(EDITED)] == [EDITED]
    assert not [m for m in kept if m.text.startswith(old)]
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == len(messages(a))
    older = [q for q in result.quarantine if q.reason == R.R_DUPLICATE_EXPORT and old in q.raw]
    assert len(older) == 1  # the older export's version, kept in quarantine
    assert "2024-03-01" in older[0].source_file
    # the kept id is the export id's: an edit does not change it
    edited = next(m for m in kept if m.text == EDITED)
    mid = next(i for i, m in result.messages if m is edited)
    assert mid == export_message_id(edited.conversation_id, edited.source_ref)


@pytest.mark.parametrize("kind", sorted(JSON_FORMATS))
def test_an_edited_message_in_a_reexport_keeps_one_row(tmp_path: Path, kind: str) -> None:
    src, old = JSON_FORMATS[kind]
    root, first, second = _two_exports(tmp_path, src, old)
    _check(kind, root, first, second, old)


def test_imessage_edited_message_keeps_one_row(tmp_path: Path) -> None:
    old = "明日、空港まで迎えに行くね"
    first = tmp_path / "2024-03-01" / "chat.db"
    second = tmp_path / "2024-04-01" / "chat.db"
    for db in (first, second):
        db.parent.mkdir()
        build(db)
    con = sqlite3.connect(second)
    con.execute("UPDATE message SET text = ? WHERE guid = 'A1'", (EDITED,))
    con.commit()
    con.close()
    _check("imessage", tmp_path, first, second, old)


# -- the rule on records (no reader): which export is the newer one --------------------------

START = dt.date(2024, 3, 1)
T0 = dt.datetime(2024, 3, 1, 3, 0, tzinfo=dt.UTC)


def _msg(file: str, ref: str, text: str, minute: int, order: int) -> Message:
    ts = T0 + dt.timedelta(minutes=minute)
    return Message(
        source="s", conversation_id="telegram_1", contact_id="Maria", sender="Maria",
        is_owner=False, ts=ts, local_ts=(ts + dt.timedelta(hours=9)).replace(tzinfo=None),
        tz="Asia/Tokyo", type="text", text=text, source_order=order, source_ref=ref,
        source_file=file,
    )  # fmt: skip


def test_the_export_that_reaches_later_wins_even_when_read_first() -> None:
    newer = [
        _msg("b.json", "telegram:1/1", "edited", 0, 0),
        _msg("b.json", "telegram:1/2", "x", 9, 1),
    ]
    older = [_msg("a.json", "telegram:1/1", "original", 0, 0)]
    result = ingest([*newer, *older], start_date=START)
    assert [m.text for _, m in result.messages] == ["edited", "x"]
    assert [(q.reason, q.source_file) for q in result.quarantine] == [
        (R.R_DUPLICATE_EXPORT, "a.json")
    ]
    # read the other way round: the same row is kept
    again = ingest([*older, *newer], start_date=START)
    assert [m.text for _, m in again.messages] == ["edited", "x"]


def test_an_id_repeated_within_one_file_is_a_plain_duplicate() -> None:
    recs = [
        _msg("a.json", "telegram:1/1", "one", 0, 0),
        _msg("a.json", "telegram:1/1", "two", 1, 1),
    ]
    result = ingest(recs, start_date=START)
    assert [m.text for _, m in result.messages] == ["one"]
    assert [q.reason for q in result.quarantine] == [R.R_DUPLICATE]


def test_formats_without_ids_keep_the_content_rule() -> None:
    """A positional ref (a Telegram message without an id, a LINE line) is no export id:
    an edit there is a new message, as before, and the id is the content id."""
    recs = [
        _msg("a.json", "telegram:1/#0", "one", 0, 0),
        _msg("b.json", "telegram:1/#0", "1", 0, 0),
    ]
    result = ingest(recs, start_date=START)
    assert [m.text for _, m in result.messages] == ["1", "one"]
    assert {i for i, _ in result.messages} == {message_id(m) for _, m in result.messages}
