"""Reader for Instagram's "Download your information" messages (JSON).

Instagram writes Messenger's thread format (``your_instagram_activity/messages/inbox/
<user>_<id>/message_N.json``: participants, newest-first messages with ``timestamp_ms``,
``sender_name``, ``content``, ``photos``, ``share`` for shared posts and reels, ``reactions``;
every string mojibake), so it is read by the Messenger reader's parser with its own kind:
conversations are ``instagram_<thread folder>``. Under ``kind = "auto"`` a thread file is
Instagram's when its path (the export zip or folder) or its media ``uri`` values say so;
otherwise it is read as Messenger's (the rows are the same but for the conversation prefix).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from memory_pipeline.core.common.records import Record
from memory_pipeline.core.ingest.sources.base import SourceSpec, register
from memory_pipeline.core.ingest.sources.exports import (
    ExportFile,
    read_exports,
    register_detector,
)
from memory_pipeline.core.ingest.sources.messenger import (
    accept_json,
    is_instagram,
    is_meta_thread,
    parse_as,
)

KIND = "instagram"


def sniff(f: ExportFile) -> bool:
    """A Meta thread file from an Instagram export."""
    return is_meta_thread(f) and is_instagram(f)


def parse(spec: SourceSpec, f: ExportFile, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Records of one Instagram thread file (raises Rejected before the first)."""
    return parse_as(KIND, spec, f, dates)


@register(KIND)
def read_instagram(spec: SourceSpec, dates: frozenset[dt.date] | None) -> Iterator[Record]:
    """Every Instagram thread file under the source path (a DYI folder or zip)."""
    yield from read_exports(spec, dates, parse, accept_json)


read_instagram.depends_on = (  # type: ignore[attr-defined]
    "memory_pipeline.core.ingest.sources.exports",
    "memory_pipeline.core.ingest.sources.messenger",
)
register_detector(KIND, sniff, parse, rank=10)
