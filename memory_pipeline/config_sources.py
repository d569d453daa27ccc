"""The [[sources]], [[owners]] and [[contacts]] tables of the configuration, read and checked.

A table whose name or path is unusable is skipped after its problem is listed, so one bad
table never hides the problems of the next; ``OwnerSpec`` is what an [[owners]] table and
a fan-out source (every speaker an owner) become."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_pipeline.config_settings import (
    _BY_NAME,
    BOOL,
    ENV_PREFIX,
    NAMES,
    NON_NEGATIVE_NUMBER,
    OWNER_PREFIX,
    PATH,
    SLUG,
    TEXT,
    TIMEZONE,
    Kind,
    Setting,
    _env_key,
    _PipelineValues,
    _read,
    _show,
    _table,
    _unknown_keys,
    enum_kind,
    int_kind,
)
from memory_pipeline.core.common.contacts import ContactSpec
from memory_pipeline.core.common.owners import owner_slug, valid_owner_id
from memory_pipeline.core.ingest.sources import READERS, SourceSpec

# A source option that fans one corpus out to many owners in one read pass: every speaker
# of a RealPersonaChat file becomes an owner, and a dialogue belongs to both its speakers.
FAN_OUT_OPTION = "owners"
FAN_OUT_SPEAKERS = "speakers"
FAN_OUT_KINDS = frozenset({"realpersonachat"})


@dataclass(frozen=True)
class OwnerSpec:
    """One owner of a multi-owner deployment: ``id`` (a slug, their folder's name), ``owner``
    (their sender name / speaker id in the exports) and the sources that are their history.

    ``fan_out`` names the fan-out sources whose shared read gives this owner records (a
    speaker of a corpus); their records come from that one pass, not from ``sources``.
    """

    id: str
    owner: str
    sources: tuple[SourceSpec, ...] = ()
    fan_out: tuple[str, ...] = ()


@dataclass
class _Sources:
    """The [[sources]] tables read so far: what is enabled, what is off, every valid name."""

    specs: list[SourceSpec] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    # MEMORY_PIPELINE_SOURCES as a set of names (None: each table's own `enabled` decides)
    enabled_names: set[str] | None = None
    explicit_owner: set[str] = field(default_factory=set)  # tables that set `owner` themselves


def _sources(
    raw: Mapping[str, Any],
    env: Mapping[str, str],
    base_dir: Path,
    owner: str,
    timezone: str,
    errors: list[str],
) -> _Sources:
    """Every [[sources]] table in order; a table whose name or path is unusable is skipped
    after its problem is listed, so one bad table never hides the problems of the next."""
    enabled_env = env.get(ENV_PREFIX + "SOURCES")
    out = _Sources(
        enabled_names=(
            None
            if enabled_env is None
            else {s.strip() for s in enabled_env.split(",") if s.strip()}
        )
    )
    raw_sources = raw.get("sources", [])
    if not isinstance(raw_sources, list):
        errors.append("[[sources]]: must be an array of tables")
        raw_sources = []
    for i, src in enumerate(raw_sources):
        _read_source(i, src, env, base_dir, owner, timezone, out, errors)
    return out


# The keys of a [[sources]] table: the common ones, the fan-out ones, then each kind's own
# options (its reader reads them). A key no kind knows (a typo of `enabled`, say) is a
# problem, never silently passed on.
SOURCE_KEYS = ("name", "kind", "path", "enabled", "owner", "timezone")
FAN_OUT_OPTIONS: dict[str, Kind] = {
    FAN_OUT_OPTION: enum_kind((FAN_OUT_SPEAKERS,)),
    "speakers": NAMES,
    "owner_prefix": OWNER_PREFIX,
}
# what every export reader reads (core/ingest/sources/exports.py): more names that mean the
# owner, and one conversation id for every file of the source
_EXPORT_OPTIONS: dict[str, Kind] = {"owner_aliases": NAMES, "conversation": TEXT}
_WHATSAPP_DATE_ORDER = enum_kind(("dmy", "mdy", "ymd"))
SOURCE_OPTIONS: dict[str, dict[str, Kind]] = {
    "line_json": {},
    "inbox": {"owner_aliases": NAMES},  # what apps posted (core/ingest/inbox.py)
    "line_txt": {},
    "locomo": {"turn_seconds": NON_NEGATIVE_NUMBER},
    "realpersonachat": {"dialogue_limit": int_kind(0, 10**12)},
    **{
        kind: dict(_EXPORT_OPTIONS)
        for kind in (
            "chatgpt",
            "claude",
            "discord",
            "imessage",
            "imessage_exporter",
            "instagram",
            "kakaotalk",
            "messenger",
            "signal",
            "slack",
            "sms_backup",
            "telegram",
        )
    },
    "line_pc": {**_EXPORT_OPTIONS, "members": NAMES},
    "whatsapp": {**_EXPORT_OPTIONS, "date_order": _WHATSAPP_DATE_ORDER},
    # auto hands each file to the reader of its format: it takes every reader's options
    "auto": {**_EXPORT_OPTIONS, "members": NAMES, "date_order": _WHATSAPP_DATE_ORDER},
}


def _read_source(
    i: int,
    src: Any,
    env: Mapping[str, str],
    base_dir: Path,
    owner: str,
    timezone: str,
    out: _Sources,
    errors: list[str],
) -> None:
    """Validate ``sources[i]`` and add it to ``out`` as a spec, a disabled name, or nothing.

    Every value is checked, also a disabled table's (a typo is a typo), but a disabled
    source's path need not exist: it may well point at data not present here.
    """
    where = f"sources[{i}]"
    if not isinstance(src, Mapping):
        errors.append(f"{where}: must be a table, not {_show(src)}")
        return
    name = src.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        errors.append(f"{where}.name: required, lowercase letters, digits and _")
        return
    where = f"sources[{i}] ({name})"
    if name in out.names:
        errors.append(f"{where}.name: duplicate source name")
    out.names.add(name)

    def read(key: str, kind: Kind, default: Any = None, **more: Any) -> Any:
        setting = Setting(None, key, kind, default, **more)
        return _read(setting, src, env, errors, where=f"{where}.{key}")

    kinds = tuple(sorted(READERS))
    kind = read("kind", enum_kind(kinds), required=True)
    path_env = f"{ENV_PREFIX}SOURCE_{_env_key(name)}_PATH"
    path_value = read("path", PATH, env=path_env, required=True)
    enabled = read("enabled", BOOL, True)
    src_owner = src.get("owner", owner)
    if "owner" in src:
        out.explicit_owner.add(name)
        if not isinstance(src_owner, str):
            errors.append(f"{where}.owner: {_show(src_owner)} is not a string ('' = nobody)")
    src_tz = read("timezone", TIMEZONE, timezone)
    options = {k: v for k, v in src.items() if k not in SOURCE_KEYS}
    known = {**FAN_OUT_OPTIONS, **SOURCE_OPTIONS.get(kind, {})} if kind else {}
    if kind:
        _unknown_keys(where, options, [*SOURCE_KEYS, *known], errors)
    for key, option_kind in known.items():
        read(key, option_kind)
    fan_out = FAN_OUT_OPTION in options
    if fan_out and kind and kind not in FAN_OUT_KINDS:
        errors.append(f"{where}.{FAN_OUT_OPTION}: only for kinds {sorted(FAN_OUT_KINDS)}")
    if path_value is None or kind is None:
        return
    if out.enabled_names is not None:
        enabled = name in out.enabled_names
    if not enabled:
        out.disabled.append(name)
        return
    path = (base_dir / path_value).resolve()
    try:
        exists = path.exists()
    except (OSError, ValueError):
        exists = False
    if not exists:
        errors.append(f"{where}.path: {path} does not exist")
    out.specs.append(
        SourceSpec(
            name=name,
            kind=kind,
            path=path,
            timezone=str(src_tz),
            # a fan-out source is read once for everyone: no owner filters the read
            owner=None if fan_out else (src_owner if isinstance(src_owner, str) else owner) or None,
            options=options,
        )
    )


def _fans_out(spec: SourceSpec) -> bool:
    return FAN_OUT_OPTION in spec.options


def fan_out_owner_id(spec: SourceSpec, speaker: str) -> str:
    """The owner id a speaker of a fan-out source gets (``owner_prefix`` + slug)."""
    return owner_slug(speaker, str(spec.options.get("owner_prefix", "")))


OWNER_KEYS = ("id", "owner", "sources")


def _owners(
    raw: Mapping[str, Any],
    env: Mapping[str, str],
    base_dir: Path,
    pipe: _PipelineValues,
    sources: _Sources,
    errors: list[str],
) -> list[OwnerSpec]:
    """[[owners]]: ``id`` (slug), ``owner`` (sender name) and ``sources`` (names of
    [[sources]] tables, or nested tables); nested sources join the configuration's sources.

    With owners listed, sources no owner names (and that do not fan out) belong to the
    [pipeline] owner, who is then one more owner (id ``[pipeline].owner_id``)."""
    raw_owners = raw.get("owners", [])
    if not isinstance(raw_owners, list):
        errors.append("[[owners]]: must be an array of tables")
        return []
    by_name = {s.name: s for s in sources.specs}
    top_level = list(sources.specs)
    claimed: set[str] = set()
    out: list[OwnerSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw_owners):
        where = f"owners[{i}]"
        if not isinstance(entry, Mapping):
            errors.append(f"{where}: must be a table")
            continue
        _unknown_keys(where, entry, OWNER_KEYS, errors)
        oid = entry.get("id")
        if not isinstance(oid, str) or not valid_owner_id(oid):
            errors.append(f"{where}.id: required, a slug like 'alice' ([a-z0-9][a-z0-9_-]{{0,63}})")
            continue
        where = f"owners[{i}] ({oid})"
        if oid in seen:
            errors.append(f"{where}.id: duplicate owner id")
        seen.add(oid)
        name = entry.get("owner")
        if not isinstance(name, str) or not name.strip():
            errors.append(f"{where}.owner: required, their sender name in the exports")
            continue
        name = name.strip()
        specs: list[SourceSpec] = []
        listed = entry.get("sources", [])
        if not isinstance(listed, list):
            errors.append(f"{where}.sources: a list of source names or source tables")
            listed = []
        for j, item in enumerate(listed):
            if isinstance(item, str):
                spec = by_name.get(item)
                if spec is None:
                    if item not in sources.disabled:
                        errors.append(f"{where}.sources[{j}]: unknown source {_show(item)}")
                    continue
                if _fans_out(spec):
                    errors.append(f"{where}.sources[{j}]: {item!r} fans out to its speakers")
                    continue
                claimed.add(item)
                if item not in sources.explicit_owner:
                    spec = replace(spec, owner=name)
                specs.append(spec)
            elif isinstance(item, Mapping):
                before = len(sources.specs)
                at = len(sources.names)
                _read_source(at, item, env, base_dir, name, pipe.timezone, sources, errors)
                specs.extend(sources.specs[before:])
            else:
                errors.append(f"{where}.sources[{j}]: a source name or a source table")
        out.append(OwnerSpec(oid, name, tuple(specs)))
    if out or any(_fans_out(s) for s in top_level):
        rest = [s for s in top_level if s.name not in claimed and not _fans_out(s)]
        if rest:
            if pipe.owner_id in seen:
                names = ", ".join(s.name for s in rest)
                errors.append(f"[[owners]]: sources {names} belong to no listed owner")
            else:
                out.append(OwnerSpec(pipe.owner_id, pipe.owner, tuple(rest)))
    return out


# [[contacts]]: key -> kind (docs/configuration.md lists them; a test checks it)
CONTACT_OPTIONS: dict[str, Kind] = {
    "id": SLUG,
    "names": NAMES,
    "phones": NAMES,
    "emails": NAMES,
    "handles": NAMES,
}


def _contacts(
    raw: Mapping[str, Any], env: Mapping[str, str], errors: list[str]
) -> list[ContactSpec]:
    """[[contacts]]: ``id`` (slug) and at least one of ``names``, ``phones``, ``emails``,
    ``handles``: every spelling of one person across apps, mapped to that id at ingest
    (core/common/contacts.py). A spelling listed under two ids is refused (which person
    would it be?)."""
    raw_contacts = raw.get("contacts", [])
    if not isinstance(raw_contacts, list):
        errors.append("[[contacts]]: must be an array of tables")
        return []
    out: list[ContactSpec] = []
    for i, entry in enumerate(raw_contacts):
        where = f"contacts[{i}]"
        if not isinstance(entry, Mapping):
            errors.append(f"{where}: must be a table")
            continue
        _unknown_keys(where, entry, list(CONTACT_OPTIONS), errors)

        def read(key: str, entry: Mapping[str, Any] = entry, where: str = where) -> Any:
            setting = Setting(None, key, CONTACT_OPTIONS[key], required=key == "id")
            return _read(setting, entry, env, errors, where=f"{where}.{key}")

        cid = read("id")
        lists = {k: read(k) or [] for k in ("names", "phones", "emails", "handles")}
        if cid is None:
            continue
        if not any(lists.values()):
            errors.append(f"{where} ({cid}): list at least one of names, phones, emails, handles")
            continue
        out.append(ContactSpec(cid, *(tuple(x.strip() for x in lists[k]) for k in lists)))
    ids = [c.id for c in out]
    errors.extend(
        f"[[contacts]]: duplicate contact id {cid!r}"
        for cid in sorted({c for c in ids if ids.count(c) > 1})
    )
    owners_of: dict[str, set[str]] = {}
    for c in out:
        for value in (*c.names, *c.phones, *c.emails, *c.handles):
            owners_of.setdefault(value.strip().casefold(), set()).add(c.id)
    for value, cids in sorted(owners_of.items()):
        if len(cids) > 1:
            errors.append(f"[[contacts]]: {value!r} is listed for {', '.join(sorted(cids))}")
    return out


def _evaluation_paths(
    raw: Mapping[str, Any], env: Mapping[str, str], base_dir: Path, errors: list[str]
) -> dict[str, Path | None]:
    """{"questions", "locomo"} -> resolved file path or None; a path that is not a file is a
    problem now rather than a failure at the end of a long run."""
    evaluation = _table(raw, "evaluation", errors)
    eval_paths: dict[str, Path | None] = {}
    for key in ("questions", "locomo"):
        value = _read(_BY_NAME["evaluation", key], evaluation, env, errors)
        path = eval_paths[key] = (base_dir / value).resolve() if value else None
        if path is None:
            continue
        try:
            is_file = path.is_file()
        except (OSError, ValueError):
            is_file = False
        if not is_file:
            errors.append(f"[evaluation].{key}: {path} is not a file")
    return eval_paths


def _check_sources_enabled(sources: _Sources, env: Mapping[str, str], errors: list[str]) -> None:
    """The checks over all sources, last: names in $MEMORY_PIPELINE_SOURCES that match no
    table, and (only when nothing else is wrong, as it is then the one real problem) no
    enabled source at all."""
    if sources.enabled_names is not None and (missing := sources.enabled_names - sources.names):
        errors.append(f"{ENV_PREFIX}SOURCES names unknown sources {sorted(missing)}")
    if not sources.specs and not errors:
        errors.append("[[sources]]: no source is enabled")
