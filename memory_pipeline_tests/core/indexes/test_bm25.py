"""BM25 with bm25s, and the postings table + sql/bm25_search.sql giving the same ranking."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from memory_pipeline.config import load_config
from memory_pipeline.core.indexes import tokenize as tk
from memory_pipeline.core.indexes.bm25 import (
    POSTINGS_SCHEMA,
    SQL_SEARCH_FILE,
    Bm25Index,
    build_index,
    document_frequencies,
    load_index,
    postings,
    query_tokens,
    search_sql,
)
from memory_pipeline.core.ingest.normalize import messages_table
from memory_pipeline.core.ingest.stage import discover_dates, read_all
from memory_pipeline.core.sessions.chunking import chunk_sessions
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.paths import ROOT

TOL = 1e-5

DOCS = {
    "d1": "Morning! Running 5 min late, sorry. Get a coffee at the Doutor by the exit?",
    "d2": "No problem, I'll get you a latte",
    "d3": "I got the job at Hikari Design! UX designer, full time.",
    "d4": "火曜の飲み会、19時に渋谷のハチ公前集合でいい？",
    "d5": "来月引越しするから、週末は引っ越しの準備で忙しい",
    "d6": "Coffee after work? コーヒー飲みたい",
    "d7": "😭🎉",
}


@pytest.fixture(scope="module")
def small() -> Bm25Index:
    return build_index(list(DOCS), list(DOCS.values()), tokenizer="sudachi")


# ------------------------------------------------------------------------- helpers


def sql_con(indexes: dict[str, Bm25Index]) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with ``bm25_postings`` = the postings of each representation."""
    parts = []
    for rep, index in indexes.items():
        post = postings(index)
        parts.append(
            pa.table(
                {
                    "representation": pa.array([rep] * post.num_rows, pa.string()),
                    "token": post.column("token"),
                    "chunk_id": post.column("doc_id"),
                    "score": post.column("score"),
                }
            )
        )
    con = duckdb.connect()
    con.register("postings_arrow", pa.concat_tables(parts))
    con.execute("CREATE TABLE bm25_postings AS SELECT * FROM postings_arrow")
    return con


def run_sql(
    con: duckdb.DuckDBPyConnection, tokens: list[str], representation: str, k: int
) -> list[tuple[str, float]]:
    """sql/bm25_search.sql exactly as shipped, with its three parameters."""
    params = {"tokens": tokens, "representation": representation, "k": k}
    return [(d, float(s)) for d, s in con.execute(search_sql(), params).fetchall()]


def assert_same_ranking(expected: list[tuple[str, float]], got: list[tuple[str, float]]) -> None:
    """Same top-k: scores equal rank by rank; ids equal except among float-level ties.

    bm25s sums float32, DuckDB sums the same float32 values in double, so two documents
    whose scores differ by ~1e-7 may swap, and a tie at the k-th place may keep a different
    member of the tie; everything else must match exactly.
    """
    assert len(got) == len(expected), (expected, got)
    for (_, s_exp), (_, s_got) in zip(expected, got, strict=True):
        assert s_got == pytest.approx(s_exp, rel=TOL, abs=TOL)
    if not expected:
        return
    exp, gt = dict(expected), dict(got)
    boundary = expected[-1][1] + 10 * TOL
    assert {d for d, s in expected if s > boundary} == {d for d, s in got if s > boundary}
    for doc in exp.keys() & gt.keys():
        assert gt[doc] == pytest.approx(exp[doc], rel=TOL, abs=TOL)


def check_sql_matches(
    index: Bm25Index, queries: Sequence[str], k: int = 10, rep: str = "raw_text"
) -> int:
    """Every query: SQL over postings == Bm25Index.search; returns how many had hits."""
    con = sql_con({rep: index, "other": build_index(["x"], ["unrelated other text"], "english")})
    position = {d: i for i, d in enumerate(index.doc_ids)}
    with_hits = 0
    for query in queries:
        tokens = query_tokens(index, query)
        expected = index.search(query, k)
        got = run_sql(con, tokens, rep, k)
        assert_same_ranking(expected, got)
        # and straight against bm25s's full score vector (it drops out-of-vocabulary strings)
        full = index.retriever.get_scores([*tokens, *["<oov>"] * 2]) if tokens else None
        if full is not None:
            for doc, score in got:
                assert score == pytest.approx(float(full[position[doc]]), rel=TOL, abs=TOL)
            if got:
                above = {index.doc_ids[i] for i in np.flatnonzero(full > got[-1][1] + 10 * TOL)}
                assert above <= {d for d, _ in got}
        with_hits += bool(expected)
    return with_hits


# ------------------------------------------------------------------------ build/search


def test_search_finds_the_right_documents(small: Bm25Index):
    assert small.tokenizer.name == "sudachi"
    assert small.search("coffee", 3)[0][0] in {"d1", "d6"}
    assert [d for d, _ in small.search("引っ越しの準備", 2)] == ["d5"]
    assert [d for d, _ in small.search("渋谷で飲み会", 2)] == ["d4"]
    assert small.search("designer job", 1)[0][0] == "d3"
    # spelling variant in the query: 引越し matches 引っ越し in the document
    assert small.search("引越し", 1)[0][0] == "d5"


def test_scores_are_bm25s_scores(small: Bm25Index):
    """search() returns bm25s's own numbers: same order and scores as BM25.retrieve."""
    tokens = small.tokenizer.tokenize("coffee latte job")
    docs, scores = small.retriever.retrieve([tokens], k=3, show_progress=False)
    expected = [(small.doc_ids[i], float(s)) for i, s in zip(docs[0], scores[0], strict=True)]
    assert_same_ranking(expected, small.search("coffee latte job", 3))


def test_search_edge_cases(small: Bm25Index):
    assert small.search("", 5) == []
    assert small.search("😭", 5) == []
    assert small.search("xyzzy plugh", 5) == []  # only out-of-vocabulary tokens
    assert small.search("coffee", 0) == []
    assert len(small.search("coffee", 100)) == 2  # only matching documents, k > corpus is fine
    oov_mixed = small.search("coffee xyzzy", 5)
    assert oov_mixed == small.search("coffee", 5)


def test_repeated_query_tokens_count_twice(small: Bm25Index):
    """bm25s adds a repeated query token once per occurrence; we keep that behaviour."""
    once = dict(small.search("coffee", 5))
    twice = dict(small.search("coffee coffee", 5))
    assert once.keys() == twice.keys()
    for doc, score in once.items():
        assert twice[doc] == pytest.approx(2 * score, rel=1e-6)
    assert query_tokens(small, "coffee Coffee xyzzy") == ["coffe", "coffe"]


def test_ties_break_by_doc_id():
    ids = ["c", "a", "b", "d"]
    index = build_index(ids, ["tea time", "tea time", "tea time", "other words"], "english")
    assert [d for d, _ in index.search("tea", 2)] == ["a", "b"]
    assert [d for d, _ in index.search("tea", 10)] == ["a", "b", "c"]


def test_search_many_matches_search(small: Bm25Index):
    queries = ["coffee", "引越し", "", "job designer", "xyzzy"]
    assert small.search_many(queries, 3) == [small.search(q, 3) for q in queries]


def test_build_index_validates():
    with pytest.raises(ValueError, match="unique"):
        build_index(["a", "a"], ["x", "y"], "english")
    with pytest.raises(ValueError, match="texts"):
        build_index(["a"], ["x", "y"], "english")
    with pytest.raises(ValueError, match="method"):
        build_index(["a"], ["x"], "english", method="bm25+")


def test_auto_tokenizer_and_params():
    english = build_index(["a", "b"], ["I like tea", "You like coffee"])
    assert english.tokenizer.name == "english"
    japanese = build_index(["a", "b"], ["お茶が好き", "コーヒーが好き"], k1=1.2, b=0.5)
    assert japanese.tokenizer.name == "sudachi"
    assert japanese.params == {"k1": 1.2, "b": 0.5, "method": "lucene"}


@pytest.mark.parametrize("texts", [[], ["😭", "", "の"]], ids=["no documents", "no tokens at all"])
def test_degenerate_corpora(texts: list[str]):
    index = build_index([f"d{i}" for i in range(len(texts))], texts, "sudachi")
    assert index.search("anything 何か", 5) == []
    assert postings(index).num_rows == 0


def test_save_load_round_trip(small: Bm25Index, tmp_path: Path):
    small.save(tmp_path / "idx")
    names = {p.name for p in (tmp_path / "idx").iterdir()}
    assert {"memory_pipeline_bm25.json", "doc_ids.json", "vocab.index.json"} <= names
    meta = json.loads((tmp_path / "idx" / "memory_pipeline_bm25.json").read_text("utf-8"))
    assert meta["tokenizer"] == {"name": "sudachi", "params": small.tokenizer.params}

    loaded = Bm25Index.load(tmp_path / "idx")  # mmap by default
    assert isinstance(loaded.retriever.scores["data"], np.memmap)
    assert loaded.doc_ids == small.doc_ids
    assert (loaded.tokenizer.name, loaded.tokenizer.params) == ("sudachi", small.tokenizer.params)
    for q in ["coffee", "引越し準備", "飲み会 渋谷 19時", "xyzzy", "job job"]:
        assert loaded.search(q, 5) == small.search(q, 5)
    assert postings(loaded).equals(postings(small))
    in_memory = load_index(tmp_path / "idx", mmap=False)
    assert not isinstance(in_memory.retriever.scores["data"], np.memmap)
    assert in_memory.search("coffee", 5) == small.search("coffee", 5)


def test_load_refuses_other_tokenizer_version(small: Bm25Index, tmp_path: Path):
    small.save(tmp_path)
    meta_path = tmp_path / "memory_pipeline_bm25.json"
    meta = json.loads(meta_path.read_text("utf-8"))
    meta["tokenizer"]["params"]["version"] = tk.TOKENIZER_VERSION + 1
    meta_path.write_text(json.dumps(meta), "utf-8")
    with pytest.raises(ValueError, match="rebuild"):
        Bm25Index.load(tmp_path)


# ----------------------------------------------------------------------------- postings


def test_postings_table(small: Bm25Index):
    post = postings(small)
    assert post.schema == POSTINGS_SCHEMA
    assert post.num_rows == len(small.retriever.scores["data"])
    assert set(post.column("doc_id").to_pylist()) == set(small.doc_ids) - {"d7"}  # emoji only
    assert min(post.column("score").to_pylist()) > 0
    # summing a query's postings per document reproduces bm25s's full score vector
    tokens = query_tokens(small, "coffee 引越し 渋谷 coffee")
    sums = dict.fromkeys(small.doc_ids, 0.0)
    rows = post.to_pylist()
    for tok in tokens:
        for row in rows:
            if row["token"] == tok:
                sums[row["doc_id"]] += row["score"]
    vocab = small.vocab
    expected = small.retriever.get_scores_from_ids([vocab[t] for t in tokens])
    assert [sums[d] for d in small.doc_ids] == pytest.approx(expected.tolist(), rel=1e-6)


def _postings_counts(index: Bm25Index) -> dict[str, int]:
    counts = postings(index).group_by("token").aggregate([("doc_id", "count")])
    return dict(zip(counts["token"].to_pylist(), counts["doc_id_count"].to_pylist(), strict=True))


def test_document_frequencies_are_the_postings_rows_per_token(small: Bm25Index):
    """The searcher's idf is counted on the score matrix (the version carries no postings
    file): the same documents per token as the postings table, zero scores left out too."""
    assert document_frequencies(small) == _postings_counts(small)
    scores = small.retriever.scores
    token = next(iter(small.vocab))
    col = small.vocab[token]
    lo, hi = int(scores["indptr"][col]), int(scores["indptr"][col + 1])
    assert hi > lo
    data = np.array(scores["data"], copy=True)
    data[lo:hi] = 0  # as robertson's zero idf stores a very common token
    small.retriever.scores = {**scores, "data": data}
    try:
        df = document_frequencies(small)
        assert token not in df
        assert df == _postings_counts(small)
    finally:
        small.retriever.scores = scores


def test_sql_file_is_shipped_with_parameters():
    text = SQL_SEARCH_FILE.read_text(encoding="utf-8")
    assert text == search_sql()
    for param in ("$tokens", "$representation", "$k", "bm25_postings", "query_tokens"):
        assert param in text


def test_sql_equals_bm25s_small(small: Bm25Index):
    queries = [
        "coffee",
        "coffee coffee coffee",  # repeated token: counted per occurrence on both sides
        "coffee xyzzy",  # out-of-vocabulary token: ignored on both sides
        "xyzzy",
        "",
        "引越し 引っ越し 準備",  # two spellings -> the same token twice
        "渋谷 飲み会 19時 coffee latte job",
    ]
    assert check_sql_matches(small, queries, k=3) == 5


def test_sql_empty_token_list_and_representation_filter(small: Bm25Index):
    con = sql_con({"raw_text": small, "summary": build_index(["s1"], ["coffee"], "english")})
    assert run_sql(con, [], "raw_text", 5) == []
    assert [d for d, _ in run_sql(con, ["coffe"], "summary", 5)] == ["s1"]
    assert "s1" not in {d for d, _ in run_sql(con, ["coffe"], "raw_text", 5)}


# --------------------------------------------------------------- sample and real corpora


@pytest.fixture(scope="module")
def sample_chunks() -> pa.Table:
    """The chunks `memory-pipeline run` builds from data/sample, via the pure core stages."""
    cfg = load_config(ROOT / "memory_pipeline.toml", env={})
    dates = discover_dates(cfg.sources, cfg.start_date)
    messages = messages_table(read_all(cfg.sources, dates, cfg.start_date).messages)
    sessions = sessionize(messages, cfg.session_gap_minutes)
    return chunk_sessions(sessions, messages, cfg.chunk_size, cfg.chunk_stride)


SAMPLE_QUERIES = [
    "飲み会はどこに集合？",
    "渋谷 渋谷 ハチ公",
    "バイトの時給はいくら",
    "引越しの準備",
    "Maria got a new job",
    "coffee coffee latte",
    "When does Maria start at Hikari Design?",
    "旅行 travel trip",
    "xyzzy 存在しない単語",
    "",
]


@pytest.mark.parametrize("tokenizer", ["sudachi", "regex", "cjk_bigram"])
def test_sql_equals_bm25s_on_sample_chunks(sample_chunks: pa.Table, tokenizer: str):
    assert sample_chunks.num_rows > 10
    index = build_index(
        sample_chunks.column("chunk_id").to_pylist(),
        sample_chunks.column("raw_text").to_pylist(),
        tokenizer,
    )
    assert check_sql_matches(index, SAMPLE_QUERIES, k=5) >= 6


def _locomo(path: Path) -> tuple[list[str], list[str], list[str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    ids, texts, questions = [], [], []
    for sample in data[:2]:
        conv = sample["conversation"]
        for key, session in conv.items():
            if key.startswith("session_") and isinstance(session, list):
                for turn in session:
                    ids.append(f"{sample['sample_id']}:{turn['dia_id']}")
                    caption = turn.get("blip_caption")
                    texts.append(turn["text"] + (f" [image: {caption}]" if caption else ""))
        questions += [qa["question"] for qa in sample["qa"][:40]]
    return ids, texts, questions


def test_sql_equals_bm25s_on_locomo(shared_file: Callable[[str], Path]):
    ids, texts, questions = _locomo(shared_file("locomo/locomo_dev.json"))
    index = build_index(ids, texts)  # auto -> english
    assert index.tokenizer.name == "english"
    repeated = ["painting painting sunrise", "support group support group LGBTQ", "zzzqqq camp"]
    assert check_sql_matches(index, questions + repeated, k=10) >= len(questions) - 2


def _rpc(path: Path, n: int) -> tuple[list[str], list[str]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = (
            (f"{d['dialogue_id']}:{u['utterance_id']}", u["text"])
            for d in map(json.loads, f)
            for u in d["utterances"]
        )
        ids, texts = zip(*itertools.islice(rows, n), strict=True)
    return list(ids), list(texts)


def test_sql_equals_bm25s_on_realpersonachat(shared_file: Callable[[str], Path]):
    ids, texts = _rpc(shared_file("realpersonachat/dialogues.jsonl.gz"), 3500)
    docs, held_out = (ids[:3000], texts[:3000]), texts[3000:3040]  # queries: unseen utterances
    index = build_index(*docs)  # auto -> sudachi
    assert index.tokenizer.name == "sudachi"
    queries = held_out + [
        "旅行 旅行 京都",
        "夏休み 夏休み 夏休み 海",
        "ｘｙｚｚｙ 未知語です",
        "ラーメン",
    ]
    assert check_sql_matches(index, queries, k=10) >= 30


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
def test_fast_index_is_bm25s_bit_for_bit(method):
    """The whole-corpus numpy build equals bm25s's own per-document build exactly."""
    import random

    import bm25s
    import numpy as np
    from bm25s.tokenization import Tokenized

    from memory_pipeline.core.indexes.bm25 import fast_index

    rng = random.Random(7)
    words = [f"w{i}" for i in range(800)] + ["東京", "ラーメン", "café"]
    docs = [
        [rng.choice(words[: rng.choice([5, 60, len(words)])]) for _ in range(rng.randint(0, 30))]
        for _ in range(3000)
    ]
    ref, fast = (bm25s.BM25(method=method, backend="numpy") for _ in range(2))
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(w, len(vocab)) for w in d] for d in docs]
    ref.index(Tokenized(ids=ids, vocab=vocab), create_empty_token=False, show_progress=False)
    assert fast_index(fast, docs)
    assert fast.vocab_dict == ref.vocab_dict
    assert fast.scores["num_docs"] == ref.scores["num_docs"] == 3000
    for key in ("data", "indices", "indptr"):
        a, b = np.asarray(ref.scores[key]), np.asarray(fast.scores[key])
        assert a.dtype == b.dtype and np.array_equal(a, b), key
    q = ids[11][:3] or [0]
    assert np.array_equal(ref.get_scores_from_ids(q), fast.get_scores_from_ids(q))


def test_fast_index_declines_an_empty_corpus_and_build_index_still_works():
    import bm25s

    from memory_pipeline.core.indexes.bm25 import fast_index

    assert not fast_index(bm25s.BM25(backend="numpy"), [])
    assert not fast_index(bm25s.BM25(backend="numpy"), [[], []])
    index = build_index(["a", "b"], ["", ""], tokenizer="english")
    assert index.search("anything") == []


def test_term_counts_equal_the_sorted_unique_keys():
    """The counting-sort postings are the ``np.unique`` sort's, value for value: CSC order,
    term frequencies, empty documents and tokens of no document included."""
    import numpy as np

    from memory_pipeline.core.indexes.bm25 import _term_counts

    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 40, 5000)
    lengths[:3] = 0  # empty documents at the start and elsewhere
    n_vocab = 700  # some ids never drawn: tokens of no document
    flat = (rng.zipf(1.4, int(lengths.sum())) % 650).astype(np.int64)
    n_docs = len(lengths)
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    keys, tf = np.unique(flat * n_docs + doc, return_counts=True)
    tok, rows = np.divmod(keys, n_docs)
    rows2, tf2, indptr = _term_counts(flat, lengths, n_vocab)
    assert np.array_equal(rows2, rows) and np.array_equal(tf2, tf)
    assert np.array_equal(indptr, np.r_[0, np.cumsum(np.bincount(tok, minlength=n_vocab))])
    assert indptr.dtype == np.int64
