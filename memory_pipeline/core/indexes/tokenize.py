"""Tokenizers for BM25 over mixed Japanese/English chat.

bm25s's own tokenizer does not split Japanese, so every index is built from token lists made
here. One tokenizer turns documents *and* queries into tokens; an index records the
tokenizer's ``name`` and ``params`` so a query is always tokenized the way its corpus was.

| name | Japanese | latin (English) |
|---|---|---|
| ``regex`` | runs of kanji / hiragana / katakana, one token per script run | ``[a-z0-9]+`` runs |
| ``sudachi`` | SudachiPy (mode B) normalized forms of content words | stem + stopwords |
| ``cjk_bigram`` | overlapping character bigrams of CJK runs | stem + stopwords |
| ``english`` | as ``cjk_bigram`` (the name records that ``auto`` saw English) | stem + stopwords |

Width and case never split a token: full-width ``ＢＢＱ``/``１９`` give ``bbq``/``19`` and
half-width katakana matches full-width. ``regex`` and the bigram tokenizers apply NFKC +
lowercase to the whole text (a character-width normalization, not morphology, so the
baseline gets it too); ``sudachi`` lets Sudachi normalize its own input and applies NFKC +
lowercase only to the latin words it cuts out (NFKC over every text cost ~10% throughput).

``regex`` reproduces the LINE paper's baseline: no morphology, stopwords only. The others
share one English path: latin words go through English stopwords then the Snowball English
stemmer (PyStemmer), also when they sit inside Japanese text (``Yukiも`` -> ``yuki``).

Sudachi part-of-speech filter (decided for retrieval over chat, where queries are content
words): keep 名詞 (普通名詞, 固有名詞, 数詞), 動詞, 形容詞, 形状詞 (好き, 大切, 元気, except the
助動詞語幹 そう/よう); drop 助詞, 助動詞, 補助記号, 記号, 空白, 代名詞, 連体詞, 接続詞, 感動詞,
接頭辞, 接尾辞 and 副詞 (in chat, adverbs are mostly intensifiers and fillers: とても, ちょっと,
もう, やっぱり). Light verbs and formal nouns that survive the filter are dropped by a small
stop list of normalized forms (為る, 居る, 有る, 成る, 出来る, 思う, 事, 物, ...), and so are
tokens of a single kana (fragments of unknown words).

``auto`` (see :func:`auto_tokenizer`): ``sudachi`` when at least 5% of the sampled texts are
Japanese by :func:`memory_pipeline.core.common.lang.detect_lang`, else ``english``. ``sudachi``
handles latin exactly like ``english``, so the threshold only trades Sudachi's dictionary
(about 2 s to load, 200 MB) against Japanese quality; ``cjk_bigram`` replaces ``sudachi``
when SudachiPy is not installed.
"""

from __future__ import annotations

import os
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from memory_pipeline.core.common.lang import detect_lang
from memory_pipeline.core.common.parallel import batched, is_serial, map_tasks

__all__ = [
    "AUTO_JA_SHARE",
    "ENGLISH_STOPWORDS",
    "JAPANESE_STOPWORDS",
    "PARALLEL_BATCH",
    "SUDACHI_STOPWORDS",
    "TOKENIZER_CHOICES",
    "TOKENIZER_NAMES",
    "TOKENIZER_VERSION",
    "CjkBigramTokenizer",
    "EnglishTokenizer",
    "ParallelTokenizer",
    "RegexTokenizer",
    "SudachiTokenizer",
    "Tokenizer",
    "auto_tokenizer",
    "get_tokenizer",
    "japanese_share",
    "sudachi_available",
]

# Bump when any tokenizer's output changes: saved indexes record it and refuse to load
# with a different version (their postings would no longer match query tokens).
TOKENIZER_VERSION = 1
TOKENIZER_NAMES = ("regex", "sudachi", "cjk_bigram", "english")
# What a configuration may name: a tokenizer, or "auto" (picked from a sample of the corpus).
TOKENIZER_CHOICES = (*TOKENIZER_NAMES, "auto")
# Share of sampled texts that must be Japanese for ``auto`` to pick ``sudachi``.
AUTO_JA_SHARE = 0.05
AUTO_MAX_SAMPLES = 2000

# NLTK's English list: the usual function words, plus the fragments left by splitting on
# apostrophes (don't -> don + t, I'll -> i + ll).
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against
    between into through during before after above below to from up down in out on off over
    under again further then once here there when where why how all any both each few more
    most other some such no nor not only own same so than too very s t can will just don
    should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn
    mustn needn shan shouldn wasn weren won wouldn
    """.split()
)

# Function words as the regex baseline sees them (whole hiragana/kanji runs).
JAPANESE_STOPWORDS: frozenset[str] = frozenset(
    """
    の に は を た が で て と し れ さ も な か だ よ ね わ ぞ ぜ や へ ば ず ん う ぬ
    です ます でした ました ですね ますね ですか ますか ですよ ますよ ません ましょう
    だ だった だね だよ ない なかった なく なる なっ なり なら
    する した して します しよう しない さん ちゃん くん
    いる いた います いました いない ある あり あった あります ありません
    から まで より って けど けれど けれども しかし そして でも ので のに ながら
    こと もの ところ とき ため よう そう など という といった
    これ それ あれ どれ この その あの どの ここ そこ あそこ どこ
    私 僕 俺 あなた
    """.split()
)

# Normalized forms (Sudachi) that pass the part-of-speech filter but carry no topic:
# light and auxiliary verbs (する, いる, ある, なる, できる, しまう, くれる, もらう, あげる,
# やる, くださる, いただく, おく), 思う (と思います), 無い, and formal nouns (こと, もの, ため...).
SUDACHI_STOPWORDS: frozenset[str] = frozenset(
    """
    為る 居る 有る 成る 出来る 仕舞う 呉れる 貰う 上げる 遣る 下さる 頂く 置く 思う 無い
    事 物 為 様 訳 筈 所 方 積もり 内 達
    """.split()
)

# Keep these top-level parts of speech (first POS field) ...
_SUDACHI_KEEP_POS = frozenset({"名詞", "動詞", "形容詞", "形状詞"})
# ... except these (first, second) POS fields.
_SUDACHI_DROP_SUBPOS = frozenset({("名詞", "助動詞語幹"), ("形状詞", "助動詞語幹")})

# Sudachi rejects inputs above 49,149 UTF-8 bytes; 12,000 chars x 4 bytes stays below.
_SUDACHI_MAX_CHARS = 12_000

# After NFKC + lowercase. Latin words: ASCII letters/digits and latin-1/extended letters
# (not × ÷); numbers with thousands separators stay one token (4,500 -> 4500).
_LATIN = r"[0-9]{1,3}(?:,[0-9]{3})+|[0-9a-z\u00df-\u00f6\u00f8-\u024f]+"
_LATIN_RE = re.compile(_LATIN)
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3006"  # + 々 〆
_HIRAGANA = "\u3041-\u3096"
_KANA = "\u30a1-\u30fa"  # katakana letters (not the middle dot ・)
_KATAKANA = _KANA + "\u30fc"  # + the prolonged sound mark ー, which never starts a token
_CJK = _HAN + _HIRAGANA + _KATAKANA
_HAS_CJK_RE = re.compile(f"[{_CJK}]")
# The sudachi path reads the text as written (Sudachi normalizes width and case itself, and
# NFKC over every text costs ~10% of the throughput): latin words, full-width ones included,
# are cut out here and normalized one by one; half-width katakana counts as Japanese.
_FW_DIGIT = "\uff10-\uff19"
_LATIN_RAW = (
    f"[0-9{_FW_DIGIT}]{{1,3}}(?:[,\uff0c][0-9{_FW_DIGIT}]{{3}})+"
    f"|[0-9A-Za-z{_FW_DIGIT}\uff21-\uff3a\uff41-\uff5a\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]+"
)
_LATIN_RAW_RE = re.compile(_LATIN_RAW)
_HAS_JA_RAW_RE = re.compile(f"[{_CJK}\uff66-\uff9f]")
# regex baseline: latin runs, then one token per script run.
_REGEX_RE = re.compile(f"({_LATIN})|([{_HAN}]+)|([{_HIRAGANA}]+)|([{_KANA}][{_KATAKANA}]*)")
# bigram tokenizers: latin runs and mixed-script CJK runs.
_BIGRAM_RE = re.compile(f"({_LATIN})|([{_HAN}{_HIRAGANA}{_KANA}][{_CJK}]*)")
# Sudachi forms never emitted: the stop list and any single kana (fragments of unknown words).
_SUDACHI_DROP = SUDACHI_STOPWORDS | frozenset(
    chr(c) for c in [*range(0x3041, 0x3097), *range(0x30A1, 0x30FB), 0x30FC]
)


@runtime_checkable
class Tokenizer(Protocol):
    """What indexes need from a tokenizer: a stable identity and text -> tokens."""

    name: str
    params: dict[str, Any]

    def tokenize(self, text: str) -> list[str]: ...

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]: ...


def _normalize(text: str) -> str:
    """NFKC + lowercase: width variants and case never split a token."""
    return unicodedata.normalize("NFKC", text).lower()


# ---------------------------------------------------------------------------------------
# English path (shared by every tokenizer except regex)

_local = threading.local()  # PyStemmer and Sudachi tokenizers are not shared across threads
# word as found in the text -> its token, or None for a stopword
_EN_CACHE: dict[str, str | None] = {}
_EN_CACHE_MAX = 500_000
_MISSING = object()


def _stemmer() -> Any:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer  # PyStemmer

        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def _english_token(word: str) -> str | None:
    """NFKC + lowercase, then None for a stopword, digits without separators, or the stem."""
    word = unicodedata.normalize("NFKC", word).lower()
    if "," in word:  # 4,500 -> 4500
        return word.replace(",", "")
    if word in ENGLISH_STOPWORDS:
        return None
    return _stemmer().stemWord(word)


def _english(word: str, out: list[str]) -> None:
    """Append the token of a latin word (any width or case) unless it is a stopword."""
    token = _EN_CACHE.get(word, _MISSING)
    if token is _MISSING:
        token = _english_token(word)
        if len(_EN_CACHE) >= _EN_CACHE_MAX:
            _EN_CACHE.clear()
        _EN_CACHE[word] = token
    if token is not None:
        out.append(token)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Tokenizers


class RegexTokenizer:
    """The LINE paper baseline: script runs + stopwords, no morphology, no stemming.

    Kept to reproduce the paper's numbers; ``今日は涼しいですね`` gives ``今日 / 涼 / しいですね``
    (kanji and hiragana runs), which is exactly the weakness the other tokenizers fix.
    """

    name = "regex"

    def __init__(self) -> None:
        self.params: dict[str, Any] = {"version": TOKENIZER_VERSION}

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one text."""
        out: list[str] = []
        for m in _REGEX_RE.finditer(_normalize(text)):
            tok = m.group()
            if m.lastindex == 1:
                if tok in ENGLISH_STOPWORDS:
                    continue
                tok = tok.replace(",", "") if "," in tok else tok
            elif tok in JAPANESE_STOPWORDS:
                continue
            out.append(tok)
        return out

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokens of many texts."""
        tokenize = self.tokenize
        return [tokenize(t) for t in texts]


class CjkBigramTokenizer:
    """Overlapping character bigrams for CJK runs + stemmed English words.

    The dictionary-free fallback when SudachiPy is unavailable: bigrams need no word
    boundaries, so ``引っ越し`` is found inside ``引っ越しした`` (at the price of noise bigrams
    spanning particles). A CJK run of one character is kept as a unigram.
    """

    name = "cjk_bigram"

    def __init__(self) -> None:
        self.params: dict[str, Any] = {"version": TOKENIZER_VERSION}

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one text."""
        out: list[str] = []
        for m in _BIGRAM_RE.finditer(_normalize(text)):
            tok = m.group()
            if m.lastindex == 1:
                _english(tok, out)
            elif len(tok) == 1:
                out.append(tok)
            else:
                out.extend([tok[i : i + 2] for i in range(len(tok) - 1)])
        return out

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokens of many texts."""
        tokenize = self.tokenize
        return [tokenize(t) for t in texts]


class EnglishTokenizer(CjkBigramTokenizer):
    """English corpora: stem + stopwords; stray CJK gets ``cjk_bigram``'s bigrams.

    Same output as ``cjk_bigram``; a separate name so an index says what ``auto`` decided.
    """

    name = "english"


# Sudachi dictionary: created once per process (about 2 s); tokenizers once per thread.
_SUDACHI_LOCK = threading.Lock()
_SUDACHI: dict[str, Any] = {}  # dict name -> (pid, Dictionary, keep POS ids)


def sudachi_available() -> bool:
    """True when SudachiPy and its core dictionary can be imported."""
    try:
        import sudachidict_core  # noqa: F401
        import sudachipy  # noqa: F401
    except ImportError:
        return False
    return True


def _sudachi_dictionary(dict_name: str) -> tuple[Any, frozenset[int]]:
    """The process's Dictionary for ``dict_name`` and the ids of the kept parts of speech."""
    pid = os.getpid()
    entry = _SUDACHI.get(dict_name)
    if entry is None or entry[0] != pid:
        with _SUDACHI_LOCK:
            entry = _SUDACHI.get(dict_name)
            if entry is None or entry[0] != pid:  # new, or inherited through fork
                from sudachipy import Dictionary

                # Dictionary(dict=...) + .tokenizer() is 0.7's API; Dictionary.create() is
                # the deprecated spelling that prints a warning.
                dictionary = Dictionary(dict=dict_name)
                keep: set[int] = set()
                pos_id = 0
                while (pos := dictionary.pos_of(pos_id)) is not None:
                    if pos[0] in _SUDACHI_KEEP_POS and (pos[0], pos[1]) not in _SUDACHI_DROP_SUBPOS:
                        keep.add(pos_id)
                    pos_id += 1
                entry = (pid, dictionary, frozenset(keep))
                _SUDACHI[dict_name] = entry
    return entry[1], entry[2]


class SudachiTokenizer:
    """SudachiPy normalized forms of Japanese content words + stemmed English words.

    Normalized forms merge spelling variants (引越し / 引越 / 引っ越し -> 引っ越し) and
    inflections (食べた -> 食べる, 美味しかった -> 美味しい). Mode ``B`` (default) splits long
    compounds into searchable parts (東京都庁 -> 東京 + 都庁) while keeping words such as
    新宿駅 whole; ``C`` keeps the longest units, ``A`` the shortest. Latin words and digits are
    cut out before Sudachi sees the text and take the English path.
    """

    name = "sudachi"

    def __init__(self, mode: str = "B", dict: str = "core") -> None:
        mode = mode.upper()
        if mode not in ("A", "B", "C"):
            raise ValueError(f"sudachi mode must be A, B or C, got {mode!r}")
        self.mode = mode
        self.dict = dict
        self.params: dict[str, Any] = {"version": TOKENIZER_VERSION, "mode": mode, "dict": dict}
        _sudachi_dictionary(dict)  # fail early (ImportError) and pay the load once, here

    def _sudachi(self) -> tuple[Any, frozenset[int]]:
        """This thread's Sudachi tokenizer for our mode, and the kept POS ids."""
        key = (os.getpid(), self.dict, self.mode)
        cache: dict[tuple[int, str, str], tuple[Any, frozenset[int]]] | None
        cache = getattr(_local, "sudachi", None)
        if cache is None:
            cache = _local.sudachi = {}
        hit = cache.get(key)
        if hit is None:
            dictionary, keep = _sudachi_dictionary(self.dict)
            # Only the fields we read are loaded (faster); ``out=`` reuses one MorphemeList.
            tokenizer = dictionary.tokenizer(self.mode, fields={"pos", "normalized_form"})
            hit = cache[key] = ((tokenizer, tokenizer.tokenize("")), keep)
        return hit

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one text."""
        return self.tokenize_many((text,))[0]

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokens of many texts: one Sudachi lookup, and an inlined loop for pure Japanese."""
        sudachi, keep = self._sudachi()
        tokenizer, morphemes = sudachi
        drop = _SUDACHI_DROP
        has_latin = _LATIN_RAW_RE.search
        has_ja = _HAS_JA_RAW_RE.search
        mixed = self._tokenize_mixed
        result: list[list[str]] = []
        for text in texts:
            if has_latin(text) is not None or len(text) > _SUDACHI_MAX_CHARS:
                result.append(mixed(text, sudachi, keep))
                continue
            out: list[str] = []
            if has_ja(text) is not None:
                for m in tokenizer.tokenize(text, out=morphemes):  # reuses one MorphemeList
                    if m.part_of_speech_id() in keep:
                        form = m.normalized_form()
                        if form not in drop:
                            out.append(form)
            result.append(out)
        return result

    @staticmethod
    def _japanese(segment: str, sudachi: Any, keep: frozenset[int], out: list[str]) -> None:
        """Append the kept normalized forms of a Japanese segment of any length."""
        tokenizer, morphemes = sudachi
        drop = _SUDACHI_DROP
        for start in range(0, len(segment), _SUDACHI_MAX_CHARS):
            piece = segment[start : start + _SUDACHI_MAX_CHARS]
            for m in tokenizer.tokenize(piece, out=morphemes):
                if m.part_of_speech_id() in keep:
                    form = m.normalized_form()
                    if form not in drop:
                        out.append(form)

    @classmethod
    def _tokenize_mixed(cls, text: str, sudachi: Any, keep: frozenset[int]) -> list[str]:
        """Latin words to the English path, the Japanese between them to Sudachi."""
        out: list[str] = []
        pos = 0
        for m in _LATIN_RAW_RE.finditer(text):
            start = m.start()
            if start > pos:
                segment = text[pos:start]
                if _HAS_JA_RAW_RE.search(segment) is not None:
                    cls._japanese(segment, sudachi, keep, out)
            _english(m.group(), out)
            pos = m.end()
        if pos < len(text):
            segment = text[pos:]
            if _HAS_JA_RAW_RE.search(segment) is not None:
                cls._japanese(segment, sudachi, keep, out)
        return out


# ---------------------------------------------------------------------------------------
# Parallel tokenization

# Texts per task: large enough that a task's ~1 ms scheduling cost and its round trip are
# small against Sudachi's ~20 us per chat text, small enough to spread a day's chunks.
PARALLEL_BATCH = 2_000


class ParallelTokenizer:
    """``inner`` with ``tokenize_many`` cut into batches run by ``runner`` (a Dask client).

    Same ``name`` and ``params`` as ``inner``, so an index built through it records the
    plain tokenizer. Tokens of a text do not depend on its batch, so the output equals
    ``inner.tokenize_many`` exactly. ``inner`` is pickled to the workers; the Sudachi
    dictionary is per process and loads there on first use.
    """

    def __init__(self, inner: Tokenizer, runner: Any = None, batch: int = PARALLEL_BATCH) -> None:
        self.inner = inner
        self.runner = runner
        self.batch = batch
        self.name = inner.name
        self.params: dict[str, Any] = inner.params

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one text, here (a query is not worth a task)."""
        return self.inner.tokenize(text)

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokens of many texts, in order (on the cluster even for one batch: the output
        must not depend on the corpus size deciding where it was computed)."""
        texts = list(texts)
        if is_serial(self.runner) or not texts:
            return self.inner.tokenize_many(texts)
        parts = map_tasks(self.inner.tokenize_many, batched(texts, self.batch), self.runner)
        return [tokens for part in parts for tokens in part]


# ---------------------------------------------------------------------------------------
# Registry


def get_tokenizer(name: str, sample_texts: Sequence[str] | None = None, **params: Any) -> Tokenizer:
    """The tokenizer called ``name`` ("regex", "sudachi", "cjk_bigram", "english", "auto").

    ``params`` are a tokenizer's ``params`` as saved with an index (``mode``/``dict`` for
    sudachi); a saved ``version`` other than :data:`TOKENIZER_VERSION` is refused because
    that index's tokens would not match today's query tokens. ``"auto"`` needs
    ``sample_texts`` (see :func:`auto_tokenizer`).
    """
    version = params.pop("version", TOKENIZER_VERSION)
    if version != TOKENIZER_VERSION:
        raise ValueError(
            f"tokenizer {name!r} version {version} was saved, this code has version "
            f"{TOKENIZER_VERSION}: rebuild the index"
        )
    if name == "auto":
        if sample_texts is None:
            raise ValueError("tokenizer 'auto' needs sample_texts (see auto_tokenizer)")
        if params:
            raise ValueError(f"tokenizer 'auto' takes no params, got {sorted(params)}")
        return auto_tokenizer(sample_texts)
    if name == "sudachi":
        return SudachiTokenizer(**params)
    classes: dict[str, type[RegexTokenizer | CjkBigramTokenizer]] = {
        "regex": RegexTokenizer,
        "cjk_bigram": CjkBigramTokenizer,
        "english": EnglishTokenizer,
    }
    if name not in classes:
        raise ValueError(f"unknown tokenizer {name!r}; choose from {TOKENIZER_CHOICES}")
    if params:
        raise ValueError(f"tokenizer {name!r} takes no params, got {sorted(params)}")
    return classes[name]()


def japanese_share(sample_texts: Sequence[str], max_samples: int = AUTO_MAX_SAMPLES) -> float:
    """Share of non-blank texts that ``detect_lang`` calls Japanese, over an even sample."""
    n = len(sample_texts)
    step = max(1, n // max_samples) if max_samples else 1
    sample = sample_texts[::step]
    if hasattr(sample, "to_pylist"):  # an Arrow array: only the sampled values leave Arrow
        sample = sample.to_pylist()
    texts = [t for t in sample if t and not t.isspace()]
    if not texts:
        return 0.0
    return sum(1 for t in texts if detect_lang(t) == "ja") / len(texts)


def auto_tokenizer(sample_texts: Sequence[str]) -> Tokenizer:
    """``sudachi`` when >= 5% of the sampled texts are Japanese, else ``english``.

    Up to 2,000 evenly spaced texts are sampled. Both choices treat latin words the same way,
    so a mixed corpus loses nothing with ``sudachi``; below the threshold the Japanese is too
    rare to pay for the dictionary. Without SudachiPy, Japanese corpora get ``cjk_bigram``.
    """
    if japanese_share(sample_texts) >= AUTO_JA_SHARE:
        return SudachiTokenizer() if sudachi_available() else CjkBigramTokenizer()
    return EnglishTokenizer()
