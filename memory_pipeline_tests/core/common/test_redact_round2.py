"""redact() on the remote path, second round: bank and national ids, webhooks, OAuth/session
URLs, invisible characters, obfuscated e-mails and phone formats of other regions.

The crafted English/Japanese set (fixtures/pii_crafted/redact_set.jsonl, also scored by
benchmarks/bench_redact.py) is asserted per type against floors measured on it, and every
hard negative must stay untouched.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memory_pipeline.core.common.redact import KINDS, find_spans, redact

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import bench_redact  # noqa: E402

ROWS = bench_redact.load_set()
# Measured on the crafted set with this code: every type at 100 %. Before this round IBAN,
# SSN, WEBHOOK and INVISIBLE were at 0 %, URL_SECRET (OAuth/session names) at 33 %.
FLOORS = {
    "EMAIL": 1.0,
    "EMAIL_OBFUSCATED": 1.0,
    "INVISIBLE": 1.0,
    "PHONE": 1.0,
    "CARD": 1.0,
    "IBAN": 1.0,
    "SSN": 1.0,
    "MY_NUMBER": 1.0,
    "ADDRESS": 1.0,
    "URL_SECRET": 1.0,
    "WEBHOOK": 1.0,
}


def test_the_set_covers_both_languages_and_every_type() -> None:
    types = {(r["lang"], r["type"]) for r in ROWS}
    positives = {t for _, t in types if not t.startswith("NEG_")}
    assert positives == set(FLOORS)
    for lang in ("en", "ja"):
        assert {t for lg, t in types if lg == lang and not t.startswith("NEG_")} >= {
            "EMAIL",
            "EMAIL_OBFUSCATED",
            "INVISIBLE",
            "PHONE",
            "CARD",
            "IBAN",
            "SSN",
            "URL_SECRET",
            "WEBHOOK",
        }
        assert sum(1 for r in ROWS if r["lang"] == lang and r["type"].startswith("NEG_")) >= 20


@pytest.mark.parametrize("kind", sorted(FLOORS))
def test_recall_per_type_meets_its_floor(kind: str) -> None:
    scores = bench_redact.score([r for r in ROWS if r["type"] == kind], find_spans)
    hits = sum(h for h, _ in scores.values())
    n = sum(n for _, n in scores.values())
    missed = bench_redact.misses([r for r in ROWS if r["type"] == kind], find_spans)
    assert hits / n >= FLOORS[kind], missed


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r["type"].startswith("NEG_")], ids=lambda r: r["text"][:40]
)
def test_hard_negatives_stay_unredacted(row: dict) -> None:
    redacted, counts = redact(row["text"])
    assert redacted == row["text"]
    assert counts == dict.fromkeys(KINDS, 0)


# -- each new class, with its own inputs (not the set's) --------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("IBAN IT60 X054 2811 1010 0000 0123 456 ok", "IBAN [IBAN] ok"),
        ("be71096123456769", "[IBAN]"),
        ("IBANはＮＬ９１ＡＢＮＡ０４１７１６４３００です", "IBANは[IBAN]です"),
        ("card 5105.1051.0510.5100", "card [CARD]"),
        ("SSN: 457-55-5462.", "SSN: [SSN]."),
        ("ssn 457555462 thx", "ssn [SSN] thx"),
        ("https://hooks.slack.com/services/TA/BB/cc1122 を登録", "[URL_WITH_SECRET] を登録"),
        ("see https://ptb.discord.com/api/webhooks/42/tok", "see [URL_WITH_SECRET]"),
        ("https://api.telegram.org/bot123:ABC/sendMessage", "[URL_WITH_SECRET]"),
        ("https://x.example/cb?state=a&code=zz9", "[URL_WITH_SECRET]"),
        ("https://x.example/p?SID=1f2e", "[URL_WITH_SECRET]"),
        ("https://x.example/p;JSESSIONID=AB12", "[URL_WITH_SECRET]"),
        ("https://x.example/p?a=1&jwt=e.y.z", "[URL_WITH_SECRET]"),
        ("https://x.example/p?sess\u200bion=q", "[URL_WITH_SECRET]"),
        ("tel 080\u2060-9876\u2060-5432 ok", "tel [PHONE] ok"),
        ("a.b\u00ad@example.org", "[EMAIL]"),
        ("メール：ｓａｔｏ\u200b＠ｅｘａｍｐｌｅ．ｊｐ", "メール：[EMAIL]"),
        ("write to lena at example dot org", "write to [EMAIL]"),
        ("lena (at) example (dot) org", "[EMAIL]"),
        ("mio アットマーク example ドット co ドット jp", "[EMAIL]"),
        ("Munich: 089 12345678", "Munich: [PHONE]"),
        ("from abroad 0033 1 23 45 67 89", "from abroad [PHONE]"),
        ("Seoul 031-123-4567 office", "Seoul [PHONE] office"),
        ("携帯 ０７０－９８７６－５４３２", "携帯 [PHONE]"),
    ],
)
def test_new_classes(text: str, expected: str) -> None:
    assert redact(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "IBAN DE00 3704 0044 0532 0130 00",  # wrong check digits
        "DE89 is the code name",
        "4111.1111.1111.1111.9",  # dotted, not a card grouping, and Luhn-invalid
        "1.234.567.890.123 yen",
        "123-45-6789-0",  # a longer id
        "000-12-3456 and 666-12-3456 and 900-12-3456",  # never-issued areas
        "123 45 6789",  # spaced, without a label
        "https://slack.com/intl/ja-jp/help",
        "https://example.com/?barcode=1&encode=utf8",  # code only as a word suffix
        "we meet at the station dot",
        "I'm looking at example.com now",
        "she works at home dot com",
        "25.12.2024 and 2024.12.25",
        "ver 10.0.19045.3693",
        "item 12345678",
    ],
)
def test_new_hard_negatives(text: str) -> None:
    assert redact(text)[0] == text


@pytest.mark.parametrize(
    "text",
    ["DE89 3704 0044 0532 0130 00", "SSN 123-45-6789", "0044 20 7946 0958", "a\u200b@b.io"],
)
def test_new_kinds_are_idempotent(text: str) -> None:
    once, _ = redact(text)
    twice, counts = redact(once)
    assert twice == once and sum(counts.values()) == 0


def test_invisible_characters_stay_inside_the_masked_span() -> None:
    """The zero-width space is masked with the number: nothing of it is left around it."""
    text = "電話は090\u200b-1234-5678です"
    assert redact(text)[0] == "電話は[PHONE]です"
