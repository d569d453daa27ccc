"""Tokenizers: what reaches BM25 for Japanese, English and mixed chat text."""

from __future__ import annotations

import gzip
import itertools
import json
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_pipeline.core.indexes import tokenize as tk
from memory_pipeline.core.indexes.tokenize import (
    CjkBigramTokenizer,
    EnglishTokenizer,
    RegexTokenizer,
    SudachiTokenizer,
    Tokenizer,
    auto_tokenizer,
    get_tokenizer,
    japanese_share,
)

ALL = ("regex", "sudachi", "cjk_bigram", "english")


@pytest.fixture(scope="module")
def toks() -> dict[str, Tokenizer]:
    return {name: get_tokenizer(name) for name in ALL}


# (tokenizer, text, exact expected tokens)
EXACT = [
    # English: stopwords removed, Snowball stems; the regex baseline does not stem.
    ("english", "I was running to the station", ["run", "station"]),
    ("english", "The and of, to: it's THEIR", []),
    ("english", "Maria's new job at Hikari Design", ["maria", "new", "job", "hikari", "design"]),
    ("cjk_bigram", "Cooking classes", ["cook", "class"]),
    ("sudachi", "Running 5 min late, sorry!", ["run", "5", "min", "late", "sorri"]),
    ("regex", "Running 5 min late, sorry!", ["running", "5", "min", "late", "sorry"]),
    # Sudachi: normalized dictionary forms of content words, particles/auxiliaries dropped.
    ("sudachi", "昨日カレーを食べた。", ["昨日", "カレー", "食べる"]),
    ("sudachi", "すごく美味しかったです", ["凄い", "美味しい"]),
    ("sudachi", "私は東京に行きます", ["東京", "行く"]),
    ("sudachi", "スマートフォンを買い替えたい", ["スマートフォン", "買い換える"]),
    ("sudachi", "来週から時給1,150円に上がる", ["来週", "時給", "1150", "円", "上がる"]),
    ("sudachi", "英会話教室に通っています", ["英会話", "教室", "通う"]),
    ("sudachi", "東京都庁", ["東京", "都庁"]),  # mode B splits long compounds
    # Mixed: latin words inside Japanese take the English path (stem + stopwords).
    ("sudachi", "Yukiと渋谷でcoffeeを飲んだ", ["yuki", "渋谷", "coffe", "飲む"]),
    ("sudachi", "ＮＥＴＦＬＩＸで映画を見てる", ["netflix", "映画", "見る"]),  # full width
    ("sudachi", "the movies were great だった", ["movi", "great"]),
    ("sudachi", "ＢＢＱは楽しかった", ["bbq", "楽しい"]),  # full-width latin
    ("sudachi", "ﾗｰﾒﾝ食べた", ["ラーメン", "食べる"]),  # half-width katakana
    ("sudachi", "１９時に４，５００円", ["19", "時", "4500", "円"]),
    ("sudachi", "Café au lait", ["café", "au", "lait"]),
    # regex baseline: one token per script run, Japanese stopwords on whole runs.
    ("regex", "昨日カレーを食べた。", ["昨日", "カレー", "食", "べた"]),
    ("regex", "ＢＢＱは楽しい", ["bbq", "楽", "しい"]),
    ("regex", "4,500円です", ["4500", "円"]),
    # bigrams: overlapping pairs over a CJK run, latin words stemmed.
    ("cjk_bigram", "東京タワー", ["東京", "京タ", "タワ", "ワー"]),
    ("cjk_bigram", "猫", ["猫"]),
    ("cjk_bigram", "ﾗｰﾒﾝ", ["ラー", "ーメ", "メン"]),
    ("english", "I had ramen at 一蘭", ["ramen", "一蘭"]),
]


@pytest.mark.parametrize(("name", "text", "expected"), EXACT)
def test_exact_tokens(toks: dict[str, Tokenizer], name: str, text: str, expected: list[str]):
    assert toks[name].tokenize(text) == expected


# (tokenizer, text, tokens that must be present, tokens that must be absent)
CONTAINS = [
    ("sudachi", "引越しの準備", ["引っ越し", "準備"], ["の"]),
    ("sudachi", "引っ越しの準備", ["引っ越し"], []),
    ("sudachi", "来月引越する", ["引っ越し"], ["為る", "する"]),
    ("sudachi", "ディズニーランドとユニバに行った", ["ディズニーランド", "ユニバ"], ["と", "に"]),
    (
        "sudachi",
        "そうなんですよねー。アンドロイドはWindowsっぽくて",
        ["アンドロイド", "window"],
        [],
    ),
    ("sudachi", "とても楽しかったと思います", ["楽しい"], ["迚も", "思う", "と", "ます"]),
    ("sudachi", "彼女は好きな料理を作っている", ["好き", "料理", "作る"], ["居る", "は", "を"]),
    ("cjk_bigram", "引っ越しした", ["引っ", "っ越", "越し"], []),
]


@pytest.mark.parametrize(("name", "text", "present", "absent"), CONTAINS)
def test_contains(
    toks: dict[str, Tokenizer], name: str, text: str, present: list[str], absent: list[str]
):
    got = toks[name].tokenize(text)
    assert set(present) <= set(got), got
    assert not set(absent) & set(got), got


def test_spelling_variants_meet():
    """引越し / 引越 / 引っ越し are one token: a query in any spelling finds the others."""
    sudachi = get_tokenizer("sudachi")
    forms = [sudachi.tokenize(t) for t in ("引越しの日", "引越の日", "引っ越しの日")]
    assert forms[0] == forms[1] == forms[2] == ["引っ越し", "日"]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("text", ["", "   \n\t", "😭🎉👍", "！？。、…", "(^_^;)", "ー"])
def test_nothing_to_index(toks: dict[str, Tokenizer], name: str, text: str):
    assert toks[name].tokenize(text) == []


@pytest.mark.parametrize("name", ALL)
def test_tokenize_many_matches_tokenize(toks: dict[str, Tokenizer], name: str):
    texts = ["Yukiと渋谷でcoffee", "", "I'm running late", "昨日カレーを食べた", "😭"]
    tok = toks[name]
    assert tok.tokenize_many(texts) == [tok.tokenize(t) for t in texts]
    assert tok.tokenize_many(iter(texts)) == tok.tokenize_many(texts)


@pytest.mark.parametrize("name", ALL)
def test_protocol_and_identity(toks: dict[str, Tokenizer], name: str):
    tok = toks[name]
    assert isinstance(tok, Tokenizer)
    assert tok.name == name
    assert tok.params["version"] == tk.TOKENIZER_VERSION
    # name + params rebuild an identical tokenizer (what a saved index relies on)
    again = get_tokenizer(tok.name, **tok.params)
    assert (again.name, again.params) == (tok.name, tok.params)


def test_sudachi_params_and_modes():
    assert SudachiTokenizer().params == {
        "version": tk.TOKENIZER_VERSION,
        "mode": "B",
        "dict": "core",
    }
    assert SudachiTokenizer(mode="c").tokenize("東京都庁") == ["東京都庁"]
    with pytest.raises(ValueError, match="mode"):
        SudachiTokenizer(mode="D")


def test_sudachi_dictionary_once_and_no_deprecation(capfd: pytest.CaptureFixture[str]):
    """The dictionary is built once per process, without 0.7's deprecation warning."""
    tk._SUDACHI.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = SudachiTokenizer()
        first.tokenize("テスト")
        second = SudachiTokenizer(mode="C")
        second.tokenize("テスト")
    assert not [w for w in caught if "deprecat" in str(w.message).lower()]
    out, err = capfd.readouterr()
    assert "deprecat" not in (out + err).lower()
    assert len(tk._SUDACHI) == 1


def test_sudachi_long_input():
    """Sudachi refuses > 49,149 bytes at once; long texts are analyzed in pieces."""
    text = "今日は涼しいですね。" * 3000 + "Running"  # 90 KB of Japanese
    got = SudachiTokenizer().tokenize(text)
    assert got.count("今日") == 3000 and got[-1] == "run"


def test_threads_get_their_own_sudachi():
    tok = SudachiTokenizer()
    texts = ["昨日カレーを食べた", "引越しの準備", "Yukiと渋谷でcoffee"] * 200
    expected = tok.tokenize_many(texts)
    results: list[list[list[str]]] = []
    threads = [
        threading.Thread(target=lambda: results.append(tok.tokenize_many(texts))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4


def test_get_tokenizer_errors():
    with pytest.raises(ValueError, match="unknown tokenizer"):
        get_tokenizer("mecab")
    with pytest.raises(ValueError, match="sample_texts"):
        get_tokenizer("auto")
    with pytest.raises(ValueError, match="rebuild"):
        get_tokenizer("regex", version=tk.TOKENIZER_VERSION + 1)
    with pytest.raises(ValueError, match="no params"):
        get_tokenizer("english", mode="B")


# (sample texts, chosen tokenizer)
AUTO = [
    (["今日は涼しいですね", "雨が降ってきた"], "sudachi"),
    (["Hey Mel! Good to see you!", "I'm swamped with the kids"], "english"),
    ([], "english"),
    (["", "   "], "english"),
    # 1 Japanese text in 20 (5%) is enough: sudachi treats the English exactly like english.
    (["See you tomorrow"] * 19 + ["また明日ね"], "sudachi"),
    (["See you tomorrow"] * 30 + ["また明日ね"], "english"),
    # kanji in an English sentence do not make it Japanese
    (["I had ramen at 一蘭 today"] * 5, "english"),
]


@pytest.mark.parametrize(("samples", "expected"), AUTO)
def test_auto_rule(samples: list[str], expected: str):
    assert auto_tokenizer(samples).name == expected
    assert get_tokenizer("auto", sample_texts=samples).name == expected


def test_auto_without_sudachi(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tk, "sudachi_available", lambda: False)
    assert isinstance(auto_tokenizer(["今日は涼しいですね"]), CjkBigramTokenizer)
    assert isinstance(auto_tokenizer(["Hello there"]), EnglishTokenizer)


def test_japanese_share_samples_evenly():
    texts = ["hello"] * 5000 + ["こんにちは、元気？"] * 5000
    assert japanese_share(texts, max_samples=100) == pytest.approx(0.5, abs=0.02)


def test_regex_is_the_morphology_free_baseline():
    regex = RegexTokenizer()
    # no stemming, no normalization of inflection: the paper's setting
    assert regex.tokenize("running runs") == ["running", "runs"]
    assert regex.tokenize("食べた") != regex.tokenize("食べる")


# --------------------------------------------------------------------- real data slices


def _rpc_utterances(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        texts = (u["text"] for line in f for u in json.loads(line)["utterances"])
        return list(itertools.islice(texts, n))


def test_sudachi_on_realpersonachat(shared_file: Callable[[str], Path]):
    texts = _rpc_utterances(shared_file("realpersonachat/dialogues.jsonl.gz"), 2000)
    tok = SudachiTokenizer()
    out = tok.tokenize_many(texts)
    assert len(out) == len(texts)
    # nearly every utterance keeps a content word; no particle/auxiliary leaks through
    assert sum(1 for t in out if t) / len(out) > 0.9
    flat = [t for toks in out for t in toks]
    for function_word in ("は", "が", "を", "に", "です", "ます", "た", "。", "、"):
        assert function_word not in flat
    assert auto_tokenizer(texts).name == "sudachi"


def test_english_on_locomo(shared_file: Callable[[str], Path]):
    data = json.loads(shared_file("locomo/locomo_dev.json").read_text(encoding="utf-8"))
    conv = data[0]["conversation"]
    turns = [
        t["text"]
        for key, session in conv.items()
        if key.startswith("session_") and isinstance(session, list)
        for t in session
    ]
    assert auto_tokenizer(turns).name == "english"
    flat = [t for toks in EnglishTokenizer().tokenize_many(turns) for t in toks]
    assert "the" not in flat and "support" in flat
