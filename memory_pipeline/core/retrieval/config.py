"""How a search ranks, as one value: ``SearchConfig`` and its named presets.

Every knob of a search used to be a keyword of ``Searcher.search`` (and a positional argument
of ``rank``), repeated by the public API, the CLI, context packs and the evaluation sweep. One
frozen value instead lets each of them take, store, compare and name a configuration: the
sweep produces them, the evaluation reports them by ``name``, the API and the CLI pick one
by preset and adjust it with ``dataclasses.replace``.

What a search is *about* (the query, how many hits, the contact/conversation scope and the
reference time ``as_of``) is not configuration: it stays an argument of each call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from importlib import resources
from types import MappingProxyType
from typing import Any

from memory_pipeline.core.common.representations import REPRESENTATIONS

MODES = ("bm25", "dense", "hybrid")
FUSIONS = ("rrf", "linear")
TURN_MODES = ("highlights", "index")
# A parsed time expression below this confidence may date the event rather than the chat
# ("the trip in March"): it stays content instead of becoming a filter.
HARD_FILTER_CONFIDENCE = 0.8


@dataclass(frozen=True)
class SearchConfig:
    """One way of ranking chunks (the field defaults are the search before the evaluation
    selected one; ``PRESETS["default"]`` is the selection).

    ``mode``: ``bm25``, ``dense`` or ``hybrid`` (both retrievers, fused by ``fusion``:
    ``rrf`` with constant ``rrf_k``, or ``linear``: ``beta * bm25 + (1 - beta) * dense`` over
    min-max normalized scores). ``bm25_rep`` / ``dense_rep``: the representation each
    retriever searches. ``candidates``: how many chunks each retriever contributes before
    fusion. ``use_time``: parse time expressions into filters (off: every query is content);
    ``hard_filter_confidence``: the confidence from which a parsed expression filters.
    ``highlights``: messages highlighted per chunk hit (0 skips the per-message ranking).
    Query understanding (``retrieval.query``, off by default until measured):
    ``speaker_boost`` adds that share of the score range to chunks (turns) where a speaker
    named in the query speaks; ``strip_question`` drops question words and those names
    (left to the boost) before ranking;
    ``prf_terms`` expands the BM25 query RM3-style with that many feedback terms (0: off).
    ``turns``: how turns are ranked: ``highlights`` (messages of the top chunks, the search
    before turns were indexed) or ``index`` (the turn index as a retriever of its own,
    fused across granularities, core/retrieval/turns.py): a turn scores ``turn_self`` x its
    own BM25 + ``turn_ctx`` x its neighbours' + ``turn_chunk`` x its best chunk, and a chunk
    ``(1 - lift)`` x its fused score + ``lift`` x its best turn. ``rerank``: reorder the
    fused turns with the packaged learned reranker (core/retrieval/rerank.py; no-op when
    it is absent). ``time_fallback``: a question whose hard time filter keeps no session in
    scope is ranked as content instead of answered empty (the words date the event asked
    about, not the chat: "the rainy season starts in May"). ``splade``: the weight of the
    learned sparse channel in a turn's own share (``turns.mix_splade``: its SPLADE score,
    scaled by the query's best, added to its scaled BM25); 0 is off, and it applies only to
    English queries on a version with SPLADE vectors (core/indexes/splade.py).
    """

    mode: str = "hybrid"
    fusion: str = "rrf"
    beta: float = 0.5
    rrf_k: int = 60
    bm25_rep: str = "raw_text"
    dense_rep: str = "embedding_text"
    candidates: int = 200
    use_time: bool = True
    hard_filter_confidence: float = HARD_FILTER_CONFIDENCE
    highlights: int = 3
    speaker_boost: float = 0.0
    strip_question: bool = False
    prf_terms: int = 0
    turns: str = "highlights"
    turn_self: float = 0.5
    turn_ctx: float = 0.2
    turn_chunk: float = 0.3
    lift: float = 0.0
    rerank: bool = False
    time_fallback: bool = False
    splade: float = 0.0

    def __post_init__(self) -> None:
        # fail when the value is made (API call, CLI flag, preset), not deep inside a ranking
        if self.mode not in MODES or self.fusion not in FUSIONS:
            raise ValueError(f"mode must be one of {MODES} and fusion one of {FUSIONS}")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {self.beta}")
        if self.rrf_k <= 0:
            raise ValueError(f"RRF k must be positive, got {self.rrf_k}")
        for rep in (self.bm25_rep, self.dense_rep):
            if rep not in REPRESENTATIONS:
                raise ValueError(f"representation must be one of {REPRESENTATIONS}, got {rep!r}")
        if self.candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {self.candidates}")
        if self.highlights < 0:
            raise ValueError(f"highlights must be >= 0, got {self.highlights}")
        if not 0.0 <= self.speaker_boost <= 1.0 or self.prf_terms < 0:
            raise ValueError(
                f"speaker_boost must be in [0, 1] and prf_terms >= 0, got "
                f"{self.speaker_boost} and {self.prf_terms}"
            )
        if self.turns not in TURN_MODES:
            raise ValueError(f"turns must be one of {TURN_MODES}, got {self.turns!r}")
        for w in (self.turn_self, self.turn_ctx, self.turn_chunk, self.lift):
            if not 0.0 <= w <= 1.0:
                raise ValueError(f"turn weights and lift must be in [0, 1], got {w}")
        if self.splade < 0:
            raise ValueError(f"splade must be >= 0, got {self.splade}")

    @property
    def family(self) -> str:
        """``bm25``, ``dense``, ``linear`` or ``rrf``: the retrieval method, as the
        evaluation groups configurations."""
        return self.mode if self.mode != "hybrid" else self.fusion

    @property
    def uses_bm25(self) -> bool:
        """Whether the ranking reads the BM25 index (``bm25_rep`` matters)."""
        return self.mode != "dense"

    @property
    def uses_dense(self) -> bool:
        """Whether the ranking reads the dense vectors (``dense_rep`` matters)."""
        return self.mode != "bm25"

    @property
    def name(self) -> str:
        """The ranking as the evaluation tables and report name it (only the parameters that
        change the ranking: e.g. ``linear[raw_text+summary] beta=0.75``; query options
        that are on follow: `` +spk0.25 +strip +prf10``, then `` turns=s/c/k lift=l`` when
        turns come from the turn index)."""
        if self.turns == "index":
            return (
                f"{self.chunk_name} turns={self.turn_self:.2f}/{self.turn_ctx:.2f}/"
                f"{self.turn_chunk:.2f} lift={self.lift:.2f}"
                + (f" +splade{self.splade:g}" if self.splade else "")
                + (" +rerank" if self.rerank else "")
            )
        return self.chunk_name

    @property
    def chunk_name(self) -> str:
        """The chunk ranking's part of ``name`` (with the query options that are on)."""
        if self.family == "bm25":
            base = f"bm25[{self.bm25_rep}]"
        elif self.family == "dense":
            base = f"dense[{self.dense_rep}]"
        elif self.family == "linear":
            base = f"linear[{self.bm25_rep}+{self.dense_rep}] beta={self.beta:.2f}"
        else:
            base = f"rrf[{self.bm25_rep}+{self.dense_rep}] k={self.rrf_k}"
        return base + self.query_suffix

    @property
    def query_suffix(self) -> str:
        """The query-understanding options that are on, as the name shows them."""
        out = f" +spk{self.speaker_boost:g}" if self.speaker_boost else ""
        out += " +strip" if self.strip_question else ""
        out += f" +prf{self.prf_terms}" if self.prf_terms and self.uses_bm25 else ""
        return out + (" +timefb" if self.time_fallback else "")

    @classmethod
    def preset(cls, name: str) -> SearchConfig:
        """The named preset (see ``PRESETS``); an unknown name lists the known ones."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ValueError(f"unknown search preset {name!r}: one of {sorted(PRESETS)}") from None


SELECTION_FILE = "selection.json"


def load_selection() -> dict[str, Any]:
    """The evaluation's recorded selection (package data): the default search configuration
    and its provenance (data, protocol, cross-validated figures with CIs).

    The default is what the evaluation measured best, not a guess: ``memory-pipeline eval``
    proposes a new record as a diff and ``--accept-selection`` writes it here.
    """
    text = resources.files(__package__).joinpath(SELECTION_FILE).read_text(encoding="utf-8")
    return json.loads(text)


SELECTION: Mapping[str, Any] = MappingProxyType(load_selection())

PRESETS: Mapping[str, SearchConfig] = MappingProxyType(
    {
        # the evaluation's selection (selection.json), with its provenance
        "default": SearchConfig(**SELECTION["config"]),
        # the default before the evaluation chose one: BM25[raw_text] + dense[embedding_text], RRF
        "rrf": SearchConfig(),
        "bm25": SearchConfig(mode="bm25"),
        "dense": SearchConfig(mode="dense"),
        # the LINE paper's fusion over the default representations
        "linear": SearchConfig(fusion="linear"),
        # the selection's chunk ranking with turns ranked only as highlights of its top chunks
        "highlights": SearchConfig(**{**SELECTION["config"], "turns": "highlights"}),
    }
)

FIELDS = tuple(f.name for f in fields(SearchConfig))


def language_defaults(selection: Mapping[str, Any]) -> dict[str, SearchConfig]:
    """The default configuration per language: English is the record's ``config`` (made on
    LoCoMo), every other language its ``languages.<lang>.config`` (made on that language's
    dev data; fields it does not record stay as the English selection)."""
    out = {"en": SearchConfig(**selection["config"])}
    for lang, record in (selection.get("languages") or {}).items():
        out[lang] = SearchConfig(**{**selection["config"], **record["config"]})
    return out


# the default per language (search picks one by the query's language: ``language_of``)
DEFAULTS: Mapping[str, SearchConfig] = MappingProxyType(
    {**language_defaults(SELECTION), "en": PRESETS["default"]}
)


def language_of(query: str, corpus_language: str = "en") -> str:
    """The language a search serves: the query's (``common.lang.detect_lang``) when it
    has letters, else the corpus's (a query of digits or emoji says nothing)."""
    from memory_pipeline.core.common.lang import detect_lang, ja_share

    if ja_share(query) > 0 or any(c.isalpha() for c in query):
        return detect_lang(query)
    return corpus_language


def for_language(config: SearchConfig, language: str) -> SearchConfig:
    """``config``, or the ``language``'s default when ``config`` is the (English) default
    up to its highlights (a caller that changed any ranking field keeps its choice)."""
    default = PRESETS["default"]
    if language == "en" or language not in DEFAULTS:
        return config
    if replace(config, highlights=default.highlights) != default:
        return config
    return replace(DEFAULTS[language], highlights=config.highlights)


def resolve(config: SearchConfig | str | None = None, **overrides: Any) -> SearchConfig:
    """A config from a value, a preset name or None (the default preset), with ``overrides``
    applied by ``dataclasses.replace``; an override of None means "keep the config's value",
    so callers (CLI flags, keyword arguments) can pass what they were given unfiltered."""
    if config is None:
        base = PRESETS["default"]
    elif isinstance(config, str):
        base = SearchConfig.preset(config)
    elif isinstance(config, SearchConfig):
        base = config
    else:
        raise TypeError(f"config must be a SearchConfig or a preset name, got {config!r}")
    unknown = sorted(set(overrides) - set(FIELDS))
    if unknown:
        raise TypeError(f"unknown search option(s) {unknown}: SearchConfig has {list(FIELDS)}")
    changes = {k: v for k, v in overrides.items() if v is not None}
    return replace(base, **changes) if changes else base
