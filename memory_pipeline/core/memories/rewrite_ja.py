"""Japanese chat sentences rewritten as statements about their speaker (the counterpart of
``rewrite.py``'s English rules): 「私は犬を飼ってる」 becomes 「〇〇は犬を飼っている」, the
chat's lead-ins, end particles and marks are dropped, a volitional becomes a plan, and
:func:`ja_statement_kind` says what kind of memory a sentence is (or None for a remark, a
courtesy or a fragment). Purely lexical, like the English rules.
"""

from __future__ import annotations

import re

__all__ = [
    "ja_is_remark",
    "ja_statement_kind",
    "ja_statement_text",
    "ja_strip_lead",
    "ja_third_person",
]

_JA_FIRST = re.compile(
    r"(?:私|わたし|僕|ぼく|俺|おれ|自分|あたし|わたくし)(?:自身)?(?=は|も|が|の|を|に|と|って)"
)


_JA_LEAD = re.compile(
    r"^(?:(?:はい|いえ|いや|ええ|うん|そうですね|そうなんです(?:よ|ね)?|そうですよね|そうなのですが|"
    r"そうなんですが|なので|だから|もちろん|実は|確かに|ちなみに|でも|あと(?:は)?|まあ|えっと|"
    r"(?:良|い|よ)いですね[ーえ〜]*|わかります|分かります)[、,!！。ー〜]*\s*)+"
)
# 私、今日… / 私昔は…: a pronoun with no particle (自分 is left out: 自分用, 自分磨き).
_JA_BARE_FIRST = re.compile(
    r"^(?:私|わたし|僕|ぼく|俺|おれ|あたし)(?:自身)?(?:[、,]\s*|(?=[一-龥ァ-ヴ])(?!自身))"
)
_JA_MID_FIRST = re.compile(r"(?<=[、,])\s*(?:私|わたし|僕|ぼく|俺|あたし)[、,]")


def ja_strip_lead(sentence: str) -> str:
    """The sentence without its leading acknowledgements (はい、そうですね、なので、)."""
    return _JA_LEAD.sub("", sentence).strip() or sentence


_JA_YOU = re.compile(r"あなた|貴方|そちら")


def ja_third_person(sentence: str, name: str, other: str | None = None) -> str:
    """``sentence`` with the first-person pronoun replaced by ``name`` (あなた by ``other``
    when known) and the casual continuous forms (てる, でる, てます) written out (ている,
    でいる, ています)."""
    s = _JA_BARE_FIRST.sub(f"{name}は、", ja_strip_lead(sentence))
    s = _JA_MID_FIRST.sub(f"{name}は、", s)
    s = _JA_FIRST.sub(name, s)
    if other:
        s = _JA_YOU.sub(other, s)
    # Only after a kana: 育てる / 捨てる keep their own て.
    s = re.sub(
        r"(?<=[ぁ-ん])([てで])(る|ます)(?=$|[。！!、,よねしけかなのんw笑〜ー]|です|から|けど)",
        r"\1い\2",
        s,
    )
    if name not in s:
        s = f"{name}は、{s}"
    return s


# A chat sentence opens with acknowledgements and fillers (了解！, じゃあそれで, えー) and may
# call the other person by name (「Yuki、実家から…」); none of it is part of the statement.
_JA_CHAT_LEAD = re.compile(
    r"^(?:(?:了解|りょうかい|OK|オッケー|おけ|じゃあ|じゃ|それじゃ|では|よし|やった|わーい|えー+|"
    r"あー+|うーん|へー+|ねえ|ねぇ|おお+|お|あ|わあ|わー|ほんと|本当|マジ|まじ|うわ|いいね|"
    r"いいよ|もちろん|ありがとう)[、,!！。ー〜]+\s*)+"
)
# 「…送るね」「…行くよ」「…だよね」: the particle speaks to the other person, the statement
# ends before it. 「な」 only after a predicate (「好きだな」), never a noun's な.
_JA_END_PARTICLE = re.compile(
    r"(?:(?:よね|よな|ね|よ|わ|ぞ|ぜ|ねー|よー)|(?<=[るただい])な)[ー〜!！w笑…]*(?=[。]?$)"
)
_JA_END_MARKS = re.compile(r"[ー〜!！w笑♪…]+(?=[。]?$)")
# Volitional endings (書こう, 渡そう, 食べよう, しましょう) as the plain form: the statement
# says what the speaker means to do. Only the kana rows a volitional can end in; 「そう」 only
# after a stem that takes it (渡そう, not 楽しそう).
_JA_VOLITIONAL = re.compile(
    r"(?:(?P<stem>[一-龥ぁ-ん])(?P<o>[こごとのぼもろお])う|(?P<so>[渡話返探貸試回残干出])そう"
    r"|(?P<shi>し)よう|(?P<ichi>[一-龥べめせてねれけえげぜでへみきりちにびい])よう"
    r"|(?P<mashou>ましょう))(?P<let>[よか]|ね)?$"
)
_O_TO_U = dict(zip("こごとのぼもろお", "くぐつぬぶむるう", strict=True))


def _ja_plain_volitional(sentence: str) -> tuple[str, bool]:
    """(sentence with a final volitional made plain, whether it was one: 書こう -> 書く)."""
    m = _JA_VOLITIONAL.search(sentence)
    if m is None or re.search(r"(?:だろ|でしょ|ありがと|おめでと|おはよ)う[よかね]?$", sentence):
        return sentence, False
    head = sentence[: m.start()]
    if m["o"]:
        plain = m["stem"] + _O_TO_U[m["o"]]
    elif m["so"]:
        plain = m["so"] + "す"
    elif m["shi"]:
        plain = "する"
    elif m["ichi"]:
        plain = m["ichi"] + "る"
    else:
        plain = "ます"
    return head + plain, True


_JA_REMARK = re.compile(r"(?:た|だ|い|かった)(?:よ)?ね[ー〜!！。w笑…]*$")


def ja_is_remark(sentence: str) -> bool:
    """「びっくりしたね」「楽しかったね」「寂しいね」: a remark that seeks the other person's
    agreement about what both know, not a statement about the speaker (「送るね」, a promise,
    is one)."""
    return _JA_REMARK.search(sentence.strip()) is not None


def ja_statement_text(sentence: str, name: str, other: str | None = None) -> str:
    """A Japanese chat sentence (or a few) as a statement about its speaker ``name``.

    Leading acknowledgements and a vocative go, each sentence loses the particle that speaks
    to the other person (ね, よ) and a final volitional becomes the plain form (「書こうよ」
    -> 「書く」); a suggestion to do something together (「渡そうよ」, 「行きましょう」) is
    about both people when ``other`` is known. The first person becomes ``name`` (see
    ``ja_third_person``).
    """
    s = _JA_CHAT_LEAD.sub("", sentence.strip()).strip() or sentence.strip()
    if other:
        s = re.sub(rf"^{re.escape(other)}(?:さん|ちゃん|くん)?[、,]\s*", "", s)
    s = re.sub(r"^(?:[^、,。\s]{1,8}(?:さん|ちゃん|くん)|[A-Za-z]{2,12})[、,]\s*", "", s)
    parts = [p for p in re.split(r"(?<=[。！!？?])", s) if p.strip()]
    out: list[str] = []
    together = False
    for p in parts:
        stop = "。" if p.rstrip()[-1:] in "。！!" else ""
        body = _JA_END_MARKS.sub("", p.strip().rstrip("。")).strip()
        body = _JA_END_PARTICLE.sub("", body).strip() or body
        body, vol = _ja_plain_volitional(body)
        if vol and (re.search(r"[よか]$|ましょう", p.strip(" 。！!ー〜")) or "一緒に" in body):
            together = True
        out.append(body + stop)
    text = "".join(out)
    if not sentence.rstrip().endswith("。"):
        text = text.rstrip("。")
    who = f"{name}と{other}" if together and other else name
    written = ja_third_person(text, name, other)
    if who != name and written.startswith(f"{name}は、"):
        written = f"{who}は、" + written[len(name) + 2 :]
    return written


_JA_OTHER_LEAD = re.compile(
    r"^(?:あなた|そちら|<[A-Z]{2}>|[\w・]{1,8}さん)(?:は|も|が|の)|(?:ですか|ますか|でしょうか)"
)
_JA_STATEMENT_END = re.compile(
    r"(?:ます|ました|ています|ていました|てます|てる|ている|です|でした|だった|んです|んですよ|"
    r"んですけど|てい(?:る|ます)ね|ますね|ますよ|ました[ね よ]?|た(?:んです)?よ?|好き|大好き)"
    r"[。！!〜ー笑w…]*$"
)
_JA_COURTESY = re.compile(
    r"ありがとう|有難う|有り難う|おはよう|おめでとう|よろしく|宜しく|お願い|すみません|すいません|こんにちは|こんばんは|はじめまして"
    r"|初めまして"
    r"|失礼|おやすみ|そうなんですね|そうですね|いいですね|素敵|すごい|凄い|なるほど|分かります|わかります"
    r"|確かに|楽しかった|お疲れ|ですよね|ですね[。！!]*$|思います|でしょう"
    # 「最善を尽くしましょう」: a suggestion to the other; 「お墓の話になってしまいましたね」,
    # 「楽しく夕方の話をしてましたね」: about this conversation, not the speaker's life
    # 「午後から暑くなりましたね」: the weather, not the speaker
    r"|(?:暑|寒|涼し|暖か|あたたか)く(?:なり|なっ)|"
    r"ましょう(?:[、,。！!〜ー]|$)|話に(?:なっ|なり)|話(?:を|で)(?:し|盛り上が)[^。]*ね[。！!〜ー]*$"
)
_JA_FRAGMENT = re.compile(r"^(?:って|と|が|は|を|に|で|も|の|よ|ね|し|から|けど)")
_JA_ACTION_END = re.compile(
    r"(?:ます|ました|ています|ていました|てます|てました|ている|ていた|てる|でいます|でいる|"
    r"でます|でる|ってきました|てきました|好き|大好き|嫌い|苦手|予定です|つもりです|ことが多い(?:です)?"
    r"|ようにして(?:い)?ます|ようにしている)(?:ね|よ|ねー|よー|けど|んです|んですよ)?"
    r"[。！!〜ー笑w…]*$"
)
_JA_PLAN = re.compile(r"予定|つもり|今度|来週|来月|来年|明日|(?:よう|ましょう)と思")
_JA_PREF = re.compile(r"好き|嫌い|苦手|ハマ|はま|趣味|よく")
_JA_PAST = re.compile(r"(?:ました|でした|だった|た)(?:んです)?[よね]?[。！!〜ー笑w…]*$")


def ja_statement_kind(sentence: str) -> str | None:
    """The memory kind of a Japanese declarative sentence about its speaker, or None.

    Japanese drops the subject: a declarative sentence with no other person before its
    predicate is read as about the speaker. Questions, courtesies, reactions to the other
    person (そうなんですね, いいですね) and sentences under 12 characters are skipped.
    """
    s = sentence.strip()
    if len(s) < (9 if _JA_ACTION_END.search(s) else 12):  # 「ピアノを弾いています」 is enough
        return None
    if "?" in s or "？" in s or _JA_OTHER_LEAD.search(s):
        return None
    if _JA_FRAGMENT.match(s):
        return None  # "ってくらい成長が早い": the tail of a sentence cut at its quote
    if _JA_COURTESY.search(s) or not _JA_STATEMENT_END.search(s):
        return None
    if not _JA_FIRST.search(s) and not _JA_BARE_FIRST.search(s) and not _JA_ACTION_END.search(s):
        return None  # 月日が経つのは早いもんです: a remark, not something the speaker does
    if _JA_PLAN.search(s):
        return "plan"
    if _JA_PREF.search(s):
        return "preference"
    if _JA_PAST.search(s):
        return "event"
    return "fact"
