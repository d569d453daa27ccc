"""line_json reader: bundled sample, every bad-input fixture, and the one-record-per-entry rule."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from memory_pipeline.core.common.records import (
    MAX_MESSAGE_CHARS,
    MESSAGE_TYPES,
    QUARANTINE_REASONS,
    Message,
    QuarantineRecord,
    SourceError,
)
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.ingest.sources.line_json import read_line_json
from memory_pipeline_tests.paths import FIXTURES, ROOT

SAMPLE = ROOT / "data" / "sample" / "line_json"
BAD = FIXTURES / "line_json_bad"
D = dt.date


def spec_for(path: Path, tz: str = "Asia/Tokyo", owner: str = "Yuki") -> SourceSpec:
    return SourceSpec(name="t_json", kind="line_json", path=path, timezone=tz, owner=owner)


def read(path: Path, dates: set[dt.date] | None = None, **kw: str) -> list:
    return list(read_source(spec_for(path, **kw), dates))


def count_input_records(root: Path) -> int:
    """Independent count: a parseable file holds len(messages) records, any other file one."""
    total = 0
    for path in sorted(root.glob("*/*.json")):
        try:
            # invalid bytes cost their entries only: the file's entries still count
            doc = json.loads(path.read_bytes().decode("utf-8", "surrogateescape").lstrip("\ufeff"))
        except ValueError:
            total += 1
            continue
        is_list = isinstance(doc, dict) and isinstance(doc.get("messages"), list)
        total += len(doc["messages"]) if is_list else 1
    return total


# -- bundled sample ---------------------------------------------------------------------------


def test_sample_reads_every_message_without_quarantine() -> None:
    recs = read(SAMPLE)
    assert recs and all(isinstance(r, Message) for r in recs)
    assert len(recs) == count_input_records(SAMPLE)
    assert {r.conversation_id for r in recs} == {"maria", "kenta"}
    assert {(r.conversation_id, r.contact_id) for r in recs} == {
        ("maria", "Maria"),
        ("kenta", "健太"),
    }
    assert {r.sender for r in recs} == {"Maria", "健太", "Yuki"}
    for r in recs:
        assert r.type in MESSAGE_TYPES
        assert r.text.strip() and len(r.text) <= MAX_MESSAGE_CHARS
        assert r.is_owner == (r.sender == "Yuki")
        assert r.ts.tzinfo is dt.UTC and r.tz == "Asia/Tokyo"
        assert r.ts == (r.local_ts - dt.timedelta(hours=9)).replace(tzinfo=dt.UTC)
        assert D(2024, 3, 1) <= r.local_date <= D(2024, 3, 14)
        assert r.source_file == f"{r.conversation_id}/{r.local_date.isoformat()}.json"
        assert r.source_ref.startswith(f"{r.source_file}#messages[")
    assert {"sticker", "photo", "system"} <= {r.type for r in recs}


def test_sample_shape_sessions_across_midnight_and_single_message_day() -> None:
    recs = read(SAMPLE)
    crossings = 0
    days: dict[tuple[str, dt.date], int] = {}
    for conv in ("maria", "kenta"):
        msgs = sorted((r for r in recs if r.conversation_id == conv), key=lambda r: r.ts)
        assert 8 <= len({m.local_date for m in msgs}) <= 10
        for a, b in zip(msgs, msgs[1:], strict=False):
            if a.local_date != b.local_date and b.ts - a.ts < dt.timedelta(minutes=30):
                crossings += 1
        for m in msgs:
            days[conv, m.local_date] = days.get((conv, m.local_date), 0) + 1
    assert crossings >= 2
    assert 1 in days.values()
    assert max(days.values()) <= 40


def test_source_order_and_ref_follow_the_file() -> None:
    recs = read(SAMPLE, {D(2024, 3, 2)})
    maria = [r for r in recs if r.conversation_id == "maria"]
    doc = json.loads((SAMPLE / "maria" / "2024-03-02.json").read_text(encoding="utf-8"))
    assert [r.text for r in maria] == [m["text"] for m in doc["messages"]]
    assert [r.source_order for r in maria] == list(range(len(maria)))
    assert [r.source_ref for r in maria] == [
        f"maria/2024-03-02.json#messages[{i}]" for i in range(len(maria))
    ]
    assert all(r.source_line is None for r in maria)


def test_reads_are_deterministic_and_dates_hint_only_skips_files() -> None:
    full = read(SAMPLE)
    assert full == read(SAMPLE)
    want = {D(2024, 3, 2), D(2024, 3, 3)}
    assert read(SAMPLE, want) == [r for r in full if r.local_date in want]
    assert read(SAMPLE, set()) == []


# -- bad input --------------------------------------------------------------------------------

EXPECTED_BAD = {
    # (file, record_ref): (reason or None for a Message, source_line)
    ("chat/2024-03-01.json", "$"): ("malformed_json", 6),
    ("chat/2024-03-02.json", "messages[0]"): (None, None),
    ("chat/2024-03-02.json", "messages[1]"): ("missing_timestamp", None),
    ("chat/2024-03-02.json", "messages[2]"): ("missing_timestamp", None),
    ("chat/2024-03-02.json", "messages[3]"): ("missing_timestamp", None),
    ("chat/2024-03-02.json", "messages[4]"): ("bad_timestamp", None),
    ("chat/2024-03-02.json", "messages[5]"): (None, None),
    ("chat/2024-03-02.json", "messages[6]"): (None, None),
    ("chat/2024-03-02.json", "messages[7]"): (None, None),
    ("chat/2024-03-02.json", "messages[8]"): (None, None),
    ("chat/2024-03-02.json", "messages[9]"): ("missing_field", None),
    ("chat/2024-03-02.json", "messages[10]"): ("missing_field", None),
    ("chat/2024-03-02.json", "messages[11]"): ("malformed_json", None),
    ("chat/2024-03-02.json", "messages[12]"): (None, None),
    ("chat/2024-03-02.json", "messages[13]"): (None, None),
    ("chat/2024-03-02.json", "messages[14]"): (None, None),
    ("chat/2024-03-02.json", "messages[15]"): ("bad_timestamp", None),
    ("chat/2024-03-03.json", "messages[0]"): (None, None),
    ("chat/2024-03-03.json", "messages[1]"): ("encoding_error", None),
    ("chat/2024-03-04.json", "messages[0]"): ("bad_timestamp", None),
    ("chat/2024-03-04.json", "messages[1]"): ("bad_timestamp", None),
    ("chat/2024-03-05.json", "messages[0]"): (None, None),
    ("chat/2024-03-06.json", "messages[0]"): (None, None),
    ("chat/2024-03-07.json", "$"): ("malformed_json", None),
    ("chat/2024-03-08.json", "messages[0]"): ("bad_timestamp", None),
}


def _key(r: Message | QuarantineRecord) -> tuple[str, str]:
    if isinstance(r, Message):
        return r.source_file, r.source_ref.split("#", 1)[1]
    return r.source_file, r.record_ref


@pytest.fixture(scope="module")
def bad_records() -> list:
    return read(BAD / "records")


def test_bad_fixture_one_record_per_input_record(bad_records: list) -> None:
    assert len(bad_records) == count_input_records(BAD / "records") == len(EXPECTED_BAD)
    got = {}
    for r in bad_records:
        reason = r.reason if isinstance(r, QuarantineRecord) else None
        got[_key(r)] = (reason, r.source_line)
    assert got == EXPECTED_BAD


def test_quarantine_records_are_safe_to_log_and_repairable(bad_records: list) -> None:
    secrets = ["secret", "no time here", "not a time", "impossible time", "who said this", "caf"]
    quarantined = [r for r in bad_records if isinstance(r, QuarantineRecord)]
    assert len(quarantined) == sum(reason is not None for reason, _ in EXPECTED_BAD.values())
    for q in quarantined:
        assert q.reason in QUARANTINE_REASONS
        assert q.source == "t_json" and q.conversation_id == "chat"
        assert q.partition_date == D.fromisoformat(q.source_file[5:15])
        assert q.raw and not any(s in q.detail for s in secrets), q.detail
    malformed = next(r for r in bad_records if _key(r) == ("chat/2024-03-01.json", "$"))
    assert "line 6 column 5" in malformed.detail
    no_time = next(r for r in bad_records if _key(r) == ("chat/2024-03-02.json", "messages[1]"))
    assert json.loads(no_time.raw)["text"] == "no time here"


def test_pass_through_cases_are_left_to_the_central_validator(bad_records: list) -> None:
    by = {_key(r): r for r in bad_records}
    f = "chat/2024-03-02.json"
    assert by[f, "messages[5]"].text == ""
    dup_a, dup_b = by[f, "messages[6]"], by[f, "messages[7]"]
    assert isinstance(dup_a, Message) and isinstance(dup_b, Message)
    assert (dup_a.text, dup_a.ts, dup_a.source_order) == (dup_b.text, dup_b.ts, 6)
    assert by[f, "messages[8]"].type == "poll"
    assert by[f, "messages[12]"].source_order == 12  # missing source_order -> array index
    system = by[f, "messages[13]"]
    assert (system.type, system.sender, system.is_owner) == ("system", "", False)
    frac = by[f, "messages[14]"]
    assert frac.type == "text"
    assert frac.local_ts == dt.datetime(2024, 3, 2, 7, 5, 9, 250000)
    huge = by["chat/2024-03-06.json", "messages[0]"]
    assert isinstance(huge, Message) and len(huge.text) > MAX_MESSAGE_CHARS
    assert huge.tz == "Europe/Madrid"
    assert huge.ts == dt.datetime(2024, 3, 6, 7, 0, tzinfo=dt.UTC)


def test_bom_file_uses_defaults(bad_records: list) -> None:
    m = next(r for r in bad_records if r.source_file == "chat/2024-03-05.json")
    assert (m.conversation_id, m.contact_id, m.tz) == ("chat", "chat", "Asia/Tokyo")
    assert m.ts == dt.datetime(2024, 3, 5, 14, 59, 59, tzinfo=dt.UTC) and m.is_owner


def test_dates_hint_skips_bad_files_of_other_dates() -> None:
    recs = read(BAD / "records", {D(2024, 3, 5)})
    assert [r.source_file for r in recs] == ["chat/2024-03-05.json"]


# -- whole-input errors -----------------------------------------------------------------------


def _write(path: Path, text: str = '{"messages": []}') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_misnamed_json_file_is_a_source_error() -> None:
    with pytest.raises(SourceError, match=r"notes\.json is not named like a date"):
        read(BAD / "misnamed")


@pytest.mark.parametrize(
    ("layout", "match"),
    [
        ({}, "no <conversation>/<YYYY-MM-DD>.json files"),
        ({"2024-03-01.json": "{}"}, "not inside a conversation directory"),
        ({"c/2024-02-30.json": "{}"}, "2024-02-30.json is not named like a date"),
        ({"c/readme.md": "x"}, "no <conversation>/<YYYY-MM-DD>.json files"),
    ],
)
def test_layout_mistakes_are_source_errors(tmp_path: Path, layout: dict, match: str) -> None:
    for name, text in layout.items():
        _write(tmp_path / name, text)
    with pytest.raises(SourceError, match=match):
        read(tmp_path)


def test_missing_path_file_path_bad_zone_and_unreadable_file(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(SourceError, match="missing"):
        list(read_line_json(spec_for(tmp_path / "missing"), None))
    f = _write(tmp_path / "x.json")
    with pytest.raises(SourceError, match="expects a directory"):
        read(f)
    good = _write(tmp_path / "src" / "c" / "2024-03-01.json")
    with pytest.raises(SourceError, match="Nowhere/City"):
        read(tmp_path / "src", tz="Nowhere/City")

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    with pytest.raises(SourceError, match=f"cannot read {good}: Permission denied"):
        read(tmp_path / "src")


# -- exact records: pins _read_file's output (reason, detail, line, raw) across refactors ------

EXPECTED_BAD_DETAILS = {
    ("chat/2024-03-01.json", "$"): "invalid JSON at line 6 column 5: Expecting ',' delimiter",
    ("chat/2024-03-02.json", "messages[1]"): "no time",
    ("chat/2024-03-02.json", "messages[2]"): "time is 'NaT'",
    ("chat/2024-03-02.json", "messages[3]"): "no time",
    ("chat/2024-03-02.json", "messages[4]"): "time out of range '25:61'",
    ("chat/2024-03-02.json", "messages[9]"): "no sender field",
    ("chat/2024-03-02.json", "messages[10]"): "no text field",
    ("chat/2024-03-02.json", "messages[11]"): "entry is str, expected an object",
    ("chat/2024-03-02.json", "messages[15]"): "time is int, expected 'HH:MM[:SS]'",
    ("chat/2024-03-03.json", "messages[1]"): "invalid UTF-8 in the entry",
    ("chat/2024-03-04.json", "messages[0]"): (
        "date field '2024-03-05' does not match file name date 2024-03-04"
    ),
    ("chat/2024-03-04.json", "messages[1]"): (
        "date field '2024-03-05' does not match file name date 2024-03-04"
    ),
    ("chat/2024-03-07.json", "$"): "top level is list, expected an object",
    ("chat/2024-03-08.json", "messages[0]"): "unknown timezone 'Mars/Olympus_Mons'",
}


def test_bad_fixture_quarantine_details(bad_records: list) -> None:
    got = {_key(r): r.detail for r in bad_records if isinstance(r, QuarantineRecord)}
    assert got == EXPECTED_BAD_DETAILS


def test_bad_fixture_file_level_raw_excerpts(bad_records: list) -> None:
    by = {_key(r): r for r in bad_records}
    files = BAD / "records" / "chat"
    listed = (files / "2024-03-07.json").read_text(encoding="utf-8")
    assert by["chat/2024-03-07.json", "$"].raw == listed  # whole text when short
    # an entry with an invalid byte keeps a replacement-decoded excerpt; its neighbour is read
    assert by["chat/2024-03-03.json", "messages[1]"].raw == (
        '{"time": "09:01", "sender": "Alex", "type": "text", "text": "caf\ufffd"}'
    )
    assert by["chat/2024-03-03.json", "messages[0]"].text == "ok"
    broken = (files / "2024-03-01.json").read_text(encoding="utf-8")
    assert by["chat/2024-03-01.json", "$"].raw == broken[:2000]  # error near the start
    # an entry's raw is its JSON, non-ASCII kept
    assert by["chat/2024-03-02.json", "messages[11]"].raw == '"just a string"'


def _quarantine(ref: str, reason: str, detail: str, raw: str, conv: str = "c") -> QuarantineRecord:
    return QuarantineRecord(
        source="t_json",
        source_file="c/2024-03-01.json",
        source_line=None,
        record_ref=ref,
        conversation_id=conv,
        partition_date=D(2024, 3, 1),
        reason=reason,
        detail=detail,
        raw=raw,
    )


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            {"date": "2024-03-01"},
            [_quarantine("$", "missing_field", "no messages array", '{"date": "2024-03-01"}')],
        ),
        (
            {"messages": {"a": 1}},
            [
                _quarantine(
                    "$", "malformed_json", "messages is dict, not array", '{"messages": {"a": 1}}'
                )
            ],
        ),
        (
            {"conversation_id": 7, "messages": [{"time": "10:00"}, 3]},
            [
                _quarantine(
                    "messages[0]",
                    "missing_field",
                    "conversation_id must be a non-empty string",
                    '{"time": "10:00"}',
                ),
                _quarantine(
                    "messages[1]",
                    "missing_field",
                    "conversation_id must be a non-empty string",
                    "3",
                ),
            ],
        ),
        (
            {"conversation_id": "other", "contact": " ", "messages": [{}]},
            [
                _quarantine(
                    "messages[0]",
                    "missing_field",
                    "contact must be a non-empty string",
                    "{}",
                    "other",
                )
            ],
        ),
        (
            {"timezone": 9, "messages": [{}]},
            [
                _quarantine(
                    "messages[0]", "bad_timestamp", "timezone must be an IANA zone name", "{}"
                )
            ],
        ),
        (
            {"date": 20240301, "messages": [{}]},
            [
                _quarantine(
                    "messages[0]",
                    "bad_timestamp",
                    "date field 'int' does not match file name date 2024-03-01",
                    "{}",
                )
            ],
        ),
        (
            {
                "messages": [
                    {"time": "10:00", "sender": "", "text": "x"},
                    {"time": "10:00", "sender": 5, "text": "x"},
                    {"time": "10:00", "sender": "A", "text": 5},
                    {"time": "10:00", "sender": "A", "text": "x", "source_order": -1},
                    {"time": "10:00", "sender": "A", "text": "x", "source_order": True},
                    {"time": "ten", "sender": "A", "text": "café"},
                    {"time": "null", "sender": "A", "text": "x"},
                ]
            },
            [
                _quarantine(
                    "messages[0]",
                    "missing_field",
                    "empty sender",
                    '{"time": "10:00", "sender": "", "text": "x"}',
                ),
                _quarantine(
                    "messages[1]",
                    "missing_field",
                    "sender is int, expected a string",
                    '{"time": "10:00", "sender": 5, "text": "x"}',
                ),
                _quarantine(
                    "messages[2]",
                    "missing_field",
                    "text is int, expected a string",
                    '{"time": "10:00", "sender": "A", "text": 5}',
                ),
                _quarantine(
                    "messages[3]",
                    "missing_field",
                    "source_order must be a non-negative integer",
                    '{"time": "10:00", "sender": "A", "text": "x", "source_order": -1}',
                ),
                _quarantine(
                    "messages[4]",
                    "missing_field",
                    "source_order must be a non-negative integer",
                    '{"time": "10:00", "sender": "A", "text": "x", "source_order": true}',
                ),
                _quarantine(
                    "messages[5]",
                    "bad_timestamp",
                    "unparseable time 'ten'",
                    '{"time": "ten", "sender": "A", "text": "café"}',
                ),
                _quarantine(
                    "messages[6]",
                    "missing_timestamp",
                    "time is 'null'",
                    '{"time": "null", "sender": "A", "text": "x"}',
                ),
            ],
        ),
    ],
    ids=[
        "no-messages",
        "messages-not-array",
        "conversation-not-string",
        "blank-contact",
        "timezone-not-string",
        "date-not-string",
        "entry-fields",
    ],
)
def test_quarantine_records_exactly(tmp_path: Path, doc: dict, expected: list) -> None:
    _write(tmp_path / "c" / "2024-03-01.json", json.dumps(doc, ensure_ascii=False))
    assert read(tmp_path) == expected


def test_messages_exactly(tmp_path: Path) -> None:
    doc = {
        "conversation_id": "conv",
        "contact": "Ann",
        "timezone": "Europe/Madrid",
        "messages": [
            {"time": "23:59:58.5", "sender": "Yuki", "text": "hi", "type": " Photo "},
            {"time": "00:01", "type": "system", "text": "joined", "source_order": 9},
        ],
    }
    _write(tmp_path / "dir" / "2024-03-01.json", json.dumps(doc))
    local = [dt.datetime(2024, 3, 1, 23, 59, 58, 500000), dt.datetime(2024, 3, 1, 0, 1)]
    common = {
        "source": "t_json",
        "conversation_id": "conv",
        "contact_id": "Ann",
        "tz": "Europe/Madrid",
        "source_file": "dir/2024-03-01.json",
    }
    assert read(tmp_path) == [
        Message(
            sender="Yuki",
            is_owner=True,
            ts=(local[0] - dt.timedelta(hours=1)).replace(tzinfo=dt.UTC),
            local_ts=local[0],
            type="photo",
            text="hi",
            source_order=0,
            source_ref="dir/2024-03-01.json#messages[0]",
            **common,
        ),
        Message(
            sender="",
            is_owner=False,
            ts=(local[1] - dt.timedelta(hours=1)).replace(tzinfo=dt.UTC),
            local_ts=local[1],
            type="system",
            text="joined",
            source_order=9,
            source_ref="dir/2024-03-01.json#messages[1]",
            **common,
        ),
    ]
