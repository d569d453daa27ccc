"""First-person chat sentences rewritten as third-person statements about their speaker.

A memory must read as a statement about a person, not as a copied message: "I got the job
at X" becomes "Maria got the job at X", 「私は犬を飼ってる」 becomes 「〇〇は犬を飼っている」.
The rewrite is purely lexical (no parser): subject pronouns become the speaker's name with
the verb that follows put in the third person, possessives become "Name's", "you" becomes
the other person when the conversation has exactly one; relative dates ("yesterday", "last
Saturday", "next month") become absolute ones resolved against the message's local date.

Also here: :func:`en_statement_kind`, the general English statement rule (what kind of
memory a first-person declarative sentence is, or None when it is a reaction, a courtesy or
too thin to remember). The Japanese rules are in ``rewrite_ja.py``.
"""

from __future__ import annotations

import datetime as dt
import re

from memory_pipeline.core.common.timelex import MONTH_NAMES, WEEKDAY_NUMBERS, WEEKDAY_PATTERN

__all__ = [
    "en_continuation_ok",
    "en_is_reaction",
    "en_resolve_dates",
    "en_statement_kind",
    "en_third_person",
]

# ----------------------------------------------------------------------------- English verbs

_MODALS = frozenset(
    "can could will would should might must may shall did was were had used ought "
    "cannot can't couldn't won't wouldn't shouldn't didn't wasn't weren't hadn't mightn't "
    "mustn't gonna".split()
)
_IRREGULAR_PAST = frozenset(
    """went got made took came saw knew thought told found gave felt left kept began brought
    bought caught taught fought sought built sent spent lent meant met read led fed held stood
    understood wrote rode drove ate fell forgot forgave grew threw flew drew wore tore swore bore
    chose froze spoke broke woke sang rang drank swam ran sat lay lost won shot hung heard said
    paid laid became did had was were put set let cut hit hurt quit shut cost spread beat bit
    hid slid struck stuck dug sold hung dealt dreamt learnt burnt spelt sprang sank shrank stank
    began undertook overcame rebuilt""".split()
)
# Any other -ly word before the verb is an adverb ("I slowly formed", "I generally don't"),
# except the verbs that end in -ly.
LY_ADVERB = (
    r"(?!(?:apply|reply|rely|supply|comply|imply|multiply|ally|bully|rally|fly)\b)[a-z]{2,}ly"
)
_ADVERBS = (
    r"(?:really|just|also|still|always|never|usually|often|sometimes|recently|finally|actually|"
    r"totally|absolutely|definitely|truly|honestly|already|even|especially|mostly|only|now|"
    r"currently|genuinely|personally|seriously|kinda|sorta|constantly|regularly|rarely|"
    r"literally|all|both|too|officially|eventually|probably|certainly|sort\s+of|kind\s+of|"
    rf"{LY_ADVERB})"
)
_ES_END = re.compile(r"(?:s|sh|ch|x|z|o)$")
_IRREG_3RD = {
    "have": "has",
    "do": "does",
    "go": "goes",
    "am": "is",
    "be": "is",
    "wanna": "wants to",
    "gotta": "has to",
}
_NEG_3RD = {
    "don't": "doesn't",
    "don’t": "doesn’t",
    "haven't": "hasn't",
    "haven’t": "hasn’t",
    "am not": "is not",
    "dont": "doesn't",
}


def _third(verb: str) -> str:
    """The third-person singular present of ``verb`` when it is a present form (past forms,
    modals and -ing forms are returned unchanged)."""
    low = verb.lower()
    if low in _NEG_3RD:
        return _NEG_3RD[low]
    if low in _IRREG_3RD:
        return _IRREG_3RD[low]
    stem = re.sub(r"^(?:re|over|under|mis|out|fore|with)", "", low)
    if stem != low and stem in _IRREGULAR_PAST:
        return verb  # retook, overcame
    if (
        low in _MODALS
        or low in _IRREGULAR_PAST
        or (low.endswith("ed") and not low.endswith("eed"))  # need, feed: present
        or low.endswith(("ing", "n't", "’t"))
        or not low.isalpha()
        or len(low) < 2
    ):
        return verb
    if low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    if _ES_END.search(low):
        return verb + "es"
    return verb + "s"


_APOS = "['’]"
_I_CONTRACT = re.compile(
    rf"\b(?:I{_APOS}m|I\s+am|Im)\b|\bI{_APOS}ve\b|\bI{_APOS}ll\b|\bI{_APOS}d\b", re.I
)
_I_VERB = re.compile(  # not after "and": "Toby and I bond" keeps its plural verb
    rf"(?<!\band\s)\b[Ii]\b(?!{_APOS})(?P<adv>(?:\s+{_ADVERBS})*)\s+(?P<verb>[A-Za-z’']+)"
)
_ME = re.compile(r"\b(?:me|myself)\b", re.I)
_LETS = re.compile(r"\b[Ll]et['’]s\b")
_MY = re.compile(r"\b(?:my|mine)\b", re.I)
_WE_CONTRACT = re.compile(rf"\b(?:we{_APOS}re|we{_APOS}ve|we{_APOS}ll|we{_APOS}d)\b", re.I)
_WE = re.compile(r"\bwe\b", re.I)
_OUR = re.compile(r"\b(?:our|ours)\b", re.I)
_US = re.compile(r"\b(?:us|ourselves)\b")
_YOU_CONTRACT = re.compile(rf"\byou{_APOS}(?:re|ve|ll|d)\b", re.I)
_YOUR = re.compile(r"\b(?:your|yours)\b", re.I)
_YOU = re.compile(r"\b(?:you|yourself)\b", re.I)


def en_third_person(sentence: str, name: str, other: str | None = None) -> str:
    """``sentence`` with the speaker (I, me, my; we, our as "Name and others") named.

    "you" becomes ``other`` when given; otherwise it is left as is.
    """
    s = sentence
    cont = {"m": "is", "am": "is", "ve": "has", "ll": "will", "d": "would"}

    def _i_contract(m: re.Match[str]) -> str:
        tail = re.split(rf"{_APOS}|\s+", m[0], maxsplit=1)[-1].lower()
        if m[0].lower() == "im":
            tail = "m"
        return f"{name} {cont.get(tail, 'is')}"

    s = _LETS.sub(f"{name} and {other or 'others'} will", s)  # "let's": the two of them
    s = _I_CONTRACT.sub(_i_contract, s)
    s = _I_VERB.sub(lambda m: f"{name}{m['adv']} {_third(m['verb'])}", s)
    s = re.sub(r"\b[Ii]\b(?!['’])", name, s)
    s = _ME.sub(name, s)
    s = _MY.sub(f"{name}'s", s)
    we_cont = {"re": "are", "ve": "have", "ll": "will", "d": "would"}
    s = _WE_CONTRACT.sub(lambda m: f"{name} and others {we_cont[m[0][3:].lower()]}", s)
    s = _WE.sub(f"{name} and others", s)
    s = _OUR.sub(f"{name}'s", s)
    s = _US.sub(f"{name} and others", s)
    if other:
        you_cont = {"re": "is", "ve": "has", "ll": "will", "d": "would"}
        s = _YOU_CONTRACT.sub(lambda m: f"{other} {you_cont[m[0][4:].lower()]}", s)
        s = _YOUR.sub(f"{other}'s", s)
        s = _YOU.sub(other, s)
    return s[:1].upper() + s[1:]


# ----------------------------------------------------------------------------- English dates

_WD = f"(?:{WEEKDAY_PATTERN})"
_REL_DATE = re.compile(
    rf"\b(?P<yesterday>yesterday|last\s+night)\b"
    rf"|\b(?P<today>today|tonight|this\s+(?:morning|afternoon|evening))\b"
    rf"|\b(?P<tomorrow>tomorrow)\b"
    rf"|\b(?P<lastwd>last)\s+(?P<wd>{_WD})\b"
    rf"|\b(?:this\s+past|last)\s+(?P<lastwknd>weekend)\b"
    rf"|\b(?P<lastweek>last\s+week)\b|\b(?P<nextweek>next\s+week)\b"
    rf"|\b(?P<lastmonth>last\s+month)\b|\b(?P<thismonth>this\s+month)\b"
    rf"|\b(?P<nextmonth>next\s+month)\b"
    rf"|\b(?P<lastyear>last\s+year)\b|\b(?P<thisyear>this\s+year)\b|\b(?P<nextyear>next\s+year)\b"
    rf"|\b(?P<agon>a|one|two|three|four|five|six|\d)\s+(?P<agou>days?|weeks?|months?|years?)\s+ago\b",
    re.I,
)
_NUM = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _day(d: dt.date) -> str:
    return f"{d.day} {MONTH_NAMES[d.month - 1]} {d.year}"


def _month(y: int, m: int) -> str:
    while m < 1:
        y, m = y - 1, m + 12
    while m > 12:
        y, m = y + 1, m - 12
    return f"{MONTH_NAMES[m - 1]} {y}"


def en_resolve_dates(sentence: str, today: dt.date) -> tuple[str, dt.date | None]:
    """(sentence with relative dates made absolute, the single day it names or None).

    Days become "on 7 May 2023", weeks "the week of 1 May 2023" (its Monday), months "in
    April 2023", years "in 2022"; "3 days ago" is a day, "2 months ago" a month.
    """
    day_found: list[dt.date] = []

    def sub(m: re.Match[str]) -> str:
        g = {k: v for k, v in m.groupdict().items() if v}
        monday = today - dt.timedelta(days=today.weekday())
        if "yesterday" in g:
            d = today - dt.timedelta(days=1)
        elif "today" in g:
            d = today
        elif "tomorrow" in g:
            d = today + dt.timedelta(days=1)
        elif "wd" in g:
            wd = WEEKDAY_NUMBERS[g["wd"].lower()]
            d = today - dt.timedelta(days=(today.weekday() - wd) % 7 or 7)
        elif "lastwknd" in g:
            d = today - dt.timedelta(days=(today.weekday() - 5) % 7 or 7)
            return f"the weekend of {_day(d)}"
        elif "lastweek" in g:
            return f"the week of {_day(monday - dt.timedelta(days=7))}"
        elif "nextweek" in g:
            return f"the week of {_day(monday + dt.timedelta(days=7))}"
        elif "lastmonth" in g:
            return f"in {_month(today.year, today.month - 1)}"
        elif "thismonth" in g:
            return f"in {_month(today.year, today.month)}"
        elif "nextmonth" in g:
            return f"in {_month(today.year, today.month + 1)}"
        elif "lastyear" in g:
            return f"in {today.year - 1}"
        elif "thisyear" in g:
            return f"in {today.year}"
        elif "nextyear" in g:
            return f"in {today.year + 1}"
        else:
            n = _NUM.get(g["agon"].lower()) or int(g["agon"])
            unit = g["agou"].lower()
            if unit.startswith("d"):
                d = today - dt.timedelta(days=n)
            elif unit.startswith("w"):
                return f"the week of {_day(monday - dt.timedelta(days=7 * n))}"
            elif unit.startswith("m"):
                return f"in {_month(today.year, today.month - n)}"
            else:
                return f"in {today.year - n}"
        day_found.append(d)
        return f"on {_day(d)}"

    out = _REL_DATE.sub(sub, sentence)
    out = re.sub(r"\b(on|in)\s+(on|in)\b", r"\2", out)  # "on yesterday" never, but be safe
    return out, (day_found[0] if len(day_found) == 1 else None)


# ----------------------------------------------------------------------------- English rule

_FIRST = re.compile(
    r"\b(?:I|I['’](?:m|ve|ll|d)|Im|my|me|myself|mine|we|we['’](?:re|ve|ll|d)|our|us)\b", re.I
)
# Courtesies and reactions: about the conversation, not about the speaker's life.
_REACTION = re.compile(
    r"^(?:I(?:['’]m|\s+am)\s+(?:so\s+|really\s+|very\s+|super\s+|just\s+)*(?:glad|happy|sorry|"
    r"proud|thrilled|stoked|excited\s+for\s+you|(?:always\s+)?here\s+for\s+you|with\s+you|sure|"
    r"curious)\b"
    # "I'm thrilled to make a family for kids": glad to do something is the speaker's own
    r"(?!\s+to\s+(?!(?:hear|see|know|read|help|chat|talk|meet|be\s+here)\b)[a-z]+\b)"
    r"(?!.*\b(?:my|I)\b)"
    r"|I\s+(?:totally\s+|really\s+|completely\s+|definitely\s+)?(?:agree|know|hope|bet|see|"
    r"understand|get\s+it|appreciate|wish|guess|think\s+so|feel\s+you|hear\s+you|mean|"
    r"can['’]?t\s+wait|cannot\s+wait|(?:love|like)\s+(?:that|this|it|the\s+idea)(?=\s*(?:[!.,;]|$))|"
    r"can\s+(?:imagine|tell|see)|will\s+(?:do|try)|['’]ll\s+(?:do|try)|"
    r"(?:would|['’]d)\s+love)\b"
    r"|let\s+me\s+(?:know|see|check|think)\b)",
    re.I,
)
# Not about the speaker's life either: a suggestion to the other person ("Let's keep going!"),
# a promise of courtesy ("I'll keep that in mind"), a photo pointer ("Here's a pic of ..."),
# "(So) glad ..." — the conversation, not a fact.
_COURTESY = re.compile(
    r"^(?:let['’]?s\b|(?:so\s+|really\s+)?glad\b|here['’]?s\s+(?:a|an|the|my|our|some)\b"
    r"|here\s+(?:is|are)\b|check\s+(?:out|this)\b|take\s+a\s+look\b|look\s+at\s+this\b)"
    r"|\bI(?:['’]ll|\s+will)\s+(?:definitely\s+|for\s+sure\s+|totally\s+|surely\s+|"
    r"certainly\s+|also\s+)?(?:keep\s+(?:that|it|this|you|those)|reach\s+out|let\s+you|try|"
    r"do\s+(?:that|it|my\s+best|the\s+same)|remember\s+(?:that|this|it)|think\s+about\s+(?:it|that)"
    r"|check\s+(?:it|that)|look\s+into|give\s+it\s+a|take\s+(?:that|your)|keep\s+at\s+it"
    r"|make\s+sure\s+to\s+(?:remember|have|keep|let|spread|tell|check|say))\b"
    # catching up: "A lot's happened since we last talked", "Been a wild few days since we chatted"
    r"|^.{0,50}\bsince\s+(?:we|I)\s+(?:last\s+)?(?:talked|chatted|spoke|caught\s+up)\W*$"
    r"|^(?:\w+\s+)?(?:works|sounds\s+good)\s+for\s+me\b"
    # signing off: "ttyl", "gonna head out soon", "let me get ready"
    r"|\bttyl\b|\bhead(?:ing)?\s+out\b|^let\s+me\s+get\s+ready\b|\bgotta\s+(?:go|run)\b"
    # cheering: "We can make a real impact together!", "We can do it!", "Same with me"
    r"|^we\s+(?:can|will|['’]ll|could)\b(?:.*\btogether\b|\s+do\s+(?:it|this)\b)"
    r"|^(?:I\s+feel\s+)?(?:the\s+)?same\s+(?:way|here|with\s+me|for\s+me)\b|^I\s+feel\s+the\s+same\b",
    re.I,
)
# "Books help us keep our dreams alive": the first person only as us/our is people in general.
# "Our dog" is the speaker's; "our dreams" beside "us" is everyone's.
_I_FORMS = r"I|I['’](?:m|ve|ll|d)|Im|my|me|myself|mine"
_PERSONAL_FIRST = re.compile(rf"\b(?:{_I_FORMS}|we|we['’](?:re|ve|ll|d))\b", re.I)
_I_OR_MY = re.compile(rf"\b(?:{_I_FORMS})\b", re.I)  # the speaker alone, without "we"


# "Showing off our true selves is the best thing ever", "step outside our comfort zones":
# what everyone has, so "our" is people in general (not "our dog", "our trip").
_OUR_EVERYONE = re.compile(
    r"\bour\s+(?:own\s+|true\s+|inner\s+|authentic\s+)?(?:selves|lives|dreams|hearts|souls|"
    r"comfort\s+zones?|minds|bodies|spirits|passions|goals|loved\s+ones)\b",
    re.I,
)


# "We can all do something", "We all need a push sometimes", "all of us": everyone (not
# "we all got together to eat": that is the speaker's group, on a day).
_WE_ALL = re.compile(
    r"\bwe\s+(?:can|could|should|must|need\s+to|have\s+to|gotta)\s+all\b"
    r"|\bwe\s+all\s+(?:need|have|deserve|go\s+through|face|want|make|get)\b|\ball\s+of\s+us\b",
    re.I,
)


def _generic_first(s: str) -> bool:
    """The first person is only "us" (and "our"): people in general, not the speaker."""
    if _WE_ALL.search(s) and not _I_OR_MY.search(s):
        return True  # "We can all do something to make a difference"
    if _PERSONAL_FIRST.search(s):
        return False
    return bool(_US.search(s) or not _OUR.search(s) or _OUR_EVERYONE.search(s))


_ADDRESSEE = re.compile(r"\b(?:you|your|yours|yourself|you['’](?:re|ve|ll|d))\b", re.I)
_HYPOTHETICAL = re.compile(r"\b(?:would|could|should|might|['’]d)\b", re.I)
# "I used to ride with my dad, we'd go through the fields": after "used to" / "when I was",
# would/'d is the past habitual, not a hypothetical.
_HABITUAL_PAST = re.compile(r"\bused\s+to\b|\bwhen\s+(?:I|we)\s+(?:was|were)\b", re.I)
# "I made it to show how we should accept change": a modal inside a how/what/why clause
# is what the statement is about, not the speaker's hypothetical.
_EMBEDDED_MODAL = re.compile(
    r"\b(?:how|what|why|where)\s+(?:\w+\s+){1,2}?(?:would|could|should|might|can)\b", re.I
)


# "I started doing what you said", "the book you recommended": the other person's advice or
# gift inside a statement of what the speaker did is still the speaker's statement.
_YOUR_PART = re.compile(
    r"\b(?:what|that|which|the\s+\w+|\w+)\s+you\s+(?:said|told\s+me(?:\s+about)?|suggested|"
    r"recommended|gave\s+me|sent\s+me|showed\s+me|mentioned|taught\s+me)\b",
    re.I,
)


def _about_addressee(s: str) -> bool:
    """The sentence speaks to or about the other person (you, your), beyond naming what they
    said or gave."""
    return _ADDRESSEE.search(_YOUR_PART.sub(" ", s)) is not None


def _hypothetical(s: str) -> bool:
    """A would/could/should/might that makes the sentence a maybe, not a fact."""
    embedded = [e.span() for e in _EMBEDDED_MODAL.finditer(s)]
    for m in _HYPOTHETICAL.finditer(s):
        word = m.group(0).lower()
        if word in ("would", "'d", "’d") and _HABITUAL_PAST.search(s, 0, m.start()):
            continue
        if any(a < m.start() < b for a, b in embedded):
            continue
        return True
    return False


_THIN = re.compile(r"^(?:\W*\w+\W*){0,3}$")
_PLAN = re.compile(
    r"\b(?:will|['’]ll|going\s+to|gonna|plan(?:ning)?\s+(?:to|on)|hoping\s+to|about\s+to|"
    r"tomorrow|next\s+(?:week|month|year|weekend)|soon|upcoming|intend|(?:I['’]m|am)\s+off\s+to)\b",
    re.I,
)
_PREF = re.compile(
    r"\b(?:love|loves|like|likes|enjoy|enjoys|adore|hate|prefer|favorite|favourite|fave|fan\s+of|"
    r"passionate|into)\b",
    re.I,
)
_REL = re.compile(
    r"\b(?:my|our)\s+(?:wife|husband|partner|boyfriend|girlfriend|kids?|children|son|daughter|"
    r"mom|mother|dad|father|parents?|sister|brother|family|friends?|grandma|grandpa|cousin|"
    r"aunt|uncle|dog|cat|pets?)\b",
    re.I,
)
_PAST_VERB = re.compile(
    r"\b(?:I|we)\s+(?:\w+\s+)?(?:\w+ed|" + "|".join(sorted(_IRREGULAR_PAST)) + r")\b", re.I
)


# Fillers: resolve, anticipation and cheering say how the speaker feels about going on, not
# what they did or have ("I'll keep pushing!", "I won't give up", "Can't wait!", "Wish I was
# that brave"). Kept, they make memories with nothing to check and crowd out the sentences
# of the same message that do say something.
_FILLER = re.compile(  # the resolve phrases count only in a short sentence (en_is_filler)
    r"^(?:(?:I|we)\s+)?(?:can['’]?t|cannot)\s+wait\b"
    r"|^(?:wish|hope|hoping|gotta|got\s+to|check|don['’]?t|do\s+not|remember|hang\s+in|stay|"
    r"make\s+sure|believe\s+in|looks\s+like)\b"
    r"|\b(?:keep\s+(?:on\s+)?(?:going|pushing|plugging|at\s+it|trying|"
    r"fighting|believing|working\s+hard|it\s+up|moving\s+forward|chasing)|never\s+(?:give\s+up|"
    r"quit|stop)|won['’]?t\s+(?:give\s+up|quit|let)|not\s+(?:gonna|going\s+to)\s+(?:give\s+up|quit|"
    r"let)|make\s+it\s+happen|(?:do|doing)\s+(?:my|our)\s+best|give\s+it\s+(?:my|our)\s+(?:all|"
    r"best)|pushing\s+forward|make\s+(?:my|our)\s+dreams?\s+(?:come\s+true|a\s+reality|happen)|"
    r"give\s+(?:it|that|this|those\s+\w+)\s+a\s+(?:shot|try|go)|keep\s+(?:on\s+)?(?:looking|searching|"
    r"pursuing|working))\b",
    re.I,
)


MAX_FILLER_WORDS = 18


def en_is_filler(sentence: str) -> bool:
    """Resolve, anticipation or a wish with nothing checkable (see ``_FILLER``)."""
    s = sentence.strip()
    m = _FILLER.search(s)
    return m is not None and (m.start() == 0 or len(s.split()) <= MAX_FILLER_WORDS)


def en_statement_kind(sentence: str) -> str | None:
    """The memory kind of a first-person declarative sentence, or None when it is not one
    worth keeping (no first person, a question, a reaction or courtesy, under four words)."""
    s = sentence.strip()
    if "?" in s or not _FIRST.search(s) or _THIN.match(s) or _REACTION.search(s):
        return None
    if _COURTESY.search(s) or _generic_first(s) or en_is_filler(s):
        return None  # a suggestion, courtesy, filler or photo pointer; "us" as people in general
    if _about_addressee(s) or _hypothetical(s):
        return None  # about the other person, or what might be: not a fact about the speaker
    if _PLAN.search(s):
        return "plan"
    if _PAST_VERB.search(s):
        return "event"
    if _PREF.search(s):
        return "preference"
    if _REL.search(s):
        return "relationship"
    return "fact"


def en_continuation_ok(sentence: str) -> bool:
    """A sentence with no first person that may go on with the statement before it ("The
    kids had such a blast."): declarative, not a question, courtesy, reaction, hypothetical
    or remark to the other person, at least four words."""
    s = sentence.strip()
    if "?" in s or _THIN.match(s) or _COURTESY.search(s) or _ADDRESSEE.search(s):
        return False
    return not _hypothetical(s) and not _CONT_REMARK.match(s) and not en_is_filler(s)


# Exclamations about the conversation ("That's so funny!", "Sounds great") go on with nothing.
_CONT_REMARK = re.compile(
    r"^(?:that['’]?s|sounds|wow|congrats|thanks|thank|good\s+luck|take\s+care|talk\s+soon|"
    r"what\s+a|how\s+(?:cool|nice|fun|great|awesome)|cheers|same|nice|great|awesome|cool|"
    r"(?:that|this|the)\s+(?:pic|picture|photo|shot|view)\s+(?:is|was|looks))\b",
    re.I,
)


def en_is_reaction(clause: str) -> bool:
    """The clause is a reaction, thanks or courtesy ("I totally get it", "Thanks so much")."""
    c = clause.strip()
    return bool(_REACTION.search(c) or _CONT_REMARK.match(c) or _COURTESY.search(c))
