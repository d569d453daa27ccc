"""core/privacy/forget.py on hand-made outputs: cache entries and files it must reach."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.privacy.forget import (
    ForgetPlan,
    UnknownContact,
    apply_forget,
    resolve_contact,
)
from memory_pipeline.core.represent.cache import ContentCache
from memory_pipeline_tests.factories import msg, table

SECRET = "the spare key is under the blue flowerpot"


def test_cache_entries_keyed_by_or_quoting_the_contacts_texts_are_deleted(tmp_path: Path):
    path = tmp_path / "cache" / "provider_cache.sqlite"
    chunk_text = f"[2024-03-01 10:00] Sam: {SECRET}"
    with ContentCache(path) as cache:
        key = cache.key_for("local", "m", {})
        cache.put_vectors(key, [text_hash(chunk_text), "other"], np.ones((2, 3), np.float32))
        tkey = cache.key_for("openai", "s", {"lang": "en"})
        cache.put_texts(tkey, {"h1": f"Summary: Sam said {SECRET}.", "h2": "about Maria"})
    plan = ForgetPlan(
        "Sam", tmp_path, texts={SECRET}, text_hashes={text_hash(chunk_text)}, cache_path=path
    )
    apply_forget(plan)
    con = sqlite3.connect(str(path))
    left = sorted(h for (h,) in con.execute("SELECT text_hash FROM cache_entries"))
    con.close()
    assert left == ["h2", "other"]
    # nothing of the payload in the file, its WAL or freed pages
    raw = b"".join(p.read_bytes() for p in path.parent.iterdir() if p.is_file())
    assert SECRET.encode() not in raw


def test_index_versions_and_the_dossier_file_are_removed(tmp_path: Path):
    out = tmp_path / "out"
    for v in ("v-old", "v-new"):
        (out / "indexes" / v).mkdir(parents=True)
        (out / "indexes" / v / "chunks.parquet").write_text(SECRET, encoding="utf-8")
    (out / "indexes" / "CURRENT").write_text("v-new", encoding="utf-8")
    dossier = tmp_path / "dossiers" / "Sam.md"
    dossier.parent.mkdir()
    dossier.write_text(SECRET, encoding="utf-8")
    plan = ForgetPlan(
        "Sam",
        out,
        index_versions=sorted((out / "indexes").glob("v-*")),
        dossier_files=[dossier],
    )
    apply_forget(plan)
    assert list((out / "indexes").iterdir()) == []
    assert not dossier.exists()
    assert (out / "privacy" / "forget_list.json").is_file()


def test_a_contact_resolves_by_id_or_name_in_any_case(tmp_path: Path):
    store = TableStore(tmp_path)
    t = table(msg("2024-03-01 10:00", conv="Sam"), msg("2024-03-01 11:00", conv="Maria"))
    store.write("raw_messages", t.slice(0, 1), msg("2024-03-01 10:00").local_date)
    store.write("raw_messages", t, msg("2024-03-01 10:00").local_date)
    assert resolve_contact(store, "Sam") == "Sam"
    assert resolve_contact(store, "sAM") == "Sam"
    with pytest.raises(UnknownContact):
        resolve_contact(store, "Nobody")
