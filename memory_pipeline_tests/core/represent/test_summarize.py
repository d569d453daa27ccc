"""Extractive summaries, titles and bullets on the bundled sample, constructed chunks and a
real RealPersonaChat slice: length targets, determinism, what must be kept and never picked."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from memory_pipeline.core.represent.summarize import (
    BULLET_LABELS,
    BULLET_MAX_CHARS,
    ELLIPSIS,
    SEPARATOR,
    SUMMARY_TARGETS,
    Line,
    extractive_summary,
    parse_raw_text,
    session_bullets,
    session_title,
    source_length,
    summary_length,
    within_target,
)
from memory_pipeline.core.sessions.chunking import chunk_windows, render_lines
from memory_pipeline_tests.paths import SAMPLE

SAMPLE_JSON = SAMPLE / "line_json"
GAP = dt.timedelta(minutes=180)
T0 = dt.datetime(2024, 3, 1, 20, 0)
LANG_OF = {"maria": "en", "kenta": "ja"}


# ---------------------------------------------------------------------------- helpers


def load_conversation(name: str) -> list[Line]:
    """All messages of a sample line_json conversation, in time order, with their types."""
    lines: list[tuple[dt.datetime, int, Line]] = []
    for path in sorted((SAMPLE_JSON / name).glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for i, m in enumerate(doc["messages"]):
            ts = dt.datetime.fromisoformat(f"{doc['date']}T{m['time']}")
            line = Line(m["sender"], m["text"], ts, m.get("type", "text"))
            lines.append((ts, m.get("source_order", i), line))
    return [line for _, _, line in sorted(lines, key=lambda x: (x[0], x[1]))]


def sessions_of(lines: list[Line]) -> list[list[Line]]:
    out: list[list[Line]] = []
    for line in lines:
        if out and line.local_ts - out[-1][-1].local_ts <= GAP:
            out[-1].append(line)
        else:
            out.append([line])
    return out


def chunks_of(lines: list[Line]) -> list[list[Line]]:
    return [s[a:b] for s in sessions_of(lines) for a, b in chunk_windows(len(s))]


def render(lines: list[Line]) -> str:
    """The chunk rendering of memory_pipeline.core.sessions.chunking (raw_text)."""
    return "\n".join(
        f"[{x.local_ts:%Y-%m-%d %H:%M}] {x.sender}: " + x.text.replace("\n", "\n  ") for x in lines
    )


def chat(*messages: tuple[str, str] | tuple[str, str, str], start: dt.datetime = T0) -> list[Line]:
    """Lines one minute apart from (sender, text[, type]) tuples."""
    return [
        Line(m[0], m[1], start + dt.timedelta(minutes=i), m[2] if len(m) > 2 else "text")
        for i, m in enumerate(messages)
    ]


def bounds(lang: str) -> tuple[int, int]:
    return SUMMARY_TARGETS["ja" if lang == "ja" else "en_words"]


def text_lines(lines: list[Line]) -> dict[str, set[str]]:
    """sender -> whitespace-collapsed texts of that sender's text messages."""
    out: dict[str, set[str]] = {}
    for x in lines:
        if x.type == "text":
            out.setdefault(x.sender, set()).add(" ".join(x.text.split()))
    return out


def assert_extractive(summary: str, lines: list[Line]) -> None:
    """Every summary line is '<sender>: <message>' of a text message (or its cut prefix)."""
    by_sender = text_lines(lines)
    for row in summary.split(SEPARATOR):
        sender, _, text = row.partition(": ")
        assert sender in by_sender, row
        if text.endswith(ELLIPSIS):
            stem = text[: -len(ELLIPSIS)]
            assert any(t.startswith(stem) for t in by_sender[sender]), row
        else:
            assert text in by_sender[sender], row


SAMPLE_CHUNKS = [
    pytest.param(name, i, chunk, id=f"{name}-{i}")
    for name in ("maria", "kenta")
    for i, chunk in enumerate(chunks_of(load_conversation(name)))
]

# Japanese filler (greetings, acknowledgements, chit-chat) around one key message.
JA_FILLER = [
    "おはよう！",
    "うん",
    "了解",
    "そうなんだ",
    "笑",
    "最近ちょっと忙しくてさ、なかなか連絡できなくてごめんね",
    "全然大丈夫だよ、こっちもバタバタしてた",
    "ありがとう",
    "ほんとそれ",
    "なるほどね〜",
    "いいね",
    "今日は雨がすごかったね、傘を持っていって正解だった",
    "わかる",
    "そういえば駅前のカフェがリニューアルしたらしいよ、雰囲気がかなり変わったって",
    "へー、今度見てみたいな",
]
EN_FILLER = [
    "hey!",
    "ok",
    "lol",
    "yeah",
    "haha same",
    "Sorry I was busy all day, the office was crazy and I barely had time to eat lunch",
    "No worries, it was the same here honestly",
    "thanks",
    "right?",
    "I watched a couple of episodes of that show you recommended, it is pretty good so far",
    "nice",
    "The weather was awful today, I got completely soaked on the way back home",
    "true",
    "Apparently the cafe near the station changed its whole menu again last week",
    "interesting, I should check it out sometime",
]


def with_key(filler: list[str], key: str, at: int = 9) -> list[Line]:
    rows = [("A" if i % 2 else "B", t) for i, t in enumerate(filler * 2)]
    rows.insert(at, ("A", key))
    return chat(*rows)


# ---------------------------------------------------------------------------- parse_raw_text


@pytest.mark.parametrize(("name", "index", "chunk"), SAMPLE_CHUNKS)
def test_parse_raw_text_roundtrip_restores_lines_and_types(
    name: str, index: int, chunk: list[Line]
) -> None:
    parsed = parse_raw_text(render(chunk))
    expected = [
        Line(x.sender, x.text, x.local_ts.replace(second=0, microsecond=0), x.type) for x in chunk
    ]
    assert parsed == expected  # stickers, photos and system lines are recognised from markers


def test_parse_raw_text_reads_the_production_rendering() -> None:
    chunk = load_conversation("maria")[:20]
    table = pa.table(
        {
            "local_ts": pa.array([x.local_ts for x in chunk], pa.timestamp("us")),
            "sender": [x.sender for x in chunk],
            "text": [x.text for x in chunk],
        }
    )
    raw_text = "\n".join(render_lines(table))
    assert raw_text == render(chunk)
    assert [(x.sender, x.text, x.type) for x in parse_raw_text(raw_text)] == [
        (x.sender, x.text, x.type) for x in chunk
    ]


@pytest.mark.parametrize(
    ("raw_text", "expected"),
    [
        pytest.param(
            "[2024-03-07 21:12] Sam: Packing list:\n  - body\n  - lens\n"
            "[2024-03-07 21:15] Yuki: ok",
            [("Sam", "Packing list:\n- body\n- lens", "text"), ("Yuki", "ok", "text")],
            id="continuation-lines",
        ),
        pytest.param(
            "[2024-03-01 18:20] 健太: 了解\r\n[2024-03-01 18:21] Yuki: [スタンプ]\r\n",
            [("健太", "了解", "text"), ("Yuki", "[スタンプ]", "sticker")],
            id="crlf",
        ),
        pytest.param(
            "[2024-03-01 18:20:05] A: with seconds\n[2024-03-01T18:21] B: T separator",
            [("A", "with seconds", "text"), ("B", "T separator", "text")],
            id="stamp-variants",
        ),
        pytest.param(
            "garbage before\n[2024-03-01 18:20] A: first\nunindented continuation",
            [("A", "first\nunindented continuation", "text")],
            id="junk-and-unindented",
        ),
        pytest.param(
            "[2024-03-03 12:40] : 母がアルバム「ひな祭り2024」を作成しました",
            [("", "母がアルバム「ひな祭り2024」を作成しました", "system")],
            id="senderless-system",
        ),
        pytest.param(
            "[2024-03-09 19:30] 母: ☎ 通話時間 12:34\n[2024-03-13 23:48] Sam: ☎ Missed call",
            [("母", "☎ 通話時間 12:34", "call"), ("Sam", "☎ Missed call", "call")],
            id="calls",
        ),
        pytest.param(
            "[2024-03-09 17:11] Maria: [Photo]\n[2024-03-09 17:19] Maria: Maria unsent a message.",
            [("Maria", "[Photo]", "photo"), ("Maria", "Maria unsent a message.", "system")],
            id="photo-and-unsent",
        ),
        pytest.param(
            "[2024-03-01 10:00] Ann: the time is: 10:30",
            [("Ann", "the time is: 10:30", "text")],
            id="colon-in-text",
        ),
        pytest.param("", [], id="empty"),
    ],
)
def test_parse_raw_text_is_tolerant(raw_text: str, expected: list[tuple[str, str, str]]) -> None:
    assert [(x.sender, x.text, x.type) for x in parse_raw_text(raw_text)] == expected


# ---------------------------------------------------------------------------- length targets


@pytest.mark.parametrize(("name", "index", "chunk"), SAMPLE_CHUNKS)
def test_sample_chunk_summaries_meet_the_length_target(
    name: str, index: int, chunk: list[Line]
) -> None:
    lang = LANG_OF[name]
    lo, hi = bounds(lang)
    summary = extractive_summary(chunk)
    n = summary_length(summary, lang)
    src = source_length(chunk, lang)
    assert within_target(summary, lang, src)
    assert n <= hi
    assert n >= min(lo, src)  # shorter than the target only when the source is
    if src < lo:
        assert n == src  # a short chunk is summarised by all of its text messages
    assert_extractive(summary, chunk)
    assert source_length(render(chunk), lang) == src  # raw_text or lines: same measure


@pytest.mark.parametrize(("lang", "filler"), [("ja", JA_FILLER), ("en", EN_FILLER)])
def test_long_constructed_chunks_land_inside_the_bounds(lang: str, filler: list[str]) -> None:
    lo, hi = bounds(lang)
    lines = chat(*[("A" if i % 3 else "B", t) for i, t in enumerate(filler * 3)])
    summary = extractive_summary(lines)
    assert lo <= summary_length(summary, lang) <= hi
    assert within_target(summary, lang, source_length(lines, lang))


@pytest.mark.parametrize(
    ("lang", "message"),
    [
        ("en", " ".join(f"word{i} is part of a very long message." for i in range(80))),
        ("ja", "これはとても長いメッセージです。" * 60),
        ("ja", "句読点のないとても長いメッセージ" * 60),
    ],
)
def test_one_over_long_message_is_cut_and_never_exceeds_the_upper_bound(
    lang: str, message: str
) -> None:
    lo, hi = bounds(lang)
    summary = extractive_summary(chat(("Ann", message), ("Bob", "ok")), lang)
    assert lo <= summary_length(summary, lang) <= hi
    assert summary.startswith("Ann: ")
    assert summary.endswith(ELLIPSIS)
    assert message.startswith(summary[len("Ann: ") : -len(ELLIPSIS)])


def test_a_chunk_shorter_than_the_lower_bound_is_returned_whole() -> None:
    lines = chat(
        ("Maria", "Morning! Running 5 min late, sorry."),
        ("Yuki", "[Sticker]", "sticker"),
        ("Yuki", "No problem, I'll get you a latte"),
    )
    summary = extractive_summary(lines)
    assert summary == (
        "Maria: Morning! Running 5 min late, sorry.\nYuki: No problem, I'll get you a latte"
    )
    assert within_target(summary, "en", source_length(lines, "en"))


@pytest.mark.parametrize(
    ("summary", "lang", "source_len", "expected"),
    [
        ("あ" * 300, "ja", 1000, True),
        ("あ" * 200, "ja", 1000, True),
        ("あ" * 500, "ja", 1000, True),
        ("あ" * 501, "ja", 1000, False),  # over the upper bound: never acceptable
        ("あ" * 150, "ja", 1000, False),  # too short although the source was long enough
        ("あ" * 150, "ja", 150, True),  # short because the source is short
        (" ".join(["w"] * 80), "en", 500, True),
        (" ".join(["w"] * 121), "en", 500, False),
        (" ".join(["w"] * 30), "en", 500, False),
        (" ".join(["w"] * 30), "en", 30, True),
        ("", "en", 0, True),
    ],
)
def test_within_target(summary: str, lang: str, source_len: int, expected: bool) -> None:
    assert within_target(summary, lang, source_len) is expected


def test_target_override() -> None:
    lines = chat(*[("A" if i % 2 else "B", t) for i, t in enumerate(EN_FILLER * 3)])
    summary = extractive_summary(lines, "en", target=(20, 30))
    assert 20 <= summary_length(summary, "en") <= 30
    with pytest.raises(ValueError, match="below lower bound"):
        extractive_summary(lines, "en", target=(30, 20))


# ---------------------------------------------------------------------------- what is kept


@pytest.mark.parametrize(
    ("lang", "filler", "key"),
    [
        ("en", EN_FILLER, "Let's meet at Kyoto station on March 23 at 10:30"),
        ("en", EN_FILLER, "I'll send you the 6,800 yen for the Blue Harbor tickets tomorrow"),
        ("en", EN_FILLER, "Guess what, I got the job at Hikari Design, I start on Monday"),
        ("ja", JA_FILLER, "3月23日の10時半に京都駅の中央口で待ち合わせしよう！"),
        ("ja", JA_FILLER, "佐藤先輩の結婚式は6月15日だって、招待状も送るらしい"),
        ("ja", JA_FILLER, "飲み会の会費は一人4,500円、明日までに送るね"),
    ],
)
def test_commitments_dates_and_names_are_kept(lang: str, filler: list[str], key: str) -> None:
    for at in (0, 9, 25):
        summary = extractive_summary(with_key(filler, key, at))
        assert f"A: {key}" in summary.split(SEPARATOR), (at, summary)


def test_sample_summaries_keep_the_plans() -> None:
    maria = chunks_of(load_conversation("maria"))
    kyoto = next(c for c in maria if any("plan Kyoto" in x.text for x in c))
    summary = extractive_summary(kyoto)
    assert "Yuki: Perfect 👌 I'll book the train tickets by next Sunday" in summary
    assert "Fushimi Inari" in summary
    kenta = chunks_of(load_conversation("kenta"))
    moving = next(c for c in kenta if any("引っ越しの日決まった" in x.text for x in c))
    assert "健太: 引っ越しの日決まった！3月20日（水・祝）" in extractive_summary(moving)


def test_non_text_messages_are_never_picked() -> None:
    rows: list[tuple[str, str, str]] = []
    for i in range(30):
        rows.append(("Maria", "[Sticker]", "sticker"))
        rows.append(("Yuki", "[Photo]", "photo"))
        if i % 10 == 0:  # informative text that only LOOKS like a great pick, but is a photo
            rows.append(("Maria", "Kyoto trip on March 23 at 10:30, 20,000 yen, Gion", "photo"))
    rows.append(("Yuki", "Let's meet at Kyoto station on March 23 at 10:30", "text"))
    summary = extractive_summary(chat(*rows))
    assert summary == "Yuki: Let's meet at Kyoto station on March 23 at 10:30"
    assert extractive_summary(chat(("A", "[スタンプ]", "sticker"), ("B", "[写真]", "photo"))) == ""
    assert extractive_summary([]) == ""


@pytest.mark.parametrize(("name", "index", "chunk"), SAMPLE_CHUNKS)
def test_markers_in_rendered_chunks_are_never_picked(
    name: str, index: int, chunk: list[Line]
) -> None:
    summary = extractive_summary(parse_raw_text(render(chunk)))
    for marker in ("[Sticker]", "[Photo]", "[スタンプ]", "[写真]", "unsent a message", "取り消し"):
        assert marker not in summary


@pytest.mark.parametrize(("name", "index", "chunk"), SAMPLE_CHUNKS)
def test_summaries_are_deterministic_and_chronological(
    name: str, index: int, chunk: list[Line]
) -> None:
    first = extractive_summary(chunk)
    assert extractive_summary(list(chunk)) == first
    assert extractive_summary(parse_raw_text(render(chunk))) == first
    assert extractive_summary(chunk, LANG_OF[name]) == first  # detection agrees with the sample
    order = {f"{x.sender}: {' '.join(x.text.split())}": i for i, x in enumerate(chunk)}
    positions = [order[row] for row in first.split(SEPARATOR) if row in order]
    assert positions == sorted(positions)


# ---------------------------------------------------------------------------- titles


def sample_sessions(name: str) -> list[list[Line]]:
    return sessions_of(load_conversation(name))


@pytest.mark.parametrize("session", sample_sessions("maria"))
def test_english_titles_have_three_to_six_words(session: list[Line]) -> None:
    title = session_title(session)
    assert 3 <= len(title.split()) <= 6, title
    assert title == session_title(session)  # deterministic


@pytest.mark.parametrize("session", sample_sessions("kenta"))
def test_japanese_titles_are_short_phrases(session: list[Line]) -> None:
    title = session_title(session)
    assert 8 <= len(title) <= 20, title
    assert title == session_title(session)


@pytest.mark.parametrize(
    ("name", "needle", "expected_any"),
    [
        ("maria", "plan Kyoto", {"Kyoto", "Fushimi Inari", "Arashiyama", "Gion"}),
        ("maria", "Blue Harbor", {"Blue Harbor", "Zepp Haneda"}),
        ("kenta", "送別会やらない", {"美咲", "送別会", "大輔"}),
    ],
)
def test_titles_name_the_topic(name: str, needle: str, expected_any: set[str]) -> None:
    session = next(s for s in sample_sessions(name) if any(needle in x.text for x in s))
    title = session_title(session)
    assert any(e in title for e in expected_any), title


@pytest.mark.parametrize(
    ("lines", "lang", "expected"),
    [
        (chat(("Maria", "[Sticker]", "sticker"), ("Yuki", "[Sticker]", "sticker")), "en", "Maria"),
        (chat(("Maria", "ok"), ("Yuki", "lol")), "en", "Maria"),
        (chat(("健太", "[スタンプ]", "sticker"), ("Yuki", "うん", "text")), "ja", "健太"),
        ([], "en", "Empty"),
    ],
)
def test_titles_are_never_empty(lines: list[Line], lang: str, expected: str) -> None:
    title = session_title(lines, lang)
    assert expected in title
    if lang == "en":
        assert 3 <= len(title.split()) <= 6, title
    else:
        assert 1 <= len(title) <= 20, title


# ---------------------------------------------------------------------------- bullets


def test_english_bullets_pick_commitments_and_decisions_first() -> None:
    session = next(s for s in sample_sessions("maria") if any("plan Kyoto" in x.text for x in s))
    bullets = session_bullets(session)
    assert 1 <= len(bullets) <= 5
    assert "Commitment: Yuki: Perfect 👌 I'll book the train tickets by next Sunday" in bullets
    assert "Commitment: Maria: And I'll book the ryokan by Sunday the 10th too" in bullets
    assert_bullet_shape(bullets, "en")
    assert bullets == session_bullets(session)


def test_japanese_bullets_pick_promises() -> None:
    session = next(s for s in sample_sessions("kenta") if any("ロクシタン" in x.text for x in s))
    bullets = session_bullets(session)
    assert "約束: Yuki: ありがとう！半分の3,100円あとで送るね" in bullets
    assert "約束: 健太: じゃあそれで。13日に新宿のルミネで買ってくる" in bullets
    assert_bullet_shape(bullets, "ja")


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            chat(
                ("A", "hi"),
                ("B", "Let's meet at Kyoto station on March 23 at 10:30"),
                ("A", "I'll bring the tickets"),
                ("B", "The museum in Osaka reopened after two years of renovation"),
            ),
            [
                "Decision: B: Let's meet at Kyoto station on March 23 at 10:30",
                "Commitment: A: I'll bring the tickets",
                "Context: B: The museum in Osaka reopened after two years of renovation",
            ],
        ),
        (
            chat(
                ("健太", "21日の送別会は渋谷の「はなび」って店にした、19時から"),
                ("Yuki", "カードも買ったから、明日書いておくね"),
                ("Yuki", "[スタンプ]", "sticker"),
            ),
            [
                "決定: 健太: 21日の送別会は渋谷の「はなび」って店にした、19時から",
                "約束: Yuki: カードも買ったから、明日書いておくね",
            ],
        ),
    ],
)
def test_bullets_on_constructed_sessions(lines: list[Line], expected: list[str]) -> None:
    assert session_bullets(lines) == expected


def test_bullets_respect_max_and_trim_long_messages() -> None:
    long = "I'll bring " + "a very long list of things " * 20
    things = ["the cake", "plates and cups", "a speaker", "ice", "the banner", "candles"]
    lines = chat(*[("A", f"I'll bring {t} to the party on Friday") for t in things])
    assert len(session_bullets(lines, max_bullets=3)) == 3
    assert len(session_bullets(lines)) == 5
    assert session_bullets(lines, max_bullets=0) == []
    (bullet,) = session_bullets(chat(("A", long)))
    assert bullet.startswith("Commitment: A: I'll bring a very long list")
    assert bullet.endswith(ELLIPSIS)
    assert len(bullet) <= len("Commitment: A: ") + BULLET_MAX_CHARS


def assert_bullet_shape(bullets: list[str], lang: str) -> None:
    labels = list(BULLET_LABELS[lang].values())
    ranks = []
    for b in bullets:
        label = next(x for x in labels if b.startswith(x + " "))
        ranks.append(labels.index(label))
        rest = b[len(label) + 1 :]
        assert re.match(r"^[^:]+: ", rest), b
        assert len(rest.split(": ", 1)[1]) <= BULLET_MAX_CHARS
    assert ranks == sorted(ranks)  # decisions, then commitments, then context


# ---------------------------------------------------------------------------- real data


def rpc_chunks(path: Path, dialogues: int) -> list[str]:
    """raw_text of the 42/36 chunks of the first dialogues (NaT and empty utterances skipped)."""
    out: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, row in enumerate(f):
            if n >= dialogues:
                break
            try:
                d = json.loads(row)
            except json.JSONDecodeError:
                continue
            rows = []
            for u in d.get("utterances", []) if isinstance(d, dict) else []:
                ts, text = (u.get("timestamp") or ""), (u.get("text") or "")
                if len(ts) >= 16 and text:
                    text = text.replace("\n", "\n  ")
                    rows.append(f"[{ts[:10]} {ts[11:16]}] {u['interlocutor_id']}: {text}")
            out.extend("\n".join(rows[a:b]) for a, b in chunk_windows(len(rows)))
    return out


def test_real_realpersonachat_chunks(shared_file: Callable[[str], Path]) -> None:
    chunks = rpc_chunks(shared_file("realpersonachat/dialogues.jsonl.gz"), 300)
    assert len(chunks) >= 250
    parsed = [parse_raw_text(c) for c in chunks]
    start = time.perf_counter()
    summaries = [extractive_summary(p) for p in parsed]
    elapsed = time.perf_counter() - start
    lo, hi = bounds("ja")
    for lines, summary in zip(parsed, summaries, strict=True):
        assert within_target(summary, "ja", source_length(lines, "ja")), summary
        assert summary_length(summary, "ja") >= min(lo, source_length(lines, "ja"))
        assert_extractive(summary, lines)
    assert summaries == [extractive_summary(p) for p in parsed]  # deterministic
    assert len(chunks) / elapsed > 300  # loose floor; the benchmark measures the real rate
    for lines in parsed[:50]:
        assert 1 <= len(session_title(lines)) <= 20
        bullets = session_bullets(lines)
        assert len(bullets) <= 5
        assert_bullet_shape(bullets, "ja")
