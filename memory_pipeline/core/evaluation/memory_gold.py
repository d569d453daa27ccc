"""Memory extraction scored against LoCoMo's annotated observations (issue 12).

LoCoMo's ``observation`` block lists, per session and speaker, facts about that speaker with
the dia_ids they rest on. It is evaluation data: the source reader never reads it; only this
module does, and only to score memories that were extracted without it.

**Coverage.** An observation is *covered* by a memory when all three hold:

1. same person: the memory's ``subject`` is the observation's speaker (exact name);
2. same source: one of the memory's cited messages is one of the observation's evidence
   turns (``source_ref`` = dia_id, inside the same conversation);
3. same content: content-word F1 between the two texts is at least ``MIN_F1`` (0.3).

Content words (:func:`content_words`): NFKC, lower case, tokens ``[a-z0-9]+`` (an ISO date
``2023-05-07`` is one token, so a resolved date weighs as much as the word it replaced), the
speaker names of the conversation removed (a memory always names its subject; the name
would otherwise give every pair of a person's texts free overlap), English stopwords
removed, Snowball-stemmed (PyStemmer, as the BM25 index), and a stem that is itself a
stopword (others -> other) removed too. Japanese text is cut into
character bigrams of its kana/kanji runs (no stopwords, no stemming), so the same function
works on both languages.

**Recall** of a conversation: covered observations / observations. **Precision**: memories
that cover at least one observation / memories (memories of that conversation only). The
headline is the mean over conversations with a percentile bootstrap CI over conversations
(the conversation is the unit that varies; observations inside one are not independent),
and the pooled (micro) figure beside it.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow as pa

from memory_pipeline.core.evaluation import metrics as M
from memory_pipeline.core.evaluation.evalsets_locomo import _EVIDENCE, _norm_dia
from memory_pipeline.core.ingest.sources.locomo import load_locomo_samples

__all__ = [
    "GOLD_PER_CONVERSATION_SCHEMA",
    "GOLD_SUMMARY_SCHEMA",
    "MIN_F1",
    "Observation",
    "content_f1",
    "content_words",
    "load_locomo_observations",
    "score_memories_against_gold",
]

MIN_F1 = 0.3

GOLD_PER_CONVERSATION_SCHEMA = pa.schema(
    [
        ("corpus_id", pa.string()),
        ("messages", pa.int64()),
        ("observations", pa.int64()),
        ("covered", pa.int64()),
        ("n_memories", pa.int64()),
        ("covering_memories", pa.int64()),
        ("recall", pa.float64()),
        ("precision", pa.float64()),
        ("memories_per_1000_messages", pa.float64()),
    ]
)
GOLD_SUMMARY_SCHEMA = pa.schema(
    [
        ("metric", pa.string()),
        ("mean", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("pooled", pa.float64()),
        ("n_conversations", pa.int32()),
        ("min_f1", pa.float64()),
    ]
)


@dataclass(frozen=True, slots=True)
class Observation:
    """One annotated fact about a speaker, with the turns it rests on."""

    corpus_id: str  # the LoCoMo sample_id = the pipeline's conversation_id
    session: str  # "session_3"
    speaker: str
    text: str
    evidence: tuple[str, ...]  # normalised dia_ids ("D3:5")


def load_locomo_observations(path: Path | str) -> tuple[list[Observation], dict[str, list[str]]]:
    """(observations, conversation -> speaker names) of a LoCoMo file.

    Evidence is read leniently like the QA evidence (``'D8:6; D9:17'``, lists); an
    observation with no readable dia_id is dropped (it could never be covered).
    """
    out: list[Observation] = []
    speakers: dict[str, list[str]] = {}
    for sample in load_locomo_samples(Path(path)):
        sid = str(sample.get("sample_id"))
        conv = sample.get("conversation") or {}
        speakers[sid] = [
            str(conv[k]) for k in ("speaker_a", "speaker_b") if isinstance(conv.get(k), str)
        ]
        for session, per_speaker in sorted((sample.get("observation") or {}).items()):
            if not isinstance(per_speaker, dict):
                continue
            for speaker, items in per_speaker.items():
                for item in items or []:
                    if not isinstance(item, list | tuple) or len(item) < 2:
                        continue
                    text, ev = item[0], item[1]
                    raw = " ".join(ev) if isinstance(ev, list) else str(ev)
                    refs = tuple(dict.fromkeys(_norm_dia(s, t) for s, t in _EVIDENCE.findall(raw)))
                    if refs and isinstance(text, str):
                        out.append(
                            Observation(
                                sid, session.removesuffix("_observation"), speaker, text, refs
                            )
                        )
    return out, speakers


# ----------------------------------------------------------------------------- normalization

# A compact English stopword list (function words, auxiliaries, pronouns, chat fillers).
STOPWORDS = frozenset(
    """a an the and or but if then so because as of at by for with about against between into
    through during before after above below to from up down in out on off over under again
    further once here there when where why how all any both each few more most other some such
    no nor not only own same than too very s t can will just don should now is are was were be
    been being have has had having do does did doing would could might must shall may i me my
    myself we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves what which who whom this that
    these those am im ive ill id re ve ll d m also really get got lot lots much many
    one thing things way well even still yeah yes oh wow hey hi thanks thank haha lol its it's
    """.split()
)
_EN_TOKEN = re.compile(r"\d{4}-\d{2}-\d{2}|[a-z0-9]+")
_JA_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff々ー]+")


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def content_words(text: str, names: Iterable[str] = ()) -> list[str]:
    """The content words of ``text`` (see the module docstring), names removed."""
    t = unicodedata.normalize("NFKC", text or "").lower().replace("’", "'")
    name_tokens = {
        w for n in names for w in _EN_TOKEN.findall(unicodedata.normalize("NFKC", n).lower())
    }
    jp_names = [unicodedata.normalize("NFKC", n) for n in names if _JA_RUN.search(n)]
    for n in jp_names:
        t = t.replace(n.lower(), " ")
    t = re.sub(r"'s\b", "", t)
    words = [w for w in _EN_TOKEN.findall(t) if w not in STOPWORDS and w not in name_tokens]
    out = [w for w in (_stemmer().stemWords(words) if words else []) if w not in STOPWORDS]
    for run in _JA_RUN.findall(t):
        out += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    return out


def content_f1(a: Sequence[str], b: Sequence[str]) -> float:
    """Bag-of-words F1 of two token lists (0 when either is empty)."""
    if not a or not b:
        return 0.0
    ca: dict[str, int] = defaultdict(int)
    for w in a:
        ca[w] += 1
    common = 0
    for w in b:
        if ca.get(w, 0) > 0:
            ca[w] -= 1
            common += 1
    if common == 0:
        return 0.0
    p, r = common / len(a), common / len(b)
    return 2 * p * r / (p + r)


# ----------------------------------------------------------------------------- scoring


@dataclass(slots=True)
class GoldScores:
    """What :func:`score_memories_against_gold` measured."""

    per_conversation: pa.Table
    summary: pa.Table
    # observation index -> covering memory ids; memory id -> covered observation indices
    covered_by: dict[int, list[str]]
    covers: dict[str, list[int]]


def score_memories_against_gold(
    memories: pa.Table,
    messages: pa.Table,
    observations: Sequence[Observation],
    speakers: Mapping[str, Sequence[str]],
    *,
    min_f1: float = MIN_F1,
    resamples: int = 5000,
    seed: int = 0,
) -> GoldScores:
    """Recall and precision of ``memories`` against ``observations`` per conversation, with
    bootstrap CIs over conversations.

    ``messages`` must hold every cited message (``message_id``, ``conversation_id``,
    ``source_ref``); only conversations that have observations are scored.
    """
    ref_of = dict(
        zip(
            messages.column("message_id").to_pylist(),
            messages.column("source_ref").to_pylist(),
            strict=True,
        )
    )
    n_messages: dict[str, int] = defaultdict(int)
    for conv in messages.column("conversation_id").to_pylist():
        n_messages[conv] += 1
    convs = sorted({o.corpus_id for o in observations})
    obs_at: dict[tuple[str, str, str], list[int]] = defaultdict(list)  # (conv, speaker, ref)
    obs_words = []
    for i, o in enumerate(observations):
        obs_words.append(content_words(o.text, speakers.get(o.corpus_id, ())))
        for ref in o.evidence:
            obs_at[(o.corpus_id, o.speaker, ref)].append(i)
    covered_by: dict[int, list[str]] = defaultdict(list)
    covers: dict[str, list[int]] = defaultdict(list)
    mem_count: dict[str, int] = defaultdict(int)
    cols = ("memory_id", "conversation_id", "subject", "text", "message_ids")
    for r in memories.select(list(cols)).to_pylist():
        conv = r["conversation_id"]
        if conv not in speakers:
            continue
        mem_count[conv] += 1
        cands = {
            i
            for mid in r["message_ids"] or []
            for i in obs_at.get((conv, r["subject"], ref_of.get(mid) or ""), ())
        }
        if not cands:
            continue
        words = content_words(r["text"], speakers.get(conv, ()))
        for i in sorted(cands):
            if content_f1(words, obs_words[i]) >= min_f1:
                covered_by[i].append(r["memory_id"])
                covers[r["memory_id"]].append(i)
    rows = []
    conv_of_mem = dict(
        zip(
            memories.column("memory_id").to_pylist(),
            memories.column("conversation_id").to_pylist(),
            strict=True,
        )
    )
    for conv in convs:
        n_obs = sum(1 for o in observations if o.corpus_id == conv)
        n_cov = sum(1 for i in covered_by if observations[i].corpus_id == conv)
        n_mem = mem_count.get(conv, 0)
        n_cm = sum(1 for m in covers if conv_of_mem.get(m) == conv)
        n_msg = n_messages.get(conv, 0)
        rows.append(
            {
                "corpus_id": conv,
                "messages": n_msg,
                "observations": n_obs,
                "covered": n_cov,
                "n_memories": n_mem,
                "covering_memories": n_cm,
                "recall": n_cov / n_obs if n_obs else None,
                "precision": n_cm / n_mem if n_mem else None,
                "memories_per_1000_messages": 1000 * n_mem / n_msg if n_msg else None,
            }
        )
    summary = []
    pooled = {
        "recall": (sum(r["covered"] for r in rows), sum(r["observations"] for r in rows)),
        "precision": (
            sum(r["covering_memories"] for r in rows),
            sum(r["n_memories"] for r in rows),
        ),
        "memories_per_1000_messages": (
            1000 * sum(r["n_memories"] for r in rows),
            sum(r["messages"] for r in rows),
        ),
    }
    for metric, (num, den) in pooled.items():
        mean, lo, hi = M.bootstrap_ci([r[metric] for r in rows], resamples, seed)
        summary.append(
            {
                "metric": metric,
                "mean": mean,
                "ci_lo": lo,
                "ci_hi": hi,
                "pooled": num / den if den else None,
                "n_conversations": len(rows),
                "min_f1": min_f1,
            }
        )
    return GoldScores(
        pa.Table.from_pylist(rows, schema=GOLD_PER_CONVERSATION_SCHEMA),
        pa.Table.from_pylist(summary, schema=GOLD_SUMMARY_SCHEMA),
        dict(covered_by),
        dict(covers),
    )


def precision_sample(memories: pa.Table, n: int = 40, seed: int = 0) -> list[dict]:
    """``n`` memories drawn with a fixed seed (rows in table order, ``random.Random(seed)
    .sample``): the hand-read precision sample, chosen by the seed and not by a reader."""
    import random

    rows = memories.to_pylist()
    return random.Random(seed).sample(rows, min(n, len(rows)))
