"""Ambiguous follow-up questions, evaluated as Alonso et al. (2024) did: a labelled question
made ambiguous by moving its entity into the conversation so far.

``make_variants`` turns each dev question into up to two variants, deterministically:

- ``person``: the first known speaker it names becomes "they" / "their" ("When did they go
  to the support group?"), and a synthetic preceding turn names that person;
- ``topic``: its key noun phrase (the run of content words around its rarest word, by the
  index's idf) becomes "that" ("When did Caroline go to that?"), and a synthetic preceding
  turn holds the phrase.

``evaluate_ambiguous`` ranks the original question, the ambiguous one alone, and the
ambiguous one resolved against its preceding turn (``retrieval.query.resolve_references``,
the rules the API uses for ``recent``), and reports turn / session evidence R@5 with CIs
(conversations, then questions resampled) and the resolved-minus-ambiguous difference.

What the generator cannot do (the report repeats it): it writes one templated preceding
turn, not a real conversation, so there is no distractor entity to confuse the resolver;
the resolver and the generator share a notion of "content word", which flatters topic
resolution; "they" loses the person's gender that "he"/"she" would carry; questions that
name no known speaker and have no content word get no variant; the dev questions are
English, so the Japanese rules (あれ / それ / あの件) are covered by unit tests only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from memory_pipeline.core.evaluation import crossval as CV
from memory_pipeline.core.evaluation.evalsets import EvalQuestion
from memory_pipeline.core.retrieval.query import (
    resolve_references,
    speakers_in,
    understood_rank,
)

LIMITS = (
    "one templated preceding turn, not a real conversation: no distractor entity",
    "generator and resolver share a notion of content word (flatters topic resolution)",
    "'they'/'their' for every person (no he/she)",
    "questions naming no known speaker and no content word get no variant",
    "English questions only: the Japanese rules are covered by unit tests, not measured",
)
KINDS = ("person", "topic")
CONDITIONS = ("original", "ambiguous", "resolved")
K = 5
PERSON_TURNS = (
    "I was just thinking about {e}.",
    "Have you heard from {e} lately?",
    "{e} came up earlier today.",
)
TOPIC_TURNS = (
    "Remember the {e}?",
    "I keep thinking about the {e}.",
    "So, the {e}.",
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’\-]*")
_STOP = frozenset(
    "a an the and or but of to in on at by for from with about as into what when where who "
    "whom whose which why how did do does is are was were be been has have had will would "
    "can could should may might her his their its my our your they them he she it this that "
    "these those there some any all kind kinds type types likely many much long ago "
    "after before during since while first last recent recently ever also".split()
)
_VERB_BEFORE = frozenset("to did do does would will can could should might may".split())
_DETERMINERS = re.compile(r"(?:\b(?:the|a|an|her|his|their|its|my|our|your)\s+)$", re.I)


@dataclass(frozen=True)
class Variant:
    """One ambiguous variant of a question: the question with its entity replaced, the
    synthetic preceding turn holding the entity, and the entity itself."""

    question_id: str
    corpus_id: str
    kind: str  # person | topic
    ambiguous: str
    recent: tuple[str, ...]
    entity: str


def _pick(question_id: str, options: Sequence[str]) -> str:
    """A template chosen by the question id's hash (deterministic, varied)."""
    digest = hashlib.blake2b(question_id.encode(), digest_size=4).digest()
    return options[int.from_bytes(digest, "big") % len(options)]


def person_variant(q: EvalQuestion, known: Sequence[str]) -> Variant | None:
    """The question with its first named known speaker as "they" / "their"."""
    names = speakers_in(q.question, known)
    if not names:
        return None
    name = names[0]
    rx = re.compile(rf"(?<![\w]){re.escape(name)}(?:'s|’s)?(?![\w])", re.I)
    m = rx.search(q.question)
    if m is None:
        return None
    word = "their" if m[0].lower().endswith(("'s", "’s")) else "they"
    text = q.question[: m.start()] + word + q.question[m.end() :]
    text = text[0].upper() + text[1:]
    recent = (_pick(q.question_id, PERSON_TURNS).format(e=name),)
    return Variant(q.question_id, q.corpus_id, "person", text, recent, name)


def topic_variant(
    q: EvalQuestion, known: Sequence[str], weight_of: Callable[[str], float]
) -> Variant | None:
    """The question with its key noun phrase (the content-word run around its rarest word,
    names excluded) replaced by "that"."""
    names = {w.lower() for n in speakers_in(q.question, known) for w in n.split()}
    words = list(_WORD.finditer(q.question))

    def bare(i: int) -> str:
        return re.sub(r"(?:'s|’s)$", "", words[i][0]).lower()

    # a word right after a name or an auxiliary is the verb ("did Caroline research"):
    # the entity is a noun phrase, so those are skipped
    content = [
        i
        for i, w in enumerate(words)
        if bare(i) not in _STOP
        and bare(i) not in names
        and len(w[0]) > 2
        and not (i and (bare(i - 1) in names or bare(i - 1) in _VERB_BEFORE))
    ]
    if not content:
        return None
    best = max(content, key=lambda i: (weight_of(words[i][0]), -i))
    lo = hi = best
    keep = set(content)
    while lo - 1 in keep and q.question[words[lo - 1].end() : words[lo].start()] == " ":
        lo -= 1
    while hi + 1 in keep and q.question[words[hi].end() : words[hi + 1].start()] == " ":
        hi += 1
    start, end = words[lo].start(), words[hi].end()
    phrase = q.question[start:end]
    det = _DETERMINERS.search(q.question[:start])
    if det is not None:
        start = det.start()
    text = q.question[:start] + "that" + q.question[end:]
    recent = (_pick(q.question_id, TOPIC_TURNS).format(e=phrase),)
    return Variant(q.question_id, q.corpus_id, "topic", text, recent, phrase)


def make_variants(
    questions: Sequence[EvalQuestion], known: Sequence[str], weight_of: Callable[[str], float]
) -> list[Variant]:
    """Every question's person and topic variants (in question order; a question gets
    none of a kind it cannot make)."""
    out = []
    for q in questions:
        made = (person_variant(q, known), topic_variant(q, known, weight_of))
        out.extend(v for v in made if v is not None)
    return out


def idf_weight(searcher) -> Callable[[str], float]:
    """A word's weight: the mean idf of its BM25 tokens in the index (0 when unknown)."""
    tokenizer = searcher.bm25["raw_text"].tokenizer
    idf = searcher.idf

    def weight(word: str) -> float:
        toks = tokenizer.tokenize(word)
        return sum(idf.get(t, 0.0) for t in toks) / len(toks) if toks else 0.0

    return weight


AMBIGUOUS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("condition", pa.string()),
        ("level", pa.string()),
        ("k", pa.int32()),
        ("mean", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("n", pa.int64()),
        ("resolved_exactly", pa.float64()),
    ]
)


def evaluate_ambiguous(
    searcher,
    questions: Sequence[EvalQuestion],
    config,
    *,
    units,
    question_scores: Callable,
    seed: int = 0,
    resamples: int = 2000,
) -> tuple[pa.Table, list[dict]]:
    """(summary table, per-variant rows): turn and session evidence R@5 of the original,
    ambiguous and resolved questions under ``config`` (the selected search), with cluster
    bootstrap CIs; ``resolved_exactly`` is the share of variants whose resolved question
    holds the entity again. Rows of the difference are condition ``resolved-ambiguous``."""
    scored = [q for q in questions if q.scored and q.gold_kind != "session_id"]
    weight = idf_weight(searcher)
    known = searcher.known_speakers
    variants = make_variants(scored, known, weight)
    by_id = {q.question_id: q for q in scored}
    resolved = {
        (v.question_id, v.kind): resolve_references(
            v.ambiguous, list(v.recent), known=known, weight_of=weight
        ).query
        for v in variants
    }
    texts = [q.question for q in scored] + [v.ambiguous for v in variants]
    texts += list(resolved.values())
    if config.uses_dense:
        searcher.prime_queries(texts, config.dense_rep)
    memo: dict[tuple[str, str], dict[str, float | None]] = {}

    def score(q: EvalQuestion, text: str) -> dict[str, float | None]:
        key = (q.question_id, text)
        if key not in memo:
            scope = q.scope or {"conversation_id": q.corpus_id}
            mask = searcher.scope_mask(scope.get("contact_id"), scope.get("conversation_id"))
            ranked = understood_rank(searcher, text, config, mask)
            asked = dataclasses.replace(q, question=text)
            names = tuple(speakers_in(text, known))
            rows = question_scores(asked, ranked, units, (K,), False, (names, config.speaker_boost))
            memo[key] = {lv: v for lv, m, _k, v in rows if m == "evidence_recall"}
        return memo[key]

    per_variant: list[dict] = []
    for v in variants:
        q = by_id[v.question_id]
        text_of = {
            "original": q.question,
            "ambiguous": v.ambiguous,
            "resolved": resolved[(v.question_id, v.kind)],
        }
        for cond, text in text_of.items():
            for level, value in score(q, text).items():
                per_variant.append(
                    {
                        "question_id": v.question_id,
                        "corpus_id": v.corpus_id,
                        "kind": v.kind,
                        "condition": cond,
                        "level": level,
                        "k": K,
                        "value": value,
                        "exact": v.entity.lower() in text_of["resolved"].lower(),
                    }
                )
    return pa.Table.from_pylist(
        summary_rows(per_variant, seed, resamples), schema=AMBIGUOUS_SCHEMA
    ), per_variant


def summary_rows(per_variant: Sequence[Mapping], seed: int, resamples: int) -> list[dict]:
    """Means with cluster-bootstrap CIs per kind ("all" too), condition and level, and the
    resolved-minus-ambiguous difference per question."""
    out = []
    for kind in ("all", *KINDS):
        rows = [r for r in per_variant if kind in ("all", r["kind"])]
        if not rows:
            continue
        exact_by = {(r["question_id"], r["kind"]): r["exact"] for r in rows}
        exact = sum(exact_by.values()) / len(exact_by)
        for level in ("turn", "session"):
            cell: dict[str, dict[tuple[str, str], float | None]] = {c: {} for c in CONDITIONS}
            group: dict[tuple[str, str], str] = {}
            for r in rows:
                if r["level"] == level:
                    key = (r["question_id"], r["kind"])
                    cell[r["condition"]][key] = r["value"]
                    group[key] = r["corpus_id"]
            keys = sorted(group)
            series = {c: [cell[c].get(k) for k in keys] for c in CONDITIONS}
            diff = [
                None if a is None or b is None else a - b
                for a, b in zip(series["resolved"], series["ambiguous"], strict=True)
            ]
            series["resolved-ambiguous"] = diff
            groups = [group[k] for k in keys]
            for cond, values in series.items():
                mean, lo, hi = CV.cluster_bootstrap_ci(
                    values, groups, n_resamples=resamples, seed=seed
                )
                out.append(
                    {
                        "kind": kind,
                        "condition": cond,
                        "level": level,
                        "k": K,
                        "mean": mean,
                        "ci_lo": lo,
                        "ci_hi": hi,
                        "n": sum(v is not None for v in values),
                        "resolved_exactly": exact,
                    }
                )
    return out


__all__ = [
    "AMBIGUOUS_SCHEMA",
    "CONDITIONS",
    "KINDS",
    "LIMITS",
    "Variant",
    "evaluate_ambiguous",
    "make_variants",
    "person_variant",
    "summary_rows",
    "topic_variant",
]
