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
