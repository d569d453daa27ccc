"""English memory rules: the patterns per kind and the checks that keep them precise.

Each rule is a pattern and a builder (``_EN_RULES``); the builder returns a :class:`_Hit`
or None. The checks around them (attitude, photo captions, questions, reactions) reject a
statement rather than guess, as the extractor favours precision over recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memory_pipeline.core.memories.extract_dates import _FUTURE, _PAST
from memory_pipeline.core.memories.extract_text import _content_words
from memory_pipeline.core.memories.extract_types import _Hit
from memory_pipeline.core.memories.rewrite import (
    en_is_reaction,
    en_third_person,
)

# ----------------------------------------------------------------------------- English rules

_EN_TRIGGER = re.compile(
    r"\b(?:I|I'm|I’m|I've|I’ll|I'll|we|we'll|we're|let's|my|me|myself|mine|our|us|got|moved|"
    r"moving|been|started|went)\b",
    re.I,
)
_EN_QUESTION = re.compile(r"\?\s*$|\?")
# A clause must start where a new statement can start (not inside "if I ...", "you think I ...").
_EN_HYPO = re.compile(
    r"\b(?:if|wish|hope|hoping|unless|whether|would|could|maybe|perhaps|imagine|pretend|when|"
    r"once|until|before|after|dream|dreamed|dreaming|thought|think|guess|wonder|said|says|told|"
    r"wanted|want|wants|need|needed|should|can't believe|never)\b|\byou\b",
    re.I,
)
_I = r"(?:I|i)"
_WE = r"(?:[Ww]e)"
_IM = r"(?:I'm|I’m|I am|Im)"
_CAP_WORD = r"(?:[A-Z][\w&'’.-]*)"
_CAP_NAME = (
    rf"(?:(?:the\s)?{_CAP_WORD}(?:\s(?:of|and|&|de|du|la)\s{_CAP_WORD}|\s{_CAP_WORD}){{0,4}})"
)
_OCCUPATIONS = (
    r"teacher|nurse|doctor|physician|surgeon|engineer|designer|developer|programmer|student|"
    r"lawyer|attorney|accountant|artist|painter|illustrator|writer|author|novelist|poet|musician|"
    r"chef|cook|baker|photographer|scientist|researcher|consultant|barista|waiter|waitress|"
    r"bartender|cashier|firefighter|police officer|pilot|flight attendant|mechanic|electrician|"
    r"plumber|carpenter|farmer|architect|dentist|pharmacist|therapist|counselor|counsellor|"
    r"social worker|veterinarian|vet|librarian|professor|lecturer|tutor|coach|personal trainer|"
    r"athlete|dancer|singer|actor|actress|journalist|editor|analyst|entrepreneur|freelancer|"
    r"intern|paramedic|soldier|veteran|salesman|saleswoman|realtor|banker|translator|"
    r"interpreter|streamer|youtuber|influencer|game developer|data scientist|"
    r"basketball player|soccer player|football player|player|animator|filmmaker|"
    r"software engineer|web developer|ux designer|graphic designer|fashion designer"
)
_EN_JOB_IS = re.compile(
    rf"\b{_IM}\s(?:now\s|currently\s|still\s)?(?:a|an)\s(?P<title>(?:(?:full-time|part-time|"
    rf"freelance|professional|senior|junior|high\s?school|college|university|grad|graduate|"
    rf"[A-Z][\w-]*|[a-z]+)\s){{0,2}}(?:{_OCCUPATIONS}))\b(?!\s(?:friend|at heart|wannabe))",
)
_EN_WORK_AS = re.compile(
    rf"\b{_I}\s(?:currently\s|now\s|still\s)?work\sas\s(?:a|an)\s(?P<title>[a-zA-Z -]{{3,40}}?)"
    r"(?=$|[,.!;]|\s(?:at|for|in|and|but|so|now|since)\b)"
)
_EN_WORK_AT = re.compile(
    rf"\b{_I}\s(?:currently\s|now\s|still\s)?work\s(?:at|for)\s(?P<org>{_CAP_NAME})"
)
_EN_GOT_JOB = re.compile(
    rf"\b(?:{_I}|{_I}'ve|{_I}’ve)\s(?:just\s|finally\s|recently\s|officially\s)?"
    r"(?:got|landed|accepted|started|began|start|am starting|'m starting)\s"
    r"(?:a|the|my|an)\s(?:new\s|dream\s|first\s)?(?:job|position|role|internship)"
    r"(?:\s(?:as\s(?:an?\s)?(?P<title>[a-zA-Z ]{3,40}?)))?"
    rf"(?:\s(?:at|with)\s(?P<org>{_CAP_NAME}))?"
    r"(?=$|[,.!;]|\s(?:at|with|last|this|in|on|and|but|yesterday|today|recently)\b|\s[-–—])"
)
_EN_LIVE = re.compile(
    rf"\b(?:{_I}\s(?:currently\s|now\s|still\s)?live|{_IM}\s(?:currently\s|now\s)?living)\s"
    rf"in\s(?P<place>{_CAP_NAME})"
)
_EN_MOVED = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|recently\s|finally\s)?(?:moved|relocated)\s(?:back\s)?"
    rf"(?:to|into)\s(?P<place>{_CAP_NAME}|(?:a|an|my|our)\snew\s(?:place|apartment|house|"
    r"home|flat|city))",
)
_EN_MOVING = re.compile(
    rf"\b(?:{_IM}|[Ww]e're|[Ww]e are)\s(?:going\sto\smove|moving|relocating)\s(?:back\s)?to\s"
    rf"(?P<place>{_CAP_NAME})"
)
_EN_FROM = re.compile(
    rf"\b(?:{_IM}\s(?:originally\s)?from|{_I}\sgrew\sup\sin)\s(?P<place>{_CAP_NAME})"
)
_EN_AGE = re.compile(rf"\b{_IM}\s(?P<age>\d{{1,2}})\s(?:years?\sold|yrs?\sold|y/o)\b")
_EN_SCHOOL = re.compile(
    rf"\b(?:{_I}\s(?:go\sto|attend|study\sat)|{_IM}\s(?:a\s(?:student|freshman|sophomore|junior|"
    rf"senior)\sat|studying\s[a-z ]{{3,30}}\sat))\s(?P<school>{_CAP_NAME})"
)
_EN_STATUS = re.compile(
    rf"\b{_IM}\s(?:now\s|happily\s)?(?P<st>married|engaged|single|divorced|widowed)\b"
)
_EN_GOT_STATUS = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|finally\s|recently\s)?(?:got\s(?P<st>married|engaged|divorced)"
    r"|(?P<bu>broke\sup))\b"
)
_EN_DIET = re.compile(rf"\b{_IM}\s(?:a\s)?(?P<diet>vegetarian|vegan|pescatarian)\b")
_EN_ALLERGY = re.compile(
    rf"\b{_IM}\s(?:(?:very|super|really|also|so|deathly)\s)?allergic\sto\s"
    r"(?P<x>[a-z][a-z ,-]{2,40}?)(?=$|[.!;]|\s(?:and|but|so)\b)"
)
_EN_VOLUNTEER = re.compile(
    rf"\b(?:{_I}\s(?:still\s)?volunteer|{_IM}\s(?:still\s)?volunteering)\s(?:at|with|for)\s"
    r"(?P<org>(?:a|an|the|my)\s[a-z][a-z -]{2,40}?|[A-Z][\w' -]{2,40}?)"
    r"(?=$|[.,!;]|\s(?:and|but|so)\b)"
)
_SINGLE_REL = (
    "manager|boss|supervisor|wife|husband|boyfriend|girlfriend|partner|fiance|fiancee|fiancé|"
    "fiancée|mom|mother|dad|father|roommate|landlord|therapist|mentor|coach"
)
_MULTI_REL = (
    "sister|brother|son|daughter|best friend|friend|cousin|aunt|uncle|coworker|co-worker|"
    "colleague|neighbor|neighbour|grandma|grandmother|grandpa|grandfather|niece|nephew|"
    "teammate|classmate|kid|baby|stepdad|stepmom|stepson|stepdaughter"
)
_PETS = (
    "dog|dogs|cat|cats|puppy|puppies|kitten|kittens|turtle|turtles|bird|birds|parrot|hamster|"
    "hamsters|rabbit|rabbits|bunny|fish|snake|snakes|horse|horses|guinea pig|guinea pigs|"
    "lizard|gecko|tortoise"
)
_NOT_NAMES = frozenset(
    "I The A An So Very Super Really Always Also Just Still Such Quite Pretty Mom Dad My Our "
    "Your His Her Their And But Or Not Now Then Yes No Ok Okay Sure Thanks It This That".split()
)
_EN_REL = re.compile(
    rf"\b[Mm]y\s(?P<rel>{_SINGLE_REL}|{_MULTI_REL}|{_PETS})(?:'s\sname\sis|,?\s(?:named|called)"
    rf"|\sis\s(?:named|called)|\sis|,)?\s(?P<name>(?:(?:Ms|Mr|Mrs|Dr)\.?\s)?[A-Z][\w’'-]+"
    r"(?:\s[A-Z][\w’'-]+)?)(?![\w’'])"
)
_EN_HAVE_REL = re.compile(
    rf"\b{_I}\s(?:have|'ve\sgot|’ve\sgot)\s(?P<n>a|an|one|two|three|four|five|\d)\s"
    r"(?P<rel>kids?|children|sons?|daughters?|sisters?|brothers?|siblings?|grandkids?|"
    r"grandchildren|granddaughters?|grandsons?)\b"
)
_EN_HAVE_POSS = re.compile(
    rf"\b(?:{_I}\s(?:have|own|'ve\sgot|’ve\sgot)|we\s(?:have|own))\s(?P<n>a|an|one|two|three|"
    rf"four|five|\d|my\sown)\s(?:(?:new|little|big|pet|rescue|old|black|white|sweet|cute|"
    rf"[A-Z][a-z]+)\s){{0,2}}(?P<thing>{_PETS}|car|bike|motorcycle|house|apartment|condo|boat|"
    r"piano|guitar|garden|farm)\b(?!\s(?:shelter|food|park|walker|sitter|show|class|lesson|"
    r"ride|trip|wash|loan|payment|accident|seat|keys?|lessons?|bed|toy|friendly|store|race|"
    r"repair|insurance|dealer|party|tour|and\sa\s(?:half|bit)))"
)
_EN_ACQUIRE = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|finally\s|recently\s)?(?P<verb>adopted|bought|got|rescued)\s"
    rf"(?:a|an|another|my\sfirst|our\sfirst|a\snew|two|three)\s(?:(?:new|little|rescue|"
    rf"[a-z]+)\s){{0,2}}(?P<thing>{_PETS}|car|bike|motorcycle|house|apartment|condo|boat|"
    r"piano|guitar|camera|laptop)\b(?!\s(?:shelter|food|park|walker|sitter|toy|bed))"
)
_EN_GOT_ADOPTED = re.compile(r"\b(?P<name>[A-Z][a-z]+)\s(?:finally\s|just\s)?got\sadopted\b")
_EN_EVENT = re.compile(
    rf"\b(?:{_I}|{_WE})\s(?:just\s|finally\s|recently\s|officially\s)?(?P<ev>"
    r"graduated(?:\sfrom\s[A-Z][\w ]{2,40}?)?|passed\s(?:my|the|our)\s[a-z][\w ]{2,30}?"
    r"|won\s(?:a|an|the|first|second|third|my|our)\s[\w ]{2,40}?|got\spromoted"
    r"|had\s(?:a|our|my)\s(?:baby|son|daughter)|finished\s(?:my|our)\s(?:first\s)?"
    r"(?:marathon|degree|thesis|novel|book|album|painting)|ran\s(?:a|my\sfirst)\s[\w ]{2,30}?"
    r"|published\s(?:a|my|our)\s[\w ]{2,40}?|signed\s(?:a|the|my)\s(?:contract|deal|lease)"
    r"|opened\s(?:a|my|our)\s(?:own\s)?[\w ]{2,30}?|quit\smy\sjob|lost\smy\sjob"
    r"|got\sa\spromotion|joined\s(?:a|the)\s[\w ]{2,30}?\s(?:club|team|group|band|gym|class))"
    r"(?=$|[.,!;]|\s(?:and|but|so|last|this|yesterday|today|on|in|at)\b)"
)
_EN_PREF = re.compile(
    rf"\b(?:{_I}\s(?:really\s|absolutely\s|totally\s|just\s|also\s|still\s|truly\s|"
    r"genuinely\s|do\s|actually\s){0,2}(?P<verb>love|like|enjoy|adore|hate|prefer|dislike|"
    rf"can't\sstand|can’t\sstand)|{_IM}\s(?:really\s|totally\s|also\s)?(?P<verb2>obsessed\swith"
    r"|into|a\s(?:big\s|huge\s)?fan\sof|passionate\sabout))\s(?P<obj>[^.!?;:]{2,120})"
)
_EN_PREF_BAD_OBJ = re.compile(
    r"^(?:it|that|this|these|those|them|you|your|yours|him|her|how|what|when|where|who|why|"
    r"the\sway|the\sidea|to\s(?:hear|see|know|think)|hearing|seeing|the\ssound|that\sidea|"
    r"talking|chatting|our\s(?:talk|chat|convo)|us|it's|it’s|everything|anything|something|"
    r"both|all|each|lots|a\slot|so\smuch|too|very|more|less|most|least|the\sfact|reading"
    r"\syour|being\sable|having\syou|the\sphoto|the\spic|the\spicture|ur)\b",
    re.I,
)
_EN_FAV = re.compile(
    r"\b[Mm]y\s(?:all-time\s|absolute\s|new\s)?(?:favorite|favourite|fav)\s(?P<what>[a-z]+(?:\s"
    r"[a-z]+)?)\s(?:is|has\sto\sbe|would\sbe)\s(?P<val>[^.,!?;]{2,60})"
)
_EN_PLAN = re.compile(
    rf"\b(?:{_I}'ll|{_I}’ll|{_I}\swill|{_IM}\s(?:going\sto|gonna|planning\s(?:to|on))|{_I}"
    r"\splan\sto|[Ww]e'll|[Ww]e’ll|[Ww]e\swill|[Ww]e're\s(?:going\sto|gonna|planning\sto)|"
    r"[Ww]e’re\s(?:going\sto|gonna|planning\sto)|[Ww]e\sare\s(?:going\sto|planning\sto)|"
    r"[Ll]et's|[Ll]et’s|[Ww]e\sshould|(?:I|[Ww]e)\shave\sto|I'm\sstarting|I\sstart|I\sleave|"
    r"I'm\sleaving|"
    rf"{_I}\s(?:have|'ve\sgot|’ve\sgot)\s(?:a|an|my)\s(?:[\w-]+\s)?(?:shift|appointment|meeting|"
    rf"class|exam|test|interview|game|match|date|flight|concert|party|recital|trip)"
    rf"|{_IM}\s(?:flying|heading|traveling|travelling|visiting|hosting|attending|going|"
    r"meeting|seeing|taking|starting|leaving|playing|running|performing|working|bringing|"
    r"moving|going\sback))\b"
)
_EN_PLAN_NOT = re.compile(r"\b(?:never|not|n't|n’t|no)\b", re.I)
# "Oh, and btw - I've been ...", "Guess what - I got ...": the lead and its dash go.
# Interjections go with or without punctuation; an elongated one ("Nooo", "Awww", "Yesss",
# "Hahaha") is an interjection whatever its letters. Words that also open a phrase ("So much
# has happened", "So far", "Great job", "Right now", "Sure thing") go only when a comma (or
# "!", ":", ".") or the speaker ("So I ...") follows them: stripped alone they leave the
# phrase cut ("Much has happened", "Far, so good").
_EN_LEAD_SUBJECT = r"(?=\s+(?:I|I['’](?:m|ve|ll|d)|Im|we|we['’](?:re|ve|ll|d)|my|our)\b)"
_EN_LEAD = re.compile(
    r"^(?:(?i:thank\s+you|thanks)(?:\s+(?:so|very)\s+much|\s+a\s+(?:lot|ton|bunch)|\s+so\s+much)?"
    r"(?:[,!:.]+|\s+[-–—])?\s+"
    r"|(?i:so(?!\s+(?:much|many|far|long|that|few|little|does|do|did|is|am|are|was|were|too|very"
    r"|[a-z]+(?:ly|ful|ous|ive|ing|ed)|excited|happy|glad|proud|good|great|bad|sad|cool|fun|nice"
    r"|sorry|true|cute|hard|tough|busy|sweet|beautiful|awesome|amazing)\b)"
    r"|well(?!\s+(?:done|worth|said|known|aware|enough)\b)"
    r"|and|also|oh|oh\s+and|anyway|anyways|plus|but|yeah|yea|yes|yep|yup|yay|wow|(?:ha){2,}h?|"
    r"(?:he){2,}h?|lol|lmao|hey|hi|omg|ok|okay|btw|by\s+the\s+way|actually|speaking\s+of\s+which|"
    r"ugh|hmm+|um+|uh+|aw+|ah+|oo+h|whoa|yikes|phew|gosh|"
    r"oops|welp|noo+|[a-z]*([a-z])\1\1[a-z]*)(?:[,!:.]+|\s+[-–—])?\s+"
    r"|(?i:sure|right|true|perfect|great|cool|nice|awesome|amazing|of\s+course|"
    r"no\s+worries|no\s+problem|for\s+sure|oh\s+no|oh\s+well|honestly|seriously|exactly|"
    r"definitely|absolutely|totally|alright|tbh|ngl|no|nah)"
    rf"(?:(?:[,!:.]+|\s+[-–—])\s+|{_EN_LEAD_SUBJECT}\s+)"
    # "Mel, ..." is a vocative; "Books, movies, and ..." is a list (not stripped)
    r"|[A-Z][a-z]+[,!:]\s+(?![a-z-]+(?:\s+[a-z-]+)?,?\s+(?:and|or)\s)"
    r"|(?i:you\swon['’]t\sbelieve\s(?:it|this)|guess\swhat|on\sanother\snote|fun\sfact)"
    r"\s*[-–—:,!]\s*)+",
)
# "much, I'll take good care of it": a sentence that starts with one lower-case word before a
# comma is the cut tail of a phrase ("after college, I ..." is a phrase of its own); the
# clause after the comma, starting with the speaker, is the statement.
_EN_DANGLING = re.compile(
    r"^(?!(?:after|before|in|on|at|for|with|since|during|by|from|to|of|about|like|as|then|now"
    r"|today|tonight|yesterday|recently|lately|later|here|there)\b)"
    r"[a-z][\w'’]*[,;:]\s+(?=(?:I|I['’](?:m|ve|ll|d)|my|we|our)\b)"
)
# "I'll tell them.": a statement whose object is in another message goes on with nothing.
_EN_POINTS_BACK = re.compile(r"\b(?:it|them|her|him|that|this|one)\W*$", re.I)
_EN_THANKS_FOR = re.compile(
    r"^(?:\W*(?:and|oh|yeah|yes|wow|hey)\W+)*(?:thanks|thank\s+you|thx)\W*(?:so\s+much\W*|a\s+lot\W*)?"
    r"(?:for|,?\s*\w+\W*\s*for)\b",
    re.I,
)
# "..., I had a mentor too": a reaction or thanks before the comma says nothing; the clause
# after it, starting with the speaker, is the statement.
_EN_REACTION_CLAUSE = re.compile(r"^(?P<r>[^,;]{2,60}),\s+(?=(?:I|I['’](?:m|ve|ll)|my|we)\b)", re.I)
# "- pretty cool, huh?", ", right?": a tag question after a statement does not make it one.
_EN_AFTER_THANKS = re.compile(r"[,;:]\s+|\s*[-–—]\s*(?=(?:I|my|we|our)\b)")
# "I finished another pottery project - want to see a pic?": the question after the dash
# asks about the statement before it.
_EN_DASH_QUESTION = re.compile(r"\s+[-–—]+\s+[^-–—]*\?+\s*$")
_EN_TAG_QUESTION = re.compile(
    r"\s*(?:[-–—,]\s*)(?:pretty\s+\w+|right|huh|isn['’]t\s+it|don['’]t\s+you\s+think|"
    r"you\s+know|can\s+you\s+believe\s+it|crazy|cool)(?:,\s*(?:huh|right|eh))?\s*\?+$",
    re.I,
)


_EN_FIRST_WORD = re.compile(r"\b(?:I|I['’](?:m|ve|ll|d)|my|we|our)\b")


# "Here's a photo of my horse painting I did recently.": pointing at a photo of one's own
# life says what the speaker shared (and what the photo shows is theirs).
_EN_PHOTO = re.compile(
    r"^(?:here['’]?s|here\s+(?:is|are))\s+(?P<what>(?:a|an|the|my|our|some)\s+(?:[\w-]+\s+)?"
    r"(?:photos?|pics?|pictures?|snaps?|shots?|selfies?|peek)\b)",
    re.I,
)


def _en_shared_photo(s: str) -> str:
    """ "Here's a pic of my family" -> "I shared a pic of my family" when the photo is of the
    speaker's own life (a first person follows); other sentences unchanged."""
    m = _EN_PHOTO.match(s)
    if m is None or not _EN_FIRST_WORD.search(s, m.end()):
        return s
    return f"I shared {m['what']}{s[m.end() :]}"


def _en_statement_part(s: str) -> str:
    """``s`` without a leading reaction clause or a trailing tag question."""
    s = _EN_TAG_QUESTION.sub(".", s)
    if "?" in s and _EN_FIRST_WORD.search(s.split("?")[0].rsplit(" - ", 1)[0]):
        s = _EN_DASH_QUESTION.sub(".", s)
    m = _EN_REACTION_CLAUSE.match(s)
    if m is not None and en_is_reaction(m["r"]):
        s = s[m.end() :]
    return s


# What the speaker feels about the other person ("I'm so proud of you for ...", "Your support
# means a lot to me", "I admire what you do"): in a one-to-one chat "you" is the other person,
# so the sentence is a statement about the two of them, not a courtesy to drop.
_EN_ATTITUDE = re.compile(
    r"^(?:I(?:['’]m|\s+am)\s+(?:so\s+|really\s+|very\s+|super\s+|truly\s+|just\s+|always\s+)*"
    r"(?:proud\s+of\s+you|impressed\s+(?:by|with)\s+(?:you|your)|inspired\s+by\s+(?:you|your)|"
    r"(?:grateful|thankful)\s+(?:for|to)\s+(?:you|your|our)|rooting\s+for\s+you|"
    r"here\s+to\s+support\s+you|lucky\s+to\s+have\s+(?:you|a\s+friend)))\b"
    r"|^I\s+(?:really\s+|truly\s+|seriously\s+|totally\s+|so\s+|also\s+|do\s+)*"
    r"(?:admire|appreciate|value|respect)\s+(?:you|your|our|what\s+you|how\s+you)\b"
    r"|^(?:your|our)\s+(?:[\w'’-]+\s+){1,4}(?:means?|meant)\s+(?:a\s+lot|so\s+much|the\s+world|"
    r"everything)\s+to\s+me\b"
    r"|^your\s+(?:[\w'’-]+\s+){1,4}(?:really\s+)?(?:inspires?|inspired|motivates?|motivated|"
    r"keeps?\s+me\s+motivated|encourages?)\s+me\b",
    re.I,
)


# The words every thank-you shares: an attitude memory must say something beyond them.
_ATTITUDE_WORDS = frozenset(
    "proud impressed inspired inspires inspire inspiring grateful thankful rooting support "
    "supporting lucky friend friends friendship admire admires appreciate appreciates value "
    "respect means meant lot much world everything words kind help encouragement belief "
    "always here you your our thanks thank motivate motivates motivated motivating keeps keep "
    "encourages encourage truly seriously super totally".split()
)
MIN_ATTITUDE_WORDS = 1


def _en_attitude(s: str, name: str, other: str) -> str | None:
    """ "I appreciate our friendship too, Caroline." -> "Melanie appreciates Melanie and
    Caroline's friendship too.": an attitude to the other person, both named."""
    if _EN_ATTITUDE.match(s) is None:
        return None
    said = set(_content_words(s, name, other)) - _ATTITUDE_WORDS
    if len(said) < MIN_ATTITUDE_WORDS:
        return None  # "I appreciate your support": thanks, with nothing to remember
    s = re.sub(rf",\s*{re.escape(other)}\W*$", ".", s)
    s = re.sub(r"\bour\b", f"{name} and {other}'s", s, flags=re.I)
    return en_third_person(s, name, other)


def _en_clause_ok(sentence: str, start: int) -> bool:
    """The match starts a statement: no hypothetical/reported/you-words before it."""
    return not _EN_HYPO.search(sentence, 0, start)


_EN_EXCLAMATION = re.compile(r"^(?:\W*[\w'’]+){1,4}\W*!+\W*$")
_EN_TRAIL = re.compile(r"(?:\s+(?:lol|haha+|lmao|too|though|so much|a lot))+$", re.I)


def _en_value(text: str) -> str:
    return _EN_TRAIL.sub("", text.strip(" ,.;:!-")).rstrip("'’ ")


def _en_rules(s: str) -> _Hit | None:
    """The first (highest-priority) English rule matching sentence ``s``."""
    for rx, build in _EN_RULES:
        for m in rx.finditer(s):
            if not _en_clause_ok(s, m.start()):
                continue
            hit = build(m)
            if hit is not None:
                return hit
    return None


def _got_job(m: re.Match[str]) -> _Hit | None:
    org, title = m["org"], m["title"]
    if org and org.split()[0] not in _NOT_NAMES:
        return _Hit("event", "employer", _en_value(org), 0.85, _PAST)
    if title:
        return _Hit("event", "job_title", _en_value(title), 0.8, _PAST)
    return _Hit("event", "", "new job", 0.7, _PAST)


def _rel(m: re.Match[str]) -> _Hit | None:
    rel, name = m["rel"].lower(), re.sub(r"['’]s?$", "", m["name"])
    first = name.split()[0].rstrip(".")
    if first in _NOT_NAMES or name in _NOT_NAMES:
        return None
    if re.match(r"\s(?:and|&)\s(?:I|me)\b", m.string[m.end() :]):
        return None  # "my girlfriend, Toby and I": a list, not an apposition
    if re.fullmatch(_PETS, rel):
        return _Hit("possession", "", f"{rel} {name}", 0.8)
    attr = rel.replace("fiancée", "fiance").replace("fiancé", "fiance").replace("fiancee", "fiance")
    attr = attr if re.fullmatch(_SINGLE_REL, rel) else ""
    return _Hit("relationship", attr, name, 0.85)


_EN_OBJ_END = re.compile(
    r"\s(?:but|because|since|cause|so|when|though|while|as|is|was)\s|\s[-–—]\s|\s(?:and|but)\s"
    r"(?=(?:it|that|this|they|he|she|I|we|my)\b)|,\s(?=(?:the|it|this|that|they|he|she|we|I|so|which"
    r"|but|it's|especially|because|escaping|and\s(?:it|I))\b)"
)
_EN_OBJ_VAGUE = re.compile(
    r"^(?:makes?|is|was|are|were|has|gives|brings|to\sdo|doing\sthat)\b|\b(?:them|it|that|this|those"
    r"|these|there|here)$|\b(?:that|those|this|these|them|it)\b|^(?:his|her|their|every\s?day|each)\b",
    re.I,
)


def _pref(m: re.Match[str]) -> _Hit | None:
    obj = _en_value(_EN_OBJ_END.split(m["obj"])[0])
    if _EN_PREF_BAD_OBJ.match(obj) or _EN_OBJ_VAGUE.search(obj):
        return None
    if obj.startswith("the ") and obj.islower():
        return None  # "the color and texture": of what is in another message
    if len(obj) < 3 or len(obj.split()) > 12:
        return None
    verb = (m["verb"] or m["verb2"] or "").lower()
    if verb == "like" and re.match(r"(?:to\s)?(?:a|the)?\s?(?:bit|lot)\b", obj):
        return None
    return _Hit("preference", "", obj, 0.8)


_EN_PLAN_VAGUE = re.compile(
    r"\s*(?:\w+\s){1,2}?(?:it|that|this|them)\b|\s*make\s(?:tomorrow|today)"
)


def _plan(m: re.Match[str]) -> _Hit | None:
    if _EN_PLAN_VAGUE.match(m.string, m.end()):
        return None  # "let's do it next month": what "it" is lives in another message
    return _Hit(
        "plan",
        "",
        "",
        0.75,
        _FUTURE,
        require_date=True,
        future_only="'m " in m[0] or "’m " in m[0] or " am " in m[0],
    )


def _status(m: re.Match[str]) -> _Hit:
    st = "single" if m.groupdict().get("bu") else m["st"].lower()
    return _Hit(
        "event" if "got" in m[0] or "broke" in m[0] else "fact",
        "relationship_status",
        st,
        0.85,
        _PAST,
    )


_EN_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], _Hit | None]]] = [
    (_EN_GOT_JOB, _got_job),
    (
        _EN_WORK_AT,
        lambda m: (
            _Hit("fact", "employer", _en_value(m["org"]), 0.85)
            if m["org"].split()[0] not in _NOT_NAMES
            else None
        ),
    ),
    (_EN_WORK_AS, lambda m: _Hit("fact", "job_title", _en_value(m["title"]), 0.8)),
    (_EN_JOB_IS, lambda m: _Hit("fact", "job_title", _en_value(m["title"]).lower(), 0.8)),
    (_EN_MOVING, lambda m: _Hit("plan", "residence", _en_value(m["place"]), 0.8, _FUTURE)),
    (
        _EN_MOVED,
        lambda m: _Hit(
            "event",
            "residence" if m["place"][0].isupper() else "",
            _en_value(m["place"]),
            0.8,
            _PAST,
        ),
    ),
    (_EN_LIVE, lambda m: _Hit("fact", "residence", _en_value(m["place"]), 0.85)),
    (_EN_FROM, lambda m: _Hit("fact", "hometown", _en_value(m["place"]), 0.8)),
    (_EN_SCHOOL, lambda m: _Hit("fact", "school", _en_value(m["school"]), 0.8)),
    (_EN_AGE, lambda m: _Hit("fact", "age", m["age"], 0.8)),
    (_EN_GOT_STATUS, _status),
    (_EN_STATUS, _status),
    (_EN_DIET, lambda m: _Hit("fact", "diet", m["diet"].lower(), 0.8)),
    (_EN_ALLERGY, lambda m: _Hit("fact", "", f"allergic to {_en_value(m['x'])}", 0.8)),
    (_EN_VOLUNTEER, lambda m: _Hit("fact", "", f"volunteers at {_en_value(m['org'])}", 0.75)),
    (
        _EN_GOT_ADOPTED,
        lambda m: (
            _Hit("event", "", "got adopted", 0.75, _PAST, subject=m["name"])
            if m["name"] not in _NOT_NAMES
            else None
        ),
    ),
    (_EN_EVENT, lambda m: _Hit("event", "", _en_value(m["ev"]), 0.75, _PAST)),
    (_EN_ACQUIRE, lambda m: _Hit("event", "", m[0].split(None, 1)[1], 0.75, _PAST)),
    (_EN_REL, _rel),
    (_EN_HAVE_REL, lambda m: _Hit("relationship", "", f"{m['n']} {m['rel']}", 0.8)),
    (_EN_HAVE_POSS, lambda m: _Hit("possession", "", f"{m['n']} {m['thing']}", 0.75)),
    (
        _EN_FAV,
        lambda m: _Hit(
            "preference", "favorite_" + m["what"].replace(" ", "_"), _en_value(m["val"]), 0.8
        ),
    ),
    (_EN_PREF, _pref),
    (_EN_PLAN, _plan),
]
