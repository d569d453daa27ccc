"""The search representations of a chunk: the one list every stage and the config read.

A chunk is indexed and embedded as its ``raw_text`` (the chunks table), its ``summary``
(chunk_summaries) and its ``embedding_text`` (embedding_texts), after the LINE paper. The
builder, the index publisher, the searcher's configuration, the evaluation sweep and the
pipeline configuration all iterate this tuple, so adding a representation is one edit and
its order (which fixes column and report order) is the same everywhere.
"""

from __future__ import annotations

REPRESENTATIONS: tuple[str, ...] = ("raw_text", "summary", "embedding_text")
