"""The Dagster code location: ``dagster dev`` (see workspace.yaml) loads ``defs`` from here.

The configuration comes from $MEMORY_PIPELINE_CONFIG or ./memory_pipeline.toml.
"""

from memory_pipeline.config import load_config
from memory_pipeline.defs.build import build_definitions

defs = build_definitions(load_config())
