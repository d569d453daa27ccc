"""One list of search representations, one of tokenizer names: every reader shares it."""

from __future__ import annotations

from pathlib import Path

import memory_pipeline.config as config
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.evaluation import evaluate
from memory_pipeline.core.indexes import publish_bm25
from memory_pipeline.core.indexes.tokenize import TOKENIZER_CHOICES, TOKENIZER_NAMES
from memory_pipeline.core.represent import build
from memory_pipeline.core.retrieval import config as search_config


def test_every_stage_reads_the_one_representations_tuple():
    assert REPRESENTATIONS == ("raw_text", "summary", "embedding_text")
    for module in (publish_bm25, build, search_config, config, evaluate):
        assert module.REPRESENTATIONS is REPRESENTATIONS, module.__name__
    assert config.PipelineConfig.__dataclass_fields__["dense_representations"].default is (
        config.DEFAULT_DENSE
    )


def test_the_default_embeds_what_the_default_search_reads():
    """Vectors no shipped search reads are not built by default (the embedder is the build's
    dominant cost); every preset's dense representation is embedded."""
    default = search_config.PRESETS["default"]
    assert default.uses_dense
    assert config.DEFAULT_DENSE == (default.dense_rep,)
    assert {p.dense_rep for p in search_config.PRESETS.values() if p.uses_dense} == set(
        config.DEFAULT_DENSE
    )
    shipped = Path(__file__).resolve().parents[3] / config.DEFAULT_CONFIG_NAME
    assert config.load_config(shipped, env={}).dense_representations == config.DEFAULT_DENSE


def test_the_config_accepts_exactly_the_indexes_tokenizers():
    assert TOKENIZER_CHOICES == (*TOKENIZER_NAMES, "auto")
    assert config.TOKENIZERS == frozenset(TOKENIZER_CHOICES)
