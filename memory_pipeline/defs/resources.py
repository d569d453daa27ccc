"""Resources: where the configuration and the table store come from."""

from functools import cached_property

import dagster as dg

from memory_pipeline.config import PipelineConfig, load_config, with_overrides
from memory_pipeline.core.common.storage import TableStore
from memory_pipeline.core.represent.cache import ContentCache


class PipelineResource(dg.ConfigurableResource):
    """The validated pipeline configuration (memory_pipeline.toml + MEMORY_PIPELINE_* env).

    ``output_dir`` overrides the configured output folder (tests point it at a tmp dir).
    """

    config_file: str | None = None
    output_dir: str | None = None

    @cached_property
    def cfg(self) -> PipelineConfig:
        cfg = load_config(self.config_file)
        if self.output_dir:
            from pathlib import Path

            cfg = with_overrides(cfg, output_dir=Path(self.output_dir).resolve())
        return cfg

    @property
    def store(self) -> TableStore:
        return TableStore(self.cfg.output_dir)

    def content_cache(self) -> ContentCache:
        """The provider cache shared by every partition and run (the caller closes it)."""
        path = self.cfg.cache_path
        path.parent.mkdir(parents=True, exist_ok=True)
        return ContentCache(path)
