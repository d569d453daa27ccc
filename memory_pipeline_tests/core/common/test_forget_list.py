"""The forget list: salted hashes only, matched by contact, conversation or source file."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.forget_list import (
    file_key,
    load_forget_list,
    privacy_dir,
    save_forget_list,
)
from memory_pipeline_tests.factories import msg

DAY = dt.date(2024, 3, 15)


def test_the_list_stores_salted_hashes_and_dates_never_names(tmp_path: Path):
    forget = load_forget_list(tmp_path, create=True)
    assert forget.add("contact", "Samantha Example", DAY)
    assert not forget.add("contact", "Samantha Example", DAY)  # listed once
    forget.add("conversation", "chat-with-samantha", DAY)
    save_forget_list(tmp_path, forget)
    stored = "".join(p.read_text(encoding="utf-8") for p in privacy_dir(tmp_path).iterdir())
    assert "Samantha" not in stored and "samantha" not in stored
    again = load_forget_list(tmp_path)
    assert again.has("contact", "Samantha Example")
    assert again.has("conversation", "chat-with-samantha")
    assert {e["forgotten_on"] for e in again.entries} == {"2024-03-15"}


def test_the_salt_makes_hashes_local_to_one_output_folder(tmp_path: Path):
    a = load_forget_list(tmp_path / "a", create=True)
    b = load_forget_list(tmp_path / "b", create=True)
    a.add("contact", "Sam", DAY)
    b.add("contact", "Sam", DAY)
    assert a.entries[0]["hash"] != b.entries[0]["hash"]


def test_a_record_is_forgotten_by_contact_conversation_or_file(tmp_path: Path):
    forget = load_forget_list(tmp_path, create=True)
    forget.add("conversation", "c1", DAY)
    forget.add("file", file_key("test", "c3.json"), DAY)
    assert forget.forgets(msg("2024-03-01 10:00", conv="c1"))
    assert not forget.forgets(msg("2024-03-01 10:00", conv="c2"))
    assert forget.forgets(msg("2024-03-01 10:00", conv="c3"))  # by its file
    bad = R.QuarantineRecord("test", "c3.json", 4, "c3.json:4", None, None, "x", "d", "raw")
    assert forget.forgets(bad)


def test_an_empty_list_without_salt_is_falsy_and_creates_nothing(tmp_path: Path):
    forget = load_forget_list(tmp_path)
    assert not forget
    assert not privacy_dir(tmp_path).exists()
