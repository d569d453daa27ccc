"""Query understanding without an LLM: names, question words, pseudo-relevance feedback,
and references to the conversation so far.

A chat question names people ("When did Caroline go to the support group?") and wraps its
content in question words; a follow-up question points at what was just said ("that thing
we talked about yesterday", 「昨日のあの件」). Each rule here is a plain function over
strings (English and Japanese) so it can be tested alone and switched on by a
``SearchConfig`` field; which ones the default uses is the evaluation's measurement, not a
guess:

- ``speakers_in``: the known speaker names a query mentions (the parser's matcher, with
  honorifics and possessives), plus unique first names of multi-word names.
- ``strip_question``: question words and stop phrases removed ("can you tell me", 教えて,
  だっけ); what remains is the content.
- ``boost_chunks`` / ``boost_turns``: a named speaker usually speaks the answer turn, so a
  chunk (turn) where (sent by) that speaker gets a score-scale-free bonus.
- ``prf_bm25_ranked``: RM3-style expansion from the first-pass BM25 top documents.
- ``resolve_references``: pronouns / this / that / あれ / それ / あの件 replaced by the salient
  entities of the ``recent`` messages; their latest time becomes "now" for "yesterday".

Nothing here logs or stores message text.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_pipeline.core.retrieval.fusion import linear_fusion, rrf
from memory_pipeline.core.retrieval.timeexpr import GENERIC_WORDS_EN, parse_query

Ranked = list[tuple[str, float]]

__all__ = [
    "PRF_DOCS",
    "PRF_LAMBDA",
    "RecentMessage",
    "Resolution",
    "boost_chunks",
    "boost_turns",
    "expansion_terms",
    "normalize_recent",
    "prf_bm25_ranked",
    "resolve_references",
    "salient_entities",
    "speakers_in",
    "strip_question",
]

_EPOCH = dt.datetime(2000, 1, 1)

# ----------------------------------------------------------------------------- speakers


def speakers_in(query: str, known: Sequence[str]) -> list[str]:
    """The known speaker names ``query`` mentions, in order of appearance.

    The time parser's matcher (case-insensitive, possessives, Japanese honorifics) decides
    what a mention is, so search and parsing agree; a unique first name of a multi-word
    name ("Taro" for "Taro Yamada") counts as that name. Memoized (a search asks three
    times for its query: ranking, speaker boost, answerability).
    """
    if not isinstance(query, str) or not query.strip():
        return []
    try:
        key = tuple(known)
        return list(_speakers_in(query, key))
    except TypeError:  # an unhashable name: no memo
        return list(_speakers_in.__wrapped__(query, known))


@functools.lru_cache(maxsize=1024)
def _speakers_in(query: str, known: Sequence[str]) -> tuple[str, ...]:
    names = [n for n in known if isinstance(n, str) and n.strip()]
    if not names:
        return ()
    firsts: dict[str, list[str]] = {}
    for n in names:
        parts = n.split()
        if len(parts) > 1:
            firsts.setdefault(parts[0], []).append(n)
    alias = {f: full[0] for f, full in firsts.items() if len(full) == 1 and f not in names}
    found = parse_query(query, now=_EPOCH, speakers=[*names, *alias]).speakers
    return tuple(dict.fromkeys(alias.get(n, n) for n in found))


def boost_chunks(
    ranked: Ranked, speakers_of: Callable[[str], Sequence[str]], names: Sequence[str], w: float
) -> Ranked:
    """``ranked`` with ``w`` x (score range) added to chunks where a named speaker speaks.

    Adding a share of the range keeps the bonus meaningful whatever the fusion's scale (RRF
    ~0.03, linear 0-1, BM25 unbounded, cosine negative); no name or ``w == 0``: unchanged.
    """
    if not ranked or not names or w <= 0:
        return ranked
    wanted = set(names)
    scores = [s for _, s in ranked]
    bonus = w * ((max(scores) - min(scores)) or 1.0)
    out = [(c, s if wanted.isdisjoint(speakers_of(c)) else s + bonus) for c, s in ranked]
    return sorted(out, key=lambda p: (-p[1], p[0]))


def boost_turns(
    turns: Sequence[tuple[str, float]],
    sender_of: Callable[[str], str],
    names: Sequence[str],
    w: float,
) -> list[tuple[str, float]]:
    """Turn scores (0-1, ``Searcher.ranked_turns``) plus ``w`` for turns sent by a named
    speaker: LoCoMo-style questions name the person whose turn holds the answer."""
    if not turns or not names or w <= 0:
        return list(turns)
    wanted = set(names)
    out = [(m, s + w if sender_of(m) in wanted else s) for m, s in turns]
    return sorted(out, key=lambda p: (-p[1], p[0]))


# ----------------------------------------------------------------------------- question words

_EN_PHRASES = re.compile(
    r"\b(?:do|does|did|can|could|would|will)\s+(?:you|we|i)\s+(?:remember|recall|know)"
    r"(?:\s+(?:if|whether|when|what|where|who|how))?"
    r"|\b(?:can|could|would)\s+you\s+(?:tell|remind|show)\s+me(?:\s+about)?"
    r"|\b(?:please\s+)?(?:tell|remind|show)\s+me(?:\s+about)?"
    r"|\bi\s+(?:want|wanted|need|would\s+like)\s+to\s+know(?:\s+about)?"
    r"|\bany\s+idea(?:\s+(?:if|whether|when|what|where|who|how))?"
    r"|\bwhat\s+(?:was|is)\s+it\s+that",
    re.I,
)
_EN_QWORDS = frozenset(
    "what when where who whom whose which why how whats what's "
    "did do does is are was were has have had can could would will should shall may might "
    "please kindly".split()
)
_EN_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_JA_PHRASES = re.compile(
    r"(?:を|について|のこと|って)?(?:教えて(?:ください|下さい|くれる|くれない|ほしい)?"
    r"|覚えて(?:る|います|ますか)?|知って(?:る|います|ますか)?)"
    r"|(?:は|って|が|を)?(?:何|なに|なん|いつ|どこ|誰|だれ|どう|どんな|どれ|どの)"
    r"(?:だっけ|でしたっけ|ですか|でしたか|だった|でした|なの|か)?"
    r"|(?:ましたっけ|でしたっけ|だっけ|たっけ|っけ|ですか|でしたか|ましたか|ますか|かな)"
    r"|[?？]"
)


def strip_question(query: str, names: Sequence[str] = ()) -> str:
    """``query`` without question words, stop phrases and the speaker ``names`` it
    mentions, or ``query`` itself when nothing would remain (a bare "what?" keeps its text
    rather than searching for nothing).

    English: leading/auxiliary question words and phrases ("do you remember", "tell me
    about"); Japanese: 教えて, 覚えてる, 何/いつ/どこ/誰 with their copulas, だっけ, ですか.
    A speaker's name matches the messages that address them ("Hey Caroline!") rather
    than the turn they answer in, so it leaves the words (``speaker_boost`` uses it);
    other names, numbers and content words are kept as written.
    """
    if not isinstance(query, str):
        return query
    text = unicodedata.normalize("NFKC", query) if not query.isascii() else query
    for name in sorted(names, key=len, reverse=True):
        body = r"\s+".join(map(re.escape, name.split()))
        if re.search(r"[\u3040-\u30ff\u3400-\u9fff]", name):
            text = re.sub(body + r"(?:さん|くん|君|ちゃん|様|さま|氏|先生)?", " ", text)
        else:
            text = re.sub(rf"(?<![\w]){body}(?:'s|’s|')?(?![\w])", " ", text, flags=re.I)
    text = _JA_PHRASES.sub(" ", _EN_PHRASES.sub(" ", text))
    text = _EN_WORD.sub(lambda m: " " if m[0].lower() in _EN_QWORDS else m[0], text)
    text = re.sub(r"\s+([,.!;:])", r"\1", re.sub(r"\s+", " ", text)).strip(" ,.!;:")
    return text if re.search(r"\w", text) else query


# ----------------------------------------------------------------------------- PRF (RM3)

PRF_DOCS = 3  # first-pass documents the expansion reads
PRF_LAMBDA = 0.3  # weight of the expansion model against the original query


def expansion_terms(
    query_tokens: Sequence[str],
    doc_tokens: Sequence[Sequence[str]],
    doc_scores: Sequence[float],
    idf: Mapping[str, float],
    n_terms: int,
) -> list[tuple[str, float]]:
    """RM3's relevance model over the feedback documents: p(t|D) weighted by the document's
    share of the first-pass score, times idf (so chat filler does not win), without the
    query's own tokens; the ``n_terms`` best with weights summing to 1."""
    if n_terms <= 0 or not doc_tokens:
        return []
    total = sum(max(s, 0.0) for s in doc_scores) or float(len(doc_scores))
    seen = set(query_tokens)
    weight: Counter[str] = Counter()
    for toks, s in zip(doc_tokens, doc_scores, strict=True):
        if not toks:
            continue
        share = (max(s, 0.0) or 1.0) / total
        for t, c in Counter(toks).items():
            if t not in seen:
                weight[t] += share * c / len(toks) * idf.get(t, 0.0)
    best = sorted(((t, w) for t, w in weight.items() if w > 0), key=lambda p: (-p[1], p[0]))
    best = best[:n_terms]
    z = sum(w for _, w in best) or 1.0
    return [(t, w / z) for t, w in best]


def prf_bm25_ranked(
    searcher: Any,
    query: str,
    rep: str,
    mask: np.ndarray | None,
    n: int,
    n_terms: int,
    *,
    docs: int = PRF_DOCS,
    lam: float = PRF_LAMBDA,
) -> Ranked:
    """BM25 ranking of ``query`` expanded RM3-style from its own top ``docs`` chunks:
    score = (1 - lam) * BM25(query) + lam * sum_t w_t * BM25(t), the terms from the chunks'
    raw text (``expansion_terms``). No expansion term: the plain first pass."""
    first = searcher.bm25_ranked(query, rep, mask, n)
    if n_terms <= 0 or not first:
        return first
    index = searcher.bm25[rep]
    tokenizer = index.tokenizer
    top = first[:docs]
    doc_tokens = [tokenizer.tokenize(searcher.chunk(c)["raw_text"]) for c, _ in top]
    q_tokens = tokenizer.tokenize(query)
    terms = expansion_terms(q_tokens, doc_tokens, [s for _, s in top], searcher.idf, n_terms)
    vocab = index.vocab
    terms = [(t, w) for t, w in terms if t in vocab]
    if not terms:
        return first
    q_ids = [vocab[t] for t in q_tokens if t in vocab]
    scores = (1 - lam) * np.asarray(index.retriever.get_scores_from_ids(q_ids), dtype=np.float64)
    for t, w in terms:
        scores += lam * w * np.asarray(index.retriever.get_scores_from_ids([vocab[t]]))
    ids = index.doc_ids
    valid = np.flatnonzero(scores > 0)
    if mask is not None:
        position = searcher.position
        valid = np.array([i for i in valid.tolist() if mask[position[ids[i]]]], dtype=np.int64)
    if valid.size > n:
        valid = valid[np.argpartition(-scores[valid], n - 1)[:n]]
    order = sorted(valid.tolist(), key=lambda i: (-scores[i], ids[i]))
    return [(ids[i], float(scores[i])) for i in order]


# ----------------------------------------------------------------------------- references


@dataclass(frozen=True)
class RecentMessage:
    """One message of the conversation so far: its text, and optionally who sent it and
    when (the latest time is "now" for the query's relative time words)."""

    text: str
    sender: str = ""
    time: dt.datetime | None = None


def normalize_recent(recent: Any) -> list[RecentMessage]:
    """``recent`` as RecentMessages: a list of strings or of mappings with ``text`` (and
    optional ``sender``, ``time`` as a datetime or ISO string). Raises ``ValueError`` with
    one line naming the bad item."""
    if recent is None:
        return []
    if isinstance(recent, (str, bytes)) or not isinstance(recent, Sequence):
        raise ValueError(
            f"recent must be a list of messages (strings or {{'text': ...}}), got "
            f"{type(recent).__name__}"
        )
    out = []
    for i, item in enumerate(recent):
        if isinstance(item, RecentMessage):
            out.append(item)
            continue
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            raise ValueError(f"recent[{i}]: a message is a string or a mapping with 'text'")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"recent[{i}]: 'text' must be non-empty text")
        sender = item.get("sender") or ""
        if not isinstance(sender, str):
            raise ValueError(f"recent[{i}]: 'sender' must be text")
        when = item.get("time")
        if isinstance(when, str):
            try:
                when = dt.datetime.fromisoformat(when)
            except ValueError:
                raise ValueError(f"recent[{i}]: 'time' {when!r} is not an ISO datetime") from None
        if when is not None and not isinstance(when, dt.datetime):
            raise ValueError(f"recent[{i}]: 'time' must be a datetime or an ISO string")
        if when is not None and when.tzinfo is not None:
            when = when.replace(tzinfo=None)  # the searcher's times are local wall-clock
        out.append(RecentMessage(text, sender, when))
    return out


# anaphors: (pattern, kind) — kind "person" takes a person, "thing" the salient topic
_EN_PERSON = re.compile(r"\b(?:he|she|him|her|they|them|that person|this person)\b", re.I)
_EN_PERSON_POSS = re.compile(r"\b(?:his|her|their)\b", re.I)
_EN_THING = re.compile(
    r"\b(?:that|this|the)\s+(?:thing|stuff|topic|matter|issue|idea|plan|one|event)"
    r"(?:\s+(?:we|you|i|they|he|she)\s+(?:talked|were\s+talking|spoke|chatted|discussed|"
    r"mentioned|said)(?:\s+about)?)?"
    r"|\bwhat\s+we\s+(?:talked|were\s+talking|spoke|chatted)\s+about"
    r"|\bwhat\s+(?:we|you|i)\s+(?:discussed|mentioned|said)"
    r"|(?<!\w)(?:it|that|this)(?!\w)",
    re.I,
)
_JA_PERSON = re.compile(r"彼女|彼|あの人|その人|この人|あいつ|そいつ")
_JA_THING = re.compile(
    r"(?:あの|その|この|例の)(?:件|こと|事|話|やつ|奴|話題|計画|予定)?|あれ|それ|これ"
)
_EN_STOP = (
    frozenset(
        "the a an and or but so to of in on at for with about from by as is are was were be been "
        "i you we they he she it me him her us them my your our their his its this that these "
        "those what when where who how why which do did does done have has had will would can "
        "could should just really very yeah yes no not okay ok oh hey hi hello thanks thank "
        "there here then than also too lot lots some any all more much like got get going gonna "
        "wanna think know mean said say talk talked remember still well good great nice sure "
        "today yesterday tomorrow tonight week month year time day".split()
    )
    | GENERIC_WORDS_EN
)
_JA_STOP = frozenset(
    "今日 昨日 明日 今 時間 ところ 感じ 本当 大丈夫 自分 私 僕 俺 皆 みんな".split()
)
_PLACE_WORDS = frozenset("at in on to from near the a an into".split())
_EN_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9'’\-]*")
_JA_TOKEN = re.compile(r"[\u30a1-\u30fa\u30fc]{2,}|[\u3400-\u9fff々]{2,}")


@dataclass(frozen=True)
class Resolution:
    """What ``resolve_references`` made of a query: the rewritten query, the reference time
    for its relative time words, the entities it used and why (``notes``)."""

    query: str
    as_of: dt.datetime | None
    persons: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def salient_entities(
    recent: Sequence[RecentMessage],
    known: Sequence[str] = (),
    weight_of: Callable[[str], float] | None = None,
) -> tuple[list[str], list[str]]:
    """(persons, topics) of the recent messages, most salient first.

    Salience is frequency weighted by recency (the last message counts most, each earlier
    one half as much) and, given ``weight_of`` (the index's idf), by how rare the words are.
    Persons: known speaker names mentioned (not the senders themselves, who are "I" and
    "you"), else capitalized non-initial English words. Topics: runs of adjacent English
    content words ("LGBTQ support group"), Japanese katakana words and kanji compounds;
    time words ("yesterday", 来週) are the parser's, never a topic.
    """
    persons: Counter[str] = Counter()
    capitalized: Counter[str] = Counter()
    topics: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    senders = {m.sender for m in recent if m.sender}
    weigh = weight_of or (lambda _w: 1.0)
    for age, m in enumerate(reversed(recent)):
        weight = 0.5**age
        text = unicodedata.normalize("NFKC", m.text)
        mentioned = [n for n in speakers_in(text, known) if n not in senders]
        for n in mentioned:
            persons[n] += weight
        blocked = {w.lower() for n in mentioned for w in n.split()}
        run: list[str] = []
        phrases: list[list[str]] = []
        prev_end = 0
        for j, w in enumerate(_EN_TOKEN.finditer(text)):
            token = _possessive_free(w[0].strip("'’-"))
            low = token.lower()
            gap = text[prev_end : w.start()]
            prev_end = w.end()
            if run and (gap.strip() or "'s" in w[0][-2:]):
                phrases.append(run)
                run = []
            if low in _EN_STOP or low in blocked or len(low) < 3 or _is_time_word(token):
                if run:
                    phrases.append(run)
                    run = []
                continue
            before = text[: w.start()].rstrip()
            sentence_start = j == 0 or before[-1:] in ".!?"
            place = before.rsplit(" ", 1)[-1].lower() in _PLACE_WORDS or (
                bool(run) and run[-1][0].isupper()
            )
            if token[0].isupper() and not token.isupper() and not sentence_start and not place:
                capitalized[token] += weight
                first_seen.setdefault(token, len(first_seen))
            run.append(token)
        if run:
            phrases.append(run)
        for words in phrases:
            phrase = " ".join(words)
            topics[phrase] += weight * sum(weigh(x) for x in words)
            first_seen.setdefault(phrase, len(first_seen))
        for w in _JA_TOKEN.finditer(text):
            token = w[0]
            if token in _JA_STOP or _is_time_word(token):
                continue
            if any(token in n or n in token for n in mentioned):
                continue
            topics[token] += weight * weigh(token)
            first_seen.setdefault(token, len(first_seen))
    if not persons:
        persons = capitalized
    ranked_persons = sorted(
        persons, key=lambda p: (-persons[p], p not in known, first_seen.get(p, 0))
    )
    merged: Counter[str] = Counter()  # a person's name is not part of a topic
    for t, v in topics.items():
        rest = " ".join(w for w in t.split(" ") if w not in persons)
        if rest:
            merged[rest] += v
            first_seen.setdefault(rest, first_seen[t])
    ranked_topics = sorted(merged, key=lambda t: (-merged[t], first_seen[t]))
    if ranked_topics:  # a passing word is no topic: keep those near the most salient one
        top = merged[ranked_topics[0]]
        ranked_topics = [t for t in ranked_topics if merged[t] >= TOPIC_SHARE * top]
    return ranked_persons, ranked_topics


@functools.lru_cache(maxsize=4096)
def _is_time_word(word: str) -> bool:
    """Whether the time parser reads ``word`` as a time expression (then it is a filter
    of the query, not a topic of the conversation). Memoized: a conversation repeats its
    words, and each was a parse of its own (most of a long ``recent``'s cost)."""
    parsed = parse_query(word, now=_EPOCH)
    # a future or invalid expression ("来週") is no filter, but the parser still names it
    return bool(parsed.filters) or any(n.startswith(("'", '"')) for n in parsed.notes)


def _possessive(text: str) -> re.Match[str] | None:
    """The first his/her/their used as a determiner (followed by a content word: "her
    mentor", not "tell her about")."""
    for m in _EN_PERSON_POSS.finditer(text):
        nxt = _EN_TOKEN.match(text, m.end() + 1) if text[m.end() : m.end() + 1] == " " else None
        if nxt is not None and nxt[0].lower() not in _EN_STOP:
            return m
    return None


def _possessive_free(word: str) -> str:
    return re.sub(r"(?:'s|’s|'|’)$", "", word)


MAX_TOPICS = 2
TOPIC_SHARE = 0.5  # a topic's salience, at least this share of the best one's


def resolve_references(
    query: str,
    recent: Any,
    *,
    known: Sequence[str] = (),
    as_of: dt.datetime | None = None,
    weight_of: Callable[[str], float] | None = None,
) -> Resolution:
    """``query`` with its references to the conversation so far made explicit.

    Person pronouns (he/she/they, 彼/彼女/あの人) become the most salient person of
    ``recent``; thing references (that / this / it / that thing we talked about, あれ /
    それ / あの件 / 例の件) the most salient topics (up to ``MAX_TOPICS``). A query without
    such a reference is returned unchanged. The latest ``time`` among ``recent`` becomes
    ``as_of`` when none is given, so "yesterday" means the day before that conversation.
    Raises ``ValueError`` (one line) for a malformed ``recent``.
    """
    messages = normalize_recent(recent)
    notes: list[str] = []
    times = [m.time for m in messages if m.time is not None]
    if as_of is None and times:
        as_of = max(times)
        notes.append("as_of: the latest recent message")
    if not messages:
        return Resolution(query, as_of, notes=tuple(notes))
    persons, topics = salient_entities(messages, known, weight_of)
    text = query
    used_p: list[str] = []
    used_t: list[str] = []
    ja = re.search(r"[\u3040-\u30ff\u3400-\u9fff]", query) is not None
    named_in_query = set(speakers_in(query, known))
    person = next((p for p in persons if p not in named_in_query), None)
    if person is not None:
        poss = None if ja else _possessive(text)
        pattern = _JA_PERSON if ja else _EN_PERSON
        if poss is not None:  # "her mentor" -> "Melanie's mentor"
            text = text[: poss.start()] + f"{person}'s" + text[poss.end() :]
            used_p.append(person)
        m = pattern.search(text)
        if m is not None and (poss is None or m[0].lower() != "her"):  # one person, both roles
            text = text[: m.start()] + person + text[m.end() :]
            used_p.append(person)
    present = text.lower()
    chosen = [t for t in topics if t.lower() not in present and t not in used_p][:MAX_TOPICS]
    if chosen:
        pattern = _JA_THING if ja else _EN_THING
        m = pattern.search(text)
        if m:
            sep = "・" if ja else " "
            text = text[: m.start()] + sep.join(chosen) + text[m.end() :]
            used_t = chosen
    if not used_p and not used_t:
        notes.append("no reference to the recent messages found: query unchanged")
    else:
        notes.append(f"resolved {len(used_p)} person and {len(used_t)} topic reference(s)")
    return Resolution(text, as_of, tuple(used_p), tuple(used_t), tuple(notes))


def idf_weight(n_docs: int, df: int) -> float:
    """Smoothed idf (for callers without an index: the ambiguous-query generator)."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


# ----------------------------------------------------------------------------- ranking


def fuse(config: Any, lexical: Ranked, dense: Ranked) -> Ranked:
    """The fused ranking of ``config``'s mode and fusion over the two retrievers' lists
    (the same rule as ``Searcher.rank``)."""
    if config.mode == "bm25":
        return lexical
    if config.mode == "dense":
        return dense
    if config.fusion == "linear":
        return linear_fusion(lexical, dense, config.beta)
    return rrf([lexical, dense], k=config.rrf_k)


def understood_rank(searcher: Any, content: str, config: Any, mask: np.ndarray | None) -> Ranked:
    """``searcher.rank`` with ``config``'s query understanding: question words stripped,
    the BM25 side expanded by PRF, chunks where a named speaker speaks boosted. With every
    option off it is exactly ``searcher.rank`` (the measured default stays as measured)."""
    if not (config.strip_question or config.prf_terms or config.speaker_boost):
        return searcher.rank(content, config, mask)
    names = speakers_in(content, searcher.known_speakers)
    query = strip_question(content, names) if config.strip_question else content
    if config.prf_terms and config.uses_bm25:
        n = config.candidates
        lexical = prf_bm25_ranked(searcher, query, config.bm25_rep, mask, n, config.prf_terms)
        dense = searcher.dense_ranked(query, config.dense_rep, mask, n) if config.uses_dense else []
        ranked = fuse(config, lexical, dense)
    else:
        ranked = searcher.rank(query, config, mask)
    speakers_of = getattr(searcher, "speakers_of_chunk", None) or (
        lambda c: searcher.chunk(c)["speakers"]
    )
    return boost_chunks(ranked, speakers_of, names, config.speaker_boost)
