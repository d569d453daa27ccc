"""Offline, deterministic EXTRACTIVE summaries, titles and bullets of chat chunks and sessions.

Nothing here writes new sentences: every summary line and every bullet is a message of the
chat (possibly trimmed), prefixed by its speaker, so a summary can always be traced back to
the raw text and never hallucinates. That is what the LINE paper's ``embedding_text`` needs
(an informative digest next to the raw excerpt) without an LLM, an API key or a model file,
and fast enough to run on every chunk of a corpus (≥ 2,000 chunks/s on one core).

How a chunk is summarized (``extractive_summary``):

1. Only ``type == "text"`` messages are candidates (stickers, photos, calls and system lines
   never are; ``parse_raw_text`` infers those types from the rendered markers).
2. Each candidate is tokenized without a morphological analyzer (EN: whitespace tokens minus
   stop words; JA: one regex for kanji compounds, katakana runs and latin words) and scored,
   TF-IDF-like within the chunk: content mass = sum over its distinct terms of ``1 + ln(df)``
   (df = how many messages of the chunk use the term, so the chunk's topic words weigh more;
   a term used once weighs 0.6) times a density factor (content terms per word/char), plus
   bonuses for proper names (EN: words capitalised mid-sentence; JA: katakana runs and names
   before honorifics; the speakers themselves are not counted), dates/times, money, other
   numbers, plan/decision/commitment markers and life events; divided by length**0.6 so a
   long message must carry more to win; greetings/acknowledgements and very short messages
   are down-weighted.
3. Messages are taken best-first until the middle of the length target is reached
   (skipping near-copies of what is already picked), then put back in chronological order,
   one per line: ``"Maria: Let's meet at Sangenjaya station, south exit, 9:40"``.

Length targets (``SUMMARY_TARGETS``): 200–500 characters for Japanese, 60–120 words for
English, measured on the whole summary (speaker prefixes and newlines included) by
``summary_length``. The upper bound is never exceeded: a message that does not fit is cut
at a sentence, word or character boundary and ends with "…". When the candidate messages of
the chunk together are shorter than the lower bound, the summary is all of them (shorter
than the target): ``within_target`` accepts that case given ``source_length``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain, pairwise

from memory_pipeline.core.common.lang import detect_lang

SUMMARY_TARGETS: dict[str, tuple[int, int]] = {"ja": (200, 500), "en_words": (60, 120)}
SEPARATOR = "\n"  # one picked message per summary line
ELLIPSIS = "…"
BULLET_MAX_CHARS = 140
BULLET_LABELS: dict[str, dict[str, str]] = {
    "en": {"decision": "Decision:", "commitment": "Commitment:", "context": "Context:"},
    "ja": {"decision": "決定:", "commitment": "約束:", "context": "背景:"},
}


@dataclass(frozen=True, slots=True)
class Line:
    """One chat message as the summarizer sees it (a parsed ``raw_text`` line or a table row)."""

    sender: str
    text: str
    local_ts: datetime
    type: str = "text"


# --------------------------------------------------------------------------- parsing

_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d\]")
_HEAD = re.compile(r"\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\] ?(.*?): ?(.*)")
_MARKER_TYPES = {
    "[スタンプ]": "sticker",
    "[sticker]": "sticker",
    "[写真]": "photo",
    "[photo]": "photo",
    "[アルバム]": "photo",
    "[album]": "photo",
    "[動画]": "video",
    "[video]": "video",
    "[ファイル]": "file",
    "[file]": "file",
    "[ボイスメッセージ]": "audio",
    "[voice message]": "audio",
    "[audio]": "audio",
    "[位置情報]": "location",
    "[location]": "location",
    "[連絡先]": "contact",
    "[contact]": "contact",
}
_MAX_MARKER = max(map(len, _MARKER_TYPES)) + 2
_CALL = re.compile(
    r"(?:☎|📞|通話時間|不在着信|通話をキャンセルしました|Call time|Missed call|Cancell?ed call)",
    re.IGNORECASE,
)
# LINE's system lines, by how they end (a C-level endswith; no regex per message).
_SYSTEM_ENDINGS = (
    "unsent a message.",
    "unsent a message",
    "がメッセージの送信を取り消しました",
    "を作成しました",
    "が参加しました",
    "が退出しました",
    "を招待しました",
    "joined the group.",
    "joined the group",
    "left the group.",
    "left the group",
    "joined the chat",
    "left the chat",
)
_SYSTEM = re.compile(
    r"\A\S.{0,60}?(?:unsent a message\.?|がメッセージの送信を取り消しました|"
    r"がアルバム「.*」を作成しました|が(?:参加|退出)しました|が.+を招待しました|"
    r" (?:joined|left) the (?:group|chat)\.?)\Z",
    re.DOTALL,
)


def infer_type(sender: str, text: str) -> str:
    """Best-effort message type from rendered text (raw_text does not carry the type column)."""
    if not sender:
        return "system"
    if text.startswith("[") and len(text) <= _MAX_MARKER:
        kind = _MARKER_TYPES.get(text.strip().lower())
        if kind is not None:
            return kind
    if _CALL.match(text):
        return "call"
    if text.endswith(_SYSTEM_ENDINGS) and _SYSTEM.match(text):
        return "system"
    return "text"


def parse_raw_text(raw_text: str) -> list[Line]:
    """Inverse of the chunk rendering ``[YYYY-MM-DD HH:MM] sender: text`` (tolerant).

    Lines indented by two spaces continue the previous message; any other non-blank line that
    is not a message header is also taken as a continuation (a hand-edited or re-wrapped text
    must not lose words); blank lines and text before the first header are dropped. Seconds
    and a ``T`` separator in the stamp are accepted. ``type`` is inferred from LINE's markers
    (``[Sticker]``, ``[写真]``, ``☎ …``, sender-less system lines) since the rendering does
    not keep it.
    """
    out: list[Line] = []
    stamps: dict[str, datetime | None] = {}  # messages of a chunk share few distinct minutes
    ts: datetime | None = None
    sender = ""
    parts: list[str] | None = None
    for row in raw_text.split("\n"):
        if row.endswith("\r"):
            row = row[:-1]
        if parts is not None and row.startswith("  "):
            parts.append(row[2:])
            continue
        # Fast path for the exact rendering "[YYYY-MM-DD HH:MM] sender: text", else the regex.
        new_ts = None
        if row[17:19] == "] " and row[:1] == "[" and ": " in row and _STAMP.match(row, 1):
            new_ts = _stamp(row[1:17], stamps)
            new_sender, _, first = row[19:].partition(": ")
        else:
            m = _HEAD.match(row)
            if m is not None:
                new_ts = _stamp(m.group(1), stamps)
                new_sender, first = m.group(2), m.group(3)
        if new_ts is None:  # not a message header (or an impossible date): continuation
            if parts is not None and row:  # a blank unindented line is layout, not text
                parts.append(row)
            continue
        if parts is not None and ts is not None:
            out.append(_make_line(sender, parts, ts))
        ts, sender, parts = new_ts, new_sender, [first]
    if parts is not None and ts is not None:
        out.append(_make_line(sender, parts, ts))
    return out


def _stamp(stamp: str, cache: dict[str, datetime | None]) -> datetime | None:
    if stamp in cache:
        return cache[stamp]
    try:
        ts: datetime | None = datetime.fromisoformat(stamp)
    except ValueError:
        ts = None
    cache[stamp] = ts
    return ts


def _make_line(sender: str, parts: list[str], ts: datetime) -> Line:
    text = parts[0] if len(parts) == 1 else "\n".join(parts)
    return Line(sender, text, ts, infer_type(sender, text))


# --------------------------------------------------------------------------- lexicons

_EN_STOP = frozenset(
    """
a about above after again against all almost also although always am an and any anyone
anything anyway are aren't around as at away back be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
done down during each either else even ever every everyone everything few for from further
get gets getting got had hadn't has hasn't have haven't having he he'd he'll he's her here
hers herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it
it's its itself just let let's lets like made make many may maybe me might mine more most
much must mustn't my myself need no nor not nothing now of off often oh ok okay on once one
only or other others our ours ourselves out over own pretty quite rather really right said
same say says see seem seems shall she she'd she'll she's should shouldn't since so some
someone something sometimes soon still such sure than that that's the their theirs them
themselves then there there's these they they'd they'll they're they've thing things think
this those though through thus to too under until up upon us very via was wasn't way we
we'd we'll we're we've well were weren't what what's whatever when when's where where's
whether which while who who's whom whose why why's will with won't would wouldn't yeah yes
yet you you'd you'll you're you've your yours yourself yourselves
lol haha hahaha hah hmm hm uh um wow omg btw gonna wanna gotta yep yup nope yay ooh aww
hey hi hello bye thanks thank thx pls please sorry congrats congratulations cool nice great
good awesome amazing perfect fine lot lots kind sort stuff guess know want going come came
coming go goes went take took tell told look looks looking feel feels felt sounds sound
""".split()
)
# Extra words that are fine in a summary but make poor title terms (verbs, vague adjectives).
_EN_TITLE_STOP = frozenset(
    """
today tonight tomorrow yesterday morning afternoon evening night week weekend month year
time day days first last next new old big small best better long little least bit fun happy
sad late early true real whole able ready free busy again already actually literally
bring brought send sent pay paid give gave buy bought book booked meet met start started
work working try tried use used find found call called wait help keep keeps leave left put
show play hope hoping love loved wish wished said talk talking thought told asked ask ready
can't won't dont didnt cant wont im ive ill youre deal course idea glad lucky
""".split()
)
_JA_STOP = frozenset(
    """
私 僕 俺 自分 本当 何 今 人 方 事 時 気 感 的 前 後 中 上 下 一 二 全部 大丈夫 多分 最近 結構
色々 一番 普段 確 意味 感じ 場合 以外 以上 今回 他 皆 笑 草 ok OK www w 一緒 今度 結局 全然
無理 了解 本 日 月 年 分 円 回 度 位 目 相手 話 言 思 見 行 来 出 食 好 楽 今日 明日 昨日
""".split()
)
_EN_CALENDAR = frozenset(
    """
monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
thursdays fridays saturdays sundays january february march april may june july august
september october november december
""".split()
)
_JA_HONORIFIC_KANJI = ("先輩", "先生", "店長", "部長", "課長", "社長", "係長", "会長")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _pairs(text: str) -> frozenset[tuple[str, str]]:
    return frozenset((p.split()[0], p.split()[1]) for p in text.split(","))


# English markers are matched on the message's lower-cased words (set operations in C, no
# regex scan over the text): single words, and word pairs for multi-word markers.
_EN_WHEN_WORDS = _words(
    """
monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays
fridays saturdays sundays tomorrow tonight weekend
"""
)
_EN_WHEN_PAIRS = _pairs(
    "next week,next weekend,next month,next year,next time,this week,this weekend,this month,"
    "this evening,this morning,this afternoon,tomorrow morning,tomorrow night"
)
_EN_MONTHS = _words(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_EN_COMMIT_WORDS = _words("i'll i’ll promise promised")
_EN_COMMIT_PAIRS = _pairs(
    "i will,i'm going,i’m going,i am,i'm gonna,i’m gonna,will do,count me,remind me,i can"
)
_EN_DECIDE_WORDS = _words(
    """
let's let’s we'll we’ll decided decide agreed booked reserved confirmed plan planned planning
deadline appointment reminder schedule scheduled
"""
)
_EN_DECIDE_PAIRS = _pairs("let us,shall we,should we,how about,we will,we're going,we’re going")
# Life events and news: what a memory should surface later ("when did Maria start her job?").
_EN_EVENT_WORDS = _words(
    """
hired promoted promotion quit moved moving married engaged wedding pregnant baby born birthday
adopted graduated graduating graduation diagnosed hospital surgery accepted interview news
"""
)
_EN_EVENT_PAIRS = _pairs(
    "got the,got a,got my,got into,new job,passed away,broke up,job offer,guess what,big news"
)
_EN_GREETING_WORDS = _words(
    """
hi hey hello yo morning night gn bye thanks thank thx ty ok okay k yes yeah yep yup no nope sure
cool nice great perfect lol haha hahaha lmao wow omg same right true noted np welcome congrats
congratulations sorry ha awesome good
"""
)
# A number; group 1: a time/date (9:40, 3/23), 2: am/pm or an ordinal, 3: a currency word.
_EN_NUMBER = re.compile(
    r"\d[\d,.]*(?:(:\d\d|/\d\d?|-\d\d-\d\d)|\s?(am|pm|a\.m\.|p\.m\.|st|nd|rd|th)(?![a-z])"
    r"|\s?(?:k\s)?(yen|dollars?|bucks|usd|jpy|eur|euros?|pounds?|円)(?![a-z]))?",
    re.IGNORECASE,
)
_EN_PAIR_FIRSTS = (
    frozenset(
        a
        for pairs in (_EN_WHEN_PAIRS, _EN_COMMIT_PAIRS, _EN_DECIDE_PAIRS, _EN_EVENT_PAIRS)
        for a, _ in pairs
    )
    | _EN_MONTHS
)
_EN_CURRENCY = re.compile(r"[$¥€£]\s?\d")
_EN_STRIP = "\"'“”‘’()[]{}<>.,!?;:…*_~/\\|-–—+=#@&%^`"
_EN_SENTENCE_END = (".", "!", "?", "…")
# Display words (titles, speakers' names): letters, inner apostrophes and hyphens.
_EN_WORD = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W\d_]+)?(?:-[^\W_]+)*")
_EN_PHRASE = re.compile(r"(?<![\w'’])[A-Z][\w'’]*(?:-\w+)*(?: [A-Z][\w'’]*(?:-\w+)*)+")

_K = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々〆ヶ"
_KANA_LINK = "みりしきちいえけせねべめれわびぎじ"  # okurigana inside compounds: 飲み会, 食べ放題
_KANA_TAIL = "しりみきいえけ"  # trailing okurigana of such compounds: 取り消し, 引っ越し
_KATA = "\u30a1-\u30fa\u30fc"
_HALF_KATA = "\uff66-\uff9f"
# The regexes run over whole chunks start with ONE character class (branches are dispatched by
# a one-character lookbehind) or with literal alternatives: Python's re then skips the other
# positions in C, 2-5x faster than alternatives that each start with a repeat.
_JA_TOKEN = re.compile(
    rf"[{_K}{_KATA}{_HALF_KATA}A-Za-zＡ-Ｚａ-ｚ]"
    rf"(?:(?<=[{_K}])(?:[{_K}]*(?:っ?[{_KANA_LINK}]|っ)[{_K}]+"
    rf"(?:(?:っ?[{_KANA_LINK}]|っ)[{_K}]+)*[{_KANA_TAIL}]?"  # 飲み会, 取り消し
    rf"|[{_KATA}]{{2,}}"  # 段ボール, 生ビール
    rf"|[{_K}]+(?=[{_K}]っ[たちす])"  # 寿司(作った): the noun before a verb stem
    rf"|[{_K}]*)"  # a kanji run
    rf"|(?<=[{_KATA}{_HALF_KATA}])[{_KATA}{_HALF_KATA}]+"  # katakana, 2+ characters
    rf"|(?<=[A-Za-z])[A-Za-z0-9'’\-]*"
    rf"|(?<=[Ａ-Ｚａ-ｚ])[Ａ-Ｚａ-ｚ]*)"
)
_JA_NAME_BEFORE_HONORIFIC = re.compile(
    rf"([{_K}]{{1,4}}|[{_KATA}]{{2,}}|[A-Za-z]+)(?:さん|ちゃん|くん|君|様|氏)"
)
_D = "0-9０-９"
# A number; group 1: money (4,500円), group 2: a date/time (3月, 20日, 19時, 18:15, 3/23).
_JA_NUMBER = re.compile(
    rf"[{_D}][{_D},，万千.]*(?:(\s?円)|([月日時分年週曜]|[:：][{_D}]{{2}}|/[{_D}]))?"
)
_JA_YEN = re.compile(rf"[¥￥]\s?[{_D}]")
_JA_WHEN_WORDS = re.compile(
    "|".join(
        "月曜 火曜 水曜 木曜 金曜 土曜 日曜 明後日 明日 あした 今夜 今晩 今週 "
        "再来週 来週 来月 来年 週末 午前 午後".split()
    )
)
# "てるね/でるね/いるね" come first so that their "るね" is not taken for a promise.
_JA_NOT_COMMIT = frozenset({"てるね", "でるね", "いるね"})
_JA_COMMIT = re.compile(
    r"てるね|でるね|いるね|約束|てお[くき]|でお[くき]|とく(?:[ねよわ。！!]|$)|"
    r"るね(?:[!！。〜~…]|$)|くね(?:[!！。〜~…]|$)|しますね|てくる|任せて|つもり|"
    + "|".join(
        f"{v}(?:[よねわ]|から|$)"
        for v in "する やる 行く 送る 買う 書く 渡す 払う 持ってく 持って行く 持っていく".split()
    ),
    re.MULTILINE,
)
_JA_NOT_DECIDE = frozenset({"それでは", "じゃあね"})  # "well then" / "bye", not a decision
_JA_DECIDE = re.compile(
    r"それでは|じゃあね|しよう|しましょう|ましょう|ようか|ようよ|やろう|行こう|会おう|決まった|決まり|決定|決めた|"
    r"にした|にする|予約|予定|計画|集合|待ち合わせ|締め切り|締切|じゃあ|それで"
)
_JA_EVENT = re.compile(
    r"結婚|婚約|誕生日|引っ越|転勤|転職|就職|内定|合格|入院|退院|卒業|入学|出産|妊娠|昇進|退職|"
    r"採用|受かった|ニュース|報告"
)
_JA_GREETING = re.compile(
    r"(?:おはよう|おやすみ|こんにちは|こんばんは|よろしく|ありがと|お疲れ|おつかれ|了解|りょうかい|"
    r"はい|うん|いいよ|いいね|ok|おけ|笑|w+|草|なるほど|そうですね|そうなんですね|そうなんですか|"
    r"そうなんだ|確かに|たしかに|さすが|ですね|ですよね|わかる|分かる|すごい|凄い|へー|へえ|えー|"
    r"やった|ほんと|マジ|まじ|失礼します|はじめまして|初めまして|こちらこそ|いえいえ|ごめん)",
    re.IGNORECASE,
)
_JA_SENTENCE_END = "。！？!?．\n"

# Score weights (see module docstring).
_W_NAME, _MAX_NAMES = 1.5, 3
_W_WHEN, _W_WHEN_MORE, _MAX_WHEN = 1.8, 0.6, 3
_W_MONEY, _W_NUMBER, _W_PLAN, _W_EVENT = 1.5, 0.6, 2.0, 2.0
_GREETING_FACTOR, _SHORT_FACTOR = 0.25, 0.4
_W_SINGLE = 0.6  # weight of a term used by one message only
_LENGTH_EXPONENT = 0.6  # score = value / length**0.6: long messages must carry more
_ECHO_OVERLAP = 0.8  # a candidate whose terms are this covered by picked ones is a near-copy


# --------------------------------------------------------------------------- analysis


class _Msg:
    """One candidate message with its features (internal; slots for speed)."""

    __slots__ = (
        "idx",
        "sender",
        "text",
        "units",
        "terms",
        "names",
        "nwhen",
        "money",
        "number",
        "kind",
        "event",
        "greeting",
        "short",
        "score",
    )

    def __init__(self, idx: int, sender: str, text: str) -> None:
        self.idx = idx
        self.sender = sender
        self.text = text
        self.units = 0
        self.terms: frozenset[str] = frozenset()
        self.names: frozenset[str] = frozenset()
        self.nwhen = 0
        self.money = False
        self.number = False
        self.kind = ""  # "decision" | "commitment" | ""
        self.event = False
        self.greeting = False
        self.short = False
        self.score = 0.0


def _clean(text: str) -> str:
    return " ".join(text.split())


def _candidates(lines: Sequence[Line]) -> list[_Msg]:
    """Text messages worth considering, whitespace-collapsed (one summary line each)."""
    out = []
    for i, ln in enumerate(lines):
        if ln.type != "text":
            continue
        text = ln.text
        if text.startswith("[") and _MARKER_TYPES.get(text.strip().lower()):
            continue
        text = _clean(text)
        if text:
            out.append(_Msg(i, ln.sender, text))
    return out


def _resolve_lang(lang: str | None, msgs: Sequence[_Msg]) -> str:
    if lang:
        return "ja" if lang.lower().startswith("ja") else "en"
    sample: list[str] = []
    size = 0
    for m in msgs:
        sample.append(m.text)
        size += len(m.text)
        if size > 600:
            break
    return detect_lang("\n".join(sample))


def _prefix_units(sender: str, lang: str) -> int:
    if not sender:
        return 0
    return len(sender) + 2 if lang == "ja" else len(sender.split())


def _render(sender: str, text: str) -> str:
    return f"{sender}: {text}" if sender else text


def _offsets(msgs: list[_Msg]) -> tuple[str, list[int]]:
    """The chunk's texts joined by newlines, and where each message starts in it."""
    starts = []
    pos = 0
    for m in msgs:
        starts.append(pos)
        pos += len(m.text) + 1
    return "\n".join([m.text for m in msgs]), starts


def _features_ja(msgs: list[_Msg]) -> None:
    joined, starts = _offsets(msgs)
    for hit in _JA_NUMBER.finditer(joined):
        m = msgs[bisect_right(starts, hit.start()) - 1]
        m.number = True
        if hit.group(1):
            m.money = True
        elif hit.group(2):
            m.nwhen += 1
    if "¥" in joined or "￥" in joined:
        for hit in _JA_YEN.finditer(joined):
            msgs[bisect_right(starts, hit.start()) - 1].money = True
    for hit in _JA_WHEN_WORDS.finditer(joined):
        msgs[bisect_right(starts, hit.start()) - 1].nwhen += 1
    for hit in _JA_COMMIT.finditer(joined):
        if hit.group() not in _JA_NOT_COMMIT:
            msgs[bisect_right(starts, hit.start()) - 1].kind = "commitment"
    for hit in _JA_DECIDE.finditer(joined):
        m = msgs[bisect_right(starts, hit.start()) - 1]
        if not m.kind and hit.group() not in _JA_NOT_DECIDE:
            m.kind = "decision"
    for hit in _JA_EVENT.finditer(joined):
        msgs[bisect_right(starts, hit.start()) - 1].event = True


# raw token -> (lower-cased core, term or "", capitalised, ends a sentence); bounded cache.
_EN_TOKEN_INFO: dict[str, tuple[str, str, bool, bool]] = {}
_TOKEN_CACHE_MAX = 200_000


def _en_token_info(tok: str) -> tuple[str, str, bool, bool]:
    core = tok.strip(_EN_STRIP)
    low = core.lower()
    term = low[:-2] if low.endswith(("'s", "’s")) else low
    if len(term) < 3 or term in _EN_STOP or not term[0].isalpha():
        term = ""
    return low, term, core[:1].isupper(), tok.endswith(_EN_SENTENCE_END)


def _en_token_infos(toks: list[str]) -> list[tuple[str, str, bool, bool]]:
    cache = _EN_TOKEN_INFO
    get = cache.get
    infos = [get(t) for t in toks]
    if None in infos:
        for i, info in enumerate(infos):
            if info is None:
                infos[i] = cache[toks[i]] = _en_token_info(toks[i])
    return infos  # type: ignore[return-value]


_EN_START = ("", "", False, True)  # a virtual token before each message: a sentence ends


def _analyze_en(msgs: list[_Msg], speakers: Iterable[str]) -> None:
    if len(_EN_TOKEN_INFO) > _TOKEN_CACHE_MAX:
        _EN_TOKEN_INFO.clear()
    # Speakers are not "names" for the bonus: in their own chat they are mostly vocatives.
    not_names = set(_EN_CALENDAR)
    for s in speakers:
        not_names.update(w.lower() for w in _EN_WORD.findall(s))
    mid_caps: set[str] = set()
    per_msg = []
    for m in msgs:
        toks = m.text.split()
        infos = _en_token_infos(toks)
        lows = [i[0] for i in infos]
        m.terms = terms = frozenset([i[1] for i in infos if i[1]])
        # Capitalised terms not at a sentence start are name candidates ("at Hikari Design").
        mid_caps.update(
            [c[1] for p, c in pairwise([_EN_START, *infos]) if c[2] and c[1] and not p[3]]
        )
        n = len(toks)
        m.units = n + _prefix_units(m.sender, "en")
        words = set(lows)
        nwhen = len(words & _EN_WHEN_WORDS)
        commit = not _EN_COMMIT_WORDS.isdisjoint(words)
        decide = not _EN_DECIDE_WORDS.isdisjoint(words) or lows[-1:] == ["then"]
        event = not _EN_EVENT_WORDS.isdisjoint(words)
        if not _EN_PAIR_FIRSTS.isdisjoint(words):
            bigrams = set(pairwise(lows))
            nwhen += len(bigrams & _EN_WHEN_PAIRS)
            if not _EN_MONTHS.isdisjoint(words):
                nwhen += sum(1 for a, b in bigrams if a in _EN_MONTHS and b[:1].isdigit())
            commit = commit or not _EN_COMMIT_PAIRS.isdisjoint(bigrams)
            decide = decide or not _EN_DECIDE_PAIRS.isdisjoint(bigrams)
            event = event or not _EN_EVENT_PAIRS.isdisjoint(bigrams)
        m.nwhen = nwhen
        m.kind = "commitment" if commit else "decision" if decide else ""
        m.event = event
        m.short = n < 4
        m.greeting = n < 7 and bool(lows) and lows[0] in _EN_GREETING_WORDS
        per_msg.append((m, len(terms) / n if n else 0.0))
    _numbers_en(msgs)
    mid_caps -= not_names
    for m, _ in per_msg:
        m.names = m.terms & mid_caps
    _score(per_msg)


def _numbers_en(msgs: list[_Msg]) -> None:
    joined, starts = _offsets(msgs)
    for hit in _EN_NUMBER.finditer(joined):
        m = msgs[bisect_right(starts, hit.start()) - 1]
        m.number = True
        if hit.group(3):
            m.money = True
        elif hit.group(1) or hit.group(2):
            m.nwhen += 1
    if "$" in joined or "¥" in joined or "€" in joined or "£" in joined:
        for hit in _EN_CURRENCY.finditer(joined):
            msgs[bisect_right(starts, hit.start()) - 1].money = True


# token -> (term or "" to drop, is a name candidate); bounded: cleared when it grows too big.
_JA_TOKEN_INFO: dict[str, tuple[str, bool]] = {}


def _ja_token_info(t: str) -> tuple[str, bool]:
    if t in _JA_STOP:
        return "", False
    c = t[0]
    if len(t) > 2 and t.endswith(_JA_HONORIFIC_KANJI):
        return t[:-2], True  # 佐藤先輩 -> 佐藤
    if "\u30a1" <= c <= "\u30fc" or "\uff66" <= c <= "\uff9f":
        return t, len(t) > 2  # katakana: given names and loanwords, both worth keeping
    if c.isascii():
        if len(t) < 2 or t.lower() in _EN_STOP:
            return "", False
        return t, c.isupper() and not t.isupper()  # "Mochi", not "LINE" or "OK"
    return t, False


def _analyze_ja(msgs: list[_Msg], speakers: Iterable[str]) -> None:
    cache = _JA_TOKEN_INFO
    if len(cache) > _TOKEN_CACHE_MAX:
        cache.clear()
    names: set[str] = set()
    per_msg = []
    for m in msgs:
        text = m.text
        n = len(text)
        m.units = n + _prefix_units(m.sender, "ja")
        terms = set()
        content_chars = 0
        for t in _JA_TOKEN.findall(text):
            info = cache.get(t)
            if info is None:
                info = cache[t] = _ja_token_info(t)
            term, is_name = info
            if term:
                terms.add(term)
                content_chars += len(term)
                if is_name:
                    names.add(term)
        m.terms = frozenset(terms)
        m.short = n < 8
        m.greeting = n < 16 and _JA_GREETING.match(text) is not None
        per_msg.append((m, content_chars / n if n else 0.0))
    _features_ja(msgs)
    joined = "".join(m.text for m in msgs)
    if "さん" in joined or "ちゃん" in joined or "くん" in joined or "君" in joined:
        names.update(_JA_NAME_BEFORE_HONORIFIC.findall(joined))
    names.difference_update(speakers)
    for m, _ in per_msg:
        m.names = m.terms & names
    _score(per_msg)


def _score(per_msg: list[tuple[_Msg, float]]) -> None:
    """Salience = (topic mass x density + bonuses) / length**0.6; see the module docstring."""
    df = Counter(chain.from_iterable(m.terms for m, _ in per_msg))
    # Topic words (used by several messages) weigh 1 + ln(df); a word said once weighs less;
    # a single character (one kanji) says little and counts half.
    weight = {
        t: (1.0 + math.log(n) if n > 1 else _W_SINGLE) * (1.0 if len(t) > 1 else 0.5)
        for t, n in df.items()
    }
    get = weight.__getitem__
    for m, density in per_msg:
        mass = sum(map(get, m.terms)) * (0.4 + min(density, 1.0))
        bonus = _W_NAME * min(len(m.names), _MAX_NAMES)
        if m.nwhen:
            bonus += _W_WHEN + _W_WHEN_MORE * (min(m.nwhen, _MAX_WHEN) - 1)
        if m.money:
            bonus += _W_MONEY
        elif m.number:
            bonus += _W_NUMBER
        if m.kind:
            bonus += _W_PLAN
        if m.event:
            bonus += _W_EVENT
        s = (mass + bonus) / max(m.units, 8) ** _LENGTH_EXPONENT
        if m.greeting:
            s *= _GREETING_FACTOR
        if m.short:
            s *= _SHORT_FACTOR
        m.score = s


def _analyze(lines: Sequence[Line], lang: str | None) -> tuple[list[_Msg], str]:
    msgs = _candidates(lines)
    lang = _resolve_lang(lang, msgs)
    speakers = {ln.sender for ln in lines}
    if lang == "ja":
        _analyze_ja(msgs, speakers)
    else:
        _analyze_en(msgs, speakers)
    return msgs, lang


# --------------------------------------------------------------------------- lengths


def _target_key(lang: str) -> str:
    return "ja" if lang == "ja" else "en_words"


def summary_length(summary: str, lang: str) -> int:
    """Length in the target's unit: characters for Japanese, whitespace words otherwise."""
    return len(summary) if lang == "ja" else len(summary.split())


def source_length(source: str | Sequence[Line], lang: str) -> int:
    """Length (target unit) of everything a summary could pick: all text messages rendered.

    ``source`` is a chunk's ``raw_text`` or its parsed lines. This, not ``len(raw_text)``
    (which counts timestamps, stickers and photos), is the ``source_len`` that
    ``within_target`` compares with the lower bound.
    """
    lines = parse_raw_text(source) if isinstance(source, str) else source
    lang = "ja" if lang == "ja" else "en"
    total = 0
    n = 0
    for m in _candidates(lines):
        total += summary_length(_render(m.sender, m.text), lang)
        n += 1
    if lang == "ja" and n > 1:
        total += (n - 1) * len(SEPARATOR)
    return total


def within_target(summary: str, lang: str, source_len: int) -> bool:
    """True when the summary is inside ``SUMMARY_TARGETS`` for ``lang``, or shorter than the
    lower bound only because the source itself (``source_length``) was shorter than it."""
    lo, hi = SUMMARY_TARGETS[_target_key(lang)]
    n = summary_length(summary, lang)
    if n > hi:
        return False
    return n >= lo or source_len < lo


# --------------------------------------------------------------------------- truncation


def _truncate_ja(text: str, budget: int, need: int) -> str:
    """``text`` in at most ``budget`` chars (ellipsis included), preferably at a sentence end."""
    if len(text) <= budget:
        return text
    if budget <= 1:
        return ELLIPSIS[:budget]
    cut = text[: budget - 1]
    floor = max(need - 1, budget // 2)
    best = max(cut.rfind(c) for c in _JA_SENTENCE_END)
    if best + 1 >= floor:
        cut = cut[: best + 1]
    else:
        space = cut.rfind(" ")  # latin words inside Japanese text
        if space + 1 >= max(floor, len(cut) - 12):
            cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def _truncate_en(text: str, budget: int, need: int) -> str:
    """``text`` in at most ``budget`` words (ellipsis glued to the last), at a sentence end
    when one leaves at least ``need`` words."""
    words = text.split()
    if len(words) <= budget:
        return text
    if budget <= 0:
        return ""
    cut = words[:budget]
    floor = max(need, budget // 2, 1)
    for i in range(len(cut) - 1, floor - 2, -1):
        if cut[i].endswith(_EN_SENTENCE_END):
            cut = cut[: i + 1]
            break
    last = cut[-1].rstrip(",;:-–—/")
    cut[-1] = (last or cut[-1]) + ELLIPSIS
    return " ".join(cut)


def _truncate(text: str, budget: int, need: int, lang: str) -> str:
    return _truncate_ja(text, budget, need) if lang == "ja" else _truncate_en(text, budget, need)


def trim_text(text: str, max_chars: int) -> str:
    """Whitespace-collapsed ``text`` in at most ``max_chars`` characters, cut at a word
    boundary when one is near, ending with "…" when cut (used for bullets)."""
    text = _clean(text)
    if len(text) <= max_chars:
        return text
    cut = text[: max(max_chars - 1, 0)]
    space = cut.rfind(" ")
    if space >= max_chars * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + ELLIPSIS


# --------------------------------------------------------------------------- summary


def extractive_summary(
    lines: list[Line], lang: str | None = None, *, target: tuple[int, int] | None = None
) -> str:
    """EXTRACTIVE summary of a chunk: its most informative messages, verbatim, in time order.

    Each summary line is ``"<speaker>: <message>"`` (newline-separated). ``lang`` ("ja"/"en")
    is detected from the messages when None; ``target`` overrides ``SUMMARY_TARGETS`` as
    (lower, upper) in the language's unit (characters for ja, words for en). The upper bound
    is never exceeded (one over-long message is cut with "…"); when all text messages of the
    chunk are shorter than the lower bound the summary is all of them, and it is "" when the
    chunk has no text message at all. Deterministic: same lines, same summary.
    """
    msgs, lang = _analyze(lines, lang)
    if not msgs:
        return ""
    lo, hi = target if target is not None else SUMMARY_TARGETS[_target_key(lang)]
    if hi < lo:
        raise ValueError(f"target upper bound {hi} is below lower bound {lo}")
    aim = (lo + hi) // 2  # fill to the middle of the target, then stop
    sep = len(SEPARATOR) if lang == "ja" else 0
    min_piece = 12 if lang == "ja" else 4

    picked: list[tuple[_Msg, str]] = []
    covered: set[str] = set()
    total = 0
    for m in sorted(msgs, key=lambda m: (-m.score, m.idx)):
        if total >= aim:
            break
        if total >= lo and (m.greeting or m.short):
            break  # only used to reach the lower bound
        if total >= lo and m.terms and len(m.terms & covered) >= _ECHO_OVERLAP * len(m.terms):
            continue
        gap = sep if picked else 0
        if total + gap + m.units <= hi:
            picked.append((m, m.text))
            total += gap + m.units
            covered |= m.terms
            continue
        if total >= lo:
            continue
        prefix = _prefix_units(m.sender, lang)
        budget = hi - total - gap - prefix
        need = lo - total - gap - prefix
        want = min(budget, max(need, aim - total - gap - prefix, min_piece))
        if want < min_piece and want < need:
            continue
        text = _truncate(m.text, want, need, lang)
        if not text:
            continue
        picked.append((m, text))
        total += gap + prefix + summary_length(text, lang)
        covered |= m.terms
    picked.sort(key=lambda p: p[0].idx)
    return SEPARATOR.join(_render(m.sender, text) for m, text in picked)


# --------------------------------------------------------------------------- title


def _participants(lines: Sequence[Line]) -> list[str]:
    seen: dict[str, None] = {}
    for ln in lines:
        if ln.sender and ln.type != "system":
            seen.setdefault(ln.sender, None)
    return list(seen)


def _title_terms_en(lines: Sequence[Line], msgs: list[_Msg]) -> list[str]:
    speakers = {w.lower() for s in _participants(lines) for w in _EN_WORD.findall(s)}
    # key -> [score, first index, display]
    items: dict[str, list] = {}

    def add(key: str, display: str, weight: float, order: int) -> None:
        it = items.get(key)
        if it is None:
            items[key] = [weight, order, display]
        else:
            it[0] += weight

    mid_caps = set().union(*(m.names for m in msgs)) if msgs else set()

    def nickname(term: str) -> bool:  # "Mel" for the speaker Melanie
        return any(sp.startswith(term) for sp in speakers)

    def weak(word: str) -> bool:
        lw = word.lower()
        return lw in _EN_STOP or lw in _EN_TITLE_STOP or lw in _EN_CALENDAR or lw in speakers

    for m in msgs:
        seen_here: set[str] = set()
        text = m.text
        for hit in _EN_PHRASE.finditer(text):
            words = hit.group().split()
            before = text[: hit.start()].rstrip()
            if (not before or before[-1] in ".!?…") and words[0].lower() not in mid_caps:
                words.pop(0)  # "Return Nozomi 44": a capitalised sentence start is no name
            while words and weak(words[0]):
                words.pop(0)
            while words and (words[-1].lower() in _EN_STOP or words[-1].lower() in _EN_CALENDAR):
                words.pop()
            if len(words) < 2 or any(w.lower() in speakers for w in words):
                continue
            key = " ".join(words).lower()
            if key not in seen_here:
                seen_here.add(key)
                add(key, " ".join(words), 4.0, m.idx)
        for t in sorted(m.terms):
            if t in speakers or t in _EN_TITLE_STOP or t in _EN_CALENDAR:
                continue
            if t in m.names and nickname(t):
                continue
            if t in m.names:
                display = next((w for w in _EN_WORD.findall(m.text) if w.lower() == t), t)
                add(t, display, 3.0, m.idx)
            elif len(t) >= 4:
                add(t, t, 1.0 + (0.5 if m.kind else 0.0), m.idx)
    ranked = sorted(items.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))
    # A name that is part of a multi-word entity is shown as the entity: "Zepp" -> "Zepp Haneda".
    phrase_of: dict[str, str] = {}
    for key, _ in ranked:
        if " " in key:
            for w in key.split():
                phrase_of.setdefault(w, key)
    out: list[str] = []
    used: list[str] = []
    for key, (score, _, display) in ranked:
        if score < 2.0 and out:
            break  # a term said once is not a topic
        if " " not in key and key in phrase_of:
            key = phrase_of[key]
            display = items[key][2]
        if any(key in u or u in key for u in used):
            continue
        out.append(display)
        used.append(key)
        if len(out) >= 6:
            break
    return out


def _title_terms_ja(lines: Sequence[Line], msgs: list[_Msg]) -> list[str]:
    speakers = set(_participants(lines))
    speakers |= {s.lower() for s in speakers}
    items: dict[str, list] = {}
    for m in msgs:
        for t in sorted(m.terms):
            if t in speakers or len(t) < 2 or t.isascii() and t not in m.names:
                continue
            if t in m.names:
                w = 2.0
            elif "\u30a1" <= t[0] <= "\u30fc":
                w = 1.0 if len(t) > 2 else 0.5  # 2-kana runs are often fragments (段ボール)
            else:
                w = 1.0
            if m.kind:
                w += 0.5
            it = items.get(t)
            if it is None:
                items[t] = [w, m.idx]
            else:
                it[0] += w
    ranked = sorted(items.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))
    out: list[str] = []
    for t, (score, _) in ranked:
        if any(t in o or o in t for o in out):
            continue
        if score < 2.0 and out:
            break
        out.append(t)
        if len(out) >= 6:
            break
    return out


def _date_label(lines: Sequence[Line], lang: str) -> str:
    ts = min(ln.local_ts for ln in lines)
    return f"{ts.month}月{ts.day}日" if lang == "ja" else ts.strftime("%Y-%m-%d")


def session_title(lines: list[Line], lang: str | None = None) -> str:
    """A short deterministic title from the session's most salient terms and named entities.

    English: 3–6 words, ``"Head: term, term"`` with the top entity first (e.g.
    ``"Kyoto: ryokan, Fushimi Inari, shinkansen"``); Japanese: about 8–20 characters,
    ``"京都：旅館・新幹線"``. Speakers' own names are left out (every message has them).
    Never empty: without salient terms it falls back to participants and date.
    """
    msgs, lang = _analyze(lines, lang)
    if not lines:
        return "空のトーク" if lang == "ja" else "Empty chat, no messages"
    people = _participants(lines)
    date = _date_label(lines, lang)
    if lang == "ja":
        return _assemble_title_ja(_title_terms_ja(lines, msgs), people, date)
    return _assemble_title_en(_title_terms_en(lines, msgs), people, date)


def _assemble_title_en(terms: list[str], people: list[str], date: str) -> str:
    chosen: list[str] = []
    nwords = 0
    for t in terms:
        n = len(t.split())
        if nwords + n > 6:
            continue
        chosen.append(t)
        nwords += n
        if len(chosen) >= 4 or nwords >= 5:
            break
    if chosen:
        head = chosen[0][0].upper() + chosen[0][1:]
        title = head + (": " + ", ".join(chosen[1:]) if len(chosen) > 1 else "")
        if nwords < 3 and people:
            title = f"{title} with {people[0]}"
        if len(title.split()) < 3:
            title = f"{title}, {date}"
        return " ".join(title.split()[:6])
    who = ", ".join(people[:3]) or "unknown"
    title = f"Chat with {who}, {date}"
    words = title.split()
    return " ".join(words[:6]) if len(words) > 6 else title


def _assemble_title_ja(terms: list[str], people: list[str], date: str) -> str:
    chosen: list[str] = []
    length = 0
    for t in terms:
        add = len(t) + (1 if chosen else 0)
        if length + add > 20:
            continue
        chosen.append(t)
        length += add
        if len(chosen) >= 4:
            break
    who = "・".join(people[:2]) or "不明"
    if chosen:
        title = chosen[0] + ("：" + "・".join(chosen[1:]) if len(chosen) > 1 else "")
        for extra in (f"（{who}）", f"（{date}）", f"（{who}、{date}）"):
            if len(title) >= 8:
                break
            if len(title) + len(extra) <= 20:
                title += extra
        return title[:20]
    title = f"{who}とのトーク（{date}）"
    return title if len(title) <= 20 else f"{who[:6]}とのトーク（{date}）"


# --------------------------------------------------------------------------- bullets


def session_bullets(lines: list[Line], lang: str | None = None, max_bullets: int = 5) -> list[str]:
    """Bullets of a session's decisions, commitments and context, extracted verbatim.

    Messages with plan/decision markers (EN "let's", "booked", "deal"…; JA しよう, 決まった,
    予約…) become ``"Decision: <speaker>: <message>"``, first-person promises (EN "I'll",
    "I promise"…; JA 〜とく, 〜ておく, 送るね, 約束…) ``"Commitment: …"``; they are picked
    first, best-scored first. Remaining slots go to the most salient other messages
    (``"Context: …"``). Japanese uses 決定: / 約束: / 背景:. Near-duplicate messages are
    skipped, messages are trimmed to ~140 characters, and bullets are listed decisions,
    commitments, then context, each group in time order. Deterministic.
    """
    if max_bullets <= 0:
        return []
    msgs, lang = _analyze(lines, lang)
    labels = BULLET_LABELS[lang]
    ranked = sorted(msgs, key=lambda m: (-m.score, m.idx))
    chosen: list[tuple[str, _Msg]] = []
    covered: set[str] = set()

    def take(m: _Msg, kind: str) -> None:
        nonlocal covered
        chosen.append((kind, m))
        covered |= m.terms

    def fresh(m: _Msg) -> bool:
        return not m.terms or len(m.terms & covered) < _ECHO_OVERLAP * len(m.terms)

    for m in ranked:
        if len(chosen) >= max_bullets:
            break
        if m.kind and not m.greeting and fresh(m) and (m.terms or m.nwhen):
            take(m, m.kind)
    for m in ranked:
        if len(chosen) >= max_bullets:
            break
        if m.kind or m.greeting or m.short or not m.terms or not fresh(m):
            continue
        if m.names or m.nwhen or m.money or m.number or len(m.terms) >= 3:
            take(m, "context")
    order = {"decision": 0, "commitment": 1, "context": 2}
    chosen.sort(key=lambda km: (order[km[0]], km[1].idx))
    return [
        f"{labels[kind]} {_render(m.sender, trim_text(m.text, BULLET_MAX_CHARS))}"
        for kind, m in chosen
    ]
