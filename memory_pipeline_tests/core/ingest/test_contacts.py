"""One person across apps: ``[[contacts]]`` maps a LINE chat and a WhatsApp chat to one contact.

Without the table each conversation is its own contact (as before); with it, raw_messages
carries one contact id for both, sessions (hence the dossier) group under it, and forgetting
that id removes both chats, also from the parsed-record cache.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from memory_pipeline.config import ConfigError, parse_config
from memory_pipeline.core.common.contacts import ContactBook, ContactSpec
from memory_pipeline.core.common.forget_list import load_forget_list
from memory_pipeline.core.ingest import file_cache
from memory_pipeline.core.ingest.sources import SourceSpec
from memory_pipeline.core.ingest.stage import read_all_tables, split_ingest
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.core.ingest.sources._helpers import EXPORTS
from memory_pipeline_tests.paths import ROOT

START = dt.date(2020, 1, 1)
MARIA = ContactSpec("maria-silva", names=("Maria", "Maria S."), phones=("+81 90 1234 5678",))
LINE_TEXT = "Kyoto camera line chat"


def _sources(tmp_path: Path) -> list[SourceSpec]:
    line = tmp_path / "line"
    line.mkdir()
    sample = (ROOT / "data" / "sample" / "line_txt" / "sam.txt").read_text("utf-8")
    text = sample.replace("Sam", "Maria S.").replace(
        "Hey! Still up for borrowing my camera for Kyoto?", LINE_TEXT
    )
    (line / "maria.txt").write_text(text, "utf-8")
    wa = tmp_path / "wa"
    wa.mkdir()
    shutil.copy(EXPORTS / "whatsapp" / "WhatsApp Chat with Maria.txt", wa)
    kw = {"timezone": "Asia/Tokyo", "owner": "Yuki", "options": {"owner_aliases": ["Yuki Tanaka"]}}
    return [
        SourceSpec(name="line", kind="line_txt", path=line, **kw),
        SourceSpec(name="wa", kind="whatsapp", path=wa, **kw),
    ]


def _messages(specs, contacts=None, **kw) -> pa.Table:
    days = [START + dt.timedelta(days=i) for i in range(365 * 6)]
    per_day = split_ingest(read_all_tables(specs, days, START, contacts=contacts, **kw), days)
    return pa.concat_tables([t.messages for t in per_day.values()])


def test_two_apps_one_contact_one_dossier(tmp_path: Path) -> None:
    specs = _sources(tmp_path)
    before = _messages(specs)
    convs = set(before["conversation_id"].to_pylist())
    assert len(convs) == 2
    assert set(before["contact_id"].to_pylist()) == {"Maria S.", "Maria"}  # as before

    after = _messages(specs, ContactBook([MARIA]))
    assert set(after["contact_id"].to_pylist()) == {"maria-silva"}
    assert set(after["conversation_id"].to_pylist()) == convs  # two chats, one person
    # same messages, same ids: only the contact changed
    assert after["message_id"].to_pylist() == before["message_id"].to_pylist()
    # one contact for the dossier: every session of both chats is hers
    sessions = sessionize(after, 180)
    assert set(sessions["contact_id"].to_pylist()) == {"maria-silva"}
    assert set(sessions["conversation_id"].to_pylist()) == convs


def test_forgetting_the_contact_removes_both_chats_and_their_cached_text(tmp_path: Path) -> None:
    specs = _sources(tmp_path)
    book = ContactBook([MARIA])
    cache = tmp_path / "cache"
    forget = load_forget_list(tmp_path / "out", create=True)
    assert _messages(specs, book, cache_dir=cache, forget=forget).num_rows > 0
    forget.add("contact", "maria-silva", dt.date(2024, 4, 1))
    assert _messages(specs, book, cache_dir=cache, forget=forget).num_rows == 0
    texts = {
        t for p in file_cache.cache_root(cache).rglob("*.parquet")
        for t in pq.read_table(p)["text"].to_pylist()
    }  # fmt: skip
    assert LINE_TEXT not in texts and not (texts - {None, ""})
    # forget's own scrub (no [[contacts]] at hand) drops such entries rather than keep text
    forget.add("contact", "someone-else", dt.date(2024, 4, 2))
    assert file_cache.scrub(cache, forget) == 2
    assert not list(file_cache.cache_root(cache).rglob("*.parquet"))


def test_a_changed_contacts_table_reparses(tmp_path: Path) -> None:
    specs = _sources(tmp_path)
    cache = tmp_path / "cache"
    stats: dict = {}
    _messages(specs, ContactBook([MARIA]), cache_dir=cache)
    other = ContactSpec("maria-silva", names=("Maria",))
    for spec in specs:
        file_cache.cached_batches(spec, None, cache_dir=cache, start_date=START,
                                  contacts=ContactBook([other]), stats=stats)  # fmt: skip
    assert stats == {"misses": 2}
    # the LINE chat (Maria S.) is its own contact again
    got = _messages(specs, ContactBook([other]), cache_dir=cache)
    assert set(got["contact_id"].to_pylist()) == {"maria-silva", "Maria S."}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Maria", "maria-silva"),
        ("  maria s. ", "maria-silva"),
        ("090-1234-5678", "maria-silva"),
        ("+819012345678", "maria-silva"),
        ("+81 90 1234 5679", None),
        ("maria@example.com", "maria-silva"),
        ("@Maria_S", "maria-silva"),
        ("Mariana", None),
    ],
)
def test_spellings(value: str, expected: str | None) -> None:
    book = ContactBook(
        [
            ContactSpec(
                "maria-silva",
                names=("Maria", "Maria S."),
                phones=("+81 90 1234 5678",),
                emails=("Maria@Example.com",),
                handles=("maria_s",),
            )
        ]
    )
    assert book.resolve(value) == expected


def _config(tmp_path: Path, contacts: str) -> dict:
    import tomllib

    (tmp_path / "in").mkdir(exist_ok=True)
    text = f"""
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
output_dir = "out"

[[sources]]
name = "s"
kind = "line_txt"
path = "in"
{contacts}
"""
    return tomllib.loads(text)


def test_config_contacts_table(tmp_path: Path) -> None:
    raw = _config(
        tmp_path,
        '[[contacts]]\nid = "maria"\nnames = ["Maria", "Maria S."]\nphones = ["+81 90 1"]\n',
    )
    cfg = parse_config(raw, base_dir=tmp_path)
    assert cfg.contacts == (ContactSpec("maria", ("Maria", "Maria S."), ("+81 90 1",)),)
    assert parse_config(_config(tmp_path, ""), base_dir=tmp_path).contacts == ()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[[contacts]]\nid = "Maria!"\nnames = ["Maria"]\n', "contacts[0].id"),
        ('[[contacts]]\nid = "maria"\n', "list at least one of"),
        ('[[contacts]]\nid = "maria"\nnames = "Maria"\n', "contacts[0].names"),
        ('[[contacts]]\nid = "maria"\nnames = ["M"]\nnick = ["x"]\n', "nick"),
        (
            '[[contacts]]\nid = "a"\nnames = ["Maria"]\n'
            '[[contacts]]\nid = "b"\nnames = ["maria"]\n',
            "is listed for a, b",
        ),
        ('[[contacts]]\nid = "a"\nnames = ["A"]\n[[contacts]]\nid = "a"\nnames = ["B"]\n', "dup"),
    ],
)
def test_config_contacts_refused_in_one_line(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config(tmp_path, table), base_dir=tmp_path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_without_the_table_nothing_maps() -> None:
    book = ContactBook()
    assert not book
    col = pa.array(["Maria", "Kenta"])
    t = pa.table({"contact_id": col})
    assert book.map_table(t).equals(t)
    assert pc.equal(
        ContactBook([MARIA]).map_column(col), pa.array(["maria-silva", "Kenta"])
    ).to_pylist() == [True, True]
