"""kind = "auto": a folder of mixed exports, each file read by the reader its content calls
for, the detected kind kept per file, unknown files as one not_an_export row each."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import Message
from memory_pipeline.core.ingest.sources.auto import detected_kind
from memory_pipeline_tests.core.ingest.sources._helpers import (
    EXPORTS,
    merged,
    read,
    reconciles,
)

AUTO = EXPORTS / "auto"


def _kinds(recs) -> dict[str, set[str | None]]:
    out: dict[str, set[str | None]] = {}
    for r in recs:
        out.setdefault(r.source_file.split("/")[-2 if "zip/" in r.source_file else -1], set())
        out[r.source_file.split("/")[-2 if "zip/" in r.source_file else -1]].add(detected_kind(r))
    return out


def test_mixed_folder_is_detected_by_content() -> None:
    recs = read("auto", AUTO)
    kinds = _kinds(recs)
    assert kinds == {
        "Maria mobile.txt": {"line_txt"},
        "[LINE] Maria.txt": {"line_pc"},
        "WhatsApp Chat - 健太.zip": {"whatsapp"},
        "whatsapp_de.txt": {"whatsapp"},
        "result.json": {"telegram"},
        "notes.txt": {None},
        "settings.json": {None},
    }
    rows = [r for r in recs if not isinstance(r, Message)]
    assert Counter(r.reason for r in rows) == {R.R_NOT_AN_EXPORT: 2}  # the photo is no record


def test_auto_reads_each_file_as_its_own_kind_does() -> None:
    """Per file: the records under auto = the records of the file's own reader."""
    recs = read("auto", AUTO)
    per_file = Counter(r.source_file for r in recs)
    own = {
        "line/Maria mobile.txt": ("line_txt", AUTO / "line" / "Maria mobile.txt"),
        "line/[LINE] Maria.txt": ("line_pc", AUTO / "line" / "[LINE] Maria.txt"),
        "phone/whatsapp_de.txt": ("whatsapp", AUTO / "phone" / "whatsapp_de.txt"),
        "telegram/ChatExport_2024-03-01/result.json": (
            "telegram", AUTO / "telegram" / "ChatExport_2024-03-01" / "result.json"),
    }  # fmt: skip
    for rel, (kind, path) in own.items():
        alone = read(kind, path)
        assert per_file[rel] == len(alone), rel
        got = [(m.local_ts, m.sender, m.type, m.text) for m in recs
               if isinstance(m, Message) and m.source_file == rel]  # fmt: skip
        assert got == [(m.local_ts, m.sender, m.type, m.text) for m in alone
                       if isinstance(m, Message)]  # fmt: skip
    result = merged("auto", AUTO)
    reconciles(result, len(recs))


def test_a_single_file_and_a_new_export_dropped_in(tmp_path: Path) -> None:
    assert {detected_kind(r) for r in read("auto", AUTO / "phone" / "whatsapp_de.txt")} == {
        "whatsapp"}  # fmt: skip
    shutil.copytree(AUTO, tmp_path / "in")
    before = merged("auto", tmp_path / "in")
    shutil.copy(EXPORTS / "telegram" / "ChatExport_2024-03-09" / "result.json",
                tmp_path / "in" / "later.json")  # fmt: skip
    after = merged("auto", tmp_path / "in")
    assert len(after.messages) == len(before.messages) + 4  # ids 7, 8, 9 and 11 are new


def test_every_export_fixture_is_detected_as_its_own_kind() -> None:
    """Precision across readers: each fixture file (outside the mixed folder) is taken for
    the kind its folder holds, none for another (new sniffers must not steal files)."""
    from memory_pipeline.core.ingest.sources.auto import detect
    from memory_pipeline.core.ingest.sources.exports import ExportFile

    kind_of = {"signal_html": "signal", "slack_variants": "slack", "telegram_variants":
               "telegram", "instagram_variants": "instagram"}  # fmt: skip
    seen = Counter()
    for p in sorted(EXPORTS.rglob("*")):
        rel = p.relative_to(EXPORTS)
        if not p.is_file() or rel.parts[0] == "auto" or p.suffix.lower() in (".zip", ".jpg"):
            continue
        want = kind_of.get(rel.parts[0], rel.parts[0])
        assert detect(ExportFile.of_path(rel.as_posix(), p)) == want, rel
        seen[want] += 1
    assert len(seen) >= 13
