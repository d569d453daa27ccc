"""Queries to try on a person's own memory, made from their messages.

After ``memory-pipeline init`` and ``run`` the first search a person types should find
something: a fixed sample question ("Which train do we take to Kyoto?") finds nothing in
someone else's history. So the suggestions come from the data itself, deterministically:

- a search for the content word that comes up on the most distinct days (conversation and
  date), outside stop words, calendar words and the participants' own names;
- a context question about the contact the owner exchanged the most messages with.

Both are printed to the owner on the command line only; they contain words and names from the
chats, so they must never go to a log.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

import pyarrow as pa

from memory_pipeline.core.common.lang import detect_lang
from memory_pipeline.core.represent.summarize_lexicon import (
    _EN_CALENDAR,
    _EN_STOP,
    _EN_TITLE_STOP,
    _JA_STOP,
)

_EN_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]{3,}")
_URL = re.compile(r"\S+://\S+|www\.\S+|\S+@\S+")
_KATAKANA = re.compile(r"[\u30a1-\u30fa][\u30a1-\u30fa\u30fc]{2,}")
_KANJI = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,4}")
# columns the suggestions read (a run reads only these from raw_messages)
COLUMNS = ["conversation_id", "local_date", "sender", "is_owner", "type", "text"]
MAX_TEXTS = 200_000  # enough to find a frequent word; bounded time on a long history
LANG_SAMPLE = 400


@dataclass(frozen=True)
class Suggestions:
    """A search query and a context question (None when the data gives none), and the
    language they are phrased in."""

    search: str | None
    context: str | None
    lang: str = "en"


def suggest_queries(messages: pa.Table, owner_names: Collection[str] = ()) -> Suggestions:
    """The queries to try on ``messages`` (a table with :data:`COLUMNS`).

    ``owner_names`` are names that mean the owner (besides rows marked ``is_owner``): they are
    never the suggested contact."""
    if messages.num_rows == 0:
        return Suggestions(None, None)
    cols = {c: messages.column(c).to_pylist() for c in COLUMNS if c in messages.column_names}
    n = min(messages.num_rows, MAX_TEXTS)
    mine = {s.casefold() for s in owner_names if s}
    texts, senders = cols["text"][:n], cols["sender"][:n]
    owners = cols.get("is_owner", [False] * n)[:n]
    kinds = cols.get("type", ["text"] * n)[:n]
    keys = list(zip(cols["conversation_id"][:n], cols["local_date"][:n], strict=True))
    text_rows = [i for i in range(n) if kinds[i] == "text" and texts[i]]
    step = max(1, len(text_rows) // LANG_SAMPLE)
    langs = Counter(detect_lang(texts[i]) for i in text_rows[::step][:LANG_SAMPLE])
    lang = "ja" if langs["ja"] > sum(langs.values()) / 2 else "en"  # most messages' language

    contacts = Counter(
        senders[i]
        for i in range(n)
        if senders[i] and not owners[i] and senders[i].casefold() not in mine
        and kinds[i] != "system"
    )
    contact = min(contacts, key=lambda s: (-contacts[s], s)) if contacts else None
    names = {w.casefold() for s in set(senders) if s for w in re.findall(r"\w+", s)}

    days: dict[str, set] = {}
    for i in text_rows:
        for word in _words(_URL.sub(" ", texts[i]), lang):
            if word.casefold() not in names:
                days.setdefault(word, set()).add(keys[i])
    word = min(days, key=lambda w: (-len(days[w]), w)) if days else None
    return Suggestions(word, _context_question(contact, lang), lang)


def _words(text: str, lang: str) -> set[str]:
    """The candidate content words of one message."""
    if lang == "ja":
        found = set(_KATAKANA.findall(text)) | set(_KANJI.findall(text))
        return {w for w in found if w not in _JA_STOP}
    out = set()
    for raw in _EN_WORD.findall(text):
        w = raw.strip("'’-").lower()
        if len(w) >= 4 and w not in _EN_STOP and w not in _EN_TITLE_STOP:
            if w not in _EN_CALENDAR and "'" not in w and "’" not in w:
                out.add(w)
    return out


def _context_question(contact: str | None, lang: str) -> str | None:
    if contact is None:
        return None
    if lang == "ja":
        return f"{contact}さんと何を話した？"
    return f"What did {contact} and I talk about?"
