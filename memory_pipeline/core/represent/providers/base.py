"""Provider contracts shared by the local model, OpenAI, Voyage and test fakes.

Assets only see these protocols, so swapping OpenAI for the local model never touches an
asset; the cache keys on ``provider``/``model``/``params`` so vectors from different
settings never mix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from memory_pipeline.core.represent.providers.retry import is_input_error


@dataclass
class EmbedResult:
    """Vectors for a list of texts, row i for text i.

    ``vectors`` is float32 (n, dim), L2-normalized; a row whose input the provider rejected
    permanently is all zeros and has ``errors[i]`` set, so one bad text never sinks a batch.
    """

    vectors: np.ndarray
    truncated: list[bool] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.vectors.shape[0])


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors; ``calls`` counts provider requests (tests assert it)."""

    provider: str
    model: str
    dim: int
    params: dict
    max_batch: int
    remote: bool
    calls: int

    def embed(self, texts: list[str], input_type: str = "document") -> EmbedResult: ...


@runtime_checkable
class Summarizer(Protocol):
    """Summarizes a session's raw text for later semantic search."""

    provider: str
    model: str
    params: dict
    remote: bool
    calls: int

    def summarize(self, raw_text: str, lang: str) -> str: ...


@runtime_checkable
class Llm(Protocol):
    """A plain chat model: one system + one user message in, text out."""

    provider: str
    model: str
    params: dict
    remote: bool
    calls: int

    def complete(self, system: str, user: str) -> str: ...


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Float32 rows scaled to unit length; all-zero rows stay zero (no NaN)."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (arr / norms).astype(np.float32, copy=False)


def chunk_indices(n: int, size: int) -> list[list[int]]:
    """``range(n)`` cut into consecutive lists of at most ``size`` indices."""
    size = max(1, int(size))
    return [list(range(start, min(n, start + size))) for start in range(0, n, size)]


def pack_batches(
    costs: Sequence[int], *, max_items: int, max_total: int | None = None
) -> list[list[int]]:
    """Greedy, order-keeping batches with at most ``max_items`` items and ``max_total`` cost.

    An item costlier than ``max_total`` on its own still gets a batch of its own (callers
    truncate inputs to the per-input limit first, so this only happens on misconfiguration).
    """
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, cost in enumerate(costs):
        over_items = len(current) >= max_items
        over_total = max_total is not None and current and total + cost > max_total
        if over_items or over_total:
            batches.append(current)
            current, total = [], 0
        current.append(i)
        total += cost
    if current:
        batches.append(current)
    return batches


def isolate_bad_inputs(
    send: Callable[[list[int]], np.ndarray],
    indices: list[int],
    *,
    max_requests: int = 64,
) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """Send ``indices`` as one request; on an input-attributable 4xx, bisect to find the culprits.

    ``send(sub_indices)`` returns the rows for those indices or raises. Other errors
    (auth, exhausted retries) propagate: they are not about any one input. ``max_requests``
    bounds the extra requests bisection may spend; once spent, a still-failing group is
    marked failed as a whole rather than hammering the provider.
    Returns (rows by index, error message by index).
    """
    rows: dict[int, np.ndarray] = {}
    errors: dict[int, str] = {}
    budget = max_requests
    stack: list[list[int]] = [indices]
    first = True
    while stack:
        group = stack.pop()
        if not first:
            budget -= 1
        first = False
        try:
            out = send(group)
        except Exception as exc:
            if not is_input_error(exc):
                raise
            message = f"{type(exc).__name__}: {exc}"[:500]
            if len(group) == 1 or budget < 2:
                for i in group:
                    errors[i] = message
                continue
            mid = len(group) // 2
            # LIFO: push the right half first so the left half is tried first.
            stack.append(group[mid:])
            stack.append(group[:mid])
            continue
        rows.update(zip(group, out, strict=True))
    return rows, errors


def split_to_window(
    text: str, count: Callable[[list[str]], list[int]], window: int
) -> list[str]:
    """``text`` cut into pieces of at most ``window`` tokens as ``count`` measures them.

    Why: a local model silently cuts (MiniLM) or averages (e5) what does not fit its window,
    so the tail of a long chunk became unfindable. Pieces are embedded separately and a chunk
    scores by its best piece (max-sim). Lines (messages) are packed greedily in order; a
    single line over the window is cut at the longest prefix that fits. ``count`` returns
    the model's token count for each text, special tokens and prefixes included, so the
    fixed overhead (``count([""])``) is charged once per piece. Every piece is re-measured
    and halved again if joining lines made it larger than the sum of its lines.
    """
    if not text or count([text])[0] <= window:
        return [text]
    overhead = count([""])[0]
    budget = max(1, window - overhead)
    lines = text.split("\n")
    sizes = [max(0, n - overhead) for n in count(lines)]
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for line, size in zip(lines, sizes, strict=True):
        if size > budget:
            if current:
                pieces.append("\n".join(current))
                current, used = [], 0
            pieces.extend(_cut_long_line(line, count, window))
            continue
        if current and used + size + 1 > budget:
            pieces.append("\n".join(current))
            current, used = [], 0
        current.append(line)
        used += size + (1 if len(current) > 1 else 0)
    if current:
        pieces.append("\n".join(current))
    out: list[str] = []
    for piece, n in zip(pieces, count(pieces), strict=True):
        if n <= window or len(piece) < 2:
            out.append(piece)
        else:  # tokenization is not additive over lines: split again
            mid = len(piece) // 2
            cut = piece.rfind("\n", 0, mid + 1)
            cut = cut if cut > 0 else mid
            out.extend(split_to_window(piece[:cut], count, window))
            out.extend(split_to_window(piece[cut:].lstrip("\n"), count, window))
    return [p for p in out if p.strip()] or [text[:1]]


def _cut_long_line(line: str, count: Callable[[list[str]], list[int]], window: int) -> list[str]:
    """One over-long line as consecutive prefixes that each fit (binary search per cut)."""
    pieces: list[str] = []
    rest = line
    while rest:
        if count([rest])[0] <= window:
            pieces.append(rest)
            break
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count([rest[:mid]])[0] <= window:
                lo = mid
            else:
                hi = mid - 1
        space = rest.rfind(" ", lo // 2, lo)  # prefer a word boundary
        cut = space if space > 0 else lo
        pieces.append(rest[:cut])
        rest = rest[cut:].lstrip(" ")
    return pieces
