"""Word lists and patterns the extractive summarizer scores with, English and Japanese.

Stop words, calendar words, plan/decision/commitment markers, life events, greetings,
numbers and money, and the scoring weights: data, kept apart from the scoring code so a
change of vocabulary is a change of this file only.
"""

from __future__ import annotations

import re

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
