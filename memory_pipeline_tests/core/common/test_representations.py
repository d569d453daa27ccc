"""One list of search representations, one of tokenizer names: every reader shares it."""

from __future__ import annotations

import memory_pipeline.config as config
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.evaluation import evaluate
from memory_pipeline.core.indexes import publish
from memory_pipeline.core.indexes.tokenize import TOKENIZER_CHOICES, TOKENIZER_NAMES
from memory_pipeline.core.represent import build
from memory_pipeline.core.retrieval import config as search_config


def test_every_stage_reads_the_one_representations_tuple():
    assert REPRESENTATIONS == ("raw_text", "summary", "embedding_text")
    for module in (publish, build, search_config, config, evaluate):
        assert module.REPRESENTATIONS is REPRESENTATIONS, module.__name__
    assert config.PipelineConfig.__dataclass_fields__["dense_representations"].default is (
        REPRESENTATIONS
    )


def test_the_config_accepts_exactly_the_indexes_tokenizers():
    assert TOKENIZER_CHOICES == (*TOKENIZER_NAMES, "auto")
    assert config.TOKENIZERS == frozenset(TOKENIZER_CHOICES)
