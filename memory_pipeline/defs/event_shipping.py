"""Dagster events as plain data, so an owner's results can cross to and from a Dask worker.

An owner's body returns ``MaterializeResult``s and ``AssetCheckResult``s; Dagster's event
objects do not pickle reliably across processes, so a worker sends them back as plain tuples
(:func:`_to_plain`) and the run's process rebuilds the events (:func:`_from_plain`). Metadata
values travel as Dagster's own serdes JSON text.
"""

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import dagster as dg

# Events as plain tuples: ("mat", key path, metadata, checks, data_version, tags) and
# ("check", key path, name, passed, severity, metadata, description). Metadata keeps Python
# scalars, dicts and lists as they are; a MetadataValue travels as its serdes JSON text.
_MV = "__metadata_value__"


def _plain_meta(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (metadata or {}).items():
        out[k] = {_MV: dg.serialize_value(v)} if isinstance(v, dg.MetadataValue) else v
    return out


def _event_meta(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: dg.deserialize_value(v[_MV]) if isinstance(v, dict) and set(v) == {_MV} else v
        for k, v in metadata.items()
    }


def _key(key: dg.AssetKey | None) -> tuple[str, ...] | None:
    return None if key is None else tuple(key.path)


def _plain_check(c: dg.AssetCheckResult) -> tuple:
    return (
        "check",
        _key(c.asset_key),
        c.check_name,
        bool(c.passed),
        c.severity.value,
        _plain_meta(c.metadata),
        c.description,
    )


def _to_plain(event: Any) -> tuple:
    """A body's event as plain data (what leaves a worker)."""
    if isinstance(event, dg.MaterializeResult):
        dv = event.data_version.value if event.data_version is not None else None
        checks = [_plain_check(c) for c in event.check_results or []]
        tags = dict(event.tags) if event.tags else None
        return ("mat", _key(event.asset_key), _plain_meta(event.metadata), checks, dv, tags)
    if isinstance(event, dg.AssetCheckResult):
        return _plain_check(event)
    raise TypeError(
        f"an owner's body may return MaterializeResult/AssetCheckResult, got {type(event).__name__}"
    )


def _from_plain(plain: tuple) -> Any:
    """The Dagster event a plain tuple of :func:`_to_plain` stands for (in the run)."""
    if plain[0] == "check":
        _, key, name, passed, severity, metadata, description = plain
        return dg.AssetCheckResult(
            asset_key=None if key is None else dg.AssetKey(list(key)),
            check_name=name,
            passed=passed,
            severity=dg.AssetCheckSeverity(severity),
            metadata=_event_meta(metadata),
            description=description,
        )
    _, key, metadata, checks, dv, tags = plain
    return dg.MaterializeResult(
        asset_key=None if key is None else dg.AssetKey(list(key)),
        metadata=_event_meta(metadata),
        check_results=[_from_plain(c) for c in checks],
        data_version=None if dv is None else dg.DataVersion(dv),
        tags=tags,
    )


def _events(result: Any) -> list[Any]:
    """What an asset body returned or yielded, as a list."""
    if result is None:
        return []
    if isinstance(result, (dg.MaterializeResult, dg.AssetCheckResult)):
        return [result]
    return list(result)


def _check_results(events: Iterable[Any]) -> Iterator[dg.AssetCheckResult]:
    for event in events:
        if isinstance(event, dg.AssetCheckResult):
            yield event
        elif isinstance(event, dg.MaterializeResult):
            yield from event.check_results or []
