"""Japanese memory rules: the patterns per kind and the checks that keep them precise.

Each rule is a pattern and a builder (``_JA_RULES``); reported speech, hypotheticals,
questions and reactions (住んでるんですね) are skipped, and a plan needs a date that is not
in the past of the stating message.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from memory_pipeline.core.memories.extract_dates import _FUTURE, _PAST, _find_date
from memory_pipeline.core.memories.extract_en import _EN_PLAN_NOT
from memory_pipeline.core.memories.extract_types import _Hit

# ----------------------------------------------------------------------------- Japanese rules

_JA_TRIGGER = re.compile(
    r"住ん|引っ越|引越|働い|勤め|転勤|就職|入社|転職|退職|好き|嫌い|苦手|ハマ|はま|飼|持って|予定"
    r"|つもり|結婚|合格|買|彼氏|彼女|夫|妻|旦那|嫁|上司|後輩|先輩|子供|子ども|娘|息子|生まれ|卒業"
    r"|独身|既婚|明日|明後日|あした|来週|週末|曜|日|月|[おこそとのほもよろごぞどぼぽ]う"
    r"|出身|趣味|好物|ことが多|てみたい"
)
_JA_QUESTION = re.compile(
    r"[?？]|(?:か|かな|かね|かしら|っけ|の|ん)[。！!〜ー…w笑]*$|(?:です|ます|でしょう|ません|ました"
    r"|んです|のです)か"
)
_JA_REACTION = re.compile(
    r"(?:んです|のです|んだ|のだ|なんです|なのです|んですって|てるん|でるん|ているん|でいるん)"
    r"(?:ね|か)|ですって|(?:いらっしゃ|されて|なさって|おられ)|ということ|ってこと"
)
_JA_REPORTED = re.compile(
    r"って(?:言|い)っ|と(?:言|い)っ|らしい|そうです|(?<![てで])みたいです|だって|とのこと"
    # hearsay: 「…って聞いたことがあります」 is what the speaker heard, not about them
    r"|って聞|と聞い|と聞き|とか聞"
    # 「お休みの日は割と家事してくれますね」: the other person does it (for the speaker)
    r"|てくれ(?:ます|る|まし|てい|てる)"
)
_JA_HYPO = re.compile(
    r"もし|たら|れば|と思えば|なら(?!ず)|たい(?:です|な|けど|と)|ほしい|欲しい|夢"
)
_OTHER_SUBJ = re.compile(
    r"(?:あなた|そちら|お宅|貴方|君|<[A-Z]{2}>|[\w・]{1,8}さん|夫|妻|主人|旦那|嫁|彼氏|彼女|彼|姉|兄|弟|妹"
    r"|父|母|親|両親|息子|娘|子供|子ども|子|友達|友人|友だち|同僚|上司|祖母|祖父|おばあちゃん"
    r"|おじいちゃん|家族|夫婦|みんな|皆|周り|先輩|後輩|奥さん|義母|義父|孫)(?:さん|ちゃん|くん)?"
    r"(?:は|も|が|の(?!で|に))"
)
_FIRST_PERSON = re.compile(r"(?:私|わたし|僕|ぼく|俺|おれ|自分|うち|あたし|わたくし)(?:は|も|が)")
_NOUN = r"[一-龥々〆ヵヶァ-ヴーA-Za-z0-9・＆&]"
# A noun run; kanji okurigana (唐揚げ, 焼き鳥) may continue it, other hiragana ends it.
_NOUN_WORD = rf"{_NOUN}+(?:(?<=[一-龥])[げきみしりけ]{_NOUN}*)?"
_NOUN_CHUNK = rf"(?:{_NOUN_WORD}の)?{_NOUN_WORD}"
# Predicate tails after the verb stem: present/continuing statements only, optional softeners.
_TAIL = (
    r"(?:ん?です|んだ|の|ので|から|けど|けれど|が|し|よ|ね|な|わ|さ|ー|〜|笑|w|ｗ|。|！|!|、|,|\s|…"
    r"|\.|よね|ですよ|ますよ|ますね|んですよ|んですけど|んですが)*$"
)
_IRU = r"(?:い(?:ます|る)|ます|る|おります)"
_JA_LIVE = re.compile(rf"(?P<place>{_NOUN_CHUNK})に住ん(?:で{_IRU}|でる|でます){_TAIL}")
_JA_MOVE = re.compile(
    rf"(?:(?P<from>{_NOUN}+)から)?(?P<place>{_NOUN}+)(?:に|へ)引っ?越(?:す|します|した|しました"
    rf"|してきた|してきました|すこと|すことになった|すことになりました|し(?:の)?予定|すつもり)(?!たい){_TAIL}"
)
_JA_WORK = re.compile(
    rf"(?P<org>{_NOUN_CHUNK})で(?:働いて|勤めて|勤務して|パートして|バイトして){_IRU}{_TAIL}"
)
_JOB_SUFFIX = (
    r"(?:員|師|士|医|者|マン|職|業|生|アルバイト|パート|エンジニア|デザイナー|ナース|講師|教員|主婦|主夫"
    r"|プログラマー|ライター|トレーナー)"
)
_JA_JOB = re.compile(
    rf"(?:仕事は|職業は|(?:私|僕|俺|自分|わたし)は)(?P<job>{_NOUN}*{_JOB_SUFFIX})"
    r"(?:です|だ|をしています|をしてます|やってます|をやっています)"
)
_JA_TRANSFER = re.compile(
    rf"(?:(?P<name>{_NOUN}{{1,6}}?)(?P<hon>さん|くん|君|ちゃん|先輩|先生)?(?:が|は|も))?"
    rf"(?:(?P<when>\d{{1,2}}月)から)?(?P<place>{_NOUN}+)(?:に|へ)転勤"
)
_JA_NEWJOB = re.compile(
    rf"(?P<org>{_NOUN_CHUNK})(?:に|へ)(?P<what>就職|入社|転職)(?:しました|した|します|する|が決まり"
    r"ました|が決まった|決まった|決まりました|することになりました|することになった)"
)
_JA_PREF = re.compile(
    rf"(?P<obj>{_NOUN_CHUNK})(?:が|も|は)?(?:大|一番|特に|すごく|とても|結構|少々|少し|ちょっと|かなり|本当に|めっちゃ|超)?(?P<p>好き|大好き|嫌い"
    r"|大嫌い|苦手|大好物|好物)(?:です|だ|なんです|なんだ|なの|で(?![しは])|。|！|!|$|、|よ|ね|w|笑|ー)"
)
_JA_FROM = re.compile(
    rf"(?P<place>{_NOUN_CHUNK})(?:の)?出身(?:です|だ|で|なんです|なので|。|！|!|$)"
    rf"|生まれ(?:は|も)(?P<born>{_NOUN_CHUNK})(?:で|です|だ|、|。|$)"
    rf"|(?P<at>{_NOUN_CHUNK})(?:で|に)生まれ(?:ました|た|て|育ち|育った)"
)
_JA_PREF_ACT = re.compile(
    r"(?P<act>[一-龥ぁ-んァ-ヴー々]{1,24}?[うくぐすつぬぶむるた](?:こと|の))(?:が|も|は)"
    r"(?:大|一番|特に|すごく|とても|本当に)?(?P<p>好き|大好き|嫌い|苦手|趣味)"
)
_JA_HOBBY = re.compile(
    r"趣味は(?P<obj>[^、。！？!?\s]{2,20}?)(?:です|だ|で|かな|とか|、|。|！|!|$)"
)
_JA_HOOKED = re.compile(
    rf"(?P<obj>{_NOUN_CHUNK})(?:に|へ)(?:ハマ|はま)って(?:い)?(?:ます|る|ますね|て|て、){_TAIL}"
)
_JA_PET = re.compile(
    rf"(?P<obj>{_NOUN_WORD})(?:を|も)?(?:[\d一二三四五六七八九十]+(?:匹|羽|頭))?飼って(?:い)?(?:ます|る)"
    rf"{_TAIL}"
)
_JA_OWN = re.compile(
    r"(?P<obj>車|バイク|自転車|一軒家|持ち家|マンション|ピアノ|別荘|家)を?持って(?:い)?(?:ます|る)"
    + _TAIL
)
_JA_HAVE_REL = re.compile(
    r"(?P<rel>彼氏|彼女|夫|妻|旦那|嫁|子供|子ども|娘|息子|姉|兄|弟|妹|孫)(?:さん)?が"
    r"(?P<num>\d+人|一人|二人|三人|四人|ひとり|ふたり)?(?:い(?:ます|る)|おります)" + _TAIL
)
_JA_STATUS = re.compile(
    r"(?P<st>結婚して(?:い)?(?:ます|る)|既婚(?:です|者です)|独身(?:です|だ))" + _TAIL
)
_JA_EVENT = re.compile(
    rf"(?:(?P<obj>{_NOUN_CHUNK})(?:に|を|が))?(?P<ev>合格|結婚|卒業|就職|退職|出産|入籍|婚約|購入)"
    r"(?:しました|した|できました|できた)(?!ら|い|ら)" + _TAIL
)
_JA_BOUGHT = re.compile(
    rf"(?P<obj>{_NOUN_CHUNK})を(?:買い?ました|買った|購入しました|購入した)(?:んです)?(?:よ|！|!|。|$)"
)
_JA_NAMED_EVENT = re.compile(
    rf"(?P<name>{_NOUN}{{1,6}}?)(?P<hon>さん|くん|君|ちゃん|先輩|先生)(?:の|が|は)(?P<ev>結婚|婚約|出産|転勤)"
)
_JA_BIRTHDAY = re.compile(
    rf"(?:(?P<name>{_NOUN}{{1,6}}?)(?P<hon>さん|くん|君|ちゃん|先輩|先生)?|(?P<me>私|僕|俺|自分))の誕生日"
    r"(?:は|も|が)?(?:(?P<m>\d{1,2})月)?(?P<d>\d{1,2})日"
)
_JA_PLAN_MARK = re.compile(
    r"予定|つもり|(?:[一-龥][ぁ-ん]?[こごとよろもぼ]|しよ|やろ|[渡話返探貸試回残干]そ|ましょ)う"
    r"(?:か(?![?？])|よ|ね|！|!|。|〜|ー|w|笑|$)"
    r"|ましょう|(?:行く|いく|来る|くる|帰る|会う|渡す|送る|買う|書く|手伝う|参加する|する|やる|出かける"
    r"|持って行く|持っていく|遊ぶ|泊まる|観る|見る|食べる|飲む|行ける)(?:ね|よ|わ|から)?[！!。〜ー笑w]*$"
    r"|(?:行きます|来ます|帰ります|会います|渡します|送ります|買います|書きます|します|やります"
    r"|出かけます|遊びます|泊まります)(?:ね|よ)?[！!。〜ー笑w]*$"
    r"|(?:てくる|てきます|ておく|ておきます|とく|ときます|てくるね|ておくね|とくね)"
)
_JA_PLAN_NOT = re.compile(
    r"(?:予定|つもり)(?:でした|だった)|ない|ません|なかった|なし|無し|毎日|毎週|毎月|毎年|いつも|よく|ありがとう|おめでとう|おはよう"
    r"|思う|だろう|よろしく|宜しく|お願い|失礼|おやすみ|こんにちは|はじめまして|初めまして"
)
_KIN = frozenset("夫 妻 主人 旦那 嫁 彼氏 彼女 姉 兄 弟 妹 父 母 息子 娘 子供 子ども 孫".split())
_NOT_JA_NAMES = frozenset(
    "私 僕 俺 自分 うち 会社 職場 仕事 家族 友達 友人 みんな 皆 誰 "
    "今 今日 来月 先月 今年 来年 去年 "
    "彼 彼女 父 母 夫 妻 人 方 上司 同僚 子供 子ども".split()
)


_NOT_A_NAME = re.compile(r"(?:女優|俳優|芸能人|歌手|選手|有名人|人|者|家|員|会社|店|先|方)$")


def _ja_first_person_ok(s: str, start: int) -> bool:
    """No other person is the explicit subject before the predicate at ``start``."""
    return not _OTHER_SUBJ.search(s, 0, start)


_JA_TIME_PREFIX = re.compile(
    r"^(?:この前|少し前|先日|最近|昨日|今日|こないだ|前|今|昔|先週|先月|去年)(?:に|は)?"
)
_JA_VAGUE = frozenset(
    "所 場所 地域 県内 市内 近く 近所 辺 辺り 方 隣 同じ 一番 大 結構 特に 本当 "
    "全部 全員 超 割と 最近 昔 今 実は 元々 普通 物 もの 事 こと 何 どれ どこ それ これ "
    "あれ 色々 いろいろ みんな 皆 子 人 大変 苦手 好き 嫌い 一緒 一人 自分 私 僕 俺 彼 "
    "彼女 前 次 他 あと 後 中 外 時 日 結局 必死 少々 少し かなり 本当に めっちゃ".split()
)
_JA_SINGLE_OK = frozenset(
    "犬 猫 亀 魚 鳥 蛇 酒 海 山 肉 夏 冬 春 秋 雨 雪 本 花 車 虫 米 茶 麺 服 靴 家".split()
)
_JA_BAD_PART = re.compile(r"苦手|好き|嫌い|大変|必死|一生懸命|元気|笑顔|全力|仕事")


def _ja_specific(value: str) -> bool:
    """A value worth remembering: not vague (所, 物), not a truncated word, not a kin word."""
    if not value or value in _JA_VAGUE or value in _KIN or _JA_BAD_PART.search(value):
        return False
    return len(value) > 1 or value in _JA_SINGLE_OK


_JA_PRONOUN_PREFIX = re.compile(r"^(?:私|僕|俺|自分)(?:は|も)?")
_JA_OBJ_TAIL = re.compile(r"(?:の方|大|私|僕|俺|自分|一番|特に)+$")


def _ja_obj(obj: str) -> str:
    obj = _JA_TIME_PREFIX.sub("", _JA_OBJ_TAIL.sub("", obj))
    obj = _JA_PRONOUN_PREFIX.sub("", obj)
    return obj.strip("・ ").lstrip("ー")


def _ja_rules(s: str) -> _Hit | None:
    """The first Japanese rule matching normalized sentence ``s`` (a statement)."""
    b = _JA_BIRTHDAY.search(s) if "誕生日" in s else None
    if b is not None and (b["me"] or b["name"] not in _NOT_JA_NAMES):
        day = f"{b['m']}月{b['d']}日" if b["m"] else f"{b['d']}日"
        subject = None if b["me"] else b["name"] + (b["hon"] or "")
        # 「美咲の誕生日も17日だから、…渡そう」 is a fact about 美咲, written as one.
        text = f"{subject}の誕生日は{day}" if subject else ""
        return _Hit("fact", "birthday", day, 0.75, subject=subject, text=text)
    m = None
    if any(k in s for k in _NAMED_KEYS):
        m = _JA_NAMED_EVENT.search(s) or _JA_TRANSFER.search(s)
    if (
        m is not None
        and m.groupdict().get("name")
        and m["name"] not in _NOT_JA_NAMES
        and not _NOT_A_NAME.search(m["name"])
    ):
        name = m["name"] + (m["hon"] or "")
        # The message is about another person (「美咲が4月から大阪に転勤なの寂しい」): the
        # memory says what happens to them, not how the speaker feels about it.
        if m.re is _JA_TRANSFER:
            when = f"{m['when']}から" if m["when"] else ""
            text = f"{name}は{when}{m['place']}に転勤する"
            return _Hit("event", "work_location", m["place"], 0.8, _FUTURE, subject=name, text=text)
        if not _JA_REPORTED.search(s) or m["ev"] == "結婚":
            attr = "relationship_status" if m["ev"] in ("結婚", "婚約") else ""
            done = re.search(rf"{m['ev']}(?:した|しました|して(?:い|た|ま)|済み)", s)
            text = f"{name}が{m['ev']}{'した' if done else 'する'}"
            return _Hit("event", attr, m["ev"], 0.7, _PAST, subject=name, text=text)
    reported = _JA_REPORTED.search(s) is not None
    hypo = _JA_HYPO.search(s) is not None
    if reported or hypo:
        return None
    for rx, build in _JA_RULES:
        if not any(k in s for k in _JA_RULE_KEYS[rx]):
            continue
        m = rx.search(s)
        if m is None or not _ja_first_person_ok(s, m.start()):
            continue
        hit = build(m)
        if hit is not None:
            return hit
    if _JA_PLAN_MARK.search(s) and not _JA_PLAN_NOT.search(s):
        return _Hit("plan", "", "", 0.65, _FUTURE, require_date=True)
    return None


def _ja_pref(m: re.Match[str]) -> _Hit | None:
    obj = _ja_obj(m["obj"])
    if not _ja_specific(obj) or obj in _NOT_JA_NAMES:
        return None
    return _Hit("preference", "", f"{obj}が{m['p']}", 0.75)


def _ja_from(m: re.Match[str]) -> _Hit | None:
    place = _ja_obj(m["place"] or m["born"] or m["at"] or "")
    if not _ja_specific(place) or place in _NOT_JA_NAMES:
        return None
    return _Hit("fact", "hometown", place, 0.8)


def _ja_pref_act(m: re.Match[str]) -> _Hit | None:
    act = _ja_obj(m["act"])
    if len(act) < 4 or _JA_BAD_PART.search(act):
        return None  # 「見るのが好き」 says what; 「るのが好き」 is a cut word
    return _Hit("preference", "", f"{act}が{m['p']}", 0.75)


def _ja_event(m: re.Match[str]) -> _Hit | None:
    ev, obj = m["ev"], _ja_obj(m["obj"] or "")
    if not _ja_specific(obj):
        if ev in ("合格", "購入", "卒業"):
            return None
        obj = ""
    attr = "relationship_status" if ev in ("結婚", "婚約", "入籍") else ""
    value = f"{obj}{'に' if ev == '合格' else 'を' if ev == '購入' else ''}{ev}" if obj else ev
    return _Hit("event", attr, value, 0.75, _PAST)


def _ja_move(m: re.Match[str]) -> _Hit | None:
    if not _ja_specific(m["place"]):
        return None
    return _Hit("event", "residence", m["place"], 0.8, _PAST)


def _ja_transfer_self(m: re.Match[str]) -> _Hit | None:
    name = m["name"]
    if name and name not in ("私", "僕", "俺", "自分", "わたし"):
        return None
    return _Hit("event", "work_location", m["place"], 0.8, _FUTURE)


_JA_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], _Hit | None]]] = [
    (
        _JA_LIVE,
        lambda m: _Hit("fact", "residence", m["place"], 0.8) if _ja_specific(m["place"]) else None,
    ),
    (_JA_MOVE, _ja_move),
    (_JA_TRANSFER, _ja_transfer_self),
    (_JA_NEWJOB, lambda m: _Hit("event", "employer", m["org"], 0.8, _PAST)),
    (
        _JA_WORK,
        lambda m: _Hit("fact", "employer", m["org"], 0.75) if _ja_specific(m["org"]) else None,
    ),
    (_JA_JOB, lambda m: _Hit("fact", "job_title", m["job"], 0.75)),
    (
        _JA_STATUS,
        lambda m: _Hit("fact", "relationship_status", "独身" if "独身" in m["st"] else "既婚", 0.8),
    ),
    (_JA_EVENT, _ja_event),
    (
        _JA_HAVE_REL,
        lambda m: _Hit(
            "relationship",
            "partner" if m["rel"] in ("彼氏", "彼女", "夫", "妻", "旦那", "嫁") else "",
            m["rel"] + (m["num"] or ""),
            0.75,
        ),
    ),
    (
        _JA_PET,
        lambda m: (
            _Hit("possession", "", f"{m['obj']}を飼っている", 0.75)
            if _ja_specific(m["obj"]) and len(m["obj"]) <= 12
            else None
        ),
    ),
    (_JA_OWN, lambda m: _Hit("possession", "", f"{m['obj']}を持っている", 0.75)),
    (
        _JA_BOUGHT,
        lambda m: (
            _Hit("event", "", f"{_ja_obj(m['obj'])}を買った", 0.7, _PAST)
            if _ja_specific(_ja_obj(m["obj"]))
            else None
        ),
    ),
    (
        _JA_HOOKED,
        lambda m: (
            _Hit("preference", "", f"{_ja_obj(m['obj'])}にハマっている", 0.75)
            if _ja_specific(_ja_obj(m["obj"]))
            else None
        ),
    ),
    (_JA_PREF_ACT, _ja_pref_act),
    (_JA_PREF, _ja_pref),
    (
        _JA_HOBBY,
        lambda m: (
            _Hit("preference", "hobby", m["obj"], 0.75)
            if _ja_specific(m["obj"]) or len(m["obj"]) > 2
            else None
        ),
    ),
    (_JA_FROM, _ja_from),
]
# Substrings a sentence must contain for a rule to be tried: most sentences skip every regex.
_NAMED_KEYS = ("結婚", "婚約", "出産", "転勤")
_JA_RULE_KEYS: dict[re.Pattern[str], tuple[str, ...]] = {
    _JA_LIVE: ("住ん",),
    _JA_MOVE: ("越",),
    _JA_TRANSFER: ("転勤",),
    _JA_NEWJOB: ("就職", "入社", "転職"),
    _JA_WORK: ("働いて", "勤めて", "勤務して", "パートして", "バイトして"),
    _JA_JOB: ("仕事は", "職業は", "は"),
    _JA_STATUS: ("結婚して", "既婚", "独身"),
    _JA_EVENT: ("合格", "結婚", "卒業", "就職", "退職", "出産", "入籍", "婚約", "購入"),
    _JA_HAVE_REL: ("がい", "がお", "人い", "人お", "りい"),
    _JA_PET: ("飼って",),
    _JA_OWN: ("持って",),
    _JA_BOUGHT: ("買", "購入"),
    _JA_HOOKED: ("ハマって", "はまって"),
    _JA_PREF: ("好き", "嫌い", "苦手", "好物"),
    _JA_PREF_ACT: ("ことが", "のが", "ことも", "のも", "ことは", "のは"),
    _JA_HOBBY: ("趣味は",),
    _JA_FROM: ("出身", "生まれ"),
}

# Session-level: "XからYだっけ？" asked about someone who announced a move, answered "そう".
_JA_MOVE_ANNOUNCE = re.compile(r"引っ?越")
_JA_FROM_TO = re.compile(
    rf"(?P<from>{_NOUN}+)から(?P<to>{_NOUN}+)(?:に|へ)?(?:引っ?越|だっけ|でしょ|だよね)"
)
_AFFIRM = re.compile(
    r"^(?:そう|うん|はい|ええ|そうそう|そうだよ|そうです|yes|yeah|yep|right)", re.I
)


def _dated_plan(hit: _Hit, s: str, date_rx: re.Pattern[str], today: dt.date, lang: str) -> bool:
    """A plan rule's hit holds: the sentence dates it, in the future, and is not negated."""
    has_date, when = _find_date(date_rx, s, today, hit.date_direction or 1)
    if not has_date or (lang == "en" and _EN_PLAN_NOT.search(s)):
        return False
    if hit.future_only and (when is None or when <= today):
        return False
    return when is None or when >= today  # a past date in a plan sentence dates something else
