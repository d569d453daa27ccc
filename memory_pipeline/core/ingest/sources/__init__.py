"""Source readers: each turns one kind of chat export into canonical records.

Importing this package registers every built-in reader in ``READERS``.
"""

from memory_pipeline.core.ingest.sources import (  # noqa: F401
    auto,
    chatgpt,
    claude,
    discord,
    imessage,
    imessage_exporter,
    inbox,
    instagram,
    kakaotalk,
    line_json,
    line_pc,
    line_txt,
    locomo,
    messenger,
    realpersonachat,
    rpc_columnar,
    signal,
    slack,
    sms_backup,
    telegram,
    whatsapp,
)
from memory_pipeline.core.ingest.sources.base import (
    READERS,
    TABLE_READERS,
    SourceSpec,
    read_source,
    register,
    register_tables,
)

__all__ = ["READERS", "TABLE_READERS", "SourceSpec", "read_source", "register", "register_tables"]
