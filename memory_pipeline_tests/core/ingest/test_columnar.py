"""The columnar ingest path (core/ingest/columnar.py, sources/rpc_columnar.py) against the
record path (columnar.ingest over the row readers), which stays the reference.

Every parity test builds the per-date tables both ways and compares them whole (ids, text,
quarantine rows, audit). Each also asserts which reader ran, so a parity that holds only
because the columnar reader fell back to the row reader cannot pass as a columnar result.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from memory_pipeline.core.common.forget_list import load_forget_list
from memory_pipeline.core.common.records import Message
from memory_pipeline.core.ingest.sources import SourceSpec, read_source
from memory_pipeline.core.ingest.sources.rpc_columnar import read_realpersonachat_tables
from memory_pipeline.core.ingest.stage import (
    discover_dates,
    read_all,
    read_all_tables,
    read_source_tables,
    split_ingest,
)
from memory_pipeline.core.sessions.chunking import chunk_windows, sorted_distinct, window_plan
from memory_pipeline_tests.paths import FIXTURES, SAMPLE

START = dt.date(2022, 8, 1)
DAYS = [START + dt.timedelta(days=i) for i in range(10)]


def utt(i: int | None, who: str, text: str, ts: Any = "absent") -> dict[str, Any]:
    u: dict[str, Any] = {"interlocutor_id": who, "text": text}
    if i is not None:
        u["utterance_id"] = i
    if ts != "absent":
        u["timestamp"] = ts
    return u


def dialogue(did: int, people: list[str], utts: list[dict[str, Any]]) -> str:
    return json.dumps(
        {"dialogue_id": did, "interlocutors": people, "utterances": utts, "evaluations": []},
        ensure_ascii=False,
    )


# Clean JSON lines with the corpus's own defects and the odd shapes a timestamp can take.
CLEAN = [
    dialogue(
        1,
        ["AA", "AB"],
        [
            utt(0, "AA", "こんにちは", "2022-08-02T10:00:00.360000"),
            utt(1, "AB", "line one\nline two", "2022-08-02T10:01:00"),
            utt(2, "AA", "NaT follows", "2022-08-02T10:02:00.000000"),
            utt(3, "AB", "no time", "NaT"),
            utt(4, "AA", "empty string time", ""),
            utt(5, "AB", "same words", "2022-08-02T10:03:00"),
            utt(6, "AB", "same words", "2022-08-02T10:03:00"),  # a genuine repeat: 2 messages
            utt(7, "AA", "Feb 30", "2022-02-30T10:00:00"),
            utt(8, "AA", "offset", "2022-08-02T10:04:00+09:00"),
            utt(9, "AB", "zulu", "2022-08-02T01:05:00Z"),
            utt(10, "AA", "space form", "2022-08-02 10:06:00"),
            utt(11, "AB", "milliseconds", "2022-08-02T10:07:00.123"),
            utt(12, "AA", "   "),  # no timestamp key at all
            utt(13, "AB", "\u3000 ", "2022-08-02T10:08:00"),  # all whitespace: empty_text
            utt(14, "AA", "x" * 20_001, "2022-08-02T10:09:00"),  # too_large
            utt(15, "AB", "late", "2022-08-02T23:59:59.999999"),
            utt(16, "AA", "after midnight", "2022-08-03T00:30:00"),
        ],
    ),
    dialogue(
        2,
        ["AC", "AA"],
        [
            utt(None, "AC", "no utterance id", "NaT"),
            utt(None, "AA", "still none", "2022-08-04T09:00:00"),
            utt(2, "AC", "before the start date", "2022-07-20T09:00:00"),
        ],
    ),
    dialogue(3, ["AB", "AC"], [utt(0, "AB", "only NaT", "NaT"), utt(1, "AC", "x", None)]),
    dialogue(4, ["AB", "AA"], [utt(0, "AB", "last dialogue", "2022-08-05T20:00:00")]),
]
# the corpus holds two dialogue lines twice: their utterances are duplicates
CLEAN.append(CLEAN[0])


def write(folder: Path, lines: list[str], ending: str = "\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = ending.join(lines) + ending
    (folder / "dialogues.jsonl.gz").write_bytes(gzip.compress(data.encode("utf-8")))
    return folder


def rpc(path: Path, owner: str | None = None, tz: str = "Asia/Tokyo", **options) -> SourceSpec:
    return SourceSpec(
        name="rpc", kind="realpersonachat", path=path, timezone=tz, owner=owner, options=options
    )


def assert_same_tables(
    sources: list[SourceSpec],
    days: list[dt.date] = DAYS,
    start: dt.date = START,
    **kw: Any,
) -> dict[dt.date, Any]:
    rows = split_ingest(read_all(sources, days, start, **kw), days)
    cols = split_ingest(read_all_tables(sources, days, start, **kw), days)
    assert rows.keys() == cols.keys()
    for day in days:
        for name in ("messages", "quarantine", "audit"):
            a, b = getattr(rows[day], name), getattr(cols[day], name)
            assert a.schema == b.schema, (day, name)
            assert a.to_pylist() == b.to_pylist(), (day, name)
    return cols


def totals(tables: dict[dt.date, Any]) -> tuple[int, int]:
    return (
        sum(t.messages.num_rows for t in tables.values()),
        sum(t.quarantine.num_rows for t in tables.values()),
    )


# --- RealPersonaChat: the columnar reader --------------------------------------------------


def test_clean_file_is_read_in_columns(tmp_path: Path) -> None:
    spec = rpc(write(tmp_path, CLEAN))
    tables = read_source_tables(spec)
    assert tables.columnar
    assert tables.messages.num_rows > 0 and tables.quarantine


def test_clean_file_same_tables_as_the_record_path(tmp_path: Path) -> None:
    got = assert_same_tables([rpc(write(tmp_path, CLEAN))])
    reasons = sorted({r["reason"] for t in got.values() for r in t.quarantine.to_pylist()})
    # the rules this file exercises, so the parity above covers each of them
    assert reasons == [
        "bad_timestamp",
        "duplicate",
        "empty_text",
        "missing_timestamp",
        "out_of_range",
        "too_large",
    ]
    messages = [r for t in got.values() for r in t.messages.to_pylist()]
    assert sum(r["text"] == "same words" for r in messages) == 2  # the repeat is kept


@pytest.mark.parametrize("owner", [None, "AA", "AB"])
@pytest.mark.parametrize("limit", [None, 0, 1, 3])
def test_owner_and_limit(tmp_path: Path, owner: str | None, limit: int | None) -> None:
    options = {} if limit is None else {"dialogue_limit": limit}
    spec = rpc(write(tmp_path, CLEAN), owner=owner, **options)
    assert read_realpersonachat_tables(spec) is not None
    assert_same_tables([spec])


@pytest.mark.parametrize("tz", ["America/New_York", "Europe/London", "Australia/Lord_Howe"])
def test_dst_transitions_take_the_record_path_rule(tmp_path: Path, tz: str) -> None:
    """Local times in and around DST changes (gaps, repeated hours, half-hour shifts)."""
    stamps = [
        "2022-03-13T01:59:59",
        "2022-03-13T02:30:00",  # New York: does not exist
        "2022-03-13T03:00:00",
        "2022-11-06T01:30:00",  # New York: happens twice
        "2022-03-27T01:30:00",  # London: does not exist
        "2022-10-30T01:30:00",  # London: twice
        "2022-04-03T01:45:00",  # Lord Howe: 30-minute shift
        "2022-10-02T02:15:00",
    ]
    lines = [dialogue(1, ["AA", "AB"], [utt(i, "AA", f"t{i}", s) for i, s in enumerate(stamps)])]
    spec = rpc(write(tmp_path, lines), tz=tz)
    assert read_realpersonachat_tables(spec) is not None
    start = dt.date(2022, 3, 1)
    days = [start + dt.timedelta(days=i) for i in range(300)]
    got = assert_same_tables([spec], days, start)
    assert totals(got) == (len(stamps), 0)


def test_dates_subset_start_date_and_retention(tmp_path: Path) -> None:
    spec = rpc(write(tmp_path / "in", CLEAN))
    forget = load_forget_list(tmp_path / "out", create=True)
    some = [dt.date(2022, 8, 1), dt.date(2022, 8, 3), dt.date(2022, 8, 4)]
    assert_same_tables([spec], some)
    assert_same_tables([spec], DAYS, dt.date(2022, 8, 3))
    got = assert_same_tables([spec], forget=forget, retain_from=dt.date(2022, 8, 3))
    expired = [
        r for t in got.values() for r in t.quarantine.to_pylist() if r["reason"] == "expired"
    ]
    assert expired and all(r["raw"] == "" for r in expired)


@pytest.mark.parametrize("kind", ["contact", "conversation", "file"])
def test_forget_list(tmp_path: Path, kind: str) -> None:
    spec = rpc(write(tmp_path / "in", CLEAN))
    forget = load_forget_list(tmp_path / "out", create=True)
    value = {"contact": "AA+AB", "conversation": "rpc-1", "file": "rpc\x1fdialogues.jsonl.gz"}
    forget.add(kind, value[kind], dt.date(2022, 9, 1))
    got = assert_same_tables([spec], forget=forget)
    forgotten = [r for t in got.values() for r in t.quarantine.to_pylist()]
    assert any(r["reason"] == "forgotten" for r in forgotten)


HOSTILE = {
    "blank line inside": (CLEAN[:1] + [""] + CLEAN[1:], "\n"),
    "whitespace-only line": (CLEAN[:1] + ["   "] + CLEAN[1:], "\n"),
    "truncated line": (CLEAN[:1] + ['{"dialogue_id": 9, "utt'] + CLEAN[1:], "\n"),
    "array line": (CLEAN[:1] + ["[1, 2]"] + CLEAN[1:], "\n"),
    "number as text": ([dialogue(5, ["AA", "AB"], [utt(0, "AA", 5, "2022-08-02T10:00:00")])], "\n"),
    "lone surrogate": ([CLEAN[0].replace("こんにちは", "\\ud800")], "\n"),
    "no interlocutors": ([dialogue(5, [], [utt(0, "AA", "hi", "2022-08-02T10:00:00")])], "\n"),
    "null utterances": (
        [CLEAN[3], '{"dialogue_id": 5, "interlocutors": ["AA"], "utterances": null}'],
        "\n",
    ),
    "missing sender": (
        [json.dumps({"dialogue_id": 5, "interlocutors": ["AA"], "utterances": [{"text": "x"}]})],
        "\n",
    ),
    "string dialogue id": (
        [CLEAN[3], CLEAN[3].replace('"dialogue_id": 4', '"dialogue_id": "d4"')],
        "\n",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_take_the_row_reader(tmp_path: Path, case: str) -> None:
    lines, ending = HOSTILE[case]
    spec = rpc(write(tmp_path, lines, ending))
    assert read_realpersonachat_tables(spec) is None
    assert not read_source_tables(spec).columnar
    assert_same_tables([spec])


@pytest.mark.parametrize("start", [START, dt.date(2022, 8, 3)])
def test_discover_dates_from_columns(tmp_path: Path, start: dt.date) -> None:
    spec = rpc(write(tmp_path, CLEAN))
    days = {
        rec.local_date if isinstance(rec, Message) else rec.partition_date
        for rec in read_source(spec)
    }
    want = sorted({start if d is None or d < start else d for d in days})
    assert discover_dates([spec], start) == want
    assert len(want) > 2


def test_crlf_lines_are_read_in_columns(tmp_path: Path) -> None:
    spec = rpc(write(tmp_path, CLEAN, "\r\n"))
    assert read_realpersonachat_tables(spec) is not None
    assert_same_tables([spec])


def test_rpc_fixture(tmp_path: Path) -> None:
    """The reader tests' fixture (bad lines included) through both paths."""
    assert_same_tables([rpc(FIXTURES / "rpc")])
    assert_same_tables([rpc(FIXTURES / "rpc", owner="AA")])


# --- other sources: row readers converted, one columnar ingest ----------------------------


def line_sources() -> list[SourceSpec]:
    return [
        SourceSpec("sample_line_json", "line_json", SAMPLE / "line_json", "Asia/Tokyo", "Yuki"),
        SourceSpec("sample_line_txt", "line_txt", SAMPLE / "line_txt", "Asia/Tokyo", "Yuki"),
        SourceSpec(
            "bad", "line_json", FIXTURES / "line_json_bad" / "records", "Asia/Tokyo", "Yuki"
        ),
        SourceSpec("re", "line_txt", FIXTURES / "line_txt_reexports", "Asia/Tokyo", "Yuki"),
        SourceSpec("re2", "line_txt", FIXTURES / "line_txt_reexports", "Asia/Tokyo", "Yuki"),
    ]


def test_bundled_sample_and_line_fixtures(tmp_path: Path) -> None:
    start = dt.date(2024, 3, 1)
    days = [start + dt.timedelta(days=i) for i in range(14)]
    got = assert_same_tables(line_sources(), days, start)
    reasons = {r["reason"] for t in got.values() for r in t.quarantine.to_pylist()}
    assert {"duplicate_export"} <= reasons  # the same export read as two sources
    forget = load_forget_list(tmp_path, create=True)
    forget.add("contact", "Maria", dt.date(2024, 3, 20))
    assert_same_tables(line_sources(), days, start, forget=forget, retain_from=dt.date(2024, 3, 5))


# --- sessions and chunks: the vectorized window plan ---------------------------------------


@pytest.mark.parametrize(("size", "stride"), [(42, 36), (5, 5), (4, 1), (10, 3)])
def test_window_plan_is_chunk_windows(size: int, stride: int) -> None:
    counts = np.array([0, 1, 2, 4, 5, 6, 11, 41, 42, 43, 78, 79, 200])
    rows, starts, ends = window_plan(counts, size, stride)
    want = [(r, a, b) for r, n in enumerate(counts) for a, b in chunk_windows(int(n), size, stride)]
    assert list(zip(rows.tolist(), starts.tolist(), ends.tolist(), strict=True)) == want


def test_sorted_distinct() -> None:
    groups = np.array([0, 0, 0, 2, 2, 3])
    values = pa.array(["b", "a", "b", "ä", "z", "a"])
    assert sorted_distinct(groups, values, 5).to_pylist() == [["a", "b"], [], ["z", "ä"], ["a"], []]


# --- the whole corpus ----------------------------------------------------------------------


def digest(tables: dict[dt.date, Any], name: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for day in sorted(tables):
        table = getattr(tables[day], name)
        h.update(repr(table.to_pydict()).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def test_full_corpus_same_tables(shared_file: Callable[[str], Path]) -> None:
    path = shared_file("realpersonachat/dialogues.jsonl.gz").parent
    spec = rpc(path)
    assert read_source_tables(spec).columnar
    start = dt.date(2022, 7, 29)
    days = [start + dt.timedelta(days=i) for i in range(100)]
    rows = split_ingest(read_all([spec], days, start), days)
    cols = split_ingest(read_all_tables([spec], days, start), days)
    for name in ("messages", "quarantine", "audit"):
        assert digest(rows, name) == digest(cols, name), name
    assert totals(cols) == (408_207, 412)
