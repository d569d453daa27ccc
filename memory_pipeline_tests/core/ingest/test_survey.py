"""The owner proposal and the queries to try, on message tables written here."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from memory_pipeline.core.ingest.survey import owner_found, owner_missing, propose_owner
from memory_pipeline.core.retrieval.suggest import suggest_queries

D = dt.date(2024, 3, 1)


def table(rows: list[tuple]) -> pa.Table:
    """(conversation, contact, sender, is_owner, text, day offset) rows."""
    cols = ["conversation_id", "contact_id", "sender", "is_owner", "text", "local_date"]
    data = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
    data["local_date"] = [D + dt.timedelta(days=n) for n in data["local_date"]]
    data["source"] = ["s"] * len(rows)
    data["type"] = ["text"] * len(rows)
    return pa.table(data)


def test_the_owner_is_the_one_in_every_conversation():
    t = table(
        [
            ("a", "Ann", "Ann", False, "hi", 0),
            ("a", "Ann", "Yuki", False, "hello", 0),
            ("b", "Bo", "Bo", False, "yo", 1),
            ("b", "Bo", "Yuki", False, "hey", 1),
            ("b", "Bo", "Ann", False, "me too", 1),
            ("c", "Cy", "Cy", False, "anyone?", 2),  # one speaker alone: no vote
        ]
    )
    p = propose_owner(t)
    assert (p.owner, p.conversations, p.in_every) == ("Yuki", 2, True)
    # Ann is in both too, but she is the contact of conversation a: never the owner
    assert {(c.name, c.conversations) for c in p.candidates[:2]} == {("Yuki", 2), ("Ann", 2)}
    assert owner_found(t, "yuki") == 2 and owner_found(t, "Nobody") == 0
    assert owner_found(t, "Me", ["Yuki"]) == 2  # an alias counts


def test_a_single_chat_is_decided_by_its_contact_and_a_group_tie_is_reported():
    one = table([("a", "Ann", "Ann", False, "hi", 0), ("a", "Ann", "Yuki", False, "yo", 0)])
    assert propose_owner(one).owner == "Yuki"  # Ann is the chat's contact, not its owner
    group = table(
        [
            ("g", "Hiking club", "Ann", False, "hi", 0),
            ("g", "Hiking club", "Yuki", False, "yo", 0),
        ]
    )
    assert propose_owner(group).tied == ("Ann", "Yuki")


def test_formats_that_mark_the_exporter_do_not_vote():
    t = table(
        [
            ("sms", "Ann", "X", True, "sent by me", 0),
            ("sms", "Ann", "Ann", False, "hi", 0),
            ("a", "Bo", "Bo", False, "hi", 1),
            ("a", "Bo", "Yuki", False, "hi", 1),
        ]
    )
    p = propose_owner(t)
    assert (p.owner, p.conversations, p.missing) == ("Yuki", 1, ())


def test_missing_conversations_are_named_when_nobody_is_in_all():
    t = table(
        [
            ("a", "Ann", "Ann", False, "hi", 0),
            ("a", "Ann", "Yuki", False, "yo", 0),
            ("b", "Bo", "Bo", False, "hi", 1),
            ("b", "Bo", "Yuki Tanaka", False, "yo", 1),
            ("c", "Cy", "Cy", False, "hi", 1),
            ("c", "Cy", "Yuki", False, "yo", 1),
        ]
    )
    p = propose_owner(t)
    assert (p.owner, p.missing, p.in_every) == ("Yuki", ("b",), False)
    assert owner_missing(t, "Yuki", ["yuki tanaka"]) == []  # an alias covers it


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_queries_come_from_the_data_deterministically(lang):
    if lang == "en":
        texts = ["the kayak trip is on", "kayak again tomorrow?", "dinner at the harbour", "ok"]
    else:
        texts = ["カヤックに行こう", "明日もカヤック？", "夕飯は港で", "了解"]
    t = table(
        [
            ("a", "Ann", "Ann", False, texts[0], 0),
            ("a", "Ann", "Yuki", True, texts[1], 1),
            ("b", "Bo", "Bo", False, texts[2], 2),
            ("a", "Ann", "Ann", False, texts[3], 3),
        ]
    )
    tips = suggest_queries(t, ["Yuki"])
    assert tips == suggest_queries(t.slice(0), ["Yuki"])  # the same data, the same queries
    assert tips.lang == lang
    assert tips.search == ("kayak" if lang == "en" else "カヤック")  # on two days
    assert "Ann" in tips.context  # the contact with the most messages, never the owner
    assert suggest_queries(t.slice(0, 0)).search is None
