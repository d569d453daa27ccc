"""Query understanding rules (English and Japanese): names, question words, boosts, PRF and
references to the recent messages."""

from __future__ import annotations

import datetime as dt

import pytest

from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.query import (
    RecentMessage,
    boost_chunks,
    boost_turns,
    expansion_terms,
    normalize_recent,
    resolve_references,
    salient_entities,
    speakers_in,
    strip_question,
)

KNOWN = ["Caroline", "Melanie", "Taro Yamada", "花子"]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("When did Caroline go to the LGBTQ support group?", ["Caroline"]),
        ("What is caroline's identity?", ["Caroline"]),
        ("Did Melanie and Caroline meet?", ["Melanie", "Caroline"]),
        ("Where did Taro go?", ["Taro Yamada"]),  # a unique first name
        ("花子さんはどこに行った？", ["花子"]),
        ("Where is Carolina?", []),  # no partial-word match
        ("What did they research?", []),
    ],
)
def test_speakers_in(query, names):
    assert speakers_in(query, KNOWN) == names


@pytest.mark.parametrize(
    ("query", "stripped"),
    [
        (
            "When did Caroline go to the LGBTQ support group?",
            "Caroline go to the LGBTQ support group",
        ),
        ("Do you remember what Melanie painted?", "Melanie painted"),
        ("Can you tell me about the pottery class?", "the pottery class"),
        ("太郎さんが行ったレストランはどこだっけ？", "太郎さんが行ったレストラン"),
        ("京都旅行について教えて", "京都旅行"),
        ("花子の誕生日はいつですか？", "花子の誕生日"),
        ("what?", "what?"),  # nothing would remain: kept as written
    ],
)
def test_strip_question(query, stripped):
    assert strip_question(query) == stripped


def test_boost_chunks_is_scale_free_and_off_by_default():
    ranked = [("a", 0.04), ("b", 0.03), ("c", 0.02), ("d", 0.01)]
    speakers = {"a": ["X"], "b": ["X"], "c": ["Caroline", "X"], "d": ["X"]}.__getitem__
    assert boost_chunks(ranked, speakers, ["Caroline"], 0.0) == ranked
    assert boost_chunks(ranked, speakers, [], 0.5) == ranked
    # the bonus is a share of the score range (0.03): 0.5 lifts c to 0.035, 1.0 to 0.05
    assert [c for c, _ in boost_chunks(ranked, speakers, ["Caroline"], 0.5)] == list("acbd")
    assert [c for c, _ in boost_chunks(ranked, speakers, ["Caroline"], 1.0)] == list("cabd")
    scaled = [(c, s * 1000 - 20) for c, s in ranked]  # any scale, negative scores too
    assert [c for c, _ in boost_chunks(scaled, speakers, ["Caroline"], 0.5)] == list("acbd")


def test_boost_turns_prefers_the_named_sender():
    turns = [("m1", 0.9), ("m2", 0.8), ("m3", 0.1)]
    sender = {"m1": "Melanie", "m2": "Caroline", "m3": "Caroline"}.__getitem__
    assert [m for m, _ in boost_turns(turns, sender, ["Caroline"], 0.2)] == ["m2", "m1", "m3"]
    assert boost_turns(turns, sender, ["Caroline"], 0.0) == turns


def test_expansion_terms_weigh_feedback_documents_and_skip_the_query():
    docs = [["pottery", "class", "clay", "clay"], ["clay", "kiln"], ["weather"]]
    idf = {"pottery": 1.0, "class": 1.0, "clay": 2.0, "kiln": 3.0, "weather": 1.0}
    terms = expansion_terms(["pottery"], docs, [10.0, 5.0, 0.0], idf, 2)
    assert [t for t, _ in terms] == ["clay", "kiln"]
    assert sum(w for _, w in terms) == pytest.approx(1.0)
    assert expansion_terms(["pottery"], docs, [1.0, 1.0, 1.0], idf, 0) == []


def test_config_names_the_query_options_and_validates_them():
    base = SearchConfig()
    assert base.name == "rrf[raw_text+embedding_text] k=60"
    on = SearchConfig(speaker_boost=0.25, strip_question=True, prf_terms=10)
    assert on.name == "rrf[raw_text+embedding_text] k=60 +spk0.25 +strip +prf10"
    assert SearchConfig(mode="dense", prf_terms=10).name == "dense[embedding_text]"
    with pytest.raises(ValueError, match="speaker_boost"):
        SearchConfig(speaker_boost=2.0)
    with pytest.raises(ValueError, match="prf_terms"):
        SearchConfig(prf_terms=-1)


# -- references to the recent messages ------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "recent", "resolved"),
    [
        (
            "When did she go to the support group?",
            ["I talked to Caroline today."],
            "When did Caroline go to the support group?",
        ),
        ("What did her mentor say?", ["Melanie was there too"], "What did Melanie's mentor say?"),
        (
            "When did Caroline go to that?",
            ["Caroline mentioned the LGBTQ support group."],
            "When did Caroline go to LGBTQ support group?",
        ),
        (
            "what happened with that thing we talked about",
            ["The pottery class is tomorrow"],
            "what happened with pottery class",
        ),
        ("Where does he work?", ["I met John at the Harbor Cafe."], "Where does John work?"),
        (
            "昨日のあの件どうなった？",
            ["来週の京都旅行の予約、取れたよ"],
            "昨日の京都旅行・予約どうなった？",
        ),
        ("彼女は何て言ってた？", ["花子さんに会ったよ"], "花子は何て言ってた？"),
        ("それはいつ？", ["新しいカメラを買った"], "カメラはいつ？"),
    ],
)
def test_resolve_references(query, recent, resolved):
    assert resolve_references(query, recent, known=KNOWN).query == resolved


def test_a_query_without_a_reference_is_unchanged():
    r = resolve_references("When did Caroline paint a sunrise?", ["Melanie likes pottery"])
    assert r.query == "When did Caroline paint a sunrise?"
    assert "query unchanged" in r.notes[-1]


def test_senders_are_not_the_person_referred_to():
    recent = [{"text": "Melanie showed me her painting", "sender": "Caroline"}]
    assert resolve_references("What did she paint?", recent, known=KNOWN).query == (
        "What did Melanie paint?"
    )


def test_time_words_are_no_topics_and_recent_time_is_now():
    recent = [
        {"text": "the pottery class yesterday", "time": "2023-05-08T10:00"},
        {"text": "来週の京都旅行", "time": dt.datetime(2023, 5, 9, 12, 0)},
    ]
    persons, topics = salient_entities(normalize_recent(recent))
    assert "yesterday" not in " ".join(topics) and "来週" not in topics
    assert topics[0] == "京都旅行"  # the latest message is the most salient
    r = resolve_references("what about that thing yesterday?", recent)
    assert r.as_of == dt.datetime(2023, 5, 9, 12, 0)
    given = dt.datetime(2024, 1, 1)
    assert resolve_references("that?", recent, as_of=given).as_of == given


def test_weight_of_prefers_rare_words():
    recent = ["the cat and the spaceship"]
    rare = {"cat": 0.1, "spaceship": 5.0}.get
    assert resolve_references("what about it?", recent).topics[0] == "cat"  # first seen
    assert resolve_references("what about it?", recent, weight_of=rare).topics[0] == "spaceship"


@pytest.mark.parametrize(
    ("recent", "message"),
    [
        ("just a string", "recent must be a list"),
        ([3], r"recent\[0\]: a message is a string"),
        (["ok", {"text": " "}], r"recent\[1\]: 'text' must be non-empty"),
        ([{"text": "hi", "time": "yesterday"}], r"recent\[0\]: 'time' 'yesterday' is not"),
        ([{"text": "hi", "sender": 5}], r"recent\[0\]: 'sender' must be text"),
    ],
)
def test_bad_recent_is_a_one_line_error(recent, message):
    with pytest.raises(ValueError, match=message) as info:
        normalize_recent(recent)
    assert "\n" not in str(info.value)


def test_recent_messages_pass_through():
    m = RecentMessage("hi", "A", dt.datetime(2023, 1, 1))
    assert normalize_recent([m, "yo"]) == [m, RecentMessage("yo")]
    assert normalize_recent(None) == []


@pytest.mark.parametrize(
    ("query", "names", "stripped"),
    [
        ("What is Caroline's identity?", ["Caroline"], "identity"),
        ("When did caroline meet Melanie?", ["Caroline", "Melanie"], "meet"),
        ("花子さんの誕生日はいつ？", ["花子"], "の誕生日"),
        ("Caroline?", ["Caroline"], "Caroline?"),  # nothing would remain
    ],
)
def test_strip_question_leaves_speaker_names_to_the_boost(query, names, stripped):
    assert strip_question(query, names) == stripped
