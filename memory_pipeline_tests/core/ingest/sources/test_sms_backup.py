"""SMS Backup & Restore XML: SMS, MMS (SMIL skipped, text + media parts, addr 137 = from),
group and RCS conversations, ms and s dates, drafts, call logs, overlapping backups, a
truncated file, bad bytes, surrogate references, external entities and billion laughs."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import SourceError
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline.core.ingest.sources.sms_backup import CHUNK
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

SMS = EXPORTS / "sms_backup"
FIRST = SMS / "sms-20240301120000.xml"


def _elements(path: Path) -> int:
    return len(re.findall(rb"<(?:sms|mms|call) ", path.read_bytes()))


def test_sms_and_mms() -> None:
    recs = read("sms_backup", FIRST)
    ms = messages(recs)
    assert len(recs) == _elements(FIRST) == 12  # one record per element
    first = ms[0]
    assert first.ts == dt.datetime(2024, 3, 1, 0, 0, 0, 123000, tzinfo=dt.UTC)  # ms kept
    assert first.local_ts == dt.datetime(2024, 3, 1, 9, 0, 0, 123000)  # readable_date ignored
    assert (first.sender, first.contact_id, first.is_owner) == ("Maria Silva", "Maria Silva", False)
    assert ms[1].is_owner and ms[1].sender == "Yuki"
    assert ms[1].text == "大丈夫！\n資料も持っていくね"  # &#10; inside the attribute
    assert ms[2].text == "ありがとう 😆"  # surrogate-pair references joined
    # "+81 90-1234-5678", "09012345678" and "+819012345678" are one conversation
    maria = {m.conversation_id for m in ms if m.contact_id == "Maria Silva"}
    assert maria == {"sms_9012345678"}
    assert ms[3].sender == "+1 (555) 010-4477"  # contact_name "(Unknown)"
    assert ms[4].local_ts == dt.datetime(2024, 3, 1, 18, 0)  # date in seconds
    photo = next(m for m in ms if m.type == "photo")
    assert photo.text == "会場の写真です" and photo.sender == "Maria Silva"  # SMIL skipped
    assert next(m for m in ms if m.type == "audio").text == ""
    group = [m for m in ms if m.conversation_id.startswith("sms_group_")]
    assert [(m.sender, m.is_owner) for m in group] == [
        ("Jonas Weber", False), ("Yuki", True), ("+447700900123", False)]  # fmt: skip
    assert len({m.conversation_id for m in group}) == 2  # the MMS group and the RCS group
    assert group[0].conversation_id == group[1].conversation_id  # received and sent: one group
    assert reasons(recs) == {R.R_UNKNOWN_TYPE: 1}  # the draft


def test_call_log() -> None:
    ms = messages(read("sms_backup", SMS / "calls-20240301120000.xml"))
    assert [(m.type, m.text, m.is_owner) for m in ms] == [
        ("call", "incoming call (54 s)", False), ("call", "missed call", False),
        ("call", "outgoing call (120 s)", True)]  # fmt: skip
    assert ms[0].conversation_id == "sms_9012345678"  # the same person as the SMS thread


def test_overlapping_backups_merge() -> None:
    result = merged("sms_backup", SMS)
    total = sum(_elements(p) for p in SMS.glob("*.xml"))
    reconciles(result, total)
    # two of the four messages of the later backup were already in the first one (one of
    # them written there with surrogate references, here as the emoji itself)
    assert reasons(result)[R.R_DUPLICATE_EXPORT] == 2
    later = {m.text for _, m in result.messages if m.local_ts.date() == dt.date(2024, 3, 8)}
    assert later == {"Happy women's day!", "Thank you 🌷"}


def test_truncated_backup_keeps_what_it_holds(tmp_path: Path) -> None:
    data = FIRST.read_bytes()
    cut = data.index(b"<mms", data.index(b"Who brings")) + 40  # inside the 3rd MMS
    (tmp_path / "sms.xml").write_bytes(data[:cut])
    recs = read("sms_backup", tmp_path / "sms.xml")
    assert len(messages(recs)) == 7 and len(recs) == 9  # all before the break, the draft
    (q,) = [r for r in quarantined(recs) if r.reason == R.R_UNPARSEABLE_LINE]
    assert "truncated" in q.detail and q.source_line == 34
    # a break in the middle of a large file (several chunks) keeps the earlier chunks' rows
    sms = FIRST.read_bytes().split(b"\n")[4]
    many = b"<smses count='9999'>\n" + (sms + b"\n") * 3000 + sms[:50]
    assert len(many) > 3 * CHUNK
    (tmp_path / "big.xml").write_bytes(many)
    big = read("sms_backup", tmp_path / "big.xml")
    assert len(messages(big)) == 3000 and reasons(big) == {R.R_UNPARSEABLE_LINE: 1}


def test_bad_bytes_spoil_only_their_record(tmp_path: Path) -> None:
    data = FIRST.read_bytes().replace("Grüße".encode(), "Gr\xfc\xdfe".encode("cp1252"))
    (tmp_path / "sms.xml").write_bytes(data)
    recs = read("sms_backup", tmp_path / "sms.xml")
    assert len(recs) == 12 and reasons(recs) == {R.R_ENCODING: 1, R.R_UNKNOWN_TYPE: 1}
    assert next(q for q in quarantined(recs) if q.reason == R.R_ENCODING).source_line == 9


def test_entities_are_never_expanded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT", encoding="utf-8")
    xxe = (
        f'<?xml version="1.0"?>\n<!DOCTYPE smses [<!ENTITY x SYSTEM "file://{secret}">]>\n'
        '<smses count="1"><sms address="1" date="1709251200000" type="1" body="&x;"/></smses>'
    )
    lol = '<?xml version="1.0"?>\n<!DOCTYPE smses [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;">'
    lol += "".join(
        f'<!ENTITY {c} "{(f"&{p};" * 10)}">' for p, c in zip("bcdefgh", "cdefghi", strict=True)
    )
    lol += ']>\n<smses count="1"><sms address="1" date="1" type="1" body="&i;"/></smses>'
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "xxe.xml").write_text(xxe, encoding="utf-8")
    (folder / "lol.xml").write_text(lol, encoding="utf-8")
    (folder / "other.xml").write_text('<?xml version="1.0"?><rss><channel/></rss>', "utf-8")
    (folder / "ok.xml").write_bytes(FIRST.read_bytes())
    recs = read("sms_backup", folder)
    rows = {q.source_file: q for q in quarantined(recs) if q.source_file != "ok.xml"}
    assert {k: q.reason for k, q in rows.items()} == {
        "xxe.xml": R.R_UNPARSEABLE_LINE, "lol.xml": R.R_UNPARSEABLE_LINE,
        "other.xml": R.R_NOT_AN_EXPORT}  # fmt: skip
    assert all("TOP-SECRET" not in (q.raw + q.detail) for q in rows.values())
    assert not any("TOP-SECRET" in m.text for m in messages(recs))
    with pytest.raises(SourceError, match="never expanded"):
        read("sms_backup", folder / "xxe.xml")


def test_other_apps_json_and_auto(tmp_path: Path) -> None:
    (tmp_path / "conversations.json").write_text('{"messages": []}', encoding="utf-8")
    with pytest.raises(SourceError, match="not an SMS Backup"):
        read("sms_backup", tmp_path / "conversations.json")
    recs = read("auto", SMS)
    assert {detected_kind(r) for r in recs} == {"sms_backup"}
    assert len(recs) == sum(_elements(p) for p in SMS.glob("*.xml"))
