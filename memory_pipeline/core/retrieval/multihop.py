"""Multi-hop retrieval helpers: query decomposition, a second (entity) hop, ranking merges.

A multi-hop question needs evidence from several places ("Which city have both Jean and
John visited?": one session per person; "What schools did John play in and how many years
was he with his team?": two facts). One query ranks the place that matches best first and
the others after it; the rules here make each part a query of its own, and the rankings of
the parts are merged so every part has a place near the top.

- ``decompose``: English rules only (a Japanese or other query is returned whole): a
  coordination of known speaker names ("both A and B", "A and B's") becomes one question
  per name, and a second question joined by "and"/"or" + a question word becomes a question
  of its own (carrying the first part's names when it has none, since "he" does not match).
- ``hop_terms``: the rare words of the first hop's top texts that the question lacks (names
  and question words out): what a second query searches for, to reach the other sessions
  that mention the same entities.
- ``interleave`` / ``max_merge``: deterministic merges of several rankings of the same ids.

Pure functions over strings and ranked lists; nothing here reads an index.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

Ranked = list[tuple[str, float]]

__all__ = ["decompose", "hop_terms", "interleave", "max_merge"]

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


def decompose(query: str, names: Sequence[str] = ()) -> list[str]:
    """Sub-questions of ``query`` (without the query itself), [] when no rule applies.

    ``names``: the known speaker names the query mentions (``query.speakers_in``). English
    only: the rules read English conjunctions, so any other query is left whole (a Japanese
    「と」 coordination is not split by accident)."""
    if not isinstance(query, str) or not _is_english(query):
        return []
    out: list[str] = []
    for part in _split_questions(query, names) or [query]:
        out.extend(_split_speakers(part, names) or ([part] if part != query else []))
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
