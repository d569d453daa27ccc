"""The reranker under leave-one-conversation-out: every question is scored by a model
trained without its conversation, deterministically (small hand-made corpus, fakes for the
searcher and the evaluation's units)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from memory_pipeline.core.evaluation.rerank_cv import cross_validate_reranker
from memory_pipeline.core.indexes.tokenize import get_tokenizer
from memory_pipeline.core.indexes.turns import build_turn_index, load_turn_indexes, turn_layout
from memory_pipeline.core.retrieval.config import SearchConfig
from memory_pipeline.core.retrieval.turns import TurnIndex

TOK = get_tokenizer("regex")
CONVS = ("c1", "c2", "c3")
WORDS = ("hiking", "cake", "keys", "concert", "beagle", "piano")


@dataclass
class Q:
    question_id: str
    corpus_id: str
    question: str
    gold: dict
    as_of: dt.datetime | None = None
    qtype: str = "single-hop"


@dataclass
class Cand:
    chunks: list
    turn: dict = field(default_factory=dict)

    def ranking(self, cfg):
        return self.chunks


class FakeSearcher:
    latest = dt.datetime(2024, 3, 2)
    known_speakers = ["Ann", "Bob"]

    def __init__(self, ti, chunk_ids):
        self.turn_index, self.chunk_ids = ti, chunk_ids
        self.position = {c: i for i, c in enumerate(chunk_ids)}

    def time_mask(self, parsed, conf):
        return None, []


class FakeUnits:
    def __init__(self, ref_of, session_of_chunk):
        self.ref_of, self.session_of = ref_of, session_of_chunk
        self.session_refs = {}
        for m, r in ref_of.items():
            self.session_refs.setdefault(m.split("-")[0], set()).add(r)

    def refs(self, mids, depth):
        return [self.ref_of[m] for m in mids][:depth]

    def sessions(self, ranked):
        return list(dict.fromkeys(self.session_of[c] for c, _ in ranked))


def _corpus(tmp_path):
    ids, sids, chunk_rows, texts, senders = [], [], [], [], []
    for conv in CONVS:
        for j, w in enumerate(WORDS):
            ids.append(f"{conv}-m{j}")
            sids.append(conv)
            texts.append(f"we talked about {w}")
            senders.append("Ann" if j % 2 else "Bob")
    chunk_ids = [f"{conv}-k{i}" for conv in CONVS for i in range(2)]
    for conv in CONVS:
        mids = [m for m in ids if m.startswith(conv)]
        chunk_rows += [mids[:3], mids[3:]]
    chunks = pa.table({"chunk_id": chunk_ids,
                       "session_id": [c.split("-")[0] for c in chunk_ids],
                       "chunk_index": [int(c[-1]) for c in chunk_ids],
                       "message_ids": chunk_rows})
    msgs = pa.table({"message_id": ids, "sender": senders,
                     "local_ts": [dt.datetime(2024, 3, 1)] * len(ids), "text": texts})
    build_turn_index(tmp_path, chunks, msgs, TOK)
    ti = TurnIndex(turn_layout(chunks), load_turn_indexes(tmp_path), len(chunk_ids),
                   senders=senders, lengths=[len(t) for t in texts])
    return ti, chunk_ids, {m: f"ref:{m}" for m in ids}


def test_every_question_is_scored_out_of_fold_and_deterministically(tmp_path):
    ti, chunk_ids, ref_of = _corpus(tmp_path)
    searcher = FakeSearcher(ti, chunk_ids)
    units = FakeUnits(ref_of, {c: c.split("-")[0] for c in chunk_ids})
    questions, cands = [], {}
    for conv in CONVS:
        for j, w in enumerate(WORDS):
            q = Q(f"{conv}/q{j}", conv, f"what about {w}?", {f"ref:{conv}-m{j}": 2})
            toks = TOK.tokenize(q.question)
            mask = np.array([c.startswith(conv) for c in chunk_ids])
            ranked = [(f"{conv}-k1", 2.0), (f"{conv}-k0", 1.0)]
            cands[q.question_id] = Cand(ranked, {r: ti.scores(toks, r, mask) for r in
                                                 ("turn", "turn_ctx")})
            questions.append(q)
    cfg = SearchConfig(mode="bm25", turns="index")
    folds = {c: cfg.name for c in CONVS}
    args = (searcher, units, cands, questions, folds, cfg.name, {cfg.name: cfg}, (5,))
    a = cross_validate_reranker(*args, data={"file": "synthetic"})
    b = cross_validate_reranker(*args, data={"file": "synthetic"})
    turn5 = a.oof[("turn", "evidence_recall", 5)]
    assert len(turn5) == len(questions) and all(v is not None for v in turn5)
    assert turn5 == b.oof[("turn", "evidence_recall", 5)]
    assert np.mean(turn5) > 0.9  # the matching turn is among the top 5 after reranking
    assert np.array_equal(a.final.weights, b.final.weights)
    assert a.final.provenance["conversations"] == list(CONVS)
    assert a.final.provenance["trained_on"] == {"file": "synthetic"}


def test_without_a_turn_index_there_is_no_reranker_cv():
    class NoTurns:
        turn_index = None

    assert cross_validate_reranker(NoTurns(), None, {}, [], {}, "", {}, (5,)) is None
