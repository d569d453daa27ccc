"""detect_lang: Japanese vs English by script share, including mixed and degenerate text."""

from __future__ import annotations

import pytest

from memory_pipeline.core.common.lang import detect_lang, ja_share


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("火曜の飲み会、19時に渋谷のハチ公前集合でいい？", "ja"),
        ("了解！", "ja"),
        ("カタカナだけのメッセージ", "ja"),
        ("飲み会の4,500円、今LINE Payで送ったよ", "ja"),  # latin words inside Japanese
        ("Mariaと京都に行く", "ja"),
        ("Blue Harborのライブ", "ja"),
        ("ﾊﾝｶｸｶﾀｶﾅ", "ja"),  # half-width katakana
        ("Yuki!! Guess what, I got the job at Hikari Design 🎉", "en"),
        ("I had ramen at 一蘭 today, it was great", "en"),  # one Japanese word in English
        ("Let's meet at Kyoto station on March 23 at 10:30", "en"),
        ("Café Lumière at 7?", "en"),
        ("", "en"),
        ("12:30 4,500 👍", "en"),  # no letters at all: the neutral default
        ("[2024-03-01 18:20] 健太: 火曜の飲み会\n[2024-03-01 18:21] Yuki: いいよ！", "ja"),
        ("[2024-03-01 20:10] Maria: I start on Monday\n[2024-03-01 20:11] Yuki: Great", "en"),
    ],
)
def test_detect_lang(text: str, expected: str) -> None:
    assert detect_lang(text) == expected


def test_detect_lang_looks_at_a_bounded_prefix() -> None:
    text = "これは日本語の文章です。" * 10 + "This is English. " * 10_000
    assert detect_lang(text, max_chars=100) == "ja"
    assert detect_lang(text) == "en"  # the default window reaches the English part


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [("日本語", 1.0, 1.0), ("abc", 0.0, 0.0), ("日本abc", 0.39, 0.41), ("", 0.0, 0.0)],
)
def test_ja_share(text: str, low: float, high: float) -> None:
    assert low <= ja_share(text) <= high
