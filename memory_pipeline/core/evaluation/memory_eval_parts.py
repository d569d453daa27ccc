"""The memory evaluation's settings, table schemas and pure parts: which sessions and refs a
ranked memory list covers, a pack's evidence recall, and the chunk-by-chunk baseline pack.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from memory_pipeline.core.context.packs import SEP, MemoryHit, utf16_len

BUDGETS = (1_000, 2_000, 4_000, 8_000, 16_000, 24_000)
MEMORY_KS = (1, 5, 10)
DIFF_KS = (5, 10)
MEMORY_DEPTH = 100  # memories ranked per question for the retrieval metrics
K_MEMORIES = 10  # memories put in a context pack (build_context's default)
BETA = 0.5
ER = "evidence_recall"

DIFF_SCHEMA = pa.schema(
    [
        ("config_a", pa.string()),
        ("config_b", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("split", pa.string()),
        ("mean_diff", pa.float64()),
        ("ci_lo", pa.float64()),
        ("ci_hi", pa.float64()),
        ("p_value", pa.float64()),
        ("n", pa.int32()),
    ]
)
PER_QUESTION_SCHEMA = pa.schema(
    [
        ("config", pa.string()),
        ("split", pa.string()),
        ("question_id", pa.string()),
        ("corpus_id", pa.string()),
        ("qtype", pa.string()),
        ("level", pa.string()),
        ("metric", pa.string()),
        ("k", pa.int32()),
        ("value", pa.float64()),
    ]
)


def memory_sessions(hits: Iterable[MemoryHit]) -> list[str]:
    """Source sessions of ranked memories, first occurrence kept (rank order)."""
    return list(dict.fromkeys(h.session_id for h in hits))


def memory_refs(hits: Iterable[MemoryHit], ref_of: Mapping[str, str | None]) -> list[str]:
    """Evidence refs of the ranked memories' messages, in rank order, first occurrence kept
    (messages without a ref, or unknown to ``ref_of``, are skipped)."""
    out: dict[str, None] = {}
    for h in hits:
        for mid in h.message_ids:
            ref = ref_of.get(mid)
            if ref is not None:
                out.setdefault(ref, None)
    return list(out)


def pack_message_ids(pack: Any) -> set[str]:
    """Every message a context pack contains (any piece's citation, memory pieces too)."""
    return {m for p in pack.pieces for m in p.citation.message_ids}


def context_recall(
    message_ids: Iterable[str], ref_of: Mapping[str, str | None], evidence: Collection[str]
) -> float | None:
    """Share of the evidence refs whose message is among ``message_ids``; None without
    evidence."""
    wanted = set(evidence)
    if not wanted:
        return None
    covered = {ref_of.get(m) for m in message_ids}
    return len(wanted & covered) / len(wanted)


def chunk_pack(
    ranked_chunks: Sequence[str], text_of: Mapping[str, str], budget: int
) -> tuple[list[str], int]:
    """(chunks, UTF-16 size): whole chunks in rank order, texts joined by the pack
    separator, stopping at the first chunk that would take the pack over ``budget``."""
    chosen: list[str] = []
    used = 0
    for cid in ranked_chunks:
        cost = utf16_len(text_of[cid]) + (len(SEP) if chosen else 0)
        if used + cost > budget:
            break
        chosen.append(cid)
        used += cost
    return chosen, used


# (series, level, metric, k) -> question id -> value; a series is "memory[bm25]",
# "context[split]", "chunks[<selected>]", ...
Values = dict[tuple[str, str, str, int], dict[str, float | None]]
