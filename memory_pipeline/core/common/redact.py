"""Redaction of contact details and secrets in chat text, before it is embedded or shown.

``redact(text)`` replaces

- e-mail addresses -> ``[EMAIL]``
- URLs that carry a secret (userinfo ``https://user:pass@host``, or a query/fragment parameter
  named like a credential: ``token=``, ``key=``, ``api_key=``, ``access_token=``, ``sig=``,
  ``password=``, ``secret=`` …) -> ``[URL_WITH_SECRET]``; plain URLs are kept, and nothing
  inside a kept URL is rewritten (a long numeric id must not become ``[CARD]``)
- card-like numbers: 13–19 digits, single spaces/dashes allowed between them, Luhn-valid
  -> ``[CARD]``
- phone numbers -> ``[PHONE]``: Japanese formats (03-1234-5678, 090-1234-5678, 0120-123-456,
  03(1234)5678, 09012345678, full-width digits and hyphens, +81 …) and international ones
  (+1 415 555 0100, (415) 555-0100, 415-555-0100, +44 20 7946 0958, 020 7946 0958)

and returns how many of each it replaced. Times (19:00), dates (2024/03/05, 2024-03-05, 3/23),
money (¥4,500, $120, 1,150円), years and short numbers are never touched: every phone pattern
needs a leading 0 (domestic), a leading + (international), an area code in parentheses, or
the exact North-American 3-3-4 grouping, and a plausible digit count. Regexes are compiled
once; text without digits, "@" or "://" returns immediately.
"""

from __future__ import annotations

import re

EMAIL = "EMAIL"
PHONE = "PHONE"
CARD = "CARD"
URL_WITH_SECRET = "URL_WITH_SECRET"
KINDS = (EMAIL, PHONE, CARD, URL_WITH_SECRET)
PLACEHOLDERS = {kind: f"[{kind}]" for kind in KINDS}

_D = "[0-9０-９]"
_H = "[-‐‑‒–—―−－ー]"  # hyphen-likes, incl. full-width and the katakana long mark (090ー1234…)
_SEP = "[-‐‑‒–—―−－ー.．\u0020\u3000]"  # one separator between digit groups
# Not glued to a longer token: no digit/letter/+ before, no digit/letter or "-digit" after.
_NB = r"(?<![0-9０-９A-Za-z+＋])(?<![0-9０-９][-‐‑‒–—―−－ー])"
_NA = rf"(?![0-9０-９A-Za-z])(?!{_H}{_D})"

_URL = re.compile(r"(?:https?|ftp|wss?)://[^\s<>\"'`、。「」『』（）【】〈〉《》]+", re.IGNORECASE)
_URL_TRAILING = ".,;:!?)]}>'\"。、！？）」』】"
_URL_USERINFO = re.compile(r"^[a-z][a-z0-9+.\-]*://[^/?#@\s:]*:[^/?#@\s]*@", re.IGNORECASE)
_URL_PARAM = re.compile(r"[?&#;]([^=&#;?/\s]+)=")
_SECRET_NAMES = frozenset(
    """
token key apikey api_key api-key access_token accesstoken refresh_token id_token auth
auth_token authtoken authorization sig signature password passwd pwd pass secret
client_secret credential credentials private_key privatekey session_token sessiontoken
""".split()
)
_SECRET_SUFFIXES = tuple(f"{sep}{name}" for sep in "_-." for name in _SECRET_NAMES)

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]*[@＠]"
    r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,}(?![A-Za-z0-9\-])"
)
_CARD = re.compile(rf"{_NB}{_D}(?:[\u0020\-－]?{_D}){{12,18}}{_NA}")
_PHONE = re.compile(
    rf"{_NB}(?:"
    rf"[+＋]{_D}{{1,3}}(?:{_SEP}?[(（][0０][)）])?(?:{_SEP}?[(（]?{_D}{{1,4}}[)）]?){{2,5}}"
    rf"|[(（]{_D}{{2,5}}[)）]{_SEP}?{_D}{{2,4}}{_SEP}?{_D}{{3,4}}"  # (415) 555-0100, (03) 1234-5678
    rf"|[0０]{_D}{{1,4}}[(（]{_D}{{1,4}}[)）]{_D}{{3,4}}"  # 03(1234)5678
    rf"|{_D}{{2,5}}{_SEP}{_D}{{1,4}}{_SEP}{_D}{{3,4}}"  # 03-1234-5678, 415-555-0100
    rf"|[0０]{_D}{{9,10}}"  # 09012345678, 0312345678
    rf"){_NA}"
)
_DIGIT = re.compile(r"[0-9０-９]")
_DIGIT_RUNS = re.compile(r"[0-9０-９]+")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _is_phone(s: str) -> bool:
    """Digit-count and grouping rules that keep dates, times and amounts out."""
    runs = _DIGIT_RUNS.findall(s)
    n = sum(map(len, runs))
    first = s[0]
    if first in "+＋":
        return 8 <= n <= 15
    if first in "(（":
        return 10 <= n <= 11
    if runs[0][0] in "0０":
        return 10 <= n <= 11  # Japanese (and UK-style) domestic numbers
    # North American without a country code: exactly 3-3-4, area code not starting 0/1.
    return [len(r) for r in runs] == [3, 3, 4] and runs[0][0] not in "1１"


def _secret_url(url: str) -> bool:
    if _URL_USERINFO.match(url):
        return True
    for name in _URL_PARAM.findall(url):
        low = name.lower()
        if low in _SECRET_NAMES or low.endswith(_SECRET_SUFFIXES):
            return True
    return False


def _redact_plain(text: str, counts: dict[str, int]) -> str:
    """E-mail, card and phone redaction of a text that holds no URL."""
    if "@" in text or "＠" in text:
        text, n = _EMAIL.subn(PLACEHOLDERS[EMAIL], text)
        counts[EMAIL] += n
    if _DIGIT.search(text) is None:
        return text

    def card(m: re.Match[str]) -> str:
        digits = "".join(_DIGIT_RUNS.findall(m.group()))
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            counts[CARD] += 1
            return PLACEHOLDERS[CARD]
        return m.group()

    def phone(m: re.Match[str]) -> str:
        if _is_phone(m.group()):
            counts[PHONE] += 1
            return PLACEHOLDERS[PHONE]
        return m.group()

    text = _CARD.sub(card, text)
    return _PHONE.sub(phone, text)


def redact(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with e-mails, phones, card numbers and secret-bearing URLs replaced by
    placeholders, and the number of replacements per kind (all of ``KINDS`` as keys)."""
    counts = dict.fromkeys(KINDS, 0)
    if not text:
        return text, counts
    has_url = "://" in text
    if not has_url and "@" not in text and "＠" not in text and _DIGIT.search(text) is None:
        return text, counts
    if not has_url:
        return _redact_plain(text, counts), counts
    pieces: list[str] = []
    pos = 0
    for m in _URL.finditer(text):
        url = m.group()
        while url and url[-1] in _URL_TRAILING:  # sentence punctuation, unless a ")" is paired
            if url[-1] == ")" and url.count("(") >= url.count(")"):
                break
            url = url[:-1]
        end = m.start() + len(url)
        pieces.append(_redact_plain(text[pos : m.start()], counts))
        if _secret_url(url):
            pieces.append(PLACEHOLDERS[URL_WITH_SECRET])
            counts[URL_WITH_SECRET] += 1
        else:
            pieces.append(url)
        pos = end
    pieces.append(_redact_plain(text[pos:], counts))
    return "".join(pieces), counts
