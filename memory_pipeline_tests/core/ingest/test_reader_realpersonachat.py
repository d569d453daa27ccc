"""RealPersonaChat reader: the mapping rules, one record per utterance, and the real corpus.

The fixture fixtures/rpc/dialogues.jsonl(.gz) holds, line by line: 1 a clean dialogue (AA-AB);
2 NaT first / NaT between dates, out-of-order and midnight-crossing timestamps (AC-AA);
3 a truncated JSON line; 4 a dialogue without AA (AB-AC); 5 a dialogue with no timestamp at all
(NaT, null, missing key); 6 a bad timestamp, a missing text, an empty text and a non-object
utterance; 7 a JSON array instead of a dialogue; 8 an exact copy of line 1 (the real file
has two such duplicates; readers do not dedupe).
"""

from __future__ import annotations

import collections
import datetime as dt
import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_pipeline.core.common.records import (
    MAX_RAW_EXCERPT,
    Message,
    QuarantineRecord,
    Record,
    SourceError,
)
from memory_pipeline.core.common.timeutil import to_utc
from memory_pipeline.core.ingest.columnar import ingest
from memory_pipeline.core.ingest.sources import READERS, SourceSpec, read_source
from memory_pipeline.core.ingest.sources import realpersonachat as rpc
from memory_pipeline_tests.paths import FIXTURES

FIXTURES = FIXTURES / "rpc"
JSONL = FIXTURES / "dialogues.jsonl"
TOKYO = "Asia/Tokyo"


def make_spec(
    path: Path = FIXTURES, owner: str | None = None, tz: str = TOKYO, **options: Any
) -> SourceSpec:
    return SourceSpec(
        name="rpc", kind="realpersonachat", path=path, timezone=tz, owner=owner, options=options
    )


def read(spec: SourceSpec, dates: set[dt.date] | None = None) -> list[Record]:
    return list(read_source(spec, dates))


def write_gz(path: Path, lines: list[str] | bytes) -> Path:
    data = lines if isinstance(lines, bytes) else "".join(f"{x}\n" for x in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0))
    return path


def expected_per_line(owner: str | None) -> dict[int, int]:
    """Independent count: utterances per in-scope dialogue line, 1 per unusable line."""
    out: dict[int, int] = {}
    for no, line in enumerate(JSONL.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            out[no] = 1
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("utterances"), list):
            out[no] = 1
        elif owner is None or owner in obj["interlocutors"]:
            out[no] = len(obj["utterances"])
    return out


def by_ref(records: list[Record]) -> dict[tuple[int | None, str], Record]:
    return {
        (r.source_line, r.source_ref if isinstance(r, Message) else r.record_ref): r
        for r in records
    }


def partition(r: Record) -> dt.date | None:
    return r.local_date if isinstance(r, Message) else r.partition_date


# --- fixture integrity and registration ------------------------------------------------------


def test_gz_fixture_is_the_readable_jsonl() -> None:
    assert gzip.decompress((FIXTURES / "dialogues.jsonl.gz").read_bytes()) == JSONL.read_bytes()


def test_registered() -> None:
    assert READERS["realpersonachat"] is rpc.read_realpersonachat


def test_message_built_positionally_matches_record_field_order() -> None:
    # The fast positional constructor is only used while records.Message keeps its order.
    assert rpc._new_message is Message


# --- one record per input record ---------------------------------------------------------------


@pytest.mark.parametrize("owner", [None, "AA", "AB", "AC"])
def test_exactly_one_record_per_utterance(owner: str | None) -> None:
    records = read(make_spec(owner=owner))
    got = collections.Counter(r.source_line for r in records)
    assert dict(got) == expected_per_line(owner)
    # never both a message and a quarantine record for one utterance
    assert len(by_ref(records)) == len(records)


def test_fixture_totals() -> None:
    assert len(read(make_spec())) == 28
    assert len(read(make_spec(owner="AA"))) == 25


def test_deterministic() -> None:
    assert read(make_spec()) == read(make_spec())
    assert read(make_spec(owner="AA")) == read(make_spec(owner="AA"))


def test_duplicate_dialogue_lines_pass_through() -> None:
    recs = [r for r in read(make_spec()) if isinstance(r, Message) and r.conversation_id == "rpc-1"]
    assert len(recs) == 8
    assert {r.source_line for r in recs} == {1, 8}


# --- field mapping -----------------------------------------------------------------------------


def test_message_fields() -> None:
    first = read(make_spec(owner="AA"))[0]
    assert first == Message(
        source="rpc",
        conversation_id="rpc-1",
        contact_id="AB",
        sender="AA",
        is_owner=True,
        ts=dt.datetime(2022, 8, 6, 5, 51, 18, 360000, tzinfo=dt.UTC),
        local_ts=dt.datetime(2022, 8, 6, 14, 51, 18, 360000),
        tz=TOKYO,
        type="text",
        text="よろしくお願いします。",
        source_order=0,
        source_ref="dialogue:1/utterance:0",
        source_file="dialogues.jsonl.gz",
        source_line=1,
        ts_inferred=False,
    )


def test_all_messages_have_consistent_times() -> None:
    for r in read(make_spec()):
        if isinstance(r, Message):
            assert r.ts.tzinfo is dt.UTC
            assert r.local_ts.tzinfo is None
            assert r.ts == to_utc(r.local_ts, r.tz)
            assert r.type == "text"
            assert r.ts_inferred is False


def test_owner_mode_contacts_and_is_owner() -> None:
    records = read(make_spec(owner="AA"))
    contacts = {r.conversation_id: r.contact_id for r in records if isinstance(r, Message)}
    assert contacts == {"rpc-1": "AB", "rpc-2": "AC", "rpc-6": "AB"}
    assert "rpc-4" not in {r.conversation_id for r in records}
    for r in records:
        if isinstance(r, Message):
            assert r.is_owner == (r.sender == "AA")


def test_benchmark_mode_contacts_and_is_owner() -> None:
    records = read(make_spec(owner=None))
    contacts = {r.conversation_id: r.contact_id for r in records if isinstance(r, Message)}
    assert contacts == {"rpc-1": "AA+AB", "rpc-2": "AA+AC", "rpc-4": "AB+AC", "rpc-6": "AA+AB"}
    assert not any(r.is_owner for r in records if isinstance(r, Message))


def test_count_skipped() -> None:
    assert rpc.count_skipped(make_spec(owner="AA")) == 1  # dialogue 4 (AB-AC)
    assert rpc.count_skipped(make_spec(owner="AC")) == 4  # lines 1, 5, 6, 8
    assert rpc.count_skipped(make_spec(owner=None)) == 0


def test_out_of_order_timestamps_keep_source_order() -> None:
    msgs = [r for r in read(make_spec()) if isinstance(r, Message) and r.conversation_id == "rpc-2"]
    assert [m.source_order for m in msgs] == [1, 3, 4, 5]
    assert msgs[2].local_ts < msgs[1].local_ts  # utterance 4 is earlier than 3: kept as given


def test_midnight_crossing_uses_local_date() -> None:
    recs = by_ref(read(make_spec()))
    late = recs[(2, "dialogue:2/utterance:1")]
    after = recs[(2, "dialogue:2/utterance:3")]
    assert isinstance(late, Message) and isinstance(after, Message)
    assert late.local_date == dt.date(2022, 8, 9)
    assert after.local_date == dt.date(2022, 8, 10)
    assert after.ts == dt.datetime(2022, 8, 9, 15, 0, 15, tzinfo=dt.UTC)


# --- quarantine --------------------------------------------------------------------------------


def test_nat_partition_date_from_nearest_neighbour() -> None:
    recs = by_ref(read(make_spec()))
    first = recs[(2, "dialogue:2/utterance:0")]  # no previous: the next one's date
    middle = recs[(2, "dialogue:2/utterance:2")]  # previous (08-09) wins over next (08-10)
    for q in (first, middle):
        assert isinstance(q, QuarantineRecord)
        assert q.reason == "missing_timestamp"
        assert q.conversation_id == "rpc-2"
        assert q.source_line == 2
        assert q.source_file == "dialogues.jsonl.gz"
    assert first.partition_date == dt.date(2022, 8, 9)
    assert middle.partition_date == dt.date(2022, 8, 9)


def test_dialogue_without_any_timestamp() -> None:
    recs = [r for r in read(make_spec()) if r.source_line == 5]
    assert len(recs) == 3  # "NaT", null and a missing key
    for q in recs:
        assert isinstance(q, QuarantineRecord)
        assert q.reason == "missing_timestamp"
        assert q.partition_date is None


def test_malformed_line_is_one_record() -> None:
    recs = [r for r in read(make_spec(owner="AA")) if r.source_line == 3]
    assert len(recs) == 1
    q = recs[0]
    assert isinstance(q, QuarantineRecord)
    assert q.reason == "malformed_json"
    assert q.record_ref == "line:3"
    assert q.conversation_id is None
    assert q.partition_date is None
    assert q.raw.startswith('{"dialogue_id": 3')


def test_non_object_line_is_one_record() -> None:
    (q,) = [r for r in read(make_spec()) if r.source_line == 7]
    assert isinstance(q, QuarantineRecord)
    assert q.reason == "malformed_json"
    assert q.raw == '["not", "a", "dialogue"]'


def test_utterance_level_defects() -> None:
    recs = by_ref(read(make_spec()))
    expect = {
        "dialogue:6/utterance:1": "bad_timestamp",
        "dialogue:6/utterance:2": "missing_field",
        "dialogue:6/utterance:4": "malformed_json",
    }
    for ref, reason in expect.items():
        q = recs[(6, ref)]
        assert isinstance(q, QuarantineRecord), ref
        assert q.reason == reason
        assert q.partition_date == dt.date(2022, 8, 13)
    empty = recs[(6, "dialogue:6/utterance:3")]
    assert isinstance(empty, Message) and empty.text == ""  # the central validator decides
    assert recs[(6, "dialogue:6/utterance:4")].raw == '"oops"'


def test_quarantine_detail_never_contains_text() -> None:
    texts = [
        u["text"]
        for line in JSONL.read_text(encoding="utf-8").splitlines()
        for u in _utterances_or_empty(line)
        if isinstance(u, dict) and u.get("text")
    ] + ["途中で切れた行"]
    quarantined = [r for r in read(make_spec()) if isinstance(r, QuarantineRecord)]
    assert len(quarantined) == 11
    for q in quarantined:
        assert q.detail
        assert not any(t in q.detail for t in texts)
        assert len(q.raw) <= MAX_RAW_EXCERPT


def _utterances_or_empty(line: str) -> list[Any]:
    try:
        obj = json.loads(line)
    except ValueError:
        return []
    return obj.get("utterances", []) if isinstance(obj, dict) else []


def test_raw_excerpt_is_capped(tmp_path: Path) -> None:
    line = json.dumps({"dialogue_id": 9, "interlocutors": ["AA", "AB"], "utterances": "x" * 5000})
    path = write_gz(tmp_path / "dialogues.jsonl.gz", [line, JSONL.read_text().splitlines()[0]])
    (q,) = [r for r in read(make_spec(path)) if isinstance(r, QuarantineRecord)]
    assert q.reason == "missing_field"
    assert len(q.raw) == MAX_RAW_EXCERPT


def test_encoding_error_line(tmp_path: Path) -> None:
    good = JSONL.read_bytes().splitlines()[0]
    path = write_gz(tmp_path / "d.jsonl.gz", good + b'\n{"dialogue_id": 2, "x": "\xff\xfe"}\n')
    recs = read(make_spec(path))
    assert len(recs) == 5
    assert isinstance(recs[-1], QuarantineRecord)
    assert recs[-1].reason == "encoding_error"
    assert recs[-1].source_line == 2


# --- options, paths, hints ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "limit", "lines"),
    [
        (None, 0, []),
        (None, 2, [1, 2]),
        (None, 3, [1, 2, 3]),  # a bad line is a record, so it counts
        ("AA", 4, [1, 2, 3, 5]),  # dialogue 4 is not AA's: not counted
    ],
)
def test_dialogue_limit(owner: str | None, limit: int, lines: list[int]) -> None:
    recs = read(make_spec(owner=owner, dialogue_limit=limit))
    assert sorted({r.source_line for r in recs}) == lines


@pytest.mark.parametrize("limit", ["3", -1, 2.5, True])
def test_dialogue_limit_must_be_int(limit: Any) -> None:
    with pytest.raises(SourceError, match="dialogue_limit"):
        read(make_spec(dialogue_limit=limit))


def test_file_path_source_file_is_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "slice.jsonl.gz"
    path.write_bytes((FIXTURES / "dialogues.jsonl.gz").read_bytes())
    recs = read(make_spec(path))
    assert {r.source_file for r in recs} == {"slice.jsonl.gz"}
    assert len(recs) == 28


def test_blank_lines_are_not_records(tmp_path: Path) -> None:
    lines = JSONL.read_text(encoding="utf-8").splitlines()
    path = write_gz(tmp_path / "dialogues.jsonl.gz", [lines[0], "", "  ", lines[1], ""])
    recs = read(make_spec(tmp_path))
    assert len(recs) == 10
    assert {r.source_line for r in recs} == {1, 4}
    assert path.exists()


def test_dates_hint_only_narrows() -> None:
    full = read(make_spec())
    for day in {partition(r) for r in full} - {None}:
        hinted = read(make_spec(), {day})
        assert [r for r in hinted if partition(r) == day] == [
            r for r in full if partition(r) == day
        ]
    # Dialogues entirely after the first wanted date and not on a wanted date are skipped;
    # earlier ones are kept because ingest files pre-start_date records under start_date.
    hinted = read(make_spec(), {dt.date(2022, 8, 10)})
    assert {r.conversation_id for r in hinted} == {"rpc-1", "rpc-2", "rpc-5", None}
    hinted = read(make_spec(), {dt.date(2022, 8, 6)})
    assert {r.conversation_id for r in hinted} == {"rpc-1", "rpc-5", None}


@pytest.mark.parametrize("start", [dt.date(2022, 8, 6), dt.date(2022, 8, 10)])
def test_dates_hint_agrees_with_ingest(start: dt.date) -> None:
    # Reading with the hint must not change any partition's accounting (read = in + out).
    days = {partition(r) for r in read(make_spec())} - {None} | {start}
    for day in sorted(d for d in days if d >= start):
        full = ingest(read(make_spec()), start_date=start, dates=[day])
        hinted = ingest(read(make_spec(), {day}), start_date=start, dates=[day])
        assert hinted.audit_rows() == full.audit_rows()
        assert hinted.messages == full.messages


def test_explicit_offsets_and_dst(tmp_path: Path) -> None:
    stamps = [
        "2022-03-13T01:59:59",
        "2022-03-13T02:30:00",  # does not exist in New York: fold=0 rule of to_utc
        "2022-03-13T03:00:00",
        "2022-11-06T01:30:00",  # ambiguous: first occurrence (EDT)
        "2022-11-06T02:00:00",
        "2022-11-06T10:00:00+09:00",  # an explicit offset wins over the zone
        "2022-11-06T01:00:00Z",
    ]
    utts = [
        {"utterance_id": i, "interlocutor_id": "AA", "text": "x", "timestamp": s}
        for i, s in enumerate(stamps * 2)  # twice: second pass hits the hour cache
    ]
    line = json.dumps({"dialogue_id": 1, "interlocutors": ["AA", "AB"], "utterances": utts})
    recs = read(make_spec(write_gz(tmp_path / "d.jsonl.gz", [line]), tz="America/New_York"))
    assert all(isinstance(r, Message) for r in recs)
    for r in recs[:5] + recs[7:12]:
        assert r.ts == to_utc(r.local_ts, "America/New_York")
    assert recs[3].ts == dt.datetime(2022, 11, 6, 5, 30, tzinfo=dt.UTC)
    assert recs[5].ts == dt.datetime(2022, 11, 6, 1, 0, tzinfo=dt.UTC)
    assert recs[5].local_ts == dt.datetime(2022, 11, 5, 21, 0)
    assert recs[6].local_ts == dt.datetime(2022, 11, 5, 21, 0)
    # the second pass (hour offsets cached) gives the same times as the first
    assert [(r.ts, r.local_ts) for r in recs[:7]] == [(r.ts, r.local_ts) for r in recs[7:]]


@pytest.mark.parametrize(
    "tz", ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Chatham", TOKYO]
)
def test_hour_cache_equals_to_utc_around_transitions(tz: str) -> None:
    clock = rpc._Clock(tz)
    for start in (dt.datetime(2022, 3, 24), dt.datetime(2022, 9, 24), dt.datetime(2022, 10, 28)):
        t = start
        while t < start + dt.timedelta(days=18):
            for s in (t.isoformat(), t.isoformat(timespec="microseconds")):
                assert clock.parse(s) == (t, to_utc(t, tz)), s
            t += dt.timedelta(minutes=7, seconds=13)


# --- wholly unreadable input -------------------------------------------------------------------


def test_missing_file_in_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="dialogues.jsonl.gz"):
        read(make_spec(tmp_path))


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"plain text, not gzip\n", "not a readable gzip"),
        (gzip.compress(b"hello\nworld\n", mtime=0), "not RealPersonaChat JSON lines"),
        (gzip.compress(b'[1, 2]\n{"a": 1}\n', mtime=0), "not RealPersonaChat JSON lines"),
        (gzip.compress(b"", mtime=0), "not RealPersonaChat JSON lines"),
        (gzip.compress(JSONL.read_bytes(), mtime=0)[:-30], "not a readable gzip"),  # truncated
    ],
)
def test_unreadable_input_raises(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "dialogues.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(SourceError, match=match) as err:
        read(make_spec(path))
    assert str(path) in str(err.value)


def test_owner_in_no_dialogue_raises() -> None:
    with pytest.raises(SourceError, match="'ZZ'"):
        read(make_spec(owner="ZZ"))


def test_unknown_timezone_raises() -> None:
    with pytest.raises(SourceError, match="Mars/Olympus"):
        read(make_spec(tz="Mars/Olympus"))


# --- the real corpus (../shared/data; skipped when absent, failed under CI=true) -------------

REAL = "realpersonachat/dialogues.jsonl.gz"


@pytest.fixture(scope="module")
def rpc_full(shared_file: Callable[[str], Path]) -> dict[str, Any]:
    """Read the whole corpus once (benchmark mode) and keep only a summary: it is big."""
    path = shared_file(REAL)
    start = time.perf_counter()
    total = 0
    reasons: collections.Counter[str] = collections.Counter()
    undated = 0
    days: set[dt.date] = set()
    keys: set[tuple[int | None, int]] = set()
    for r in read_source(make_spec(path.parent)):
        total += 1
        if isinstance(r, QuarantineRecord):
            reasons[r.reason] += 1
            undated += r.partition_date is None
        else:
            days.add(r.local_date)
            keys.add((r.source_line, r.source_order))
    return {
        "path": path,
        "seconds": time.perf_counter() - start,
        "total": total,
        "reasons": reasons,
        "undated": undated,
        "days": days,
        "messages": len(keys),
    }


@pytest.fixture(scope="module")
def rpc_independent(rpc_full: dict[str, Any]) -> dict[str, int]:
    """Counts taken straight from the JSON, without the reader."""
    utterances = all_nat = 0
    with gzip.open(rpc_full["path"], "rb") as fh:
        for line in fh:
            utts = json.loads(line)["utterances"]
            utterances += len(utts)
            if all(u["timestamp"] == "NaT" for u in utts):
                all_nat += len(utts)
    return {"utterances": utterances, "all_nat": all_nat}


def test_real_utterance_count(rpc_full: dict[str, Any], rpc_independent: dict[str, int]) -> None:
    assert rpc_independent["utterances"] == 408_619
    assert rpc_full["total"] == 408_619


def test_real_quarantine(rpc_full: dict[str, Any]) -> None:
    assert rpc_full["reasons"] == {"missing_timestamp": 352}
    assert rpc_full["messages"] == 408_619 - 352  # distinct (line, order): nothing collapsed


def test_real_undated_quarantines_are_all_nat_dialogues(
    rpc_full: dict[str, Any], rpc_independent: dict[str, int]
) -> None:
    assert rpc_full["undated"] == rpc_independent["all_nat"] > 0


def test_real_date_range(rpc_full: dict[str, Any]) -> None:
    assert min(rpc_full["days"]) == dt.date(2022, 7, 29)
    assert max(rpc_full["days"]) == dt.date(2022, 11, 5)


def test_real_owner_mode(shared_file: Callable[[str], Path]) -> None:
    path = shared_file(REAL)
    spec = make_spec(path, owner="AA")
    mine = dialogues = 0
    with gzip.open(path, "rb") as fh:
        for line in fh:
            obj = json.loads(line)
            dialogues += 1
            if "AA" in obj["interlocutors"]:
                mine += len(obj["utterances"])
    records = read(spec)
    assert len(records) == mine > 0
    assert {r.contact_id for r in records if isinstance(r, Message)} >= {"AB"}
    skipped = rpc.count_skipped(spec)
    assert 0 < skipped < dialogues
    assert dialogues - skipped == len({r.source_line for r in records})
