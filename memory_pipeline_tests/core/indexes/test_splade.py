"""The packaged SPLADE encoder (core/indexes/splade.py), its cached turn vectors, and the
channel's mixing into a turn's own share (core/retrieval/turns.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from memory_pipeline.core.indexes import splade as SP
from memory_pipeline.core.retrieval.turns import mix_splade

needs_weights = pytest.mark.skipif(not SP.available(), reason="SPLADE weights not packaged")


@needs_weights
def test_wordpiece_matches_bert_uncased():
    """Lowercased, accents stripped, punctuation split, unknown words in ## pieces, wrapped
    in [CLS] ... [SEP] (what the tokenizer.json the weights came with gives)."""
    tok = SP.packaged().tok
    pieces = [tok.terms[i] for i in tok.encode("Hello, world! Unaffable Café")]
    assert pieces == ["[CLS]", "hello", ",", "world", "!", "una", "##ffa", "##ble", "cafe", "[SEP]"]
    assert len(tok.encode("word " * 1000)) == SP.MAX_TOKENS


@needs_weights
def test_a_query_expands_to_a_relevant_turn_without_a_shared_word():
    """The point of the channel: "instrument" reaches a turn about a violin (no word in
    common, so BM25 scores it 0) above a turn about the beach; a text's vector is sparse
    and non-negative."""
    enc = SP.packaged()
    query = enc.encode(["What instrument does she play?"])
    turns = enc.encode(
        ["I practice the violin every evening.", "The weather was lovely at the beach."]
    )
    relevant, irrelevant = SP.turn_scores(turns, query)
    assert relevant > irrelevant
    assert relevant > 2 * irrelevant
    assert turns.min() >= 0 and 0 < turns.getnnz(axis=1).max() < 500
    assert enc.encode([]).shape == (0, len(enc.tok.terms))


class _Counting:
    """An encoder stand-in: a one-hot vector per text length, counting what it encodes."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.tok = type("T", (), {"terms": ["t"] * 50})()

    def encode(self, texts):
        self.seen += list(texts)
        rows = [sp.csr_matrix(([1.0], [len(t)], [0, 1]), shape=(1, 50)) for t in texts]
        return sp.vstack(rows, format="csr", dtype=np.float32)


def test_turn_vectors_are_cached_by_content_and_the_cache_keeps_only_current_texts(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(SP, "_MEMO", {})
    enc = _Counting()
    first = SP.encode_cached(["a", "bb", "a"], tmp_path, enc)
    assert enc.seen == ["a", "bb"]  # a repeated text is encoded once
    again = SP.encode_cached(["bb", "ccc"], tmp_path, enc)
    assert enc.seen == ["a", "bb", "ccc"]  # only the new text
    assert (again[0] != first[1]).nnz == 0 and again[1, 3] == 1.0
    with np.load(tmp_path / SP.CACHE_FILE) as z:
        assert sorted(bytes(k) for k in z["keys"]) == sorted(SP.text_key(t) for t in ["bb", "ccc"])
    (tmp_path / SP.CACHE_FILE).write_bytes(b"not an npz")  # unreadable: recomputed...
    monkeypatch.setattr(SP, "_MEMO", {})
    SP.encode_cached(["bb"], tmp_path, enc)
    assert enc.seen[-1] == "bb"
    SP.encode_cached(["bb", "dddd"], tmp_path / "elsewhere", enc)  # ...or read from memory
    assert enc.seen[-2:] == ["bb", "dddd"]


def test_the_index_is_english_only_and_absent_vectors_load_as_none(tmp_path, monkeypatch):
    monkeypatch.setattr(SP, "packaged", lambda: _Counting())
    monkeypatch.setattr(SP, "_MEMO", {})  # the stand-in's vectors stay out of the process's
    stats = SP.build_splade_index(tmp_path, ["昨日は犬と公園を散歩した", "今日は雨が降っている"])
    assert stats == {"splade_turns": 0} and not (tmp_path / SP.INDEX_FILE).exists()
    assert SP.load_splade_index(tmp_path, 2) is None
    stats = SP.build_splade_index(tmp_path, ["Anna: we walked the dog", "Ben: it rains"])
    assert stats["splade_turns"] == 2
    assert SP.load_splade_index(tmp_path, 2).shape == (2, 50)
    assert SP.load_splade_index(tmp_path, 3) is None  # another layout: not used


def test_mix_splade_adds_the_scaled_channel_and_is_a_no_op_when_off():
    own = np.array([2.0, 1.0, 0.0], dtype=np.float32)
    spl = np.array([0.0, 1.0, 4.0])
    for off in (mix_splade(own, spl, 0.0), mix_splade(own, None, 3.0)):
        assert off is own  # unchanged, dtype included
    mixed = mix_splade(own, spl, 2.0)
    np.testing.assert_allclose(mixed, (own / 2 + 2 * spl / 4) * 2)
    # no BM25 match: SPLADE alone orders the turns
    np.testing.assert_allclose(mix_splade(np.zeros(3), spl, 1.0), spl / 4)


@needs_weights
def test_a_long_encode_on_threads_equals_one_thread():
    """The document side of a long list runs on several threads (a first build); the rows
    are the same texts' vectors, in order, as one thread gives (float32 rounding apart)."""
    enc = SP.packaged()
    texts = [
        f"{who}: we met at the {place} on day {i} and talked about {topic}"
        for i, (who, place, topic) in enumerate(
            zip(
                ["Alex", "Sam", "Kim", "Lee"] * 20,
                ["lake house", "station", "office", "beach", "museum"] * 16,
                ["violins", "the dog", "a new job", "Kyoto", "rent", "tennis", "books", "rain"]
                * 10,
                strict=False,
            )
        )
    ]
    one = enc.encode(texts, threads=1)
    three = enc.encode(texts, threads=3)
    assert one.shape == three.shape == (80, len(enc.tok.terms))
    assert (one != 0).sum() > 0
    assert np.allclose(one.toarray(), three.toarray(), atol=1e-5)
    assert SP.encode_threads() >= 1


@needs_weights
def test_a_row_is_the_same_bits_alone_or_among_any_texts():
    """A text's vector does not depend on the texts encoded with it: alone, among texts of
    other lengths, in a shuffled subset or on several threads it is the same bits, so a
    refresh that encodes only new turns, a cached row and a full rebuild agree exactly."""
    rng = np.random.default_rng(7)
    words = "we met at the lake house station office beach and talked about violins rain".split()
    texts = ["", "hi", "ok!", "x " * 400] + [
        " ".join(rng.choice(words, size=int(rng.integers(1, 60)))) for _ in range(300)
    ]
    enc = SP.packaged()
    whole = enc.encode(texts, threads=2)
    assert len({len(enc.tok.encode(t)) for t in texts}) > 30  # many lengths, short and long
    for i in [0, 1, 2, 3, *rng.choice(len(texts), size=12, replace=False)]:
        alone = enc.encode([texts[i]], threads=1)
        assert (alone != whole[i]).nnz == 0, i
    for n in (5, 77):
        pick = rng.choice(len(texts), size=n, replace=False)
        assert (enc.encode([texts[i] for i in pick], threads=1) != whole[pick]).nnz == 0
