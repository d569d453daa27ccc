"""Memory texts read as statements about a person: no leading interjection or cut phrase in
English, Japanese rewritten about the speaker (or about the person the news is of), remarks
seeking agreement left out. The sentences are made up; none is from the bundled sample."""

from __future__ import annotations

from memory_pipeline.core.memories.extract import extract_memories
from memory_pipeline.core.sessions.sessionize import sessionize
from memory_pipeline_tests.factories import msg, table


def _rows(*lines: tuple[str, str], day: str = "2023-05-08") -> list[dict]:
    """Memories of a two-person session, one message per (sender, text)."""
    t = table(
        *(msg(f"{day} 10:{k:02d}", text, sender, order=k) for k, (sender, text) in enumerate(lines))
    )
    return extract_memories(sessionize(t, 180), t)[0].to_pylist()


def _texts(*lines: tuple[str, str], day: str = "2023-05-08") -> list[str]:
    return [r["text"] for r in _rows(*lines, day=day)]


# ----------------------------------------------------------------------------- English


def test_elongated_and_listed_interjections_leave_no_fragment() -> None:
    texts = _texts(
        ("Ann", "Ohhh I finally repaired the old bicycle in my garage."),
        ("Ben", "Yesss I signed up for the pottery course at the community center."),
        ("Ann", "Ugh I spilled coffee all over my new laptop keyboard."),
        ("Ben", "Hahaha I burned the pancakes at my brother's birthday brunch."),
    )
    assert texts == [
        "Ann finally repaired the old bicycle in Ann's garage.",
        "Ben signed up for the pottery course at the community center.",
        "Ann spilled coffee all over Ann's new laptop keyboard.",
        "Ben burned the pancakes at Ben's brother's birthday brunch.",
    ]


def test_thanks_with_an_intensifier_goes_whole() -> None:
    texts = _texts(
        ("Ann", "Thank you very much, I'll water your ferns every morning next week."),
        ("Ben", "Thanks a lot, I repainted the fence of my cabin yesterday."),
    )
    assert not any(t.split()[0].rstrip(",").lower() in ("much", "lot") for t in texts), texts
    assert "Ben repainted the fence of Ben's cabin on 7 May 2023." in texts, texts


def test_a_word_that_opens_a_phrase_is_no_lead_to_strip() -> None:
    """ "So much has happened", "So far", "So many": stripping "So" alone left "Much has
    happened", "Far, so good"; "So I ..." and "So, I ..." still lose their lead."""
    texts = _texts(
        ("Ann", "So many neighbors joined my street cleanup on Saturday morning!"),
        ("Ben", "So far my vegetable garden has given me forty tomatoes."),
        ("Ann", "So I adopted a grey rabbit from the shelter downtown."),
        ("Ben", "Of course, I kept the receipts from the hardware store."),
    )
    assert texts[0].startswith("So many neighbors joined Ann's street cleanup"), texts
    assert texts[1].startswith("So far Ben's vegetable garden"), texts
    assert "Ann adopted a grey rabbit from the shelter downtown." in texts, texts
    assert "Ben kept the receipts from the hardware store." in texts, texts


def test_a_cut_word_before_a_comma_goes_and_a_phrase_of_its_own_stays() -> None:
    from memory_pipeline.core.memories.extract_en import _EN_DANGLING

    assert _EN_DANGLING.sub("", "much, I'll keep the keys safe") == "I'll keep the keys safe"
    assert _EN_DANGLING.sub("", "lot, we rebuilt the shed") == "we rebuilt the shed"
    # a phrase of its own stays: "after college, I ..."
    assert _EN_DANGLING.sub("", "after college, I moved") == "after college, I moved"


# ----------------------------------------------------------------------------- Japanese


def test_japanese_chat_sentences_become_statements_about_the_speaker() -> None:
    from memory_pipeline.core.memories.rewrite_ja import ja_statement_text

    # the particle to the listener goes; the first person becomes the speaker
    assert ja_statement_text("金曜までに返すね", "涼子", "翔") == "涼子は、金曜までに返す"
    assert ja_statement_text("私は猫を二匹飼ってるよ", "涼子") == "涼子は猫を二匹飼っている"
    # acknowledgements and a vocative are no part of the statement
    assert ja_statement_text("了解！明後日は傘持って行くよ", "翔") == "翔は、明後日は傘持って行く"
    assert ja_statement_text("Ken、今日りんご届いたよ。", "母", "Ken") == "母は、今日りんご届いた。"
    # a volitional is made plain; a suggestion is about both people
    assert ja_statement_text("花束も買おうよ", "翔", "涼子") == "翔と涼子は、花束も買う"
    assert (
        ja_statement_text("来月また集まりましょう", "翔", "涼子")
        == "翔と涼子は、来月また集まります"
    )
    assert ja_statement_text("夜に電話しよう", "翔") == "翔は、夜に電話する"
    # polite statements keep their form
    assert ja_statement_text("毎朝ヨガをしています。", "涼子") == "涼子は、毎朝ヨガをしています。"


def test_japanese_news_about_another_person_is_written_about_them() -> None:
    rows = _rows(
        ("翔", "あと健二が6月から福岡に転勤なの悲しい"),
        ("涼子", "えー！"),
        ("翔", "いいね！健二の誕生日も9日だから、ケーキも一緒に頼もう"),
        ("涼子", "そうしよう"),
        ("翔", "中村先輩の結婚の話、驚いたね"),
    )
    got = {r["text"]: (r["subject"], r["kind"]) for r in rows}
    assert got.get("健二は6月から福岡に転勤する") == ("健二", "plan"), got
    assert got.get("健二の誕生日は9日") == ("健二", "fact"), got
    assert got.get("中村先輩が結婚する") == ("中村先輩", "event"), got
    assert not any("悲しい" in t or "驚いた" in t or "頼も" in t for t in got), got


def test_japanese_remarks_and_fillers_are_no_statement_or_prefix() -> None:
    rows = _rows(
        ("翔", "昨日のライブ、最高だったね"),
        ("涼子", "じゃあそれで。土曜に渋谷で受け取ってくる"),
        ("翔", "美味しそう！今度作ってみます。"),
    )
    texts = [r["text"] for r in rows]
    assert not any("最高" in t for t in texts), texts
    assert not any("それで" in t or "美味しそう" in t for t in texts), texts
    assert "涼子は、土曜に渋谷で受け取ってくる" in texts, texts
