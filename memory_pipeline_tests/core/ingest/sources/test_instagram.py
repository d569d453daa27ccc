"""Instagram "Download your information" messages: Messenger's format in an Instagram zip,
told apart by where the file sits; reels shares, photos, mojibake; a re-export merging."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from memory_pipeline.core.common import records as R
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    messages,
    quarantined,
    read,
    reasons,
    reconciles,
)

IG = EXPORTS / "instagram"
ZIP = IG / "instagram-yuki.tanaka-2024-03-05-AbCdEf12.zip"
MEMBER = "your_instagram_activity/messages/inbox/kenta.hikes_17841400012345678/message_1.json"


def test_thread_in_the_zip() -> None:
    recs = read("instagram", ZIP)
    assert len(recs) == 5  # the photo beside the thread is no record
    ms = sorted(messages(recs), key=lambda m: m.ts)
    assert [m.sender for m in ms] == ["健太", "健太", "Yuki Tanaka", "健太", "Yuki Tanaka"]
    assert ms[1].type == "photo" and ms[2].text == "最高！📸" and ms[2].is_owner
    assert ms[3].text == "https://www.instagram.com/reel/C4abcdEFgh/\nAmanecer en el Teide 🌋"
    assert {m.conversation_id for m in ms} == {"instagram_kenta_hikes_17841400012345678"}
    assert {detected_kind(r) for r in read("auto", IG)} == {"instagram"}


def test_reexport_merges(tmp_path: Path) -> None:
    with zipfile.ZipFile(ZIP) as z:
        doc = json.loads(z.read(MEMBER))
    newer = {"sender_name": "\u00e5\u0081\u00a5\u00e5\u00a4\u00aa", "timestamp_ms": 1709600000000,
             "content": "Hasta pronto \u00f0\u009f\u0091\u008b"}  # fmt: skip
    doc["messages"].insert(0, newer)
    later = tmp_path / "instagram-yuki.tanaka-2024-04-01" / MEMBER
    later.parent.mkdir(parents=True)
    later.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    shutil.copy(ZIP, tmp_path / ZIP.name)
    result = merged("instagram", tmp_path)
    reconciles(result, 5 + 6)
    assert reasons(result) == {R.R_DUPLICATE_EXPORT: 5}
    assert result.messages[-1][1].text == "Hasta pronto 👋"
    assert result.messages[-1][1].sender == "健太"


IV = EXPORTS / "instagram_variants"


def test_trimmed_threads_and_the_old_messages_json() -> None:
    """Participants as plain names or missing, mojibake everywhere, shares without link,
    reaction-only entries, photos without content; the 2019 ``messages.json`` layout."""
    recs = read("auto", IV)
    assert {detected_kind(r) for r in recs} == {"instagram"}
    assert len(recs) == 6 + 2 + 10 + 1
    assert reasons(recs) == {R.R_EMPTY_TEXT: 2, R.R_MISSING_TIMESTAMP: 1}
    empty = [q for q in quarantined(recs) if q.reason == R.R_EMPTY_TEXT]
    assert {q.detail.split(": ", 1)[-1] for q in empty} == {
        "message with only reactions", "message with only likes"}  # fmt: skip
    ms = messages(recs)
    ana = sorted((m for m in ms if m.conversation_id == "instagram_ana_costa_1784140009"),
                 key=lambda m: m.ts)  # fmt: skip
    assert [m.text for m in ana] == [
        "Olá! Tudo bem? 😊", "https://www.instagram.com/p/Cabc/\nCafé da manhã ☕", "",
        "shared a post by viajes.es", "Até amanhã 👋"]  # fmt: skip
    assert ana[2].type == "photo" and ana[0].is_owner and ana[0].contact_id == "Ana Costa"
    kenta = [m for m in ms if m.conversation_id == "instagram_kenta_1784140010"]
    assert {m.text for m in kenta} == {"了解！", "Meet at 6?"}
    old = [m for m in ms if m.conversation_id == "instagram_ana_costa_yuki_tanaka"]
    assert [m.type for m in old] == ["text", "text", "text", "video", "text", "audio", "call",
                                     "system"]  # fmt: skip
    assert old[0].ts.isoformat() == "2019-09-03T18:58:31.744848+00:00"
    assert old[1].text == "Into the wild\nhttps://scontent.cdninstagram.com/v/p1.jpg"
    assert old[7].text == "ana.costa named the group Trip" and old[7].sender == ""
    assert read("instagram", IV / "instagram-old-2019" / "messages.json")[0].sender == "ana.costa"
    reconciles(merged("auto", IV), len(recs))


def test_old_layout_sniff_is_precise() -> None:
    from memory_pipeline.core.ingest.sources.auto import detect
    from memory_pipeline.core.ingest.sources.exports import ExportFile

    claude = EXPORTS / "claude" / "2024-03-01" / "conversations.json"
    assert detect(ExportFile.of_bytes("conversations.json", claude.read_bytes(), "c")) == "claude"
    other = b'[{"conversation": "id-1", "participants": 3}]'
    assert detect(ExportFile.of_bytes("x.json", other, "x")) is None
