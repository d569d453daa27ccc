"""MessageRows: a version's messages by id, rows built on demand from the Arrow columns,
equal to the dicts ``to_pylist`` made (what the searcher held before)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from memory_pipeline.core.retrieval.message_rows import MessageRows


def _table() -> pa.Table:
    return pa.table(
        {
            "message_id": ["a", "b", "c", "b"],
            "sender": ["Ann", None, "Cy", "Bo"],
            "local_ts": [dt.datetime(2024, 3, d) for d in (1, 5, 3, 4)],
            "text": ["héllo", "", None, "later b"],
        }
    )


def test_rows_equal_the_pylist_dicts_and_a_repeated_id_keeps_its_last_row():
    table = _table()
    rows = MessageRows(table)
    want = {r["message_id"]: r for r in table.to_pylist()}
    assert len(rows) == len(want) == 3 and list(rows) == list(want)
    for m, r in want.items():
        assert rows[m] == r and m in rows
    assert "zzz" not in rows and rows.get("zzz") is None
    rows["a"]["text"] = "changed"  # a caller's change stays with that caller
    assert rows["a"]["text"] == "héllo"
    assert rows.latest() == dt.datetime(2024, 3, 5)
    assert rows.as_dict("sender") == {m: r["sender"] for m, r in want.items()}


def test_columns_by_id_with_unknown_ids():
    rows = MessageRows(_table())
    assert rows.column("sender", ["c", "zzz", "a"]) == ["Cy", None, "Ann"]
    assert rows.text_lengths(["a", "b", "c", "zzz"]) == [5, 7, 0, 0]
    assert rows.text_lengths([]) == []
    assert MessageRows(_table().slice(0, 0)).latest() is None


def test_senders_and_lengths_equal_the_columns_a_turn_index_was_given():
    """What a version's turn index reads per turn, at once: the same senders ("" for a null
    sender or an unknown id) and text lengths as ``column`` and ``text_lengths``."""
    rows = MessageRows(_table())
    for ids in (["c", "zzz", "a", "b", "a"], [], ["zzz"]):
        senders, lengths = rows.senders_and_lengths(ids)
        assert senders.dtype == object and senders.tolist() == [
            s or "" for s in rows.column("sender", ids)
        ]
        assert lengths.tolist() == rows.text_lengths(ids)
    senders, lengths = MessageRows(_table().slice(0, 0)).senders_and_lengths(["a"])
    assert senders.tolist() == [""] and lengths.tolist() == [0]
