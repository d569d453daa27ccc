"""Hostile input, round two: one file costs only its own records, nothing is lost silently,
one person is one name, damaged bytes cost only their lines, links out of the source are
not followed.

Every test runs the ingest stage's entrances (read_all: records; read_all_tables: columns,
with and without the parsed-record cache) and checks they agree.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import unicodedata
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.forget_list import ForgetList
from memory_pipeline.core.ingest.sources import SourceSpec
from memory_pipeline.core.ingest.stage import discover_dates, read_all, read_all_tables

START = dt.date(2024, 3, 1)
DAYS = [START + dt.timedelta(days=i) for i in range(3)]
GOOD = {"time": "10:00", "sender": "Ken", "text": "fine"}


def spec(kind: str, path: Path, owner: str | None = "Yuki") -> SourceSpec:
    return SourceSpec(name="s", kind=kind, path=path, timezone="Asia/Tokyo", owner=owner)


def outcomes(specs: list[SourceSpec], tmp: Path, days=DAYS, forget=None) -> dict:
    """{entrance: (sorted messages (conv, contact, sender, text), sorted quarantine reasons,
    records read)}; asserts read = ingested + quarantined for each."""
    out = {}
    runs = {
        "records": lambda: read_all(specs, days, START, forget=forget),
        "tables": lambda: read_all_tables(specs, days, START, forget=forget),
        "cache_cold": lambda: read_all_tables(specs, days, START, forget=forget, cache_dir=tmp),
        "cache_warm": lambda: read_all_tables(specs, days, START, forget=forget, cache_dir=tmp),
    }
    for name, run in runs.items():
        res = run()
        if isinstance(res.messages, list):
            rows = [m for _, m in res.messages]
            msgs = sorted((m.conversation_id, m.contact_id, m.sender, m.text) for m in rows)
        else:
            cols = ("conversation_id", "contact_id", "sender", "text")
            msgs = sorted(zip(*(res.messages.column(c).to_pylist() for c in cols), strict=True))
        reasons = sorted(q.reason for q in res.quarantine)
        read = sum(res.read_counts.values())
        assert read == len(msgs) + len(reasons), name
        out[name] = (msgs, reasons, read)
    first = out["records"]
    assert all(v == first for v in out.values()), out
    return first


def day_file(root: Path, body: str | bytes, day: str = "2024-03-01", conv: str = "chat") -> None:
    (root / conv).mkdir(parents=True, exist_ok=True)
    data = body.encode() if isinstance(body, str) else body
    (root / conv / f"{day}.json").write_bytes(data)


def doc(*entries: object) -> str:
    return json.dumps({"messages": list(entries)})


# -- 4. a hostile value or structure costs its own records only --------------------------------


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({**GOOD, "source_order": 2**64}, R.R_VALUE_OUT_OF_RANGE),
        ({**GOOD, "source_order": 2**63}, R.R_VALUE_OUT_OF_RANGE),
        ({**GOOD, "extra": 7 * 10**30}, None),  # a big number the reader ignores is harmless
    ],
)
def test_line_json_integer_beyond_64_bits(tmp_path, entry, reason):
    src = tmp_path / "src"
    day_file(src, doc(GOOD, entry))
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert reasons == ([reason] if reason else [])
    assert len(msgs) == (1 if reason else 2)


def test_line_json_number_too_long_to_read_costs_its_file_only(tmp_path):
    src = tmp_path / "src"
    day_file(
        src,
        '{"messages": [{"time": "10:00", "sender": "Ken", "text": "x", "n": 9%s}]}' % ("9" * 5000),
    )
    day_file(src, doc(GOOD), conv="other")
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert reasons == [R.R_VALUE_OUT_OF_RANGE] and len(msgs) == 1


@pytest.mark.parametrize("depth", [101, 5000, 200_000])
def test_line_json_deep_nesting_costs_its_file_only(tmp_path, depth):
    src = tmp_path / "src"
    deep = "[" * depth + "]" * depth
    day_file(
        src, f'{{"messages": [{{"time": "10:00", "sender": "Ken", "text": "x", "n": {deep}}}]}}'
    )
    day_file(src, doc(GOOD), conv="other")
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert reasons == [R.R_TOO_DEEP] and [m[3] for m in msgs] == ["fine"]


def test_depth_limit_is_exact_and_ignores_brackets_in_strings(tmp_path):
    src = tmp_path / "src"
    ok = "[" * 96 + "]" * 96  # 96 + messages array + entry + top object = 99 levels
    day_file(
        src,
        '{{"messages": [{{"time": "10:00", "sender": "Ken", "text": "{}", "n": {}}}]}}'.format(
            "[" * 500, ok
        ),
    )
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert reasons == [] and len(msgs) == 1


@pytest.mark.parametrize(
    ("day", "tz"), [("0001-01-01", "Asia/Tokyo"), ("9999-12-31", "America/Los_Angeles")]
)
def test_line_json_time_outside_the_representable_range(tmp_path, day, tz):
    src = tmp_path / "src"
    day_file(src, doc({**GOOD, "time": "00:00" if day.startswith("0001") else "23:59"}), day=day)
    day_file(src, doc(GOOD))
    s = SourceSpec(name="s", kind="line_json", path=src, timezone=tz, owner="Yuki")
    found = discover_dates([s], START)  # used to abort the plan with an OverflowError
    assert START in found
    msgs, reasons, _ = outcomes([s], tmp_path / "c", days=found)
    assert reasons == [R.R_VALUE_OUT_OF_RANGE] and len(msgs) == 1


def test_line_txt_time_outside_the_representable_range(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kim.txt").write_text(
        "[LINE] Chat history with Kim\n\n0001/01/01\n00:10\tKim\told\n2024/03/01\n10:00\tKim\tnew\n"
    )
    msgs, reasons, _ = outcomes([spec("line_txt", tmp_path / "src")], tmp_path / "c")
    assert reasons == [R.R_VALUE_OUT_OF_RANGE] and [m[3] for m in msgs] == ["new"]


def rpc_file(root: Path, *dialogues: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dialogues.jsonl.gz").write_bytes(gzip.compress("\n".join(dialogues).encode()))
    return root


def utt(uid: object = 0, ts: str = "2024-03-01T10:00:00", text: str = "hi") -> dict:
    return {"utterance_id": uid, "interlocutor_id": "B", "text": text, "timestamp": ts}


def dialogue(did: int, *utts: dict, extra: str = "") -> str:
    body = json.dumps({"dialogue_id": did, "interlocutors": ["Yuki", "B"], "utterances": utts})
    return body[:-1] + extra + "}"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (dialogue(2, utt(2**64)), R.R_VALUE_OUT_OF_RANGE),
        (dialogue(2, utt(1, ts="0001-01-01T00:00:00")), R.R_VALUE_OUT_OF_RANGE),
        (dialogue(2, utt(1), extra=', "x": ' + "[" * 3000 + "]" * 3000), R.R_TOO_DEEP),
    ],
)
def test_realpersonachat_hostile_dialogue_costs_its_records_only(tmp_path, bad, reason):
    src = rpc_file(tmp_path / "src", dialogue(1, utt(0), utt(1, text="yo")), bad)
    msgs, reasons, _ = outcomes([spec("realpersonachat", src)], tmp_path / "c")
    assert reasons == [reason] and len(msgs) == 2


def test_locomo_deep_file_beside_a_good_one_is_one_row(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    sample = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "Yuki",
            "speaker_b": "B",
            "session_1_date_time": "10:00 am on 1 March, 2024",
            "session_1": [{"dia_id": "D1:1", "speaker": "B", "text": "hi"}],
        },
    }
    (src / "a.json").write_text(json.dumps([sample]))
    (src / "b.json").write_text("[" * 4000 + "]" * 4000)
    msgs, reasons, _ = outcomes([spec("locomo", src)], tmp_path / "c")
    assert reasons == [R.R_TOO_DEEP] and len(msgs) == 1


# -- 5. nothing is lost silently ---------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\r", "\r\n", "\n"])
def test_line_txt_every_line_ending_reads_the_same(tmp_path, eol):
    text = (
        "[LINE] Chat history with Kim\n\nFri, 3/1/2024\n10:00\tKim\thello\n"
        '10:01\tYuki\t"two\nlines"\n10:02\tKim\tbye\u2028still the same message\n'
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kim.txt").write_bytes(text.replace("\n", eol).encode())
    msgs, reasons, _ = outcomes([spec("line_txt", tmp_path / "src")], tmp_path / "c")
    assert reasons == []  # a CR-only export used to yield nothing and no row
    assert [m[3] for m in msgs] == ["bye\u2028still the same message", "hello", "two\nlines"]


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("empty.txt", b""),
        ("header_only.txt", b"[LINE] Chat history with Kim\n\nFri, 3/1/2024\n"),
    ],
)
def test_a_file_with_no_records_is_a_quarantine_row(tmp_path, name, body):
    src = tmp_path / "src"
    src.mkdir()
    (src / name).write_bytes(body)
    (src / "ok.txt").write_text("[LINE] Chat history with Ok\n\n2024/03/01\n10:00\tOk\thi\n")
    msgs, reasons, read = outcomes([spec("line_txt", src)], tmp_path / "c")
    assert len(msgs) == 1 and len(reasons) == 1 and read == 2
    assert reasons[0] in (R.R_NO_RECORDS, R.R_NOT_AN_EXPORT)


def test_empty_json_day_file_and_empty_dialogues_are_quarantine_rows(tmp_path):
    day_file(tmp_path / "j", doc())
    rpc = rpc_file(
        tmp_path / "r",
        json.dumps({"dialogue_id": 1, "interlocutors": ["Yuki", "B"], "utterances": []}),
    )
    for s in (spec("line_json", tmp_path / "j"), spec("realpersonachat", rpc)):
        msgs, reasons, _ = outcomes([s], tmp_path / f"c{s.kind}")
        assert msgs == [] and reasons == [R.R_NO_RECORDS]


def test_duplicated_messages_key_accounts_for_both_arrays(tmp_path):
    src = tmp_path / "src"
    first = json.dumps([GOOD, {**GOOD, "text": "two"}])
    day_file(
        src,
        '{{"messages": {}, "contact": "Ken", "messages": [{}]}}'.format(
            first, json.dumps({**GOOD, "text": "kept"})
        ),
    )
    msgs, reasons, read = outcomes([spec("line_json", src)], tmp_path / "c")
    assert [m[3] for m in msgs] == ["kept"]
    assert reasons == [R.R_DUPLICATE_KEY] * 2 and read == 3


def test_duplicated_field_inside_an_entry_and_in_the_header(tmp_path):
    src = tmp_path / "src"
    entry = '{"time": "10:00", "sender": "Ken", "text": "a", "text": "b"}'
    same = '{"time": "10:00", "sender": "Ken", "text": "c", "note": 1, "note": 2}'
    day_file(src, f'{{"messages": [{entry}, {same}]}}')
    day_file(
        src, f'{{"contact": "A", "contact": "B", "messages": [{json.dumps(GOOD)}]}}', conv="other"
    )
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert [m[3] for m in msgs] == ["c"]  # an ignored key may repeat
    assert reasons == [R.R_DUPLICATE_KEY] * 2


def test_realpersonachat_duplicated_utterances_key(tmp_path):
    line = dialogue(1, utt(0))[:-1] + ', "utterances": [{}]}}'.format(
        json.dumps(utt(5, text="kept"))
    )
    src = rpc_file(tmp_path / "src", line)
    msgs, reasons, read = outcomes([spec("realpersonachat", src)], tmp_path / "c")
    assert [m[3] for m in msgs] == ["kept"] and reasons == [R.R_DUPLICATE_KEY] and read == 2


# -- 9. one person, one name -------------------------------------------------------------------


def nfd(s: str) -> str:
    return unicodedata.normalize("NFD", s)


def test_nfd_and_nfc_folders_are_one_contact_and_one_conversation(tmp_path):
    name = "ジョゼ"  # katakana with a voiced mark: NFD splits it
    assert nfd(name) != name
    src = tmp_path / "src"
    day_file(src, doc({**GOOD, "sender": nfd(name)}), conv=nfd(name))
    day_file(src, doc({**GOOD, "sender": name, "text": "two"}), conv=name, day="2024-03-02")
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert reasons == [] and {(m[0], m[1], m[2]) for m in msgs} == {(name, name, name)}


def test_message_ids_of_nfc_data_are_unchanged(tmp_path):
    from memory_pipeline.core.common.ids import stable_id

    src = tmp_path / "src"
    day_file(src, doc({**GOOD, "sender": "健太"}), conv="健太")
    res = read_all_tables([spec("line_json", src)], DAYS, START)
    mid = res.messages.column("message_id")[0].as_py()
    local = dt.datetime(2024, 3, 1, 10, 0).isoformat()
    assert mid == stable_id("msg", "健太", local, "健太", "text", "fine", 0)


@pytest.mark.parametrize(
    ("listed", "spelling"),
    [("Ken", "ken"), ("Ken", " KEN "), ("Ken", "Ken\u00a0"), ("Kén", nfd("Kén")), ("Kén", "KÉN")],
)
def test_forget_matches_names_the_way_ingest_does(tmp_path, listed, spelling):
    forget = ForgetList(salt=b"s" * 32)
    forget.add("contact", listed, START)
    src = tmp_path / "src"
    day_file(src, json.dumps({"contact": spelling, "messages": [GOOD]}), conv="c1")
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c", forget=forget)
    assert msgs == [] and reasons == [R.R_FORGOTTEN]


# -- 10. a few damaged bytes cost their lines, never the file ------------------------------------


UTF8_EXPORT = "[LINE] 健太とのトーク履歴\n\n2024/03/01(金)\n10:00\t健太\tおはよう\n"


@pytest.mark.parametrize(
    "damage",
    [b"\xff", b"\x93\xfa\x96\x7b", b"\x82\xa0\x82\xa2", b"\xe3\x81"],  # stray, cp932-looking
)
def test_damaged_bytes_in_a_utf8_or_ascii_export_cost_one_line(tmp_path, damage):
    for i, head in enumerate((UTF8_EXPORT, "[LINE] Chat history with Kim\n\n2024/03/01\n")):
        src = tmp_path / f"src{i}"
        src.mkdir()
        data = head.encode() + b"10:01\tKim\tbad " + damage + b" here\n10:02\tKim\tgood\n"
        (src / "kim.txt").write_bytes(data)
        msgs, reasons, _ = outcomes([spec("line_txt", src)], tmp_path / f"c{i}")
        assert reasons == [R.R_ENCODING]
        assert "good" in [m[3] for m in msgs]
        assert all("\ufffd" not in m[3] for m in msgs)


def test_a_real_cp932_export_is_still_decoded(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.txt").write_bytes(UTF8_EXPORT.encode("cp932"))
    msgs, reasons, _ = outcomes([spec("line_txt", tmp_path / "src")], tmp_path / "c")
    assert reasons == [] and [m[3] for m in msgs] == ["おはよう"]


def test_line_json_invalid_byte_costs_its_entry_only(tmp_path):
    src = tmp_path / "src"
    body = doc(GOOD, {**GOOD, "text": "BAD"}, {**GOOD, "text": "after"}).encode()
    day_file(src, body.replace(b"BAD", b"B\xffD"))
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert sorted(m[3] for m in msgs) == ["after", "fine"] and reasons == [R.R_ENCODING]


# -- 12. links out of the source folder are not followed -----------------------------------------


def test_symlinks_out_of_the_source_are_quarantined_not_read(tmp_path):
    outside = tmp_path / "outside"
    day_file(outside, doc({**GOOD, "text": "SECRET"}), conv="x")
    (outside / "secret.txt").write_text(
        "[LINE] Chat history with Z\n\n2024/03/01\n10:00\tZ\tSECRET\n"
    )
    src = tmp_path / "src"
    day_file(src, doc(GOOD))
    os.symlink(outside / "x", src / "linked_dir")  # a conversation folder
    os.symlink(outside / "x" / "2024-03-01.json", src / "chat" / "2024-03-02.json")
    os.symlink(src / "chat" / "2024-03-01.json", src / "chat" / "2024-03-03.json")  # inside: ok
    msgs, reasons, _ = outcomes([spec("line_json", src)], tmp_path / "c")
    assert reasons == [R.R_SYMLINK_OUTSIDE] * 2
    assert "SECRET" not in {m[3] for m in msgs} and len(msgs) == 2  # the link inside is read
    txt = tmp_path / "txt"
    txt.mkdir()
    (txt / "ok.txt").write_text("[LINE] Chat history with Ok\n\n2024/03/01\n10:00\tOk\thi\n")
    os.symlink(outside / "secret.txt", txt / "secret.txt")
    msgs, reasons, _ = outcomes([spec("line_txt", txt)], tmp_path / "c2")
    assert reasons == [R.R_SYMLINK_OUTSIDE] and [m[3] for m in msgs] == ["hi"]
