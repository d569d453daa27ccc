"""Redaction of contact details and secrets in chat text, before it is embedded or shown.

``redact(text)`` replaces

- e-mail addresses -> ``[EMAIL]``: plain ones, full-width ones (``hanako＠example．com``),
  internationalized domains (``yuki@例え.jp``) and the obfuscated forms people type to dodge
  scrapers (``john dot doe at gmail dot com``, ``taro [at] example [dot] jp``,
  ``taro アットマーク example.com``)
- URLs that carry a secret (userinfo ``https://user:pass@host``, or a query/fragment parameter
  named like a credential: ``token=``, ``key=``, ``api_key=``, ``access_token=``, ``sig=``,
  ``password=``, ``secret=`` …) -> ``[URL_WITH_SECRET]``; plain URLs are kept, and nothing
  inside a kept URL is rewritten (a long numeric id must not become ``[CARD]``)
- postal addresses -> ``[ADDRESS]``: Japanese ones (optional ``〒`` postal code, optional
  prefecture, a 市区町村 municipality, the town and a 丁目/番地/号 or ``2-21-1`` block number),
  romanized Japanese ones (``2-21-1 Shibuya, Shibuya-ku, Tokyo``) and English street addresses
  (house number, street name, street suffix, optional unit, city, state and ZIP), P.O. boxes
- card-like numbers: 13–19 digits, single spaces/dashes (or dots, in a card grouping such
  as 4-4-4-4) allowed between them, Luhn-valid -> ``[CARD]``
- IBANs (the country's registered length and the mod-97 check) -> ``[IBAN]``
- US Social Security numbers (``123-45-6789``; spaced or unbroken only after a label;
  never-issued areas kept) -> ``[SSN]``
- URLs whose path is itself the secret (Slack/Discord/Zapier/Teams webhooks, Telegram bot
  URLs) and parameters that carry a login or session (``code=``, ``sid=``, ``jwt=``,
  ``session=``, ``jsessionid=`` …) -> ``[URL_WITH_SECRET]``
- マイナンバー (Japan's 12-digit individual number, ``1234 5678 9012`` or unbroken) ->
  ``[MY_NUMBER]`` when its check digit is valid or a マイナンバー/個人番号/"my number" label
  precedes it
- phone numbers -> ``[PHONE]``: Japanese formats (03-1234-5678, 090-1234-5678, 0120-123-456,
  03(1234)5678, 09012345678, full-width digits and hyphens, +81 …) and international ones
  (+1 415 555 0100, (415) 555-0100, 415-555-0100, 1-800-555-0199, +44 20 7946 0958,
  020 7946 0958), each with an optional extension (``ext. 12``, ``x12``, ``内線12``, a bare
  ``ext`` glued on); beyond these rules, a grouped cluster with the ``00`` international
  prefix or a leading-0 national form that the phonenumbers library validates for one of
  ``_PHONE_REGIONS`` (``030 1234567``, ``06 12 34 56 78``)

and returns how many of each it replaced. Times (19:00), dates (2024/03/05, 2024-03-05, 3/23),
money (¥4,500, $120, 1,150円), version numbers, ranges ("3-5 people"), years and short
numbers are never touched: every phone pattern needs a leading 0 (domestic), a leading +
(international), an area code in parentheses, the exact North-American 3-3-4 grouping (or
1-3-3-4), and a plausible digit count; an address needs a street suffix or a municipality plus
a block number. A bare ``〒150-0002`` is kept: a postal code alone names a neighbourhood of
hundreds of households, not a person; with the address after it, the whole span goes.

Matching runs on the NFKC-normalized text (so full-width ``＠``, ``．``, digits and hyphens
look like their ASCII forms) with invisible format characters dropped (a zero-width space
inside a phone number must not hide it) but the span masked is the *original* one, mapped
back character by character, so the rest of the text keeps its exact spelling. Regexes are
compiled once.
"""

from __future__ import annotations

import re
import unicodedata

import phonenumbers

EMAIL = "EMAIL"
PHONE = "PHONE"
CARD = "CARD"
URL_WITH_SECRET = "URL_WITH_SECRET"
ADDRESS = "ADDRESS"
MY_NUMBER = "MY_NUMBER"
IBAN = "IBAN"
SSN = "SSN"
KINDS = (EMAIL, PHONE, CARD, URL_WITH_SECRET, ADDRESS, MY_NUMBER, IBAN, SSN)
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
code auth_code authcode oauth_code otp jwt sid ssid sessid session sessionid session_id
phpsessid jsessionid aspsessionid connect.sid samlresponse samlrequest ticket
""".split()
)
# URLs whose path is the secret: posting to them needs nothing else (chat webhooks, bot tokens).
_SECRET_PATH = re.compile(
    r"^[a-z]+://(?:hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"|(?:[\w-]+\.)?discord(?:app)?\.com/api/webhooks/"
    r"|hooks\.zapier\.com/hooks/|api\.telegram\.org/bot"
    r"|[\w-]+\.webhook\.office\.com/|outlook\.office\.com/webhook/)",
    re.IGNORECASE,
)
# Invisible format characters (zero-width space/joiners, word joiner, BOM, soft hyphen, bidi
# marks): they change nothing a reader sees, so one inside a phone number or an address must
# not hide it. Matching skips them; the span masked keeps them inside.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_SECRET_SUFFIXES = tuple(f"{sep}{name}" for sep in "_-." for name in _SECRET_NAMES)

# -- e-mail (matched on NFKC text: ＠ and ． are already @ and .) -------------------------------
# Domain labels may be Unicode (IDN: 例え.jp); the top-level label stays ASCII (or punycode), so
# "taro@example.comまで" ends at ".com".
_LABEL = r"[^\W_](?:[\w\-]*[^\W_])?"
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]*@"
    rf"{_LABEL}(?:\.{_LABEL})*"
    r"\.(?:[A-Za-z]{2,}|xn--[A-Za-z0-9\-]+)(?![A-Za-z0-9\-])"
)
# Obfuscated: "at"/"dot" spelled out, bracketed, or in Japanese.
_AT_STRONG = (
    r"\s*[\[(<{]\s*(?:at|@|アット)\s*[\])>}]\s*"
    r"|\s*(?:アットマーク|あっとまーく|アット|あっと)\s*"
    r"|\s*@\s*"
)
_AT_WORD = r"\s+at\s+"
_DOT = r"(?:\s*[\[(<{]\s*(?:dot|\.|ドット)\s*[\])>}]\s*|\s+dot\s+|\s*(?:ドット|どっと)\s*|\.|。|｡)"
_TLDS = (
    "com|net|org|edu|gov|mil|info|biz|name|io|co|ne|or|ac|go|ed|lg|gr|ad|jp|uk|us|ca|au|nz|de|"
    "fr|it|es|nl|se|ch|kr|cn|tw|hk|sg|in|br|ru|me|ai|app|dev|xyz|mobi"
)
_OBF_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-@])"
    rf"(?P<local>[A-Za-z0-9_%+\-]+(?:{_DOT}[A-Za-z0-9_%+\-]+)*)"
    rf"(?P<at>{_AT_STRONG}|{_AT_WORD})"
    rf"(?P<domain>[A-Za-z0-9\-]+(?:{_DOT}[A-Za-z0-9\-]+)*){_DOT}(?:{_TLDS})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
# A plain " at " is English prose ("look at this dot com") unless the address looks like one:
# a dotted/underscored/numbered local part, or a well-known mail provider.
_MAIL_PROVIDERS = frozenset(
    """
gmail googlemail yahoo ymail outlook hotmail live msn icloud me mac aol proton protonmail
docomo ezweb au softbank ybb nifty ocn biglobe
""".split()
)
_PLAIN_LOCAL = re.compile(r"[A-Za-z]+")
# Words that sit before or after a spelled " at " in prose ("look at this dot com bubble",
# "was looking at example.com"): such a local part or domain is not an address.
_PROSE_WORDS = frozenset(
    """
a an the this that these those it its my your his her our their me him us them you here there
home work school least most all once first last night noon dawn lunch dinner times random
be is was were are am been being good bad great better best mad angry
look looks looked looking stare stared staring laugh laughed laughing glance glanced
arrive arrives arrived arriving stay stays stayed staying meet meets met meeting
works worked working live lives lived living shop shopped shopping eat ate eating
study studied studying play played playing sit sat sitting stand stood standing
wait waited waiting aim aimed point pointed smile smiled yell yelled shout shouted
born married hint hinted even only just also still right left back up down out off in on
""".split()
)

# -- addresses ------------------------------------------------------------------------------
_PREFS = (
    "北海道|青森県|岩手県|宮城県|秋田県|山形県|福島県|茨城県|栃木県|群馬県|埼玉県|千葉県|東京都|"
    "神奈川県|新潟県|富山県|石川県|福井県|山梨県|長野県|岐阜県|静岡県|愛知県|三重県|滋賀県|京都府|"
    "大阪府|兵庫県|奈良県|和歌山県|鳥取県|島根県|岡山県|広島県|山口県|徳島県|香川県|愛媛県|高知県|"
    "福岡県|佐賀県|長崎県|熊本県|大分県|宮崎県|鹿児島県|沖縄県"
)
_JH = "[-‐‑–—−ー]"
_JK = "[一-龥々〆ヶァ-ヺー]"  # kanji and katakana: municipality and town names
_JKH = "[一-龥々〆ヶァ-ヺーぁ-ゖ]"  # plus hiragana (さいたま市), only after a prefecture
_JT = "(?:[一-龥々〆ヶァ-ヺーの]|[0-9]+条)"  # town names: 丸の内, 北1条西
_KNUM = "[0-9一二三四五六七八九十〇]"
_JBLOCK = (
    rf"(?:{_KNUM}+丁目(?:\s?[0-9]+(?:番地?|{_JH})(?:\s?[0-9]+号?)?)?"
    r"|[0-9]+番地?(?:[0-9]+号)?"
    rf"|[0-9]+(?:{_JH}[0-9]+){{1,3}})"
    r"(?:\s?[0-9]{1,4}号室)?"
)
_POSTAL = rf"(?:〒\s?[0-9]{{3}}{_JH}?[0-9]{{4}}|[0-9]{{3}}-[0-9]{{4}})"
_JP_ADDRESS = re.compile(
    rf"(?:{_POSTAL}\s*)?(?:(?:{_PREFS})(?:{_JKH}{{1,6}}?郡)?(?:{_JKH}{{1,7}}?[市区町村]){{1,2}}"
    rf"|(?:{_JK}{{1,6}}?郡)?(?:{_JK}{{1,7}}?[市区町村]){{1,2}})"
    rf"{_JT}{{0,10}}?{_JBLOCK}(?![0-9])"
    # a 〒 code followed by a prefecture and a municipality, without a block number
    rf"|〒\s?[0-9]{{3}}{_JH}?[0-9]{{4}}\s*(?:{_PREFS})(?:{_JKH}{{1,7}}?[市区町村郡]){{1,2}}"
    rf"{_JT}{{0,10}}"
)
_JP_ROMAN_ADDRESS = re.compile(
    r"(?<![\w$¥£€.:/#-])[0-9]{1,4}(?:-[0-9]{1,4}){1,2}\s+[A-Z][a-z]+(?:-[a-z]+)?,?\s+"
    r"[A-Z][a-z]+-(?:ku|shi|cho|machi|mura|gun)\b"
    r"(?:,\s*[A-Z][a-z]+(?:-(?:to|fu|ken))?\b)?(?:,?\s+[0-9]{3}-[0-9]{4}\b)?"
)
_EN_SUFFIX = (
    "Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Terrace|"
    "Ter|Way|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Square|Sq|Trail|Trl|Alley|Crescent|Close|Plaza|"
    "Row|Mews|Gardens|Grove"
)
_EN_TAIL = (
    r"(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b\.?)?"
    r"(?:,?\s*(?:(?:Apt|Apartment|Unit|Suite|Ste|Fl|Floor|Rm|Room)\.?\s*#?\s*[A-Za-z0-9-]+"
    r"|#\s*[0-9]+[A-Za-z]?))?"
    r"(?:,\s*[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2}(?:,?\s+[A-Z]{2}\b)?(?:,?\s+[0-9]{5}(?:-[0-9]{4})?\b)?)?"
)
_EN_ADDRESS = re.compile(
    r"(?<![\w$¥£€.,:/#+-])[0-9]{1,6}[A-Za-z]?(?:-[0-9]{1,4})?\s+"
    r"(?:(?:N|S|E|W|North|South|East|West)\.?\s+)?"
    r"(?:"
    rf"(?:(?:[A-Z][A-Za-z'’-]*|[0-9]{{1,3}}(?:st|nd|rd|th))\.?\s+){{1,4}}(?i:{_EN_SUFFIX})\b\.?"
    r"|(?:[a-z]+\s+){1,3}(?:st|ave|rd|blvd|ln|pkwy|hwy)\b\.?"  # "123 main st"
    r"|Broadway\b"
    rf"){_EN_TAIL}"
    r"|\bP\.?\s?O\.?\s+Box\s+[0-9]+\b" + _EN_TAIL
)

# -- numbers --------------------------------------------------------------------------------
_CARD = re.compile(rf"{_NB}{_D}(?:[\u0020\-－.]?{_D}){{12,18}}{_NA}")
# Dotted groupings a card is printed in (a dotted run of other lengths is an amount or an id).
_CARD_DOTTED = frozenset({(4, 4, 4, 4), (4, 6, 5), (4, 6, 4), (4, 4, 4, 4, 3), (4, 4, 4, 2)})
# IBAN: country, two check digits, 11-30 letters/digits, spaces or dashes between groups.
_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[\u0020\-]?[A-Za-z0-9]){11,30}", re.IGNORECASE
)
# Lengths per country (the SWIFT registry), so a match stops where the IBAN ends.
_IBAN_LENGTHS = {
    **dict.fromkeys("NO".split(), 15),
    **dict.fromkeys("BE".split(), 16),
    **dict.fromkeys("DK FO FI GL NL".split(), 18),
    **dict.fromkeys("MK SI".split(), 19),
    **dict.fromkeys("AT BA EE KZ LT LU XK".split(), 20),
    **dict.fromkeys("CH CR HR LI LV".split(), 21),
    **dict.fromkeys("BG BH DE GB GE IE ME RS VA".split(), 22),
    **dict.fromkeys("AE GI IL IQ TL".split(), 23),
    **dict.fromkeys("AD CZ ES MD PK RO SA SE SK TN VG".split(), 24),
    **dict.fromkeys("CV PT ST".split(), 25),
    **dict.fromkeys("IS TR".split(), 26),
    **dict.fromkeys("FR GR IT MC MR SM".split(), 27),
    **dict.fromkeys("AL AZ BY CY DO GT HU LB PL SV".split(), 28),
    **dict.fromkeys("BR EG PS QA UA".split(), 29),
    **dict.fromkeys("JO KW MU".split(), 30),
    **dict.fromkeys("MT".split(), 31),
    **dict.fromkeys("LC".split(), 32),
    **dict.fromkeys("RU".split(), 33),
}
# US Social Security number: dashed anywhere; spaced or unbroken only after a label.
_SSN = re.compile(
    r"(?<![0-9A-Za-z\-])([0-9]{3})([- ]?)([0-9]{2})\2([0-9]{4})(?![0-9A-Za-z])(?!-[0-9])"
)
_SSN_LABEL = re.compile(
    r"\bSSN|social\s*security|\bsocial\b|ソーシャル・?セキュリティ|社会保障番号", re.IGNORECASE
)
_MY_NUMBER = re.compile(
    r"(?<![0-9A-Za-z+])(?<![0-9][- ])[0-9]{4}([- ]?)[0-9]{4}\1[0-9]{4}"
    r"(?![0-9A-Za-z])(?![- ][0-9])"
)
_MY_NUMBER_LABEL = re.compile(r"(?:マイナンバー|個人番号|my\s?number)", re.IGNORECASE)
_EXT = (
    r"(?:\s?(?i:extension|extn|ext|内線)\.?\s?[:：]?\s?[0-9]{0,6}"
    r"|\s?(?i:x)\s?[0-9]{1,6}|\s?#[0-9]{1,6})(?![0-9A-Za-z])"
)
_PHONE = re.compile(
    rf"{_NB}(?P<core>"
    rf"[+＋]{_D}{{1,3}}(?:{_SEP}?[(（][0０][)）])?(?:{_SEP}?[(（]?{_D}{{1,4}}[)）]?){{2,5}}"
    rf"|[(（]{_D}{{2,5}}[)）]{_SEP}?{_D}{{2,4}}{_SEP}?{_D}{{3,4}}"  # (415) 555-0100, (03) 1234-5678
    rf"|[0０]{_D}{{1,4}}[(（]{_D}{{1,4}}[)）]{_D}{{3,4}}"  # 03(1234)5678
    rf"|{_D}{{2,5}}{_SEP}{_D}{{1,4}}{_SEP}{_D}{{3,4}}"  # 03-1234-5678, 415-555-0100
    rf"|[0０]{_D}{{9,10}}"  # 09012345678, 0312345678
    rf"|1{_SEP}?[(]?{_D}{{3}}[)]?{_SEP}?{_D}{{3}}{_SEP}{_D}{{4}}"  # 1-800-555-0199
    rf")(?:{_EXT}|{_NA})"
)
# A looser digit cluster (optional + or 00 prefix, parentheses, dots, spaces, dashes) that the
# phonenumbers library (libphonenumber's metadata) then checks as a valid number of one of
# _PHONE_REGIONS: national formats the rules above do not know ("030 1234567",
# "06 12 34 56 78", "02-312-3456") and the 00 international prefix ("0044 20 7946 0958").
# Not glued to an id ("INV-2024-000123", "ISBN978-4-…"), a time or a decimal; a date-like
# year group in front is skipped.
_PHONE_CANDIDATE = re.compile(
    r"(?<![\w+\-.:/])(?:\+|00)?[(]?[0-9][0-9().\- \u3000]{5,22}[0-9](?![\w:])(?![\-.][0-9])"
)
_DATE_LIKE = re.compile(
    r"(?:19|20)[0-9]{2}[.\-/ ]|[0-9]{1,2}[.\-/][0-9]{1,2}[.\-/](?:19|20)[0-9]{2}$"
)
# Regions whose national numbers are dialled with a leading 0 (a national form without it is
# an id or an amount more often than a phone; North America's 3-3-4 is in the rules above).
_PHONE_REGIONS = ("JP", "GB", "DE", "FR", "IT", "NL", "KR", "CN", "TW", "AU", "IN", "BR")
_DIGIT = re.compile(r"[0-9０-９]")
_DIGIT_RUNS = re.compile(r"[0-9０-９]+")

# Lower number = claimed first when candidate spans overlap. A kept URL (None) shields its
# contents; an address swallows the digits in it before phone/card patterns see them.
_PRIORITY = {
    None: 0,
    URL_WITH_SECRET: 0,
    EMAIL: 1,
    IBAN: 2,
    ADDRESS: 2,
    CARD: 3,
    MY_NUMBER: 4,
    SSN: 4,
    PHONE: 5,
}


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


def _iban_end(norm: str, m: re.Match[str]) -> int | None:
    """Where the IBAN starting at ``m`` ends (its country's length, mod-97 check = 1)."""
    country = m.group()[:2].upper()
    length = _IBAN_LENGTHS.get(country)
    if length is None:
        return None
    chars: list[str] = []
    end = m.start()
    for i in range(m.start(), m.end()):
        if norm[i] not in " -":
            chars.append(norm[i].upper())
            end = i + 1
            if len(chars) == length:
                break
    if len(chars) != length or not chars[-1].isalnum():
        return None
    if end < len(norm) and norm[end].isascii() and norm[end].isalnum():
        return None  # glued to more letters or digits: not where the IBAN ends
    code = "".join(chars[4:] + chars[:4])
    return end if int("".join(str(int(c, 36)) for c in code)) % 97 == 1 else None


def _ssn_ok(m: re.Match[str], norm: str) -> bool:
    """Issued-looking (area not 000/666/9xx, group not 00, serial not 0000); spaced or
    unbroken forms need an SSN label within the 30 characters before."""
    area, sep, group, serial = m.groups()
    if area in {"000", "666"} or area[0] == "9" or group == "00" or serial == "0000":
        return False
    if sep == "-":
        return True
    return _SSN_LABEL.search(norm, max(0, m.start() - 30), m.start()) is not None


def _my_number_ok(digits: str) -> bool:
    """The マイナンバー check digit (last digit) over the first eleven, as the law defines it:
    weights 2..7 then 2..6 from the right, 11 - (sum mod 11), 0 when that is 10 or 11."""
    body = [int(c) for c in digits[:11]]
    total = sum(p * (n + 1 if n <= 6 else n - 5) for n, p in enumerate(reversed(body), start=1))
    rest = total % 11
    return int(digits[11]) == (0 if rest <= 1 else 11 - rest)


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
    lengths = [len(r) for r in runs]
    if lengths[:1] == [1] and len(runs) > 1:  # 1-800-555-0199: country code 1, then 3-3-4
        return runs[0] in "1１" and lengths[1:] == [3, 3, 4] and runs[1][0] not in "01０１"
    # North American without a country code: exactly 3-3-4, area code not starting 0/1.
    return lengths == [3, 3, 4] and runs[0][0] not in "1１"


def _library_phones(norm: str, found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Phone spans the phonenumbers library finds valid in some region of ``_PHONE_REGIONS``
    (the whole cluster must parse as one valid number), for grouped digit clusters of 8+
    digits that the rules did not mask whole; a partial rule match ("0044 20 7946" of
    "0044 20 7946 0958") is widened by it. Checked only there, so the library's cost is
    paid by the few lines that need it."""
    out = []
    for m in _PHONE_CANDIDATE.finditer(norm):
        cand = m.group()
        if any(a <= m.start() and m.end() <= b for a, b, _ in found):
            continue  # already masked whole
        digits = sum(ch.isdigit() for ch in cand)
        if not 8 <= digits <= 17 or _DATE_LIKE.search(cand):
            continue
        if not any(ch in " ().-\u3000" for ch in cand.lstrip("+")):
            continue  # an unbroken run is an id more often than a phone
        if _valid_phone(cand):
            out.append((m.start(), m.end(), PHONE))
    return out


def _valid_phone(cand: str) -> bool:
    """``cand`` parses as a valid number: international (+ or the 00 prefix) once, a
    national form (leading 0) in each region of ``_PHONE_REGIONS`` until one accepts it."""
    if cand.startswith(("+", "00")):
        regions: tuple[str, ...] = ("DE",)  # any region that dials 00 abroad reads both
    elif cand.lstrip("(").startswith("0"):
        regions = _PHONE_REGIONS
    else:
        return False
    for region in regions:
        try:
            number = phonenumbers.parse(cand, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            return True
    return False


def _secret_url(url: str) -> bool:
    if _URL_USERINFO.match(url) or _SECRET_PATH.match(url):
        return True
    for name in _URL_PARAM.findall(url):
        low = name.lower()
        if low in _SECRET_NAMES or low.endswith(_SECRET_SUFFIXES):
            return True
    return False


def _normalize(text: str) -> tuple[str, list[int], list[int]]:
    """NFKC text plus, for each normalized character, the original span it came from.

    Per character, so every normalized index maps back (NFKC may turn one character into
    several, "㍿" -> "株式会社", or leave it as is); composing across characters does not
    matter for the patterns here."""
    visible = _INVISIBLE.search(text) is None
    if visible and (text.isascii() or unicodedata.is_normalized("NFKC", text)):
        idx = list(range(len(text)))
        return text, idx, [i + 1 for i in idx]
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, ch in enumerate(text):
        norm = "" if not visible and _INVISIBLE.match(ch) else unicodedata.normalize("NFKC", ch)
        parts.append(norm)
        starts.extend([i] * len(norm))
        ends.extend([i + 1] * len(norm))
    return "".join(parts), starts, ends


def _obfuscated_ok(m: re.Match[str]) -> bool:
    """A spelled-out " at " counts only when the rest looks like an address, not prose."""
    if m.group("at").strip().lower() != "at":
        return True
    local, domain = m.group("local"), m.group("domain")
    first = re.split(r"\s|\.|\[|\(", domain, maxsplit=1)[0].lower()
    if first in _MAIL_PROVIDERS or not _PLAIN_LOCAL.fullmatch(local):
        return True  # john.doe / john dot doe / j_doe / taro99, or at gmail
    # "name at example dot com", "kenji at example.com": a name-like word on both sides
    return local.lower() not in _PROSE_WORDS and first not in _PROSE_WORDS


def _candidates(norm: str) -> list[tuple[int, int, str]]:
    """Every (start, end, kind) match in the normalized text; overlaps resolved later."""
    found: list[tuple[int, int, str]] = []
    if "@" in norm:
        found += [(m.start(), m.end(), EMAIL) for m in _EMAIL.finditer(norm)]
    pos = 0
    while (m := _OBF_EMAIL.search(norm, pos)) is not None:
        if _obfuscated_ok(m):
            found.append((m.start(), m.end(), EMAIL))
            pos = m.end()
        else:
            pos = m.start() + 1
    if _DIGIT.search(norm) is None and "丁目" not in norm:
        return found
    for pattern in (_JP_ADDRESS, _JP_ROMAN_ADDRESS, _EN_ADDRESS):
        found += [(m.start(), m.end(), ADDRESS) for m in pattern.finditer(norm)]
    for m in _IBAN.finditer(norm):
        end = _iban_end(norm, m)
        if end is not None:
            found.append((m.start(), end, IBAN))
    for m in _CARD.finditer(norm):
        runs = _DIGIT_RUNS.findall(m.group())
        digits = "".join(runs)
        seps = set(re.sub(r"[0-9]", "", m.group()))
        if len(seps) > 1 or ("." in seps and tuple(map(len, runs)) not in _CARD_DOTTED):
            continue  # mixed separators, or dots in a grouping no card is printed in
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            found.append((m.start(), m.end(), CARD))
    for m in _SSN.finditer(norm):
        if _ssn_ok(m, norm):
            found.append((m.start(), m.end(), SSN))
    for m in _MY_NUMBER.finditer(norm):
        digits = m.group().replace("-", "").replace(" ", "")
        labelled = _MY_NUMBER_LABEL.search(norm, max(0, m.start() - 20), m.start())
        if _my_number_ok(digits) or labelled is not None:
            found.append((m.start(), m.end(), MY_NUMBER))
    for m in _PHONE.finditer(norm):
        if _is_phone(m.group("core")):
            found.append((m.start(), m.end(), PHONE))
    return found + _library_phones(norm, found)


def _urls(text: str) -> list[tuple[int, int, str | None]]:
    """URL spans of the original text: secret-bearing ones to mask, plain ones to shield."""
    spans: list[tuple[int, int, str | None]] = []
    idx = [i for i, ch in enumerate(text) if not _INVISIBLE.match(ch)]
    seen = text if len(idx) == len(text) else "".join(text[i] for i in idx)
    for m in _URL.finditer(seen):
        url = m.group()
        while url and url[-1] in _URL_TRAILING:  # sentence punctuation, unless a ")" is paired
            if url[-1] == ")" and url.count("(") >= url.count(")"):
                break
            url = url[:-1]
        kind = URL_WITH_SECRET if _secret_url(url) else None
        spans.append((idx[m.start()], idx[m.start() + len(url) - 1] + 1, kind))
    return spans


def find_spans(text: str) -> list[tuple[int, int, str]]:
    """The ``(start, end, kind)`` spans of ``text`` that :func:`redact` masks, in order.

    Exposed so a reviewer (and the precision test on the bundled sample) can list exactly what
    is masked, as original substrings, without diffing placeholders back into the text."""
    if not text:
        return []
    spans: list[tuple[int, int, str | None]] = _urls(text) if "://" in text else []
    norm, starts, ends = _normalize(text)
    spans += [(starts[a], ends[b - 1], kind) for a, b, kind in _candidates(norm) if b > a]
    taken: list[tuple[int, int, str | None]] = []
    for start, end, kind in sorted(spans, key=lambda s: (_PRIORITY[s[2]], s[0], -s[1])):
        if all(end <= a or start >= b for a, b, _ in taken):
            taken.append((start, end, kind))
    # a kept URL (kind None) only shielded its contents: nothing to mask
    return [(start, end, kind) for start, end, kind in sorted(taken) if kind is not None]


def redact(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with e-mails, phones, card numbers, IBANs, SSNs, マイナンバー, postal addresses
    and secret-bearing URLs replaced by placeholders, and the number of replacements per kind (all
    of ``KINDS`` as keys). Idempotent: placeholders hold nothing any pattern matches."""
    counts = dict.fromkeys(KINDS, 0)
    spans = find_spans(text)
    if not spans:
        return text, counts
    pieces: list[str] = []
    pos = 0
    for start, end, kind in spans:
        pieces.append(text[pos:start])
        pieces.append(PLACEHOLDERS[kind])
        counts[kind] += 1
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces), counts
