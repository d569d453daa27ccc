"""Tokens per text, cached by content hash, so an index refresh tokenizes only new texts.

BM25 weights depend on the whole corpus, so every refresh rebuilds the bm25s matrices over
all chunks; that part is cheap (a few seconds for 200k documents). Tokenizing is not
(Sudachi over three representations of all RealPersonaChat took ~57 s of a ~58 s build), and
a text's tokens never change for a given tokenizer identity. :class:`CachedTokenizer` wraps
any :class:`~memory_pipeline.core.indexes.tokenize.Tokenizer` and keeps its output in the
pipeline's content cache (``core/represent/cache.py``) under a key made of the tokenizer's
name and params (params carry ``TOKENIZER_VERSION``, so a changed tokenizer never reads
stale tokens).

The cache is the provider cache on purpose: forget and retention already delete every
entry whose text hash belongs to a purged text (``core/privacy``), and tokens are words of
that text. Tokens are stored joined by U+001F (no tokenizer emits control characters; a
text whose tokens would contain one, or an empty token, is simply not cached).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory_pipeline.core.common.ids import text_hash
from memory_pipeline.core.indexes.tokenize import Tokenizer
from memory_pipeline.core.represent.cache import ContentCache

__all__ = ["CachedTokenizer", "SEP", "token_key"]

SEP = "\x1f"
PROVIDER = "tokenizer"
# above this many texts, read the whole key in one range scan instead of IN (...) batches
_SCAN_ABOVE = 20_000


def token_key(cache: ContentCache, tokenizer: Tokenizer) -> str:
    """The cache key of ``tokenizer``'s output (registered for the cache's stats)."""
    return cache.key_for(PROVIDER, tokenizer.name, tokenizer.params)


class CachedTokenizer:
    """A tokenizer that answers from the cache and tokenizes (then stores) only misses.

    Same ``name`` and ``params`` as the wrapped tokenizer, so an index built through it
    records, and later loads, the plain tokenizer. ``hits`` / ``misses`` count texts (after
    de-duplication) over this object's lifetime, for build metadata.
    """

    def __init__(self, inner: Tokenizer, cache: ContentCache, *, defer: bool = False) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.params: dict[str, Any] = inner.params
        self.key = token_key(cache, inner)
        self.hits = 0
        self.misses = 0
        # defer: new entries are held until flush(), so a tokenizer working beside another
        # writer of the cache (the turn index beside the chunk indexes) writes after it, in
        # one order whatever the threads' timing: the cache file stays the same bytes
        self.defer = defer
        self.pending: dict[str, str] = {}  # hash -> joined tokens, read like the cache

    def flush(self) -> int:
        """Write the deferred entries (one transaction); returns how many."""
        pending, self.pending = self.pending, {}
        return self.cache.put_texts(self.key, list(pending.items())) if pending else 0

    def tokenize(self, text: str) -> list[str]:
        """Tokens of one text (queries: not worth a cache round trip)."""
        return self.inner.tokenize(text)

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokens of many texts: cached ones read back, the rest tokenized once and stored.

        Equal texts get the same list object: treat the lists as read-only.
        """
        texts = list(texts)
        hashes = [text_hash(t) for t in texts]
        unique = dict(zip(hashes, texts, strict=True))
        found = self._lookup(list(unique))
        if self.pending:  # computed earlier by this tokenizer, not yet written
            found |= {h: self.pending[h] for h in unique if h in self.pending and h not in found}
        missing = [h for h in unique if h not in found]
        tokens = dict.fromkeys(found)
        for h, payload in found.items():
            tokens[h] = payload.split(SEP) if payload else []
        if missing:
            fresh = self.inner.tokenize_many([unique[h] for h in missing])
            store = []
            for h, toks in zip(missing, fresh, strict=True):
                tokens[h] = toks
                if all(t and SEP not in t for t in toks):
                    store.append((h, SEP.join(toks)))
            if self.defer:
                self.pending.update(store)
            else:
                self.cache.put_texts(self.key, store)
        self.hits += len(found)
        self.misses += len(missing)
        # equal texts share one list (callers only read them): copying 850k lists cost ~10 %
        # of a refresh (profiled)
        return [tokens[h] for h in hashes]

    def _lookup(self, hashes: list[str]) -> dict[str, str]:
        if len(hashes) <= _SCAN_ABOVE:
            return self.cache.get_texts(self.key, hashes)
        wanted = set(hashes)
        return {h: t for h, t in self.cache.iter_texts(self.key) if h in wanted}
