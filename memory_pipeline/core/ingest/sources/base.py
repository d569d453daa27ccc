"""The reader registry and the spec every reader receives."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline.core.common.records import Record, SourceError

Reader = Callable[["SourceSpec", "frozenset[dt.date] | None"], Iterator[Record]]

READERS: dict[str, Reader] = {}


@dataclass(frozen=True)
class SourceSpec:
    """One configured input: what kind it is, where it lives, and whose history it is.

    ``owner`` is the sender name (or corpus speaker id) of the person whose memory this is;
    ``timezone`` interprets local times that carry no offset.
    """

    name: str
    kind: str
    path: Path
    timezone: str
    owner: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


def register(kind: str) -> Callable[[Reader], Reader]:
    """Decorator: make a reader available under ``kind`` in the config file."""

    def deco(fn: Reader) -> Reader:
        READERS[kind] = fn
        return fn

    return deco


def read_source(spec: SourceSpec, dates: Iterable[dt.date] | None = None) -> Iterator[Record]:
    """Yield every record of one source.

    ``dates`` is a hint: a reader may skip input it can tell lies on other dates (LINE JSON
    files are named by date), but callers still filter by date themselves.
    """
    try:
        reader = READERS[spec.kind]
    except KeyError:
        known = ", ".join(sorted(READERS))
        raise SourceError(
            f"source {spec.name!r}: unknown kind {spec.kind!r} (known: {known})"
        ) from None
    if not spec.path.exists():
        raise SourceError(f"source {spec.name!r}: input path does not exist: {spec.path}")
    yield from reader(spec, frozenset(dates) if dates is not None else None)
