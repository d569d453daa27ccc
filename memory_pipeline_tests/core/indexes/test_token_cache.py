"""Tokens cached by content hash: same tokens and indexes; a refresh tokenizes only new texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.indexes import token_cache
from memory_pipeline.core.indexes.publish import build_bm25
from memory_pipeline.core.indexes.token_cache import CachedTokenizer
from memory_pipeline.core.indexes.tokenize import get_tokenizer, sudachi_available
from memory_pipeline.core.privacy.forget import ForgetPlan, purge_cache
from memory_pipeline.core.represent.cache import ContentCache

TEXTS = [
    "Morning coffee at the station, the train was late again",
    "",
    "今日は新宿駅で引っ越しの話をした",
    "Yukiも来る? BBQは１９時から",
    "Morning coffee at the station, the train was late again",  # a duplicate
    "   ",
]
NEW = ["A quokka at the zoo!", "明日は東京都庁に行く"]


class Counting:
    """A tokenizer that records which texts it was asked to tokenize."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.params = inner, inner.name, inner.params
        self.seen: list[str] = []

    def tokenize(self, text: str) -> list[str]:
        return self.inner.tokenize(text)

    def tokenize_many(self, texts):
        texts = list(texts)
        self.seen += texts
        return self.inner.tokenize_many(texts)


def names() -> list[str]:
    return ["regex", "english", "cjk_bigram"] + (["sudachi"] if sudachi_available() else [])


@pytest.mark.parametrize("name", names())
def test_cached_tokens_equal_the_tokenizer_output(tmp_path: Path, name: str):
    plain = get_tokenizer(name)
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        first = CachedTokenizer(plain, cache).tokenize_many(TEXTS)
        again = CachedTokenizer(plain, cache)  # a new build: everything from the cache
        second = again.tokenize_many(TEXTS)
    assert first == second == plain.tokenize_many(TEXTS)
    assert again.misses == 0 and again.hits == len(set(TEXTS))


def test_a_refresh_tokenizes_only_new_texts(tmp_path: Path):
    counting = Counting(get_tokenizer("english"))
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        CachedTokenizer(counting, cache).tokenize_many(TEXTS)
        assert sorted(counting.seen) == sorted(set(TEXTS))  # duplicates tokenized once
        counting.seen.clear()
        refresh = CachedTokenizer(counting, cache)
        refresh.tokenize_many(TEXTS + NEW)
    assert sorted(counting.seen) == sorted(NEW)
    assert (refresh.hits, refresh.misses) == (len(set(TEXTS)), len(NEW))


def test_deferred_entries_are_read_back_and_written_only_at_flush(tmp_path: Path):
    """The turn index's tokenizer (beside the chunk indexes' on another thread) holds its
    entries until flush: nothing reaches the file before, a text it saw is not tokenized
    twice, and after the flush a new build reads them all from the cache."""
    counting = Counting(get_tokenizer("english"))
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        held = CachedTokenizer(counting, cache, defer=True)
        first = held.tokenize_many(TEXTS)
        key = token_cache.token_key(cache, counting)
        assert cache.get_texts(key, [text_hash(t) for t in TEXTS]) == {}
        counting.seen.clear()
        assert held.tokenize_many(TEXTS + NEW) == first + counting.inner.tokenize_many(NEW)
        assert sorted(counting.seen) == sorted(NEW)  # the held ones answered from memory
        assert held.flush() == len(set(TEXTS + NEW))
        assert held.flush() == 0
        counting.seen.clear()
        again = CachedTokenizer(counting, cache)
        assert again.tokenize_many(TEXTS + NEW) == first + counting.inner.tokenize_many(NEW)
    assert counting.seen == []  # the new build read every text from the cache


def test_the_full_scan_path_reads_the_same_tokens(tmp_path: Path, monkeypatch):
    plain = get_tokenizer("english")
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        CachedTokenizer(plain, cache).tokenize_many(TEXTS)
        monkeypatch.setattr(token_cache, "_SCAN_ABOVE", 0)
        scan = CachedTokenizer(plain, cache)
        assert scan.tokenize_many(TEXTS + NEW) == plain.tokenize_many(TEXTS + NEW)
    assert scan.misses == len(NEW)


def test_another_tokenizer_never_reads_these_tokens(tmp_path: Path):
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        CachedTokenizer(get_tokenizer("regex"), cache).tokenize_many(TEXTS)
        other = CachedTokenizer(get_tokenizer("cjk_bigram"), cache)
        assert other.tokenize_many(TEXTS) == get_tokenizer("cjk_bigram").tokenize_many(TEXTS)
    assert other.hits == 0


def _reps(texts: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    ids = [f"c{i:03d}" for i in range(len(texts))]
    return {
        "raw_text": (ids, texts),
        "summary": (ids, [t[:20] for t in texts]),
        "embedding_text": (ids, [f"Kim: {t}" for t in texts]),
    }


def test_indexes_built_through_the_cache_equal_a_plain_build(tmp_path: Path):
    day1 = [t for t in TEXTS if t.strip()] + ["the train again"]
    both = day1 + NEW
    with ContentCache(tmp_path / "cache.sqlite") as cache:
        (tmp_path / "a").mkdir()
        first = build_bm25(_reps(day1), tmp_path / "a", "english", cache=cache)
        (tmp_path / "b").mkdir()
        refresh = build_bm25(_reps(both), tmp_path / "b", "english", cache=cache)
    (tmp_path / "c").mkdir()
    plain = build_bm25(_reps(both), tmp_path / "c", "english")
    old, new = set(_texts(_reps(day1))), set(_texts(_reps(both)))
    assert first.stats["tokens_computed"] == len(old)  # each distinct text once
    # the refresh tokenized only the new day's texts (three representations each)
    assert refresh.stats["tokens_computed"] == len(new - old)
    sort = [("representation", "ascending"), ("token", "ascending"), ("chunk_id", "ascending")]
    assert refresh.postings.sort_by(sort).equals(plain.postings.sort_by(sort))


def _texts(reps: dict[str, tuple[list[str], list[str]]]) -> list[str]:
    return [t for _, texts in reps.values() for t in texts]


def test_forget_and_retention_purge_the_tokens_of_their_texts(tmp_path: Path):
    path = tmp_path / "cache.sqlite"
    plain = get_tokenizer("english")
    with ContentCache(path) as cache:
        CachedTokenizer(plain, cache).tokenize_many(TEXTS)
    victim = TEXTS[0]
    purge_cache(path, ForgetPlan("", tmp_path, texts=set(), text_hashes={text_hash(victim)}))
    with ContentCache(path) as cache:
        again = CachedTokenizer(plain, cache)
        again.tokenize_many(TEXTS)
    assert again.misses == 1  # the purged text had to be tokenized again
