"""WhatsApp exports: Android and iOS layouts in several locales, marks, placeholders,
system lines, re-exports from another phone locale, zips and zip bombs."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.ingest.sources.whatsapp import choose_order
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

WA = EXPORTS / "whatsapp"
MARIA = WA / "WhatsApp Chat with Maria.txt"
MARIA2 = WA / "WhatsApp Chat with Maria (2).txt"


def test_android_layout_types_and_multiline() -> None:
    ms = messages(read("whatsapp", MARIA))
    assert ms[0].type == "system" and ms[0].sender == ""  # encryption notice
    assert ms[2].text == "Morning\nhow are you?\n\nall good here" and ms[2].is_owner
    assert [(m.type, m.text) for m in ms[3:6]] == [
        ("file", ""), ("photo", "Look at this view"),
        ("location", "location: https://maps.google.com/?q=35.6586,139.7454")]  # fmt: skip
    assert ms[6].type == "system"  # "This message was deleted"
    assert [m.text for m in ms if m.text == "ok"] == ["ok", "ok"]  # a real repeat
    assert ms[-1].type == "system" and ms[-1].sender == ""
    assert {m.conversation_id for m in ms} == {"maria"}


@pytest.mark.parametrize(
    ("name", "first"),
    [
        ("locales_reiwa.txt", dt.datetime(2022, 3, 18, 14, 56, 1)),
        ("locales_thai.txt", dt.datetime(2022, 3, 18, 14, 56, 1)),
        ("locales_arabic.txt", dt.datetime(2022, 3, 12, 21, 15)),
        ("locales_de.txt", dt.datetime(2022, 3, 12, 9, 15)),
        ("locales_es.txt", dt.datetime(2022, 3, 14, 8, 26)),
    ],
)
def test_locales(name: str, first: dt.datetime) -> None:
    recs = read("whatsapp", WA / name)
    assert not quarantined(recs)
    ms = messages(recs)
    assert ms[0].local_ts == first
    assert ms[-1].is_owner or name == "locales_es.txt"
    assert all(not m.text.endswith("\n") for m in ms)


def test_arabic_body_keeps_its_digits_and_spanish_pm() -> None:
    ms = messages(read("whatsapp", WA / "locales_arabic.txt"))
    assert ms[0].text == "مرحبا ٣ مرات" and ms[0].sender == "ماريا"
    es = messages(read("whatsapp", WA / "locales_es.txt"))
    assert es[1].local_ts.hour == 20 and es[1].type == "location"


def test_ios_zip_marks_placeholders_and_non_contacts() -> None:
    ms = messages(read("whatsapp", WA / "WhatsApp Chat - 健太.zip"))
    assert ms[0].source_file == "WhatsApp Chat - 健太.zip/_chat.txt"
    assert ms[0].type == "system"  # encryption notice under the contact's name
    assert (ms[2].sender, ms[2].type, ms[2].text) == ("Aki", "photo", "")  # "~ Aki"
    assert (ms[3].type, ms[3].is_owner) == ("photo", True)
    assert ms[4].text == "明日の集合は\n10:00 駅前で"
    assert ms[5].type == "system" and ms[5].local_ts == dt.datetime(2022, 3, 28, 0, 5, 12)
    assert {m.conversation_id for m in ms} == {"健太"}


def test_reexport_from_a_us_phone_merges() -> None:
    """The same chat exported later on a 12-hour US phone (U+202F before PM, M/D/YY,
    a number wrapped in bidi marks): only the new messages are added."""
    both = merged("whatsapp", WA, date_order=None)
    n1 = len(read("whatsapp", MARIA))
    n2 = len(read("whatsapp", MARIA2))
    maria = [m for _, m in both.messages if m.conversation_id == "maria"]
    assert len(maria) == n1 + 2  # still awake? and Tom's message
    dup = [q for q in both.quarantine if q.reason == R.R_DUPLICATE_EXPORT]
    assert len(dup) == n2 - 2
    assert "+44 7700 900123" in {m.sender for m in maria}
    total = sum(len(read("whatsapp", p)) for p in sorted(WA.iterdir()))
    reconciles(both, total)


def test_date_order_detection() -> None:
    assert choose_order(["3/13/22", "3/14/22"]) == "mdy"
    assert choose_order(["13/3/22", "14/3/22"]) == "dmy"
    assert choose_order(["2022-03-13"]) == "ymd"
    assert choose_order(["1/2/22"], "mdy") == "mdy"


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_bad_input(tmp_path: Path) -> None:
    # a zip bomb: 64 MiB of zeros compress ~1000:1, refused from the directory
    (tmp_path / "bomb.zip").write_bytes(_zip({"_chat.txt": b"\0" * (64 << 20)}))
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "notes.txt").write_text("hello\nworld\n", encoding="utf-8")
    good = b"12/03/2022, 09:16 - Maria: hi\n"
    (tmp_path / "chat.txt").write_bytes(
        good + b"12/03/2022, 09:17 - Maria: \xff bad\n" + b"31/02/2022, 09:18 - Maria: x\n"
    )
    recs = read("whatsapp", tmp_path)
    by_file = {q.source_file: q.reason for q in quarantined(recs)}
    assert by_file["bomb.zip/_chat.txt"] == R.R_TOO_LARGE
    assert by_file["broken.zip"] == R.R_ENCODING
    assert by_file["notes.txt"] == R.R_NOT_AN_EXPORT
    chat = [r for r in recs if r.source_file == "chat.txt"]
    assert len(chat) == 3 and len(messages(chat)) == 1
    assert reasons(chat) == {R.R_ENCODING: 1, R.R_BAD_TIMESTAMP: 1}
