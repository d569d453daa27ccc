"""Source readers: each turns one kind of chat export into canonical records.

Importing this package registers every built-in reader in ``READERS``.
"""

from memory_pipeline.core.ingest.sources import line_json, line_txt, locomo, realpersonachat  # noqa: F401
from memory_pipeline.core.ingest.sources.base import READERS, SourceSpec, read_source, register

__all__ = ["READERS", "SourceSpec", "read_source", "register"]
