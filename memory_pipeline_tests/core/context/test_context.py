"""Memory search and context packs over the published sample, within UTF-16 budgets."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memory_pipeline.core.common.schema import MEMORY_TIMELINE
from memory_pipeline.core.context.packs import (
    MEMORY_TIMELINE_FILE,
    ContextPack,
    MemoryIndex,
    build_context,
    recall,
    truncate_utf16,
    utf16_len,
)
from memory_pipeline.core.retrieval.searcher import Searcher
from memory_pipeline_tests.paths import ROOT
from memory_pipeline_tests.pipeline_helpers import INDEX_KEYS, Runner

DAYS = [dt.date(2024, 3, 1) + dt.timedelta(days=i) for i in range(14)]
# the stages a published search index needs; the memory extractor is not run: the tests
# write their own timeline into the published version (see ``memories``)
STAGES = [
    ["raw_messages", "quarantine", "ingest_audit"],
    ["sessions"],
    ["chunks"],
    ["chunk_summaries", "embedding_texts", "session_enrichment"],
    ["chunk_embeddings"],
]

# sample sessions the memories below come from
S_MARIA_JOB = "ses_3a71da9a46ac7d96e917"  # 03-01 Maria got the job at Hikari Design 🎉
S_KYOTO = "ses_89d179fbe5fe1a4c5506"  # 03-02 Kyoto plan, 26 messages
S_KENTA_MOVE = "ses_e94e409954b934217c65"  # 03-04 健太: 引っ越しの日 3月20日, 焼肉🍖
S_FAREWELL_1 = "ses_fa9310e61e6c53a56d35"  # 03-05 美咲の送別会 21日, 店はまた探す
S_FAREWELL_2 = "ses_0d24f22f077b26a57b00"  # 03-13 送別会は渋谷の「はなび」
S_MOCHI = "ses_256b6e3b3df688c71849"  # 03-09 Mochi got adopted 🐶
S_CAMERA = "ses_38de107ca4e545473fe8"  # 03-04 Sam lends the Fujifilm X-T4


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Runner:
    """The sample with small chunks (8 messages, stride 6) so sessions have neighbours."""
    folder = tmp_path_factory.mktemp("context")
    text = (ROOT / "memory_pipeline.toml").read_text(encoding="utf-8")
    text = text.replace("chunk_size = 42", "chunk_size = 8")
    text = text.replace("chunk_stride = 36", "chunk_stride = 6")
    text = text.replace('path = "data/sample/', f'path = "{ROOT}/data/sample/')
    text = text.replace('questions = "data/sample/', f'questions = "{ROOT}/data/sample/')
    config = folder / "memory_pipeline.toml"
    config.write_text(text, encoding="utf-8")
    runner = Runner(config, folder / "out")
    for keys in STAGES:
        runner.run(keys, DAYS)
    runner.run(INDEX_KEYS, [])  # publishes one index version
    return runner


@pytest.fixture(scope="module")
def searcher(built: Runner) -> Searcher:
    return Searcher(built.store.root)


@pytest.fixture(scope="module")
def sample(built: Runner) -> dict:
    """Messages and sessions of the sample, to write memories and check citations."""
    msgs = built.store.read("raw_messages").to_pylist()
    sessions = built.store.read("sessions").to_pylist()
    chunks = built.store.read("chunks").to_pylist()
    return {
        "messages": {m["message_id"]: m for m in msgs},
        "sessions": {s["session_id"]: s for s in sessions},
        "chunks": {c["chunk_id"]: c for c in chunks},
    }


def _find(sample: dict, session_id: str, needle: str) -> str:
    """The id of the message of ``session_id`` whose text contains ``needle``."""
    ids = [
        m
        for m in sample["sessions"][session_id]["message_ids"]
        if needle in sample["messages"][m]["text"]
    ]
    assert len(ids) == 1, (session_id, needle, ids)
    return ids[0]


def memory(
    sample: dict,
    session_id: str,
    needles: list[str],
    text: str,
    *,
    subject: str,
    kind: str = "fact",
    attribute: str = "",
    value: str = "",
    event_date: dt.date | None = None,
    lang: str = "en",
    valid_to: dt.datetime | None = None,
    superseded_by: str | None = None,
) -> dict:
    """A MEMORY_TIMELINE row whose source messages are real sample messages."""
    s = sample["sessions"][session_id]
    ids = [_find(sample, session_id, n) for n in needles]
    key = f"{session_id}|{kind}|{attribute}|{text}"
    return {
        "memory_id": "mem_" + hashlib.sha1(key.encode()).hexdigest()[:16],
        "contact_id": s["contact_id"],
        "conversation_id": s["conversation_id"],
        "session_id": session_id,
        "local_date": s["local_date"],
        "subject": subject,
        "subject_is_owner": subject == "Yuki",
        "kind": kind,
        "attribute": attribute,
        "value": value,
        "text": text,
        "lang": lang,
        "valid_from": sample["messages"][ids[-1]]["ts"],
        "event_date": event_date,
        "message_ids": ids,
        "method": "rules",
        "confidence": 0.9,
        "valid_to": valid_to,
        "superseded_by": superseded_by,
    }


@pytest.fixture(scope="module")
def rows(sample: dict) -> list[dict]:
    newer = memory(
        sample,
        S_FAREWELL_2,
        ["はなび"],
        "美咲の送別会は21日19時から渋谷の「はなび」",
        subject="健太",
        kind="plan",
        attribute="farewell_venue",
        value="はなび",
        event_date=dt.date(2024, 3, 21),
        lang="ja",
    )
    older = memory(
        sample,
        S_FAREWELL_1,
        ["21日OK", "店はまた探す"],
        "美咲の送別会は21日の夜、店は未定",
        subject="健太",
        kind="plan",
        attribute="farewell_venue",
        value="未定",
        event_date=dt.date(2024, 3, 21),
        lang="ja",
        valid_to=newer["valid_from"],
        superseded_by=newer["memory_id"],
    )
    return [
        memory(
            sample,
            S_MARIA_JOB,
            ["Hikari Design", "UX designer"],
            "Maria got a job as a UX designer at Hikari Design 🎉",
            subject="Maria",
            attribute="employer",
            value="Hikari Design",
        ),
        memory(
            sample,
            S_KENTA_MOVE,
            ["引っ越しの日決まった", "高円寺から武蔵小杉"],
            "健太の引っ越しは3月20日、高円寺から武蔵小杉へ",
            subject="健太",
            kind="plan",
            attribute="residence",
            value="武蔵小杉",
            event_date=dt.date(2024, 3, 20),
            lang="ja",
        ),
        memory(
            sample,
            S_KENTA_MOVE,
            ["焼肉おごる"],
            "健太はお礼に焼肉をおごる🍖",
            subject="健太",
            kind="plan",
            lang="ja",
        ),
        memory(
            sample,
            S_MOCHI,
            ["Mochi got adopted"],
            "Mochi the shiba mix from the shelter got adopted by a family in Meguro 🐶😭",
            subject="Maria",
            kind="event",
        ),
        memory(
            sample,
            S_KYOTO,
            ["ryokan by Sunday the 10th"],
            "Maria will book the ryokan in Gion by Sunday March 10",
            subject="Maria",
            kind="plan",
            event_date=dt.date(2024, 3, 10),
        ),
        memory(
            sample,
            S_CAMERA,
            ["Fujifilm X-T4"],
            "Sam lends Yuki his Fujifilm X-T4 camera for the Kyoto trip 📷",
            subject="Sam",
            kind="possession",
        ),
        older,
        newer,
    ]


@pytest.fixture(scope="module")
def memories(searcher: Searcher, rows: list[dict]) -> MemoryIndex:
    """The timeline published inside the index version, loaded like the API does."""
    pq.write_table(
        pa.Table.from_pylist(rows, schema=MEMORY_TIMELINE), searcher.version / MEMORY_TIMELINE_FILE
    )
    return MemoryIndex.load(searcher.version, searcher.bm25["raw_text"].tokenizer)


def by_text(rows: list[dict], fragment: str) -> dict:
    (row,) = [r for r in rows if fragment in r["text"]]
    return row


def check_citations(pack: ContextPack, sample: dict) -> None:
    """Every piece cites real sessions/messages (of that session) and shows them."""
    for p in pack.pieces:
        c = p.citation
        assert c.session_id in sample["sessions"], p.header
        session_msgs = set(sample["sessions"][c.session_id]["message_ids"])
        assert c.message_ids and set(c.message_ids) <= session_msgs, p.header
        assert len(c.source_refs) == len(c.message_ids)
        assert p.header.startswith("[") and p.header.endswith("]")
        assert c.session_id in p.header and c.message_ids[0] in p.header
        if p.kind in ("chunk", "search"):
            assert c.chunk_id in sample["chunks"] and c.chunk_id in p.header
            assert sample["chunks"][c.chunk_id]["session_id"] == c.session_id
            assert set(c.message_ids) <= set(sample["chunks"][c.chunk_id]["message_ids"])
        assert p.utf16 == utf16_len(p.render())


def source_messages(pack: ContextPack) -> list[str]:
    return [m for p in pack.pieces if p.kind != "memory" for m in p.citation.message_ids]


# -- UTF-16 ------------------------------------------------------------------------------

TRICKY = [
    "a🎉b😭c🐶d🍖",
    "👍🏽👍🏿ok👋🏻",  # skin tones
    "👨‍👩‍👧‍👦 family 👩🏽‍💻 coder",  # ZWJ sequences
    "🇯🇵🇺🇸🇫🇷 flags",
    "e\u0301te\u0301 cafe\u0301",  # combining accents
    "引っ越し🎉\n3月20日\n🐶🐶🐶",
    "❤️ hearts ✌️",  # variation selectors
]


def test_utf16_len_counts_code_units():
    assert utf16_len("") == 0
    assert utf16_len("abc") == 3
    assert utf16_len("引っ越し") == 4  # BMP
    assert utf16_len("🎉") == 2  # astral: a surrogate pair
    assert utf16_len("👍🏽") == 4
    assert utf16_len("👨‍👩‍👧‍👦") == 11  # 4 emoji + 3 ZWJ
    assert utf16_len("a🎉b") == len("a🎉b".encode("utf-16-le")) // 2 == 4


@pytest.mark.parametrize("text", TRICKY)
def test_truncate_never_splits_a_pair_or_a_sequence(text: str):
    total = utf16_len(text)
    for limit in range(total + 2):
        for marker in ("", "…"):
            out = truncate_utf16(text, limit, marker)
            assert utf16_len(out) <= limit
            out.encode("utf-16-le")  # no lone surrogate
            body = out[: len(out) - len(marker)] if out.endswith(marker) and marker else out
            if limit >= total:
                assert out == text
                continue
            assert text.startswith(body)
            if body:
                nxt = text[len(body)] if len(body) < len(text) else ""
                assert not body.endswith("\u200d")  # no dangling ZWJ
                assert not (0x1F3FB <= ord(nxt or " ") <= 0x1F3FF)  # skin tone stays
                assert nxt not in ("\u0301", "\ufe0f", "\u200d")
                flags = len(body) - len(body.rstrip("".join(map(chr, range(0x1F1E6, 0x1F200)))))
                assert flags % 2 == 0


def test_truncate_with_surrogate_code_points_and_line_breaks():
    raw = "ab\ud83c\udf89cd"  # a pair kept as two code points (surrogatepass)
    assert utf16_len(raw) == 6
    assert truncate_utf16(raw, 3) == "ab"
    assert truncate_utf16(raw, 4) == raw[:4]
    text = "first line 🎉\nsecond line that is long"
    assert truncate_utf16(text, 20) == "first line 🎉"  # prefers the line break
    assert truncate_utf16("x" * 10 + "\n" + "y" * 30, 30) == "x" * 10 + "\n" + "y" * 19
    assert truncate_utf16("🎉🎉", 3) == "🎉"
    assert truncate_utf16("🎉🎉", 1) == ""
    assert truncate_utf16("abcdef", 4, marker="…") == "abc…"
    with pytest.raises(ValueError):
        truncate_utf16("x", -1)


# -- memory search -----------------------------------------------------------------------


def test_memory_search_finds_the_fact_and_is_deterministic(
    memories: MemoryIndex, searcher: Searcher, rows: list[dict]
):
    job = by_text(rows, "Hikari")
    hits = memories.search("Where did Maria get a job?")
    assert hits[0].memory_id == job["memory_id"]
    assert hits[0].text == job["text"] and hits[0].session_id == S_MARIA_JOB
    assert hits[0].lexical > 0 and hits[0].overlap == 0.5  # {get, job}: job
    fused = memories.search("Where did Maria get a job?", searcher=searcher)
    assert fused[0].memory_id == job["memory_id"]
    assert fused == memories.search("Where did Maria get a job?", searcher=searcher)
    scores = [h.score for h in fused]
    assert scores == sorted(scores, reverse=True)
    move = by_text(rows, "武蔵小杉")
    assert memories.search("健太の引っ越し先は？")[0].memory_id == move["memory_id"]


def test_session_fusion_surfaces_memories_worded_differently(
    memories: MemoryIndex, searcher: Searcher, rows: list[dict]
):
    question = "Which hotel did we reserve in Kyoto?"  # no word of the ryokan memory
    ryokan = by_text(rows, "ryokan")
    assert ryokan["memory_id"] not in [h.memory_id for h in memories.search(question)]
    fused = memories.search(question, searcher=searcher, k=3)
    assert ryokan["memory_id"] in [h.memory_id for h in fused]
    hit = next(h for h in fused if h.memory_id == ryokan["memory_id"])
    assert hit.lexical == 0 and hit.session_score > 0
    # beta 1: the session part no longer counts
    assert ryokan["memory_id"] not in [
        h.memory_id for h in memories.search(question, searcher=searcher, beta=1.0)
    ]


def test_ties_break_by_memory_id(searcher: Searcher, rows: list[dict]):
    twins = [dict(rows[0], memory_id=i) for i in ("mem_b", "mem_a", "mem_c")]
    index = MemoryIndex(
        pa.Table.from_pylist(twins, schema=MEMORY_TIMELINE), searcher.bm25["raw_text"].tokenizer
    )
    assert [h.memory_id for h in index.search("Hikari")] == ["mem_a", "mem_b", "mem_c"]


def test_as_of_hides_superseded_and_future_memories(
    memories: MemoryIndex, searcher: Searcher, rows: list[dict]
):
    older, newer = by_text(rows, "未定"), by_text(rows, "はなび")
    q = "美咲の送別会の店"

    def found(**kw) -> set[str]:
        return {h.memory_id for h in memories.search(q, **kw)} & {
            older["memory_id"],
            newer["memory_id"],
        }

    assert found() == {older["memory_id"], newer["memory_id"]}  # history without as_of
    utc = dt.UTC
    assert found(as_of=dt.datetime(2024, 3, 10, tzinfo=utc)) == {older["memory_id"]}
    assert found(as_of=dt.datetime(2024, 3, 14, tzinfo=utc)) == {newer["memory_id"]}
    assert found(as_of=dt.datetime(2024, 3, 1, tzinfo=utc)) == set()  # not yet said
    # the switch happens at the newer memory's time, exactly
    assert found(as_of=newer["valid_from"]) == {newer["memory_id"]}
    before = newer["valid_from"] - dt.timedelta(microseconds=1)
    assert found(as_of=before) == {older["memory_id"]}
    # naive as_of = local time (Asia/Tokyo, +9): the newer one was said at 19:33 local
    assert found(as_of=dt.datetime(2024, 3, 13, 19, 40), searcher=searcher) == {newer["memory_id"]}
    assert found(as_of=dt.datetime(2024, 3, 13, 19, 0), searcher=searcher) == {older["memory_id"]}
    assert found(as_of=dt.date(2024, 3, 13)) == {newer["memory_id"]}  # end of that day
    # and a pack as of the 10th never shows the newer memory
    pack = build_context(searcher, memories, q, 24_000, as_of=dt.datetime(2024, 3, 10, 12, 0))
    assert newer["text"] not in pack.render() and older["text"] in pack.render()
    for p in pack.pieces:
        assert p.citation.start <= "2024-03-10 12:00", p.header


def test_contact_scoping(memories: MemoryIndex, searcher: Searcher):
    q = "引っ越し Hikari Mochi camera 送別会"
    everyone = {h.contact_id for h in memories.search(q)}
    assert {"Maria", "健太", "Sam"} <= everyone
    for contact in ("Maria", "健太", "Sam"):
        hits = memories.search(q, contact=contact, searcher=searcher)
        assert hits and {h.contact_id for h in hits} == {contact}
        pack = build_context(searcher, memories, q, 24_000, contact=contact)
        assert pack.pieces
        assert {p.citation.contact_id for p in pack.pieces} == {contact}
    assert memories.search(q, contact="nobody") == []


def test_missing_timeline_gives_an_empty_index(tmp_path: Path, searcher: Searcher):
    empty = MemoryIndex.load(tmp_path, searcher.bm25["raw_text"].tokenizer)
    assert len(empty) == 0 and empty.search("Hikari", searcher=searcher) == []
    pack = recall(searcher, empty, "Where did Maria get a job?")
    assert pack.escalated and pack.reason == "no memory hits"
    assert any(p.kind == "search" for p in pack.pieces)
    # without memories, the other strategies seed their sources from a search
    for strategy, kind in (("neighbors", "chunk"), ("sessions", "session")):
        pack = build_context(searcher, empty, "Hikari Design job", 3000, strategy=strategy)
        assert pack.pieces and {p.kind for p in pack.pieces} == {kind}
        assert pack.pieces[0].citation.session_id == S_MARIA_JOB
        assert "no memory hits: sources seeded from a search" in pack.notes
        assert pack.utf16 <= 3000


# -- packs -------------------------------------------------------------------------------

BUDGETS = [0, 1, 20, 60, 120, 250, 400, 700, 1000, 1500, 2500, 4000, 8000, 24_000]


@pytest.mark.parametrize("strategy", ["neighbors", "sessions", "split", "none"])
def test_packs_fit_every_budget(
    strategy: str, memories: MemoryIndex, searcher: Searcher, sample: dict
):
    # emoji-heavy: the Mochi 🐶😭, job 🎉 and yakiniku 🍖 memories and their sessions
    question = "Mochi adopted 🐶 Hikari job 🎉 焼肉 🍖"
    for budget in BUDGETS:
        pack = build_context(searcher, memories, question, budget, strategy=strategy)
        rendered = pack.render()
        assert utf16_len(rendered) <= budget, (strategy, budget)
        rendered.encode("utf-16-le")  # never a lone surrogate
        check_citations(pack, sample)
        sources = source_messages(pack)
        assert len(sources) == len(set(sources)), "source material repeated"
        kinds = [p.kind for p in pack.pieces]
        assert kinds == sorted(kinds, key=lambda k: k != "memory")  # memories first
        if strategy == "none":
            assert set(kinds) <= {"memory"}
    big = build_context(searcher, memories, question, 24_000, strategy=strategy)
    assert any("🐶" in p.text for p in big.pieces)
    assert big.to_dict()["utf16"] == utf16_len(big.render())


def test_memory_excerpts_are_verbatim_or_skipped(
    memories: MemoryIndex, searcher: Searcher, rows: list[dict]
):
    question = "Mochi adopted shelter"
    hits = memories.search(question, searcher=searcher)
    mochi = by_text(rows, "Mochi")
    assert hits[0].memory_id == mochi["memory_id"]
    full = build_context(searcher, memories, question, 24_000, strategy="none")
    first = full.pieces[0]
    assert first.kind == "memory" and first.text == mochi["text"]
    assert mochi["text"] in full.render()
    assert first.header.startswith("[memory · Maria · event · 2024-03-09 17:10")
    camera = build_context(searcher, memories, "Fujifilm camera", 24_000, strategy="none")
    assert camera.pieces[0].header.startswith("[memory · Sam · possession · 2024-03-04 19:08")
    assert f"session {S_MOCHI}" in first.header
    assert first.citation.memory_id == mochi["memory_id"]
    assert first.citation.message_ids == mochi["message_ids"]
    # a budget one unit short of the first memory: skipped whole, never cut
    tight = build_context(searcher, memories, question, first.utf16 - 1, strategy="split")
    assert mochi["memory_id"] in tight.skipped_memories
    assert any(mochi["memory_id"] in n for n in tight.notes)
    assert "Mochi the shiba" not in tight.render()
    for p in tight.pieces:
        if p.kind == "memory":
            assert p.text in {r["text"] for r in rows}
    assert tight.utf16 <= first.utf16 - 1
    # exactly the memory's size: it fits alone
    exact = build_context(searcher, memories, question, first.utf16, strategy="split")
    assert exact.render() == first.render()


def test_superseded_memory_says_so(memories: MemoryIndex, searcher: Searcher, rows: list[dict]):
    older = by_text(rows, "未定")
    pack = build_context(searcher, memories, "美咲の送別会の店", 24_000, strategy="none")
    (piece,) = [p for p in pack.pieces if p.citation.memory_id == older["memory_id"]]
    assert "superseded 2024-03-13 19:33" in piece.header and "for 2024-03-21" in piece.header


def test_neighbors_strategy_gives_the_source_chunks_and_their_neighbours(
    memories: MemoryIndex, searcher: Searcher, rows: list[dict], sample: dict
):
    ryokan = by_text(rows, "ryokan")
    question = "ryokan Gion booking"
    hits = memories.search(question, k=1)
    assert hits[0].memory_id == ryokan["memory_id"]
    pack = build_context(searcher, memories, question, 24_000, strategy="neighbors", hits=hits)
    chunks = [p for p in pack.pieces if p.kind == "chunk"]
    assert chunks and all(p.citation.session_id == S_KYOTO for p in chunks)
    session_chunks = sorted(
        (c for c in sample["chunks"].values() if c["session_id"] == S_KYOTO),
        key=lambda c: c["chunk_index"],
    )
    assert len(session_chunks) >= 4  # 26 messages in chunks of 8
    msg = ryokan["message_ids"][0]
    holding = [c["chunk_index"] for c in session_chunks if msg in c["message_ids"]]
    want = set(range(min(holding) - 1, max(holding) + 2)) & {
        c["chunk_index"] for c in session_chunks
    }
    got = [sample["chunks"][p.citation.chunk_id]["chunk_index"] for p in chunks]
    assert got == sorted(got)  # chronological
    # a chunk whose messages are all shown by its neighbours is left out, never repeated
    assert set(got) <= want and set(holding) <= set(got)
    shown = {m for p in chunks for m in p.citation.message_ids}
    for c in session_chunks:
        if c["chunk_index"] in want:
            assert set(c["message_ids"]) <= shown
    assert msg in shown
    far = [c for c in session_chunks if c["chunk_index"] not in want]
    assert far and all(set(c["message_ids"]) - shown for c in far)  # only the neighbours
    # overlapping chunks (stride 6 < size 8) never repeat a message
    assert len(source_messages(pack)) == len(set(source_messages(pack)))


def test_sessions_strategy_gives_the_whole_source_sessions(
    memories: MemoryIndex, searcher: Searcher, sample: dict
):
    question = "Where did Maria get a job?"
    hits = memories.search(question, searcher=searcher, k=3)
    pack = build_context(searcher, memories, question, 24_000, strategy="sessions", hits=hits)
    sessions = [p for p in pack.pieces if p.kind == "session"]
    want = list(dict.fromkeys(h.session_id for h in hits))
    assert [p.citation.session_id for p in sessions] == want  # memory rank order, once each
    job = sessions[0]
    assert job.citation.session_id == S_MARIA_JOB
    assert job.citation.message_ids == sample["sessions"][S_MARIA_JOB]["message_ids"]
    assert not job.truncated
    lines = job.text.split("\n")
    assert len(lines) == 15
    assert lines[0] == "20:10 Maria: Yuki!! Guess what, I got the job at Hikari Design 🎉"
    assert job.header == (
        f"[session {S_MARIA_JOB} · Maria · 2024-03-01 20:10–20:24 · messages "
        f"{job.citation.message_ids[0]}…{job.citation.message_ids[-1]} (15)]"
    )
    # a session over midnight writes the date when it changes
    kyoto = build_context(
        searcher, memories, "ryokan", 24_000, strategy="sessions", hits=memories.search("ryokan")
    )
    (piece,) = [p for p in kyoto.pieces if p.kind == "session"]
    assert "\n2024-03-03 00:01 Maria: And Nishiki market" in piece.text


def test_sessions_are_truncated_at_a_message_with_a_marker(
    memories: MemoryIndex, searcher: Searcher, sample: dict
):
    hits = memories.search("ryokan")
    for budget in (400, 700, 1000):
        pack = build_context(searcher, memories, "ryokan", budget, strategy="sessions", hits=hits)
        (piece,) = [p for p in pack.pieces if p.kind == "session"]
        assert piece.truncated
        n = len(piece.citation.message_ids)
        rest = len(sample["sessions"][S_KYOTO]["message_ids"]) - n
        assert piece.text.endswith(f"… [truncated: {rest} more messages]")
        assert piece.citation.message_ids == sample["sessions"][S_KYOTO]["message_ids"][:n]
        ids = piece.citation.message_ids
        tail = f"messages {ids[0]}…{ids[-1]} ({n})]" if n > 1 else f"message {ids[0]}]"
        assert piece.header.endswith(tail)
        assert len(piece.text.split("\n")) == n + 1  # whole messages + the marker
        assert pack.utf16 <= budget


def test_split_strategy_adds_independent_search(
    memories: MemoryIndex, searcher: Searcher, sample: dict
):
    question = "Where did Maria get a job?"
    pack = build_context(searcher, memories, question, 24_000, strategy="split")
    memory_sessions = {h.session_id for h in pack.memories}
    session_pieces = [p for p in pack.pieces if p.kind == "session"]
    search = [p for p in pack.pieces if p.kind == "search"]
    assert {p.citation.session_id for p in session_pieces} == memory_sessions
    assert any(p.citation.session_id not in memory_sessions for p in search)
    # the session half stays within half of what the memories left
    memory_units = sum(p.utf16 + 2 for p in pack.pieces if p.kind == "memory")
    budget = 3000
    small = build_context(searcher, memories, question, budget, strategy="split")
    units = sum(p.utf16 + 2 for p in small.pieces if p.kind == "session")
    assert units <= (budget - memory_units) // 2 + 2
    assert any(p.kind == "search" for p in small.pieces)
    assert small.utf16 <= budget


# -- escalation --------------------------------------------------------------------------


def test_recall_strong_memory_stays_alone(memories: MemoryIndex, searcher: Searcher, rows):
    pack = recall(searcher, memories, "Where did Maria get a job?")
    assert not pack.escalated and pack.reason.startswith("strong memory evidence")
    assert pack.pieces and {p.kind for p in pack.pieces} == {"memory"}
    assert pack.pieces[0].text == by_text(rows, "Hikari")["text"]


def test_recall_escalates_on_weak_evidence(memories: MemoryIndex, searcher: Searcher):
    pack = recall(searcher, memories, "quantum zebra xylophone")
    assert pack.escalated and pack.reason.startswith("weak memory evidence")
    assert any(p.kind != "memory" for p in pack.pieces)
    assert pack.utf16 <= 24_000
    cat = recall(searcher, memories, "What is the name of Maria's cat?")
    assert cat.escalated  # only the name matches
    quiet = recall(searcher, memories, "quantum zebra xylophone", sources=False)
    assert not quiet.escalated and {p.kind for p in quiet.pieces} <= {"memory"}


def test_recall_sources_on_request(memories: MemoryIndex, searcher: Searcher):
    pack = recall(
        searcher, memories, "Where did Maria get a job?", sources=True, strategy="sessions"
    )
    assert pack.escalated and pack.reason == "sources requested"
    assert [p.kind for p in pack.pieces][0] == "memory"
    assert any(p.kind == "session" and p.citation.session_id == S_MARIA_JOB for p in pack.pieces)
    small = recall(searcher, memories, "Where did Maria get a job?", sources=True, budget=500)
    assert small.utf16 <= 500
    d = small.to_dict()
    assert d["escalated"] and d["pieces"][0]["citation"]["session_id"] == S_MARIA_JOB


def test_bad_arguments(memories: MemoryIndex, searcher: Searcher):
    with pytest.raises(ValueError):
        build_context(searcher, memories, "x", -1)
    with pytest.raises(ValueError):
        build_context(searcher, memories, "x", 100, strategy="everything")
    with pytest.raises(ValueError):
        memories.search("x", beta=2.0)
