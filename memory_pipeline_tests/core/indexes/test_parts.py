"""Per-partition token parts: any build order gives the files a full rebuild writes."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import numpy as np
import pyarrow as pa

from memory_pipeline.core.indexes import parts as P
from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turns import MESSAGE_TOKENS, TURN_FOLDER, build_turn_index

WORDS = "puppy beagle breed coffee 東京 引っ越し café ΟΔΟΣ yen 4,500 rain walk ＢＢＱ".split()


def _corpus(seed: int, days: int = 6, sessions_per_day: int = 3):
    """Chunks over ``days`` partitions (overlapping windows, a missing message, an empty
    text, a missing sender, tz-aware times) and their messages, in shuffled row order."""
    rng = random.Random(seed)
    chunk_rows, msg_rows = [], []
    base = dt.datetime(2024, 3, 1, 22, 0, tzinfo=dt.UTC)
    for d in range(days):
        for s in range(sessions_per_day):
            sid = f"s{rng.randrange(10**6):06d}-{d}-{s}"
            n = rng.randrange(1, 9)
            mids = [f"msg-{sid}-{k}" for k in range(n)]
            for k, m in enumerate(mids):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 6)))
                sender = rng.choice(["Ann", "Bob", None, "Σίσυφος"])
                ts = base + dt.timedelta(days=d, minutes=7 * k)
                msg_rows.append({"message_id": m, "sender": sender, "local_ts": ts, "text": text})
            if rng.random() < 0.2:
                mids = mids + ["ghost-" + sid]  # a message no table row holds
            window, stride = 4, 3
            for c, lo in enumerate(range(0, max(len(mids) - 1, 1), stride)):
                chunk_rows.append(
                    {
                        "chunk_id": f"c{rng.randrange(10**9):09d}",
                        "session_id": sid,
                        "chunk_index": c,
                        "message_ids": mids[lo : lo + window],
                        "local_date": dt.date(2024, 3, 1) + dt.timedelta(days=d),
                    }
                )
    rng.shuffle(chunk_rows)
    rng.shuffle(msg_rows)
    chunks = pa.Table.from_pylist(chunk_rows)
    messages = pa.Table.from_pylist(
        msg_rows,
        schema=pa.schema(
            [
                ("message_id", pa.string()),
                ("sender", pa.string()),
                ("local_ts", pa.timestamp("us", tz="Asia/Tokyo")),
                ("text", pa.string()),
            ]
        ),
    )
    return chunks, messages


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a turn index folder (the npz as its arrays: zip entries carry times)."""
    out = {}
    for p in sorted((folder / TURN_FOLDER).rglob("*")):
        if p.is_file() and p.name != MESSAGE_TOKENS:
            out[str(p.relative_to(folder))] = p.read_bytes()
    with np.load(folder / TURN_FOLDER / MESSAGE_TOKENS) as z:
        out["indptr"], out["ids"] = z["indptr"].tobytes(), z["ids"].tobytes()
    return out


class _Counting:
    """A tokenizer that counts the texts it is asked to tokenize."""

    def __init__(self, inner):
        self.inner, self.name, self.params, self.texts = inner, inner.name, inner.params, 0

    def tokenize(self, text):
        return self.inner.tokenize(text)

    def tokenize_many(self, texts):
        texts = list(texts)
        self.texts += len(texts)
        return self.inner.tokenize_many(texts)


def test_parts_build_equals_the_per_document_build_byte_for_byte(tmp_path):
    for seed in range(3):
        chunks, messages = _corpus(seed)
        for name in ("english", "cjk_bigram"):
            for context in (1, 2):
                tok = get_tokenizer(name)
                full, inc = (
                    tmp_path / f"f{seed}{name}{context}",
                    tmp_path / f"i{seed}{name}{context}",
                )
                want = build_turn_index(full, chunks, messages, tok, context)
                got = build_turn_index(inc, chunks, messages, tok, context, parts=tmp_path / "p")
                assert got["turn_parts"] == 6
                assert {k: got[k] for k in want} == want
                assert _files(inc) == _files(full), (seed, name, context)


def test_any_build_order_equals_a_full_rebuild_and_only_changed_parts_are_tokenized(tmp_path):
    chunks, messages = _corpus(7)
    tok = _Counting(get_tokenizer("english"))
    parts = tmp_path / "parts"
    dates = sorted(set(chunks["local_date"].to_pylist()))
    # build day by day, in reverse order: each refresh sees a growing corpus
    for k in range(len(dates)):
        wanted = set(dates[len(dates) - 1 - k :])
        sub = chunks.filter(pa.array([d in wanted for d in chunks["local_date"].to_pylist()]))
        build_turn_index(tmp_path / f"v{k}", sub, messages, tok, parts=parts)
    build_turn_index(tmp_path / "full", chunks, messages, get_tokenizer("english"))
    assert _files(tmp_path / f"v{len(dates) - 1}") == _files(tmp_path / "full")
    # a warm refresh tokenizes nothing; a changed partition only its own texts
    tok.texts = 0
    stats = build_turn_index(tmp_path / "warm", chunks, messages, tok, parts=parts)
    assert tok.texts == 0 and stats["turn_parts_computed"] == 0
    changed = messages.set_column(
        3,
        "text",
        pa.array(
            [
                t + " rain" if m.startswith(f"msg-{_a_session(chunks, dates[2])}") else t
                for m, t in zip(
                    messages["message_id"].to_pylist(), messages["text"].to_pylist(), strict=True
                )
            ]
        ),
    )
    stats = build_turn_index(tmp_path / "edit", chunks, changed, tok, parts=parts)
    assert stats["turn_parts_computed"] == 1 and stats["turn_parts_pruned"] == 1
    assert 0 < tok.texts < messages.num_rows
    build_turn_index(tmp_path / "edit_full", chunks, changed, get_tokenizer("english"))
    assert _files(tmp_path / "edit") == _files(tmp_path / "edit_full")
    assert len(list((parts / TURN_FOLDER).glob("*.arrow"))) == len(dates)


def _a_session(chunks: pa.Table, day: dt.date) -> str:
    rows = [r for r in chunks.to_pylist() if r["local_date"] == day]
    return rows[0]["session_id"]


def test_a_message_two_partitions_list_is_kept_once_as_the_full_build_keeps_it(tmp_path):
    """A session re-cut across midnight while the next day was not rebuilt: both days'
    chunks list the messages after midnight. The first session by id keeps them."""
    chunks, messages = _corpus(3, days=3)
    rows = chunks.to_pylist()
    by_day = {}
    for r in rows:
        by_day.setdefault(r["local_date"], []).append(r)
    days = sorted(by_day)
    # messages of a day-0 and a day-2 chunk also listed by a day-1 chunk, in the middle
    donor0, donor2 = by_day[days[0]][0]["message_ids"], by_day[days[2]][0]["message_ids"]
    host = by_day[days[1]][0]
    host["message_ids"] = donor0[:1] + host["message_ids"] + donor2[-2:]
    chunks = pa.Table.from_pylist(rows, schema=chunks.schema)
    tok = get_tokenizer("english")
    for context in (1, 2):
        got = build_turn_index(
            tmp_path / f"i{context}", chunks, messages, tok, context, tmp_path / "p"
        )
        want = build_turn_index(tmp_path / f"f{context}", chunks, messages, tok, context)
        assert got["turn_duplicates_dropped"] == 3
        assert {k: got[k] for k in want} == want
        assert _files(tmp_path / f"i{context}") == _files(tmp_path / f"f{context}")


def test_a_session_in_two_partitions_takes_the_per_document_path(tmp_path):
    chunks, messages = _corpus(4, days=2)
    rows = chunks.to_pylist()
    first = min(r["session_id"] for r in rows)
    moved = [r for r in rows if r["session_id"] != first][0]
    moved["session_id"] = first  # now cut into both partitions (if not already the same day)
    moved["chunk_index"] = 99
    chunks = pa.Table.from_pylist(rows, schema=chunks.schema)
    tok = get_tokenizer("english")
    got = build_turn_index(tmp_path / "i", chunks, messages, tok, parts=tmp_path / "p")
    want = build_turn_index(tmp_path / "f", chunks, messages, tok)
    spans = len({r["local_date"] for r in rows if r["session_id"] == first}) > 1
    assert ("turn_parts" not in got) == spans
    assert {k: got[k] for k in want} == want
    assert _files(tmp_path / "i") == _files(tmp_path / "f")


def test_drop_parts_removes_every_file_or_the_purged_dates(tmp_path):
    chunks, messages = _corpus(1)
    tok = get_tokenizer("english")
    root = P.parts_root(tmp_path)
    build_turn_index(tmp_path / "v", chunks, messages, tok, parts=root)
    names = sorted(p.name for p in root.rglob("*.arrow"))
    assert [n[:10] for n in names] == [f"2024-03-0{d}" for d in range(1, 7)]
    # retention: the partitions before the cutoff, not the others
    assert P.drop_parts(tmp_path, before=dt.date(2024, 3, 3)) == 2
    assert sorted(p.name for p in root.rglob("*.arrow")) == names[2:]
    # forget: everything
    assert P.drop_parts(tmp_path) == 4
    assert not root.exists()
    assert P.drop_parts(tmp_path) == 0


def test_gather_ranges_and_first_seen_ids():
    assert P.gather_ranges(np.array([5, 0, 2]), np.array([2, 0, 3])).tolist() == [5, 6, 2, 3, 4]
    words = pa.array(["a", "b", "c", "d"])
    vocab, rank = P.first_seen_ids(np.array([2, 0, 2, 3]), words)
    assert vocab == {"c": 0, "a": 1, "d": 2}
    assert rank.tolist() == [1, -1, 0, 2]
    # codes of a dictionary encoding are already in first-seen order (the no-sort path)
    vocab, rank = P.first_seen_ids(np.array([0, 1, 0, 2, 1]), words)
    assert vocab == {"a": 0, "b": 1, "c": 2}
    assert rank.tolist() == [0, 1, 2, -1]
    # any codes: the same ids as sorting by first occurrence
    rng = np.random.default_rng(3)
    for _ in range(50):
        codes = rng.integers(0, 4, rng.integers(1, 12))
        uniq, first = np.unique(codes, return_index=True)
        ordered = uniq[np.argsort(first, kind="stable")].tolist()
        vocab, rank = P.first_seen_ids(codes, words)
        assert list(vocab) == [words[i].as_py() for i in ordered]
        assert [rank[c] for c in ordered] == list(range(len(ordered)))


def test_digest_hashes_string_values_not_their_layout():
    whole = pa.array(["x", "ab", None, "日本"])
    sliced = pa.array(["zz", "x", "ab", None, "日本", "q"]).slice(1, 4)
    chunked = pa.chunked_array([["x", "ab"], [None, "日本"]])
    assert P.digest(1, [whole]) == P.digest(1, [sliced]) == P.digest(1, [chunked])
    assert P.digest(1, [whole]) != P.digest(1, [pa.array(["xa", "b", None, "日本"])])
    assert P.digest(1, [pa.array([], pa.string())]) != P.digest(1, [pa.array([""])])


def _reps(seed: int, n: int = 60, days: int = 5):
    """Chunk representations (chunk_id order) and each chunk's partition date."""
    rng = random.Random(seed)
    ids = sorted(f"chk_{rng.randrange(16**10):010x}" for _ in range(n))

    def text():
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 12)))

    reps = {r: (ids, [text() for _ in ids]) for r in ("raw_text", "summary", "embedding_text")}
    day = [dt.date(2024, 3, 1) + dt.timedelta(days=rng.randrange(days)) for _ in ids]
    return reps, day


def _bm25_files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _subset(reps, day, keep):
    rows = [i for i, d in enumerate(day) if d in keep]
    sub = {r: ([ids[i] for i in rows], [t[i] for i in rows]) for r, (ids, t) in reps.items()}
    return sub, [day[i] for i in rows]


def test_chunk_indexes_from_parts_equal_the_per_document_build(tmp_path):
    from memory_pipeline.core.indexes.publish import build_bm25

    reps, day = _reps(11)
    parts = tmp_path / "parts"
    dates = sorted(set(day))
    # grow the corpus one partition at a time, newest first
    for k in range(1, len(dates) + 1):
        sub, sub_day = _subset(reps, day, set(dates[-k:]))
        got = build_bm25(sub, tmp_path / f"inc{k}", "english", parts=parts, days=sub_day)
        assert got.stats["chunk_parts"] == k and got.stats["chunk_parts_computed"] == 1
    want = build_bm25(reps, tmp_path / "full", "english")
    assert _bm25_files(tmp_path / f"inc{len(dates)}") == _bm25_files(tmp_path / "full")
    assert got.postings.equals(want.postings)
    assert {k: got.stats[k] for k in want.stats} == want.stats
    # a changed summary recomputes its partition only, and still equals a full rebuild
    ids, texts = reps["summary"]
    changed = dict(reps, summary=(ids, [texts[0] + " coffee coffee"] + texts[1:]))
    got = build_bm25(changed, tmp_path / "edit", "english", parts=parts, days=day)
    assert got.stats["chunk_parts_computed"] == 1 and got.stats["chunk_parts_pruned"] == 1
    build_bm25(changed, tmp_path / "edit_full", "english")
    assert _bm25_files(tmp_path / "edit") == _bm25_files(tmp_path / "edit_full")


def test_turn_parts_keyed_by_message_files_equal_the_content_keyed_build(tmp_path):
    """With the raw_messages files' digests (``sources``), a part whose messages all lie in
    its day's window (the day and its neighbours) is keyed by those digests: the index is
    the per-document build's, a warm build reads every part back without tokenizing, and a
    changed file recomputes exactly the parts whose window holds it. A part listing a
    message no file holds (the corpus's ghosts) or one dated outside its window is keyed
    by its messages' content, as without sources."""
    import pyarrow.compute as pc

    chunks, messages = _corpus(11, days=8)
    local = pc.cast(pc.local_timestamp(messages["local_ts"]), pa.date32())
    messages = messages.append_column("local_date", local)
    far = messages["message_id"][5].as_py()  # dated a month away: outside every window
    messages = messages.set_column(
        4,
        "local_date",
        pa.array(
            [
                d + dt.timedelta(days=30) if m == far else d
                for m, d in zip(messages["message_id"].to_pylist(), local.to_pylist(), strict=True)
            ],
            pa.date32(),
        ),
    )
    files = {d: f"sha-{d}" for d in set(messages["local_date"].to_pylist())}
    tok = _Counting(get_tokenizer("english"))
    parts = tmp_path / "p"
    got = build_turn_index(tmp_path / "a", chunks, messages, tok, parts=parts, sources=files)
    build_turn_index(tmp_path / "b", chunks, messages, get_tokenizer("english"))
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert got["turn_parts"] == got["turn_parts_computed"] == 8
    tok.texts = 0
    warm = build_turn_index(tmp_path / "c", chunks, messages, tok, parts=parts, sources=files)
    assert warm["turn_parts_computed"] == 0 and tok.texts == 0
    # which parts the files key: no ghost, no message dated outside the window
    stored = set(messages["message_id"].to_pylist())
    by_file = {
        day
        for day in set(chunks["local_date"].to_pylist())
        if all(
            m in stored and m != far
            for r in chunks.to_pylist()
            if r["local_date"] == day
            for m in r["message_ids"]
        )
    }
    assert 0 < len(by_file) < 8  # both kinds of key are exercised
    changed = sorted(files)[4]
    expect = {d for d in by_file if abs((d - changed).days) <= 1}
    stats = build_turn_index(
        tmp_path / "e", chunks, messages, tok, parts=parts, sources=files | {changed: "new"}
    )
    assert expect and stats["turn_parts_computed"] == len(expect)
    assert _files(tmp_path / "e") == _files(tmp_path / "b")


def test_parts_whose_messages_are_all_missing_equal_the_per_document_build(tmp_path):
    """Chunks listing only messages no table row holds (every message gone): the parts
    give every turn the empty head and text, as the per-document build does."""
    chunks, messages = _corpus(3)
    empty = messages.slice(0, 0)
    tok = get_tokenizer("english")
    want = build_turn_index(tmp_path / "f", chunks, empty, tok)
    got = build_turn_index(tmp_path / "i", chunks, empty, tok, parts=tmp_path / "p")
    assert {k: got[k] for k in want} == want
    assert _files(tmp_path / "i") == _files(tmp_path / "f")


def test_chunk_parts_keyed_by_their_files_equal_the_content_keyed_build(tmp_path):
    """With ``sources`` (a string per partition date that decides its texts: the files'
    digests), those partitions' chunk parts are keyed by it and their ids: the indexes are
    the per-document build's, a warm build tokenizes nothing, a changed source recomputes
    exactly its partition, and a date without a source keeps the content key (an edited
    text there is seen without any source changing)."""
    from memory_pipeline.core.indexes.publish import build_bm25

    reps, day = _reps(5, n=80, days=6)
    dates = sorted(set(day))
    files = {d: f"sha-{d}" for d in dates[1:]}  # dates[0]: no source, content key
    tok = _Counting(get_tokenizer("english"))
    parts = tmp_path / "parts"
    got = build_bm25(reps, tmp_path / "a", tok, parts=parts, days=day, sources=files)
    want = build_bm25(reps, tmp_path / "full", "english")
    assert _bm25_files(tmp_path / "a") == _bm25_files(tmp_path / "full")
    assert got.postings.equals(want.postings)
    assert got.stats["chunk_parts_computed"] == len(dates)
    assert got.stats["chunk_parts_keyed_by_files"] == len(dates) - 1
    tok.texts = 0
    warm = build_bm25(reps, tmp_path / "b", tok, parts=parts, days=day, sources=files)
    assert warm.stats["chunk_parts_computed"] == 0 and tok.texts == 0
    # a new source for one date: that partition only
    files = files | {dates[3]: "new"}
    stats = build_bm25(reps, tmp_path / "c", tok, parts=parts, days=day, sources=files).stats
    assert stats["chunk_parts_computed"] == 1
    # an edited text on the date without a source is found by its content
    first = next(i for i, d in enumerate(day) if d == dates[0])
    ids, texts = reps["summary"]
    edited = dict(
        reps, summary=(ids, [*texts[:first], texts[first] + " coffee", *texts[first + 1 :]])
    )
    stats = build_bm25(edited, tmp_path / "d", tok, parts=parts, days=day, sources=files).stats
    assert stats["chunk_parts_computed"] == 1
    build_bm25(edited, tmp_path / "d_full", "english")
    assert _bm25_files(tmp_path / "d") == _bm25_files(tmp_path / "d_full")
