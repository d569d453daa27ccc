"""The turn index: one document per message, in session order, with its context."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turns import (
    build_turn_index,
    load_message_tokens,
    load_turn_indexes,
    turn_documents,
    turn_layout,
    turn_token_lists,
)


def _tables():
    """Two sessions; session A has two overlapping windows (m2 is in both)."""
    chunks = pa.table(
        {
            "chunk_id": ["c-a0", "c-a1", "c-b0"],
            "session_id": ["A", "A", "B"],
            "chunk_index": [0, 1, 0],
            "message_ids": [["m1", "m2"], ["m2", "m3"], ["m4"]],
        }
    )
    ts = dt.datetime(2024, 3, 1, 10, 0)
    messages = pa.table(
        {
            "message_id": ["m1", "m2", "m3", "m4"],
            "sender": ["Ann", "Bob", "Ann", "Cid"],
            "local_ts": [ts, ts, ts, ts + dt.timedelta(days=40)],
            "text": ["I adopted a puppy", "what breed?", "a beagle", "hello there"],
        }
    )
    return chunks, messages


def test_layout_orders_each_session_once_and_keeps_overlap_rows():
    chunks, _ = _tables()
    lay = turn_layout(chunks)
    assert lay.message_ids == ["m1", "m2", "m3", "m4"]
    assert lay.session_ids == ["A", "A", "A", "B"]
    assert lay.chunk_rows == [[0], [0, 1], [1], [2]]  # m2 sits in both windows
    assert lay.position.tolist() == [0, 1, 2, 0]
    assert lay.session_length.tolist() == [3, 3, 3, 1]


def test_documents_carry_speaker_date_and_neighbours_within_the_session():
    chunks, messages = _tables()
    docs = turn_documents(turn_layout(chunks), messages, context=1)
    assert docs["turn"][1] == "Bob 2024-03-01: what breed?"
    assert docs["turn_ctx"][1] == "I adopted a puppy a beagle"
    assert docs["turn_ctx"][2] == "what breed?"  # never crosses into session B
    assert docs["turn_ctx"][3] == ""
    assert turn_documents(turn_layout(chunks), messages, context=0)["turn_ctx"][1] == ""


def test_build_and_load_round_trip(tmp_path):
    chunks, messages = _tables()
    stats = build_turn_index(tmp_path, chunks, messages, get_tokenizer("regex"))
    assert stats["turns"] == 4
    idx = load_turn_indexes(tmp_path)
    assert set(idx) == {"turn", "turn_ctx"}
    assert idx["turn"].search("beagle", 2)[0][0] == "m3"
    # the answer to "what breed" is found through its neighbour's document
    assert idx["turn_ctx"].search("beagle", 1)[0][0] == "m2"


def test_a_version_without_turns_loads_nothing(tmp_path):
    assert load_turn_indexes(tmp_path) == {}
    chunks, messages = _tables()
    build_turn_index(tmp_path, chunks, messages, get_tokenizer("regex"))
    (tmp_path / "turns" / "turns.json").write_text('{"format": 99}', encoding="utf-8")
    assert load_turn_indexes(tmp_path) == {}


def _varied_tables():
    """Messages that stress tokenizer boundaries: empty, unicode width/case, a final sigma,
    numbers with separators, Japanese, a missing sender, a message in no table row."""
    texts = [
        "I adopted a puppy named ΟΔΟΣ",
        "",
        "ＢＢＱ at 4,500 yen? 東京で引っ越しした",
        "what breed?",
        "a beagle, I think: café naïve",
        "今日は涼しいですね",
        "don't forget Yukiも",
    ]
    n = len(texts)
    chunks = pa.table(
        {
            "chunk_id": ["c0", "c1", "c2"],
            "session_id": ["A", "A", "B"],
            "chunk_index": [0, 1, 0],
            "message_ids": [
                [f"m{i}" for i in range(0, 3)],
                [f"m{i}" for i in range(2, 5)],
                [f"m{i}" for i in range(5, n)] + ["ghost"],
            ],
        }
    )
    ts = dt.datetime(2024, 3, 1, 23, 30)
    messages = pa.table(
        {
            "message_id": [f"m{i}" for i in range(n)],
            "sender": ["Ann", "Bob", None, "Ann", "Σίσυφος", "Cid", "Cid"],
            "local_ts": [ts + dt.timedelta(days=i) for i in range(n)],
            "text": texts,
        }
    )
    return chunks, messages


def _texts(messages: pa.Table) -> dict[str, str]:
    return dict(zip(messages["message_id"].to_pylist(), messages["text"].to_pylist(), strict=True))


def test_token_lists_equal_the_documents_tokens_for_the_regex_tokenizers():
    """The build tokenizes each message once and concatenates; for tokenizers that never
    put a space inside a token that is exactly the documents' tokens (rankings unchanged)."""
    chunks, messages = _varied_tables()
    layout = turn_layout(chunks)
    for name in ("english", "regex", "cjk_bigram"):
        tok = get_tokenizer(name)
        for context in (0, 1, 2):
            docs = turn_documents(layout, messages, context)
            lists, own = turn_token_lists(layout, messages, tok, context)
            for rep in ("turn", "turn_ctx"):
                assert lists[rep] == tok.tokenize_many(docs[rep]), (name, context, rep)
            texts = _texts(messages)
            assert own == [tok.tokenize(texts.get(m, "")) for m in layout.message_ids]


def test_dates_follow_the_stored_zone_like_datetime_date():
    chunks, messages = _varied_tables()
    aware = messages.set_column(
        2, "local_ts", messages["local_ts"].cast(pa.timestamp("us", tz="Asia/Tokyo"))
    )
    layout = turn_layout(chunks)
    tok = get_tokenizer("english")
    lists, _ = turn_token_lists(layout, aware, tok)
    assert lists["turn"] == tok.tokenize_many(turn_documents(layout, aware)["turn"])


def test_stored_message_tokens_give_the_highlight_scores_of_tokenizing(tmp_path):
    from memory_pipeline.core.retrieval.fusion import highlight_scores
    from memory_pipeline.core.retrieval.turns import TurnIndex

    chunks, messages = _varied_tables()
    tok = get_tokenizer("english")
    build_turn_index(tmp_path, chunks, messages, tok)
    stored = load_message_tokens(tmp_path)
    layout = turn_layout(chunks)
    ti = TurnIndex(layout, load_turn_indexes(tmp_path), 3, message_tokens=stored)
    vocab = ti.indexes["turn"].vocab
    inverse = {i: t for t, i in vocab.items()}
    indptr, ids = stored
    texts = _texts(messages)
    for row, m in enumerate(layout.message_ids):
        got = [inverse[int(i)] for i in ids[indptr[row] : indptr[row + 1]]]
        assert got == tok.tokenize(texts.get(m, ""))
    idf = {"puppi": 2.0, "beagl": 1.5, "bbq": 0.7, "東京": 1.1, "breed": 0.3}
    for query in ("puppy beagle breed", "BBQ 東京 puppy puppy", "nothing matches", ""):
        q = tok.tokenize(query)
        mids = layout.message_ids
        want = highlight_scores(q, [tok.tokenize(texts.get(m, "")) for m in mids], idf)
        np.testing.assert_allclose(ti.highlight_scores(mids, q, idf), want, rtol=1e-12)
    assert ti.highlight_scores(["not-a-message"], ["puppi"], idf) is None
    assert TurnIndex(layout, ti.indexes, 3).highlight_scores(mids, ["puppi"], idf) is None
