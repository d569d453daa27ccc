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
    assert counts == {"EMAIL": 1, "PHONE": 1, "CARD": 1, "URL_WITH_SECRET": 1}


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
    }
