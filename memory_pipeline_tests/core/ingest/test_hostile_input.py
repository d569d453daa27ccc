"""Hostile input (issue 13): nothing lost, nothing crashes.

Every path under a source is read or accounted for by a quarantine row with a reason; one bad
file never blocks its neighbours; lone surrogates and legacy encodings do not crash ingest.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import Message, QuarantineRecord
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.normalize import messages_table, quarantine_table
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline_tests.paths import ROOT

SAMPLE = ROOT / "data" / "sample"
START = dt.date(2024, 3, 1)
GOOD_JSON = '{"messages": [{"time": "10:00", "sender": "Kenta", "text": "hi"}]}'
GOOD_TXT = "[LINE] Chat history with Kim\n\nFri, 3/8/2024\n10:00\tKim\thello\n"


def spec(kind: str, path: Path) -> SourceSpec:
    return SourceSpec(name="s", kind=kind, path=path, timezone="Asia/Tokyo", owner="Yuki")


def records(kind: str, path: Path) -> list:
    return list(read_source(spec(kind, path)))


def quarantined(recs: list) -> dict[str, str]:
    """{source_file: reason} of the quarantine records."""
    return {r.source_file: r.reason for r in recs if isinstance(r, QuarantineRecord)}


def conserved(recs: list) -> None:
    """records read = ingested + quarantined, and the tables build (no bad strings left)."""
    res = ingest(recs, start_date=START)
    assert sum(res.read_counts.values()) == len(res.messages) + len(res.quarantine) == len(recs)
    messages_table(res.messages)
    quarantine_table(res.quarantine)


# -- 1. a lone surrogate escape is valid JSON ---------------------------------------------------


def test_lone_surrogate_in_line_json_is_ingested_with_a_replacement_character(tmp_path):
    chat = tmp_path / "chat"
    chat.mkdir()
    (chat / "2024-03-01.json").write_text(
        '{"messages": [{"time": "10:00", "sender": "Ken\\ud800", "text": "a\\udc00b"},'
        ' {"time": "10:01", "sender": "Kenta", "text": "pair \\ud83d\\ude00 kept"}]}',
        encoding="utf-8",
    )
    recs = records("line_json", tmp_path)
    assert [(r.sender, r.text) for r in recs] == [
        ("Ken\ufffd", "a\ufffdb"),
        ("Kenta", "pair \U0001f600 kept"),
    ]
    conserved(recs)


def test_lone_surrogate_in_a_quarantined_entry_keeps_the_run_going(tmp_path):
    chat = tmp_path / "chat"
    chat.mkdir()
    (chat / "2024-03-01.json").write_text(
        '{"messages": [{"time": "99:00", "sender": "K", "text": "\\udfff"}]}', encoding="utf-8"
    )
    recs = records("line_json", tmp_path)
    assert [r.reason for r in recs] == [R.R_BAD_TIMESTAMP] and "\ufffd" in recs[0].raw
    conserved(recs)


# -- 3. one garbage .txt never blocks its neighbours --------------------------------------------


def test_garbage_txt_beside_good_exports_is_quarantined_and_the_others_ingest(tmp_path):
    shutil.copytree(SAMPLE / "line_txt", tmp_path / "txt")
    (tmp_path / "txt" / "notes.txt").write_text("shopping: milk, eggs\n", encoding="utf-8")
    (tmp_path / "txt" / "broken16.txt").write_bytes(
        b"\xff\xfe" + "[LINE] x".encode("utf-16-le") + b"\x00"
    )
    (tmp_path / "txt" / "binary.txt").write_bytes(bytes(range(256)))
    recs = records("line_txt", tmp_path / "txt")
    good = records("line_txt", SAMPLE / "line_txt")
    assert [r for r in recs if isinstance(r, Message)] == good
    assert quarantined(recs) == {
        "notes.txt": R.R_NOT_AN_EXPORT,
        "broken16.txt": R.R_ENCODING,
        "binary.txt": R.R_NOT_AN_EXPORT,
    }
    conserved(recs)


# -- 4. silent loss: links, directories, unreadable files ----------------------------------------


def test_line_json_accounts_for_links_directories_and_unreadable_files(tmp_path, monkeypatch):
    chat = tmp_path / "chat"
    chat.mkdir()
    for day in ("2024-03-01", "2024-03-02"):
        (chat / f"{day}.json").write_text(GOOD_JSON, encoding="utf-8")
    (chat / "2024-03-03.json").mkdir()  # a directory named like a date file
    os.symlink(chat / "gone.json", chat / "2024-03-04.json")  # dangling
    os.symlink(chat / "2024-03-05.json", chat / "2024-03-05.json")  # loop (to itself)
    os.symlink(tmp_path / "loop", tmp_path / "loop")  # a looping conversation directory
    denied = chat / "2024-03-02.json"
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == denied:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    recs = records("line_json", tmp_path)
    assert quarantined(recs) == {
        "chat/2024-03-02.json": R.R_PERMISSION,
        "chat/2024-03-03.json": R.R_NOT_A_FILE,
        "chat/2024-03-04.json": R.R_DANGLING_LINK,
        "chat/2024-03-05.json": R.R_SYMLINK_LOOP,
        "loop": R.R_SYMLINK_LOOP,
    }
    assert [r.local_date for r in recs if isinstance(r, Message)] == [dt.date(2024, 3, 1)]
    by_file = {r.source_file: r for r in recs if isinstance(r, QuarantineRecord)}
    assert by_file["chat/2024-03-04.json"].partition_date == dt.date(2024, 3, 4)
    assert all(r.detail and r.raw == "" for r in by_file.values())  # no content to keep
    conserved(recs)


def test_line_txt_accounts_for_links_directories_and_unreadable_files(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text(GOOD_TXT, encoding="utf-8")
    (tmp_path / "b.txt").write_text(GOOD_TXT.replace("Kim", "Lee"), encoding="utf-8")
    (tmp_path / "dir.txt").mkdir()
    os.symlink(tmp_path / "gone.txt", tmp_path / "dangling.txt")
    os.symlink(tmp_path / "loop.txt", tmp_path / "loop.txt")
    denied = tmp_path / "b.txt"
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == denied:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    recs = records("line_txt", tmp_path)
    assert quarantined(recs) == {
        "b.txt": R.R_PERMISSION,
        "dir.txt": R.R_NOT_A_FILE,
        "dangling.txt": R.R_DANGLING_LINK,
        "loop.txt": R.R_SYMLINK_LOOP,
    }
    assert [(r.source_file, r.text) for r in recs if isinstance(r, Message)] == [("a.txt", "hello")]
    conserved(recs)


# -- 5. Shift-JIS exports and out-of-range times --------------------------------------------------

JA_EXPORT = (
    "[LINE] 健太とのトーク履歴\r\n保存日時：2024/03/10 12:00\r\n\r\n"
    "2024/03/08(金)\r\n10:00\t健太\tおはよう\r\n10:01\tYuki\t了解です\r\n"
)


@pytest.mark.parametrize("encoding", ["cp932", "utf-16"])
def test_legacy_encoded_export_is_decoded(tmp_path, encoding):
    (tmp_path / "kenta.txt").write_bytes(JA_EXPORT.encode(encoding))
    recs = records("line_txt", tmp_path)
    assert [(r.sender, r.text, r.contact_id) for r in recs] == [
        ("健太", "おはよう", "健太"),
        ("Yuki", "了解です", "健太"),
    ]


def test_out_of_range_time_gets_a_bad_time_reason(tmp_path):
    (tmp_path / "kim.txt").write_text(
        GOOD_TXT + "25:61\tKim\tlate\n7:99 PM\tKim\tlater\n", encoding="utf-8"
    )
    recs = records("line_txt", tmp_path / "kim.txt")
    assert [r.reason for r in recs if isinstance(r, QuarantineRecord)] == [R.R_BAD_TIMESTAMP] * 2
    assert all("late" not in r.detail for r in recs if isinstance(r, QuarantineRecord))
