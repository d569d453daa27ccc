"""redact(): contact details and secrets out; times, dates, money and plain URLs untouched."""

from __future__ import annotations

import pytest

from memory_pipeline.core.common.redact import KINDS, PLACEHOLDERS, redact


@pytest.mark.parametrize(
    ("text", "expected", "kind", "count"),
    [
        # e-mail
        ("mail taro.yamada+chat@example.co.jp please", "mail [EMAIL] please", "EMAIL", 1),
        ("連絡はtaro@example.comまで", "連絡は[EMAIL]まで", "EMAIL", 1),
        ("A: a@b.io, B: c.d@mail.example.org", "A: [EMAIL], B: [EMAIL]", "EMAIL", 2),
        ("全角＠も user＠example.jp", "全角＠も [EMAIL]", "EMAIL", 1),
        # Japanese phone formats
        ("Call 03-1234-5678", "Call [PHONE]", "PHONE", 1),
        ("携帯は090-1234-5678です", "携帯は[PHONE]です", "PHONE", 1),
        ("フリーダイヤル0120-123-456", "フリーダイヤル[PHONE]", "PHONE", 1),
        ("電話：０９０－１２３４－５６７８", "電話：[PHONE]", "PHONE", 1),
        ("携帯 090ー1234ー5678", "携帯 [PHONE]", "PHONE", 1),
        ("03(1234)5678に電話して", "[PHONE]に電話して", "PHONE", 1),
        ("09012345678まで", "[PHONE]まで", "PHONE", 1),
        ("+81 90-1234-5678", "[PHONE]", "PHONE", 1),
        ("+81-3-1234-5678 (office)", "[PHONE] (office)", "PHONE", 1),
        ("+819012345678", "[PHONE]", "PHONE", 1),
        # international formats
        ("call +1 415 555 0100 now", "call [PHONE] now", "PHONE", 1),
        ("(415) 555-0100", "[PHONE]", "PHONE", 1),
        ("415-555-0100 or 415.555.0101", "[PHONE] or [PHONE]", "PHONE", 2),
        ("London +44 20 7946 0958", "London [PHONE]", "PHONE", 1),
        ("UK 020 7946 0958", "UK [PHONE]", "PHONE", 1),
        # cards (Luhn-valid)
        ("card 4111 1111 1111 1111 ok", "card [CARD] ok", "CARD", 1),
        ("4111-1111-1111-1111", "[CARD]", "CARD", 1),
        ("Amex 378282246310005", "Amex [CARD]", "CARD", 1),
        ("カード番号は５５５５５５５５５５５５４４４４です", "カード番号は[CARD]です", "CARD", 1),
        # URLs that carry secrets
        ("see https://api.example.com/v1?token=abc123&x=1", "see [URL_WITH_SECRET]", None, 1),
        ("https://user:pa55@host.example.com/path", "[URL_WITH_SECRET]", None, 1),
        ("https://x.io/cb#access_token=abc&state=1", "[URL_WITH_SECRET]", None, 1),
        ("https://x.io/?api_key=K1", "[URL_WITH_SECRET]", None, 1),
        ("https://x.io/?key=K1", "[URL_WITH_SECRET]", None, 1),
        ("https://x.io/?sig=abc&e=1", "[URL_WITH_SECRET]", None, 1),
        ("https://x.io/login?password=hunter2", "[URL_WITH_SECRET]", None, 1),
        ("https://x.io/?client_secret=s", "[URL_WITH_SECRET]", None, 1),
        (
            "(https://s3.amazonaws.com/b/k?X-Amz-Signature=abcd).",
            "([URL_WITH_SECRET]).",
            None,
            1,
        ),
        ("ここ→https://x.io/?secret=abc。", "ここ→[URL_WITH_SECRET]。", None, 1),
    ],
)
def test_positives(text: str, expected: str, kind: str | None, count: int) -> None:
    kind = kind or "URL_WITH_SECRET"
    redacted, counts = redact(text)
    assert redacted == expected
    assert counts[kind] == count
    assert sum(counts.values()) == count


@pytest.mark.parametrize(
    "text",
    [
        "meet at 19:00",
        "on 2024/03/05, or 3/23",
        "2024-03-05 19:00",
        "2024-03-05T19:00:00+09:00",
        "10:00-17:00",
        "¥4,500 and $120 and 1,150円",
        "一人4,500円、家賃9万2千円",
        "in 2024 we had 12 people",
        "2019-2024",
        "〒150-0002",
        "seats 12D and 12E, numbers 412 and 413",
        "Nozomi 7 on the 23rd, Tokyo 8:00 -> Kyoto 10:15",
        "Train was 14,170 each way, so I paid 56,680 for both of us",
        "1,000,000 yen",
        "12-15-2024 and 01-15-2024",
        "3.14159 / version 1.2.3",
        "order 1234567890",
        "4111 1111 1111 1112",  # card-like but not Luhn-valid
        "score +5 and 2 + 3 = 5",
        "plain https://example.com/page?id=3 stays",
        "https://twitter.com/x/status/4111111111111111111",  # digits inside a kept URL
        "https://example.com/?monkey=1&turkey=2",  # 'key' only as a word suffix
        "(https://en.wikipedia.org/wiki/Kyoto_(city)) ok",
        "@kenta 見た？",  # a mention, not an e-mail
        "3月20日（水・祝）の朝9時、トラックは10時に来る",
        "",
    ],
)
def test_negatives_are_untouched(text: str) -> None:
    redacted, counts = redact(text)
    assert redacted == text
    assert counts == dict.fromkeys(KINDS, 0)


def test_mixed_message_counts_every_kind() -> None:
    text = (
        "Mail me at a@b.io or call 090-1234-5678 after 19:00; "
        "card 4111 1111 1111 1111, link https://x.io/?token=t and https://x.io/plain"
    )
    redacted, counts = redact(text)
    assert redacted == (
        "Mail me at [EMAIL] or call [PHONE] after 19:00; "
        "card [CARD], link [URL_WITH_SECRET] and https://x.io/plain"
    )
    assert counts == {
        "EMAIL": 1,
        "PHONE": 1,
        "CARD": 1,
        "URL_WITH_SECRET": 1,
        "ADDRESS": 0,
        "MY_NUMBER": 0,
        "IBAN": 0,
        "SSN": 0,
    }


@pytest.mark.parametrize(
    "text",
    ["call 03-1234-5678", "a@b.io", "https://x.io/?token=t", "4111 1111 1111 1111", "no pii"],
)
def test_idempotent(text: str) -> None:
    once, _ = redact(text)
    twice, counts = redact(once)
    assert twice == once
    assert sum(counts.values()) == 0


def test_placeholders() -> None:
    assert PLACEHOLDERS == {
        "EMAIL": "[EMAIL]",
        "PHONE": "[PHONE]",
        "CARD": "[CARD]",
        "URL_WITH_SECRET": "[URL_WITH_SECRET]",
        "ADDRESS": "[ADDRESS]",
        "MY_NUMBER": "[MY_NUMBER]",
        "IBAN": "[IBAN]",
        "SSN": "[SSN]",
    }


# -- issue 13: what people actually write, in both languages ----------------------------------
# The first eight are the crafted strings that slipped the previous patterns (each failed).
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hanako＠example．com", "[EMAIL]"),
        (
            "I live at 1600 Pennsylvania Avenue NW, Washington, DC 20500 now",
            "I live at [ADDRESS] now",
        ),
        ("〒150-0002 東京都渋谷区渋谷2-21-1", "[ADDRESS]"),
        ("1-800-555-0199", "[PHONE]"),
        ("090-1234-5678ext", "[PHONE]"),
        ("yuki@例え.jp", "[EMAIL]"),
        ("john dot doe at gmail dot com", "[EMAIL]"),
        ("マイナンバーは123456789018です", "マイナンバーは[MY_NUMBER]です"),
        # e-mail: full-width around Japanese text, IDN, obfuscations
        ("連絡先：ｈａｎａｋｏ＠ｅｘａｍｐｌｅ．ｃｏ．ｊｐまで", "連絡先：[EMAIL]まで"),
        ("メールはyuki@例え.jpです", "メールは[EMAIL]です"),
        ("taro [at] example [dot] co [dot] jp", "[EMAIL]"),
        ("write john.doe (at) example (dot) org!", "write [EMAIL]!"),
        ("mail john at gmail dot com", "mail [EMAIL]"),
        ("j_doe at example.com", "[EMAIL]"),
        ("taro アットマーク example.com に送って", "[EMAIL] に送って"),
        ("hanako あっとまーく example どっと jp", "[EMAIL]"),
        ("yuki @ example.com", "[EMAIL]"),
        # phones with extensions and the North-American 1- prefix
        ("call 090-1234-5678 ext. 123 now", "call [PHONE] now"),
        ("office (415) 555-0100 x204", "office [PHONE]"),
        ("代表03-1234-5678内線456まで", "代表[PHONE]まで"),
        ("toll free 1 (800) 555-0199", "toll free [PHONE]"),
        ("+1-800-555-0199 ext 9", "[PHONE]"),
        ("415-555-0100 extremely urgent", "[PHONE] extremely urgent"),
        # Japanese addresses: with/without 〒 and prefecture, 丁目/番地/号, kanji numerals, rooms
        ("住所は大阪市北区梅田3丁目1番1号です", "住所は[ADDRESS]です"),
        ("東京都新宿区西新宿二丁目8番1号", "[ADDRESS]"),
        ("〒060-0001 北海道札幌市中央区北1条西2丁目", "[ADDRESS]"),
        ("送り先 埼玉県さいたま市浦和区高砂3-15-1 101号室", "送り先 [ADDRESS]"),
        ("〒１５０－０００２ 東京都渋谷区渋谷２－２１－１", "[ADDRESS]"),
        ("〒100-0005 東京都千代田区丸の内", "[ADDRESS]"),
        # English and romanized addresses
        ("221B Baker Street, London", "[ADDRESS]"),
        ("ship to 123 main st, Springfield, IL 62704 please", "ship to [ADDRESS] please"),
        ("42 W. 35th St., Apt 4B, New York, NY 10001", "[ADDRESS]"),
        ("We're at 10 Downing Street.", "We're at [ADDRESS]"),
        ("Our flat: 2-21-1 Shibuya, Shibuya-ku, Tokyo 150-0002", "Our flat: [ADDRESS]"),
        ("P.O. Box 1234", "[ADDRESS]"),
        # マイナンバー: check digit, grouping, or a label before an invalid one
        ("個人番号 1234 5678 9018", "個人番号 [MY_NUMBER]"),
        ("my number is 1234-5678-9012", "my number is [MY_NUMBER]"),
        ("ref 111111111118", "ref [MY_NUMBER]"),
        # cards written with full-width digits and spaces
        ("カード ４１１１　１１１１　１１１１　１１１１", "カード [CARD]"),
        # several kinds in one message, original spelling kept around them
        (
            "Ｔｅｌ：０３－１２３４－５６７８、ｍａｉｌ：ａ＠ｂ．ｉｏ、住所：渋谷区渋谷2-21-1",
            "Ｔｅｌ：[PHONE]、ｍａｉｌ：[EMAIL]、住所：[ADDRESS]",
        ),
    ],
)
def test_what_people_write(text: str, expected: str) -> None:
    redacted, counts = redact(text)
    assert redacted == expected
    assert sum(counts.values()) == sum(redacted.count(p) for p in PLACEHOLDERS.values())


@pytest.mark.parametrize(
    "text",
    [
        "2024-03-01",
        "on 2024-03-01 at 10:00 we met at the station",
        "12:30〜13:45 に集合",
        "¥3,000 と ￥12,000、$1,299.99",
        "version 1.2.3, v2.10.4-rc1, python 3.11.7",
        "3-5 people",
        "3-5人で行こう",
        "東京都に住んでる、渋谷区が好き",
        "大阪府の人口は880万人",
        "the meeting in room 12 is 2-3 hours",
        "look at this dot com bubble",
        "meet me at home dot",
        "I walked 5 blocks down the road",
        "we saw 2 cars drive by",
        "order 123456789012",  # 12 digits, wrong マイナンバー check digit, no label
        "tracking 1234 5678 9012 3456 7",
        "3丁目の夕日",
        "score 1-0, then 2-1, final 3-2",
        "ISBN 978-4-06-519981-7",
        "〒150-0002",
        "Flight NH 106 at gate 12",
        "I have 3 kids",
    ],
)
def test_reviewer_negatives_are_untouched(text: str) -> None:
    redacted, counts = redact(text)
    assert redacted == text
    assert counts == dict.fromkeys(KINDS, 0)


@pytest.mark.parametrize(
    "text",
    [
        "hanako＠example．com",
        "〒150-0002 東京都渋谷区渋谷2-21-1",
        "john dot doe at gmail dot com",
        "マイナンバーは123456789018です",
        "090-1234-5678ext",
    ],
)
def test_new_kinds_are_idempotent(text: str) -> None:
    once, _ = redact(text)
    twice, counts = redact(once)
    assert twice == once
    assert sum(counts.values()) == 0


def test_masks_the_original_span_not_the_normalized_text() -> None:
    """NFKC is for matching only: the text around a match keeps its full-width spelling and
    the placeholder replaces exactly the original characters (one ㍿ stays one ㍿)."""
    text = "㍿サンプル　ｔｅｌ ０９０－１２３４－５６７８ です"
    redacted, counts = redact(text)
    assert redacted == "㍿サンプル　ｔｅｌ [PHONE] です"
    assert counts["PHONE"] == 1
