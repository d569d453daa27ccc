"""embedding_text: fixed identity sentence, verbatim summary, bounded raw excerpt."""

from __future__ import annotations

import datetime as dt

import pytest

from memory_pipeline.core.represent.embedding_text import (
    DEFAULT_MAX_EXCERPT,
    EXCERPT_LABEL,
    SUMMARY_LABEL,
    build_embedding_text,
    excerpt_of,
    identity_sentence,
)
from memory_pipeline.core.represent.summarize import extractive_summary, parse_raw_text

MARIA_RAW = "\n".join(
    [
        "[2024-03-01 20:10] Maria: Yuki!! Guess what, I got the job at Hikari Design 🎉",
        "[2024-03-01 20:10] Maria: UX designer, full time. I start on Monday, March 4",
        "[2024-03-01 20:12] Yuki: [Sticker]",
        "[2024-03-01 20:21] Maria: Perfect. Let's meet at Sangenjaya station, south exit, 9:40",
        "[2024-03-01 20:24] Yuki: Can't wait. See you tomorrow!",
    ]
)
KENTA_RAW = "\n".join(
    [
        "[2024-03-05 23:40] 健太: 今日はお疲れ！無事に帰れた？",
        "[2024-03-05 23:45] 健太: 6月15日だって。俺たちにも招待状送るって",
        "[2024-03-06 00:38] 健太: 美咲、21日OKだって！店はまた探す",
        "[2024-03-06 00:40] Yuki: 早っ笑 了解！おやすみ",
    ]
)


def build(raw_text: str, lang: str, **overrides: object) -> str:
    lines = parse_raw_text(raw_text)
    args: dict[str, object] = {
        "contact_id": "Maria" if lang == "en" else "健太",
        "conversation_id": "maria" if lang == "en" else "kenta",
        "start_local": lines[0].local_ts,
        "end_local": lines[-1].local_ts,
        "speakers": sorted({x.sender for x in lines}),
        "summary": extractive_summary(lines, lang),
        "raw_text": raw_text,
        "lang": lang,
    }
    args.update(overrides)
    return build_embedding_text(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw_text", "lang", "first_line"),
    [
        (
            MARIA_RAW,
            "en",
            "Conversation with Maria (maria) on Friday, March 1, 2024, 20:10–20:24, "
            "between Maria and Yuki.",
        ),
        (
            KENTA_RAW,
            "ja",
            "健太とのトーク（kenta）、2024年3月5日(火) 23:40〜3月6日(水) 00:40、"
            "参加者: Yuki、健太。",
        ),
    ],
)
def test_layout_identity_summary_excerpt(raw_text: str, lang: str, first_line: str) -> None:
    summary = extractive_summary(parse_raw_text(raw_text), lang)
    text = build(raw_text, lang)
    assert text == f"{first_line}\n{SUMMARY_LABEL}{summary}\n{EXCERPT_LABEL}\n{raw_text}"
    assert summary and summary in text
    assert excerpt_of(raw_text, DEFAULT_MAX_EXCERPT) in text
    assert text.count(EXCERPT_LABEL) == 1


@pytest.mark.parametrize(
    ("start", "end", "speakers", "lang", "expected"),
    [
        (
            dt.datetime(2024, 3, 2, 23, 40),
            dt.datetime(2024, 3, 3, 0, 25),
            ["Maria", "Yuki"],
            "en",
            "Conversation with Maria (maria) on Saturday, March 2, 2024, 23:40 to "
            "Sunday, March 3, 2024, 00:25, between Maria and Yuki.",
        ),
        (
            dt.datetime(2024, 3, 6, 19, 48),
            dt.datetime(2024, 3, 6, 19, 48),
            ["Maria", "Maria", ""],
            "en",
            "Conversation with Maria (maria) on Wednesday, March 6, 2024, 19:48–19:48, "
            "messages from Maria.",
        ),
        (
            dt.datetime(2024, 3, 3, 12, 10),
            dt.datetime(2024, 3, 3, 12, 42),
            ["", "Yuki", "母", "父"],
            "en",
            "Conversation with Maria (maria) on Sunday, March 3, 2024, 12:10–12:42, "
            "between Yuki, 母 and 父.",
        ),
        (
            dt.datetime(2023, 12, 31, 23, 50),
            dt.datetime(2024, 1, 1, 0, 10),
            ["母", "父", "Yuki"],
            "ja",
            "Mariaとのトーク（maria）、2023年12月31日(日) 23:50〜2024年1月1日(月) 00:10、"
            "参加者: 母、父、Yuki。",
        ),
        (
            dt.datetime(2024, 3, 1, 9, 5),
            dt.datetime(2024, 3, 1, 9, 7),
            [],
            "ja",
            "Mariaとのトーク（maria）、2024年3月1日(金) 09:05〜09:07、参加者: 不明。",
        ),
    ],
)
def test_identity_sentence(
    start: dt.datetime, end: dt.datetime, speakers: list[str], lang: str, expected: str
) -> None:
    got = identity_sentence(
        contact_id="Maria",
        conversation_id="maria",
        start_local=start,
        end_local=end,
        speakers=speakers,
        lang=lang,
    )
    assert got == expected


def long_raw(n: int, width: int = 60) -> str:
    return "\n".join(f"[2024-03-01 10:{i % 60:02d}] A: " + "x" * width for i in range(n))


@pytest.mark.parametrize(
    ("raw_text", "limit"),
    [
        (long_raw(200), 4000),  # many messages: cut at a message boundary
        (long_raw(200), 1000),
        (long_raw(3, width=9000), 4000),  # one huge message: hard cut
        ("[2024-03-01 10:00] A: line one\n  continued\n" + "  " + "y" * 5000, 4000),
        (long_raw(10), 4000),  # shorter than the limit: whole
        ("", 4000),
    ],
)
def test_excerpt_is_a_bounded_prefix(raw_text: str, limit: int) -> None:
    excerpt = excerpt_of(raw_text, limit)
    assert len(excerpt) <= limit
    assert raw_text.startswith(excerpt)
    if len(raw_text) <= limit:
        assert excerpt == raw_text
    else:
        assert len(excerpt) >= limit // 2
        nxt = raw_text[len(excerpt) :]
        if "\n[" in raw_text[: limit + 1][limit // 2 :]:
            assert nxt.startswith("\n[")  # the excerpt ends where a message ends


def test_excerpt_limit_in_the_embedding_text() -> None:
    raw = long_raw(300)
    text = build(raw, "en", summary="A: x")
    excerpt = text.split(f"\n{EXCERPT_LABEL}\n", 1)[1]
    assert excerpt == excerpt_of(raw, 4000)
    assert len(excerpt) <= 4000
    small = build(raw, "en", summary="A: x", max_excerpt=500)
    assert len(small.split(f"\n{EXCERPT_LABEL}\n", 1)[1]) <= 500
    assert excerpt_of(raw, 0) == ""


def test_deterministic_and_empty_summary() -> None:
    assert build(MARIA_RAW, "en") == build(MARIA_RAW, "en")
    text = build(MARIA_RAW, "en", summary="")
    assert f"\n{SUMMARY_LABEL}\n{EXCERPT_LABEL}\n" in text
