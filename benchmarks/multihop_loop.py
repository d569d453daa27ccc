"""Multi-hop retrieval on LoCoMo dev: query decomposition, an entity second hop and merges of
their rankings, scored per question type and leave-one-conversation-out.

Reuses ``locomo_loop``'s cached corpus and candidates (``--work``, read only: the extra
candidates of the sub-queries and hop queries are pickled in ``--scratch``). Each variant
turns a question into several queries (the question first), ranks each as the default does
(chunk fusion, granularity fusion, speaker boost; no reranker) and merges the rankings of
turns and of chunks (sessions are the fold of the merged chunks). Variants are grouped in
families; each family (with the default in it) is selected leave-one-conversation-out on
units R@5 (the evaluation's selection metric), and the out-of-fold values are reported with
CIs that resample conversations then questions, with the paired difference to the default.

    python benchmarks/multihop_loop.py --work /work/scratch/locomo_work --scratch /tmp/mh
"""

from __future__ import annotations

import argparse
import collections
import math
import pickle
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo_loop import SHARED, _default_turns, load  # noqa: E402

from memory_pipeline.core.evaluation import crossval as CV  # noqa: E402
from memory_pipeline.core.evaluation import metrics as M  # noqa: E402
from memory_pipeline.core.evaluation.evaluate_units import Units, _candidates  # noqa: E402
from memory_pipeline.core.retrieval.config import PRESETS  # noqa: E402
from memory_pipeline.core.retrieval.fusion import rrf  # noqa: E402

Ranked = list[tuple[str, float]]
from memory_pipeline.core.retrieval.query import speakers_in  # noqa: E402

# ---- the rules and merges measured (not shipped: none won out of fold) ----------------
_WH = r"(?:what|which|who|whom|whose|where|when|why|how|did|does|do|is|are|was|were|has|have)"
# "…, and how many years…" / "… or where …": a second question inside the first
_SECOND_QUESTION = re.compile(rf"\s*,?\s+(?:and|or)\s+(?={_WH}\b)", re.I)
_COORD = r"(?:\s*,\s*(?:and\s+)?|\s+and\s+|\s*&\s*)"
_MIN_PART_WORDS = 3  # a part shorter than this is not a question of its own


def _is_english(query: str) -> bool:
    """Letters of the query are ASCII Latin (the rules read English function words)."""
    letters = [c for c in query if c.isalpha()]
    return bool(letters) and all(c.isascii() for c in letters)


def _name_pattern(names: Sequence[str]) -> str:
    alts = sorted({re.escape(n) for n in names if n.strip()}, key=len, reverse=True)
    return "(?:" + "|".join(alts) + ")"


def _split_speakers(query: str, names: Sequence[str]) -> list[str]:
    """One question per name of a coordination of two or more ``names`` in ``query`` (the
    coordination, with its "both", replaced by the one name; a possessive kept), else []."""
    if len(names) < 2:
        return []
    name = _name_pattern(names)
    coord = re.compile(
        rf"(?:\bboth\s+)?\b({name}(?:{_COORD}{name})+)(['’]s)?\b(?:\s+both\b)?", re.I
    )
    m = coord.search(query)
    if m is None:
        return []
    members = re.findall(name, m.group(1), re.I)
    if len(members) < 2:
        return []
    possessive = m.group(2) or ""
    out = []
    for member in dict.fromkeys(members):
        text = query[: m.start()] + member + possessive + query[m.end() :]
        out.append(re.sub(r"\s+", " ", text).strip())
    return out


def _split_questions(query: str, names: Sequence[str]) -> list[str]:
    """The questions joined by "and"/"or" + a question word, each stripped of the joint;
    a later part that names nobody gets the first part's names appended."""
    parts = [p.strip(" ,?") for p in _SECOND_QUESTION.split(query)]
    parts = [p for p in parts if len(p.split()) >= _MIN_PART_WORDS]
    if len(parts) < 2:
        return []
    if names:
        name = re.compile(r"\b" + _name_pattern(names) + r"\b", re.I)
        first = list(dict.fromkeys(name.findall(parts[0])))
        parts = [p if name.search(p) or not first else f"{p} {' '.join(first)}" for p in parts]
    return [p + "?" for p in parts]


_CLAUSE = re.compile(r"\s+(?=(?:during|while|after|before|since)\b)", re.I)


def _split_clause(query: str, names: Sequence[str]) -> list[str]:
    """The main clause and the time clause (during / while / after / before / since ...)
    as two questions (the clause gets the main clause's names): the clause names the
    event that locates the answer, which is another session's ("which book was John
    reading during his recovery from an ankle injury?")."""
    parts = _CLAUSE.split(query, maxsplit=1)
    if len(parts) < 2 or min(len(p.split()) for p in parts) < _MIN_PART_WORDS:
        return []
    head, clause = parts[0].strip(" ,?"), parts[1].strip(" ,?")
    if names:
        name = re.compile(r"\b" + _name_pattern(names) + r"\b", re.I)
        first = list(dict.fromkeys(name.findall(head)))
        if first and not name.search(clause):
            clause = f"{clause} {' '.join(first)}"
    return [head + "?", clause + "?"]


def decompose(query: str, names: Sequence[str] = (), clauses: bool = False) -> list[str]:
    """Sub-questions of ``query`` (without the query itself), [] when no rule applies;
    ``clauses``: also split off a time clause (``_split_clause``).

    ``names``: the known speaker names the query mentions (``query.speakers_in``). English
    only: the rules read English conjunctions, so any other query is left whole (a Japanese
    「と」 coordination is not split by accident)."""
    if not isinstance(query, str) or not _is_english(query):
        return []
    out: list[str] = []
    for part in _split_questions(query, names) or [query]:
        out.extend(_split_speakers(part, names) or ([part] if part != query else []))
    if clauses and not out:
        out = _split_clause(query, names)
    return list(dict.fromkeys(p for p in out if p != query))


_WORD = re.compile(r"[A-Za-z][A-Za-z'’\-]*")


def hop_terms(
    texts: Sequence[str],
    tokenize,
    query_tokens: Iterable[str],
    exclude: Iterable[str],
    idf: Mapping[str, float],
    n_terms: int,
    min_idf: float = 0.0,
) -> list[str]:
    """The ``n_terms`` tokens of ``texts`` (the first hop's best turns) that say most about
    them and the query does not already hold: weight ``tf x idf``, a token capitalized
    inside a sentence (a name, a title, a place) counted twice; ``exclude`` (the speakers'
    names) and tokens of idf below ``min_idf`` left out; ties by token, so the result is
    deterministic."""
    seen = set(query_tokens) | set(exclude)
    weight: Counter[str] = Counter()
    for text in texts:
        capital = set()
        for m in _WORD.finditer(text):
            word = m.group(0)
            before = text[: m.start()].rstrip()
            if word[0].isupper() and before and before[-1] not in ".!?\"'“":
                capital.update(tokenize(word))
        for tok in tokenize(text):
            w = idf.get(tok, 0.0)
            if tok in seen or w <= min_idf:
                continue
            weight[tok] += w * (2.0 if tok in capital else 1.0)
    ranked = sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))
    return [t for t, _ in ranked[:n_terms]]


def interleave(rankings: Sequence[Ranked], depth: int | None = None) -> Ranked:
    """Round-robin over ``rankings`` (the first list's item first at each round), each id
    once at its first place; the score is 1 / place so the merge is itself a ranking."""
    out: list[str] = []
    seen: set[str] = set()
    longest = max((len(r) for r in rankings), default=0)
    for i in range(longest):
        for r in rankings:
            if i < len(r) and r[i][0] not in seen:
                seen.add(r[i][0])
                out.append(r[i][0])
    out = out[:depth] if depth is not None else out
    return [(d, 1.0 / (p + 1)) for p, d in enumerate(out)]


def max_merge(rankings: Sequence[Ranked], weights: Sequence[float] | None = None) -> Ranked:
    """Each id's best weighted score over ``rankings``, scores scaled by each list's best
    (a list of other units stays comparable); ties by first appearance then id."""
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    best: dict[str, float] = {}
    order: dict[str, int] = {}
    for r, w in zip(rankings, weights, strict=True):
        top = max((s for _, s in r), default=0.0)
        for d, s in r:
            v = w * (s / top if top > 0 else 0.0)
            order.setdefault(d, len(order))
            if d not in best or v > best[d] or math.isnan(best[d]):
                best[d] = v
    return sorted(best.items(), key=lambda kv: (-kv[1], order[kv[0]]))


TYPES = ("all", "multi-hop", "single-hop", "temporal", "open-domain")
DEPTH = 40  # turns per ranking (the evaluation fuses 2 x 20)


def ranked_one(s, cand, cfg):
    """(turn ranking, chunk ranking) of the default for one query's candidates."""
    fused, turns = _default_turns(s, cand, cfg, DEPTH)
    return turns, fused.chunks


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--locomo", type=Path, default=SHARED / "locomo" / "locomo_dev.json")
    p.add_argument("--work", type=Path, default=Path("/tmp/locomo_loop"))
    p.add_argument("--scratch", type=Path, default=Path("/tmp/multihop"))
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--e5", action="store_true", help="also the e5 turn-dense family (~6 min CPU)")
    p.add_argument("--embexp", action="store_true", help="also word-embedding query expansion")
    a = p.parse_args(argv)
    a.scratch.mkdir(parents=True, exist_ok=True)
    t0 = time.process_time()
    s, scored, cands = load(a.locomo, a.work)
    cfg = replace(PRESETS["default"], rerank=False)
    units = Units(s)
    tok = s.bm25["raw_text"].tokenizer
    names_all = s.known_speakers
    idf = s.idf

    def speakers_of(c):
        return s.chunk(c)["speakers"]

    cache_path = a.scratch / "extra_cands.pkl"
    extra: dict[str, object] = pickle.loads(cache_path.read_bytes()) if cache_path.exists() else {}
    n_new = 0

    def cand_for(text: str, q) -> object:
        nonlocal n_new
        key = f"{q.corpus_id}\t{text}"
        c = extra.get(key)
        if c is None:
            mask = s.scope_mask(None, q.corpus_id)
            c = _candidates(s, text, mask, ["embedding_text"])
            c.names = tuple(speakers_in(text, names_all))
            extra[key] = c
            n_new += 1
        c.speakers_of = speakers_of
        return c

    print(f"loaded {len(scored)} questions: {time.process_time() - t0:.1f} s CPU")
    base: dict[str, tuple] = {}
    for q in scored:
        base[q.question_id] = ranked_one(s, cands[q.question_id], cfg)

    # ---- the queries of each variant -------------------------------------------------
    subs = {q.question_id: decompose(q.question, cands[q.question_id].names) for q in scored}
    csubs = {
        q.question_id: decompose(q.question, cands[q.question_id].names, clauses=True)
        for q in scored
    }
    n_cl = collections.Counter(q.qtype for q in scored if csubs[q.question_id])
    print(f"with clauses: {dict(n_cl)}")
    n_dec = collections.Counter(q.qtype for q in scored if subs[q.question_id])
    print(f"decomposed: {dict(n_dec)}")

    def hop_query(q, docs: int, n_terms: int, with_question: bool) -> str:
        turns = base[q.question_id][0]
        texts = [s.message(m)["text"] for m, _ in turns[:docs]]
        names = [t for n in names_all for t in tok.tokenize(n)]
        terms = hop_terms(texts, tok.tokenize, tok.tokenize(q.question), names, idf, n_terms)
        head = q.question if with_question else " ".join(cands[q.question_id].names)
        return f"{head} {' '.join(terms)}".strip()

    t1 = time.process_time()
    s.prime_queries(
        list({x for v in csubs.values() for x in v}), "embedding_text"
    )  # batch the embedding
    hop_settings = [(1, 5, False), (2, 5, False), (3, 8, False), (2, 5, True), (3, 8, True)]
    hopq = {(q.question_id, hs): hop_query(q, *hs) for q in scored for hs in hop_settings}
    s.prime_queries(list(set(hopq.values())), "embedding_text")
    rankings: dict[tuple, tuple] = {}
    for q in scored:
        for sub in csubs[q.question_id]:
            rankings[(q.question_id, sub)] = ranked_one(s, cand_for(sub, q), cfg)
        for hs in hop_settings:
            hq = hopq[(q.question_id, hs)]
            rankings[(q.question_id, hq)] = ranked_one(s, cand_for(hq, q), cfg)
    if n_new:
        cache_path.write_bytes(pickle.dumps({k: _strip(v) for k, v in extra.items()}))
    print(f"extra rankings ({n_new} new candidate sets): {time.process_time() - t1:.1f} s CPU")

    # ---- merges ------------------------------------------------------------------------
    def scores(turns, chunks, q) -> tuple[float | None, float | None]:
        evidence = [r for r, g in q.gold.items() if g >= 1]
        t = M.evidence_recall_at_k(units.refs([m for m, _ in turns], 5), evidence, None, 5)
        sess = units.sessions(chunks)
        return t, M.evidence_recall_at_k(sess, evidence, units.session_refs, 5)

    Merge = Callable[[list], list]

    def rr_first(lists):  # the question's ranking, then the others round-robin
        return interleave(lists)

    def rr_keep(n: int) -> Merge:  # the question's top n kept, then round-robin
        def f(lists):
            head = [d for d, _ in lists[0][:n]]
            rest = [d for d, _ in interleave([lists[0][n:], *lists[1:]]) if d not in head]
            return [(d, 1.0 / (i + 1)) for i, d in enumerate(head + rest)]

        return f

    def maxm(w: float) -> Merge:
        return lambda lists: max_merge(lists, [1.0] + [w] * (len(lists) - 1))

    def rrf_w(k: int = 60) -> Merge:
        return lambda lists: rrf(lists, k=k)

    merges: dict[str, Merge] = {
        "rr": rr_first,
        "rr keep2": rr_keep(2),
        "max w1": maxm(1.0),
        "max w.7": maxm(0.7),
        "rrf60": rrf_w(60),
    }
    vals: dict[str, dict] = {}
    key_t, key_s, key_u = (
        ("turn", "evidence_recall", 5),
        ("session", "evidence_recall", 5),
        ("units", "evidence_recall", 5),
    )

    def record(name: str, pairs: list[tuple]) -> None:
        t = [x[0] for x in pairs]
        se = [x[1] for x in pairs]
        u = [None if a_ is None or b is None else (a_ + b) / 2 for a_, b in zip(t, se, strict=True)]
        vals[name] = {key_t: t, key_s: se, key_u: u}

    record("default", [scores(*base[q.question_id], q) for q in scored])
    for mname, merge in merges.items():
        for label, table, turn_only in (
            ("decompose", subs, False),
            ("decompose", subs, True),
            ("clauses", csubs, False),
        ):
            pairs = []
            for q in scored:
                bt, bc = base[q.question_id]
                lists = [rankings[(q.question_id, x)] for x in table[q.question_id]]
                if not lists:
                    pairs.append(scores(bt, bc, q))
                    continue
                mt = merge([bt] + [x[0] for x in lists])
                mc = bc if turn_only else merge([bc] + [x[1] for x in lists])
                pairs.append(scores(mt, mc, q))
            record(f"{label} {mname}" + (" (turns only)" if turn_only else ""), pairs)
        for hs in hop_settings:
            pairs = []
            for q in scored:
                bt, bc = base[q.question_id]
                ht, hc = rankings[(q.question_id, hopq[(q.question_id, hs)])]
                pairs.append(scores(merge([bt, ht]), merge([bc, hc]), q))
            record(f"hop docs={hs[0]} terms={hs[1]} q={int(hs[2])} {mname}", pairs)

    for keep in (3, 4):  # the top ``keep`` turns, then the best turns of new sessions
        pairs = []
        for q in scored:
            bt, bc = base[q.question_id]
            pairs.append(scores(session_slots(bt, keep, lambda m: _session(s, m)), bc, q))
        record(f"diverse keep={keep}", pairs)
    for w in (0.5, 0.7):
        c2 = replace(cfg, speaker_boost=w)
        record(f"boost {w}", [scores(*ranked_one(s, cands[q.question_id], c2), q) for q in scored])
    if a.e5:
        e5_family(s, scored, cands, cfg, a.scratch, base, scores, record)
    if a.embexp:
        embedding_expansion(s, scored, cands, cfg, a.scratch, scores, record)
    report(vals, scored, a.resamples)
    sub = [i for i, q in enumerate(scored) if subs[q.question_id]]
    print(f"\nthe {len(sub)} decomposed questions only (in sample), R@5 turn / session:")
    for name in ("default", "decompose rr", "decompose max w1"):
        t = np.mean([vals[name][key_t][i] for i in sub if vals[name][key_t][i] is not None])
        se = np.mean([vals[name][key_s][i] for i in sub if vals[name][key_s][i] is not None])
        print(f"  {name}: {t:.3f} / {se:.3f}")
    print(f"total {time.process_time() - t0:.1f} s CPU")


def e5_family(s, scored, cands, cfg, scratch: Path, base, scores, record) -> None:
    """A turn-level dense channel with multilingual-e5-small (USE at turn level was measured
    before: no gain): each turn's cosine added to its own BM25 share (``wd``, as
    ``locomo_loop.py dense``), or the e5 turn ranking merged after the default's top 3."""
    from memory_pipeline.core.evaluation.evaluate_units import Candidates
    from memory_pipeline.core.represent.providers.factory import make_embedder

    ti = s.turn_index
    model = "multilingual-e5-small"
    emb = None
    paths = (scratch / f"turn_vectors.{model}.npy", scratch / f"e5_queries.{model}.npy")
    if not paths[0].exists():
        emb = make_embedder("local", model)
        texts = [f"{s.message(m)['sender']}: {s.message(m)['text']}" for m in ti.message_ids]
        np.save(paths[0], np.asarray(emb.embed(texts, input_type="document").vectors, np.float32))
    if not paths[1].exists():
        emb = emb or make_embedder("local", model)
        asked = emb.embed([q.question for q in scored], input_type="query").vectors
        np.save(paths[1], np.asarray(asked, np.float32))
    vectors, queries = np.load(paths[0]), np.load(paths[1])
    conv = np.array([str(s.conversation[c]) for c in ti.first_chunk], dtype=object)
    dense = {}
    for i, q in enumerate(scored):
        d = np.where(conv == q.corpus_id, vectors @ queries[i], 0.0)
        dense[q.question_id] = np.maximum(d, 0.0) / (float(d.max()) or 1.0)
    for wd in (0.25, 0.5):
        pairs = []
        for q in scored:
            cand = cands[q.question_id]
            own = cand.turn["turn"].astype(np.float64)
            top = float(own.max()) or 1.0
            mixed = Candidates(dense=cand.dense, names=cand.names, speakers_of=cand.speakers_of)
            mixed.bm25 = cand.bm25
            mixed.turn = {
                "turn": (own / top + wd * dense[q.question_id]) * top,
                "turn_ctx": cand.turn["turn_ctx"],
            }
            pairs.append(scores(*ranked_one(s, mixed, cfg), q))
        record(f"e5 added wd={wd}", pairs)
    pairs = []
    for q in scored:
        bt, bc = base[q.question_id]
        d = dense[q.question_id]
        order = np.argsort(-d, kind="stable")[:DEPTH]
        dl = [(ti.message_ids[j], float(d[j])) for j in order]
        head = [m for m, _ in bt[:3]]
        rest = [m for m, _ in interleave([bt[3:], dl]) if m not in head]
        pairs.append(scores([(m, 1.0 / (i + 1)) for i, m in enumerate(head + rest)], bc, q))
    record("e5 merged keep3", pairs)


_STOP_Q = frozenset(
    "what which who whom whose where when why how did does do is are was were has have had "
    "the a an of to in on for with and or by from at as that this these those some any kind "
    "type types sort many much thing things".split()
)


def embedding_expansion(s, scored, cands, cfg, scratch: Path, scores, record) -> None:
    """Category -> instance expansion by word embeddings (Kuzi et al. 2016, "query expansion
    using word embeddings"): the conversation's words nearest (USE, the index's embedder) to
    the question's content words ("books" -> novel, Alchemist?) are added to the chunk and
    turn BM25 queries as ``(1 - lam) * BM25(q) + lam * sum_t sim_t * BM25(t)``."""
    from memory_pipeline.core.evaluation.evaluate_units import POOL, Candidates

    ti = s.turn_index
    index = s.bm25["raw_text"]
    tok, vocab = index.tokenizer, index.vocab
    rows = s._doc_positions("raw_text")
    names = {t for n in s.known_speakers for t in tok.tokenize(n)}
    conv_of_turn = [str(s.conversation[c]) for c in ti.first_chunk]
    words: dict[str, dict[str, str]] = collections.defaultdict(dict)  # conv -> word -> token
    for m, conv in zip(ti.message_ids, conv_of_turn, strict=True):
        for w in re.findall(r"[A-Za-z][a-z]{2,}", s.message(m)["text"]):
            lw = w.lower()
            if lw in words[conv] or lw in _STOP_Q:
                continue
            t = tok.tokenize(lw)
            if len(t) == 1 and t[0] in vocab and t[0] not in names:
                words[conv][lw] = t[0]
    surface = sorted({w for d in words.values() for w in d})
    asked = {
        q.question_id: [
            w.lower()
            for w in re.findall(r"[A-Za-z][A-Za-z]+", q.question)
            if w.lower() not in _STOP_Q
            and tok.tokenize(w.lower())
            and not set(tok.tokenize(w.lower())) & names
        ]
        for q in scored
    }
    qwords = sorted({w for v in asked.values() for w in v})
    path = scratch / "word_vectors.use.npz"
    emb = s.query_embedder("embedding_text")
    if path.exists():
        z = np.load(path, allow_pickle=True)
        wv = dict(zip(z["words"], z["vectors"], strict=True))
    else:
        wv = {}
    todo = [w for w in dict.fromkeys(surface + qwords) if w not in wv]
    if todo:
        t0 = time.process_time()
        got = np.asarray(emb.embed(todo, input_type="query").vectors, np.float32)
        wv.update(zip(todo, got, strict=True))
        print(f"embedded {len(todo)} words: {time.process_time() - t0:.1f} s CPU")
        np.savez(path, words=np.array(list(wv)), vectors=np.stack(list(wv.values())))
    conv_words = {c: sorted(d) for c, d in words.items()}
    conv_mat = {c: np.stack([wv[w] for w in ws]) for c, ws in conv_words.items()}
    cache: dict[str, np.ndarray] = {}

    def chunk_bm25(ids: list[int]) -> np.ndarray:
        return np.asarray(index.retriever.get_scores_from_ids(ids), dtype=np.float64)

    for n_terms, lam, min_sim in ((5, 0.2, 0.4), (10, 0.2, 0.35), (5, 0.4, 0.4), (3, 0.3, 0.45)):
        pairs = []
        for q in scored:
            cand = cands[q.question_id]
            qw = [w for w in asked[q.question_id] if w in wv]
            if not qw:
                pairs.append(scores(*ranked_one(s, cand, cfg), q))
                continue
            sims = (np.stack([wv[w] for w in qw]) @ conv_mat[q.corpus_id].T).max(axis=0)
            q_tokens = set(tok.tokenize(q.question))
            terms: dict[str, float] = {}
            for j in np.argsort(-sims, kind="stable"):
                if sims[j] < min_sim or len(terms) == n_terms:
                    break
                t = words[q.corpus_id][conv_words[q.corpus_id][j]]
                if t not in q_tokens and t not in terms:
                    terms[t] = float(sims[j])
            if not terms:
                pairs.append(scores(*ranked_one(s, cand, cfg), q))
                continue
            total = sum(terms.values())
            mask = s.scope_mask(None, q.corpus_id)
            sc = (1 - lam) * chunk_bm25([vocab[t] for t in tok.tokenize(q.question) if t in vocab])
            for t, w in terms.items():
                key = f"{q.corpus_id}\t{t}"
                if key not in cache:
                    cache[key] = chunk_bm25([vocab[t]])
                sc = sc + lam * (w / total) * cache[key]
            sc = np.where(mask[rows], sc, 0.0)
            top = np.argsort(-sc, kind="stable")[:POOL]
            out = Candidates(dense=cand.dense, names=cand.names, speakers_of=cand.speakers_of)
            out.bm25 = {"raw_text": [(index.doc_ids[i], float(sc[i])) for i in top if sc[i] > 0]}
            out.turn = {}
            for rep in ("turn", "turn_ctx"):
                v = (1 - lam) * cand.turn[rep].astype(np.float64)
                for t, w in terms.items():
                    v = v + lam * (w / total) * ti.scores([t], rep, mask).dense()
                out.turn[rep] = v
            pairs.append(scores(*ranked_one(s, out, cfg), q))
        record(f"embexp n={n_terms} lam={lam} sim>={min_sim}", pairs)


def _session(s, m: str) -> str:
    ti = s.turn_index
    return ti.layout.session_ids[ti.row_of[m]]


def session_slots(turns, keep: int, session_of) -> list:
    """The first ``keep`` turns, then each next best turn of a session not yet shown,
    then the rest in order (a mild session diversity: only the tail of the top 5)."""
    head = list(turns[:keep])
    shown = {session_of(m) for m, _ in head}
    fresh, rest = [], []
    for m, v in turns[keep:]:
        sid = session_of(m)
        (fresh if sid not in shown else rest).append((m, v))
        shown.add(sid)
    return head + fresh + rest


def _strip(c):
    c.speakers_of = None  # a closure: not picklable
    return c


def by_type(values, scored) -> dict[str, float]:
    out = collections.defaultdict(list)
    for v, q in zip(values, scored, strict=True):
        if v is not None:
            out["all"].append(v)
            out[q.qtype].append(v)
    return {k: float(np.mean(v)) for k, v in out.items()}


def report(vals: dict[str, dict], scored, resamples: int) -> None:
    """In-sample figures per variant, then each family selected leave-one-conversation-out."""
    key_t, key_s, key_u = (
        ("turn", "evidence_recall", 5),
        ("session", "evidence_recall", 5),
        ("units", "evidence_recall", 5),
    )
    print("\nin sample, R@5 turn | session (all / multi-hop / single-hop / temporal / open)")
    for name, v in vals.items():
        bt, bs = by_type(v[key_t], scored), by_type(v[key_s], scored)
        cols = " ".join(f"{bt[t]:.3f}" for t in TYPES) + " | "
        cols += " ".join(f"{bs[t]:.3f}" for t in TYPES)
        print(f"{name:44s} {cols}")
    groups = [q.corpus_id for q in scored]
    families = collections.defaultdict(list)
    for name in vals:
        if name != "default":
            families[name.split()[0]].append(name)
    for fam, names in [*families.items(), ("all", [n for n in vals if n != "default"])]:
        res = CV.leave_one_group_out(["default", *names], vals, groups, key_u)
        print(f"\nLOCO family {fam!r}: folds {sorted(set(res.folds.values()))}")
        for key in (key_t, key_s):
            mean, lo, hi = CV.cluster_bootstrap_ci(res.oof[key], groups, resamples)
            diff = [
                None if x is None or y is None else x - y
                for x, y in zip(res.oof[key], vals["default"][key], strict=True)
            ]
            d, dlo, dhi = CV.cluster_bootstrap_ci(diff, groups, resamples)
            mh = [x for x, q in zip(res.oof[key], scored, strict=True) if q.qtype == "multi-hop"]
            mg = [q.corpus_id for q in scored if q.qtype == "multi-hop"]
            m, mlo, mhi = CV.cluster_bootstrap_ci(mh, mg, resamples)
            bt = by_type(res.oof[key], scored)
            print(
                f"  {key[0]:7s} R@5 {mean:.4f} [{lo:.4f}, {hi:.4f}] minus default {d:+.4f} "
                f"[{dlo:+.4f}, {dhi:+.4f}]; multi-hop {m:.4f} [{mlo:.4f}, {mhi:.4f}]; "
                + " ".join(f"{t}={bt.get(t, float('nan')):.3f}" for t in TYPES[2:])
            )


if __name__ == "__main__":
    main()
