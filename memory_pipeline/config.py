"""One validated configuration: a TOML file plus ``MEMORY_PIPELINE_*`` environment overrides.

Every problem is reported at once, naming the file and the key, so a user fixes their
config in one pass instead of one traceback at a time. No Dagster import: the CLI, the
Dagster definitions and the benchmarks all load the same object.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.owners import (
    DEFAULT_OWNER_ID,
    OwnerError,
    owner_dir,
    owner_slug,
    read_marker,
    resolve_owner_dir,
    valid_owner_id,
)
from memory_pipeline.core.common.owners import (
    discover_owner_ids as _discover_owner_ids,
)
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.indexes.tokenize import TOKENIZER_CHOICES
from memory_pipeline.core.ingest.sources import READERS, SourceSpec
from memory_pipeline.core.retrieval.config import PRESETS
from memory_pipeline.core.sessions.chunking import DEFAULT_SIZE, DEFAULT_STRIDE
from memory_pipeline.core.sessions.sessionize import MAX_GAP_MINUTES

# The representations embedded when [representations] dense is not set: the ones the recorded
# search selection (core/retrieval/selection.json) reads. Every shipped preset ranks dense by
# embedding_text, so embedding the other two tripled the build's dominant cost (the local
# embedder) for vectors no default search reads (issue 11: "one dense representation").
DEFAULT_DENSE: tuple[str, ...] = tuple(
    r for r in REPRESENTATIONS if any(p.uses_dense and p.dense_rep == r for p in PRESETS.values())
)

ENV_PREFIX = "MEMORY_PIPELINE_"
CONFIG_ENV = "MEMORY_PIPELINE_CONFIG"
DEFAULT_CONFIG_NAME = "memory_pipeline.toml"


class ConfigError(ValueError):
    """The configuration is invalid; the message lists every problem found."""


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


@dataclass(frozen=True)
class PipelineConfig:
    """Everything a run needs to know, resolved to absolute paths.

    ``output_dir`` is always a local folder: the output itself, or, when the configured
    output is on object storage (``output_uri``, ``s3://bucket/prefix``), the local working
    folder for derived, rebuildable state (provider cache, DuckDB warehouse, evaluation
    reports). ``storage_root`` is where the storage of record lives: hand it to
    ``TableStore``, ``index_root`` and the privacy functions.
    """

    owner: str
    timezone: str
    start_date: dt.date
    end_date: dt.date | None
    output_dir: Path
    sources: tuple[SourceSpec, ...]
    session_gap_minutes: int = 180
    chunk_size: int = DEFAULT_SIZE
    chunk_stride: int = DEFAULT_STRIDE
    config_path: Path | None = None
    disabled_sources: tuple[str, ...] = field(default=())
    dense_representations: tuple[str, ...] = DEFAULT_DENSE
    tokenizer: str = "auto"  # BM25 analyzer: one of TOKENIZER_CHOICES
    hnsw_threshold: int = 50_000  # exact dense search below this many vectors, HNSW above
    eval_questions: Path | None = None  # the user's labelled JSONL questions
    eval_locomo: Path | None = None  # a LoCoMo-format file to benchmark against
    dossier_dir: Path | None = None  # where the current dossiers go as <contact>.md
    retain_days: int | None = None  # [privacy]: purge partitions older than this; None = keep all
    output_uri: str | None = None  # s3://bucket/prefix when the outputs are on object storage
    owner_id: str = DEFAULT_OWNER_ID  # this configuration's owner (single owner, or one owner)
    owners: tuple[OwnerSpec, ...] = ()  # [[owners]]: a multi-owner deployment's listed owners
    fan_out_sources: tuple[SourceSpec, ...] = ()  # sources with owners = "speakers"
    root_dir: Path | None = None  # an owner's config: the deployment's output_dir

    @property
    def multi_owner(self) -> bool:
        """Several owners (listed or fanned out): outputs go under ``owners/<owner_id>/``."""
        return bool(self.owners or self.fan_out_sources)

    def for_owner(self, spec: OwnerSpec) -> PipelineConfig:
        """The configuration of one owner: their sources, their folder for every output.

        Evaluation questions are the deployment's, not an owner's, so they are dropped."""
        folder = owner_dir(self.output_dir, spec.id)
        return replace(
            self,
            owner=spec.owner,
            owner_id=spec.id,
            sources=spec.sources,
            output_dir=folder,
            dossier_dir=None if self.output_uri else folder / "dossiers",
            owners=(),
            fan_out_sources=(),
            root_dir=self.output_dir,
            # on object storage the owner's records live under <output_uri>/owners/<id>
            output_uri=fs.join(self.output_uri, "owners", spec.id) if self.output_uri else None,
            eval_questions=None,
            eval_locomo=None,
        )

    def owner_specs(self) -> list[OwnerSpec]:
        """Every owner: the listed ones, then those a fan-out source created on disk."""
        listed = {o.id: o for o in self.owners}
        if not self.fan_out_sources:
            return list(listed.values())
        names = tuple(s.name for s in self.fan_out_sources)
        for oid in _discover_owner_ids(self.output_dir):
            if oid in listed:
                continue
            marker = read_marker(owner_dir(self.output_dir, oid)) or {}
            listed[oid] = OwnerSpec(oid, str(marker.get("owner") or oid), (), names)
        return list(listed.values())

    @property
    def storage_root(self) -> Path | str:
        """Where tables, index versions and the forget list live: the URI, else output_dir."""
        return self.output_uri or self.output_dir

    @property
    def dossiers_path(self) -> Path | str:
        """The configured folder, else ``dossiers/`` beside the output folder (data/dossiers);
        on object storage ``<output_uri>/dossiers``."""
        if self.dossier_dir:
            return self.dossier_dir
        if self.output_uri:
            return fs.join(self.output_uri, "dossiers")
        return self.output_dir.parent / "dossiers"

    @property
    def cache_path(self) -> Path:
        """The content-addressed provider cache, shared by every partition and run."""
        return self.output_dir / "cache" / "provider_cache.sqlite"

    @property
    def warehouse_path(self) -> Path:
        return self.output_dir / "warehouse.duckdb"


def find_config_file(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """Explicit path, else $MEMORY_PIPELINE_CONFIG, else ./memory_pipeline.toml."""
    env = os.environ if env is None else env
    candidate = explicit or env.get(CONFIG_ENV) or DEFAULT_CONFIG_NAME
    path = Path(candidate).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(
            f"config file not found: {path}; run from the repository root, pass --config, or set "
            f"{CONFIG_ENV}=/path/to/{DEFAULT_CONFIG_NAME}"
        )
    return path


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> PipelineConfig:
    """Read, override from the environment, validate; raise ConfigError listing all problems."""
    env = os.environ if env is None else env
    file = find_config_file(path, env)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read config: {exc}") from None
    return parse_config(raw, base_dir=file.parent, env=env, origin=str(file))


def _env_key(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


# [pipeline] keys; each can be overridden by MEMORY_PIPELINE_<KEY>
PIPELINE_KEYS = (
    "owner",
    "owner_id",
    "timezone",
    "start_date",
    "end_date",
    "output_dir",
    "session_gap_minutes",
    "chunk_size",
    "chunk_stride",
    "dossier_dir",
    "work_dir",
)
# a tokenizer name as [retrieval].tokenizer accepts it: one of the indexes' tokenizers, or auto
TOKENIZERS = frozenset(TOKENIZER_CHOICES)


def parse_config(
    raw: Mapping[str, Any],
    *,
    base_dir: Path,
    env: Mapping[str, str] | None = None,
    origin: str = "<config>",
) -> PipelineConfig:
    """Validate a parsed TOML mapping (see memory_pipeline.toml for every key).

    Each section is read by its own function that appends its problems to one list instead
    of raising, in the order of the file, so the user sees every problem of every section in
    one message; only then is the config built.
    """
    env = {} if env is None else env
    errors: list[str] = []
    pipe = _pipeline_values(raw, env, base_dir, errors)
    sources = _sources(raw, env, base_dir, pipe.owner, pipe.timezone, errors)
    owners = _owners(raw, env, base_dir, pipe.timezone, sources, errors)
    dense = _dense_representations(raw, env, errors)
    tokenizer, hnsw_threshold = _retrieval(raw, env, errors)
    eval_paths = _evaluation_paths(raw, env, base_dir, errors)
    retain_days = _privacy(raw, env, errors)
    _check_sources_enabled(sources, env, errors)
    if errors:
        raise ConfigError(f"invalid configuration in {origin}:\n  - " + "\n  - ".join(errors))
    assert pipe.start is not None
    return PipelineConfig(
        owner=pipe.owner,
        timezone=pipe.timezone,
        start_date=pipe.start,
        end_date=pipe.end,
        output_dir=pipe.output_dir.resolve(),
        output_uri=pipe.output_uri,
        sources=tuple(sources.specs),
        session_gap_minutes=pipe.gap,
        chunk_size=pipe.size,
        chunk_stride=pipe.stride,
        config_path=Path(origin) if origin != "<config>" else None,
        disabled_sources=tuple(sources.disabled),
        dense_representations=tuple(r for r in REPRESENTATIONS if r in dense),
        tokenizer=tokenizer,
        hnsw_threshold=hnsw_threshold,
        eval_questions=eval_paths["questions"],
        eval_locomo=eval_paths["locomo"],
        dossier_dir=pipe.dossier_dir,
        retain_days=retain_days,
        owner_id=pipe.owner_id,
        owners=tuple(owners),
        fan_out_sources=tuple(s for s in sources.specs if _fans_out(s)),
    )


@dataclass(frozen=True)
class _PipelineValues:
    """The [pipeline] section, validated: a bad value is replaced by a harmless default (its
    problem is already listed) so the other sections can still be checked against it."""

    owner: str
    owner_id: str
    timezone: str
    start: dt.date | None
    end: dt.date | None
    output_dir: Path  # not resolved yet (PipelineConfig gets the resolved path)
    output_uri: str | None  # s3://... output; output_dir is then the local working folder
    dossier_dir: Path | None
    gap: int
    size: int
    stride: int


def _pipeline_values(
    raw: Mapping[str, Any], env: Mapping[str, str], base_dir: Path, errors: list[str]
) -> _PipelineValues:
    """[pipeline] with its environment overrides applied, each value checked alone, then the
    checks between values (end after start, stride within size)."""
    pipe = dict(raw.get("pipeline", {}))
    for key in PIPELINE_KEYS:
        if (value := env.get(ENV_PREFIX + key.upper())) is not None:
            pipe[key] = value
    unknown = set(pipe) - set(PIPELINE_KEYS)
    if unknown:
        errors.append(f"[pipeline]: unknown keys {sorted(unknown)}")

    owner = _required_str(pipe, "owner", errors)
    owner_id = str(pipe.get("owner_id", DEFAULT_OWNER_ID)).strip()
    if not valid_owner_id(owner_id):
        errors.append(
            f"[pipeline].owner_id: {owner_id!r} is not a slug like 'yuki' "
            "([a-z0-9][a-z0-9_-]{0,63})"
        )
        owner_id = DEFAULT_OWNER_ID
    timezone = _required_str(pipe, "timezone", errors)
    if timezone:
        try:
            zone(timezone)
        except ValueError:
            errors.append(f"[pipeline].timezone: unknown IANA timezone {timezone!r}")
    start = _date(pipe, "start_date", True, errors)
    end = _date(pipe, "end_date", False, errors)
    if start and end and end < start:
        errors.append(f"[pipeline].end_date: {end} is before start_date {start}")
    output_dir, output_uri = _output(pipe, base_dir, errors)
    dossier_dir = None
    if pipe.get("dossier_dir"):
        value = str(pipe["dossier_dir"])
        if fs.is_remote(value):
            errors.append(
                "[pipeline].dossier_dir: an s3:// dossier folder is the default "
                "(<output_dir>/dossiers) when output_dir is on object storage"
            )
        else:
            dossier_dir = (base_dir / value).resolve()
    gap = _int_in_range(pipe, "session_gap_minutes", 180, 1, MAX_GAP_MINUTES, errors)
    size = _int_in_range(pipe, "chunk_size", DEFAULT_SIZE, 1, 10_000, errors)
    stride = _int_in_range(pipe, "chunk_stride", DEFAULT_STRIDE, 1, 10_000, errors)
    if stride > size:
        errors.append(f"[pipeline].chunk_stride: {stride} > chunk_size {size} would skip messages")
    return _PipelineValues(
        owner, owner_id, timezone, start, end, output_dir, output_uri, dossier_dir, gap, size,
        stride,
    )


def _output(pipe: Mapping[str, Any], base_dir: Path, errors: list[str]) -> tuple[Path, str | None]:
    """(local folder, object-storage URI or None) of ``output_dir``.

    A local output is its own working folder (unchanged behaviour; ``work_dir`` is not
    used). An ``s3://bucket/prefix`` output keeps its derived state in ``work_dir``
    (relative to the config file), by default a cache folder keyed by the URI."""
    value = str(pipe.get("output_dir", "data/output"))
    if not fs.is_remote(value):
        return base_dir / value, None
    uri = str(fs.normalize(value))
    if problem := fs.check_uri(uri):
        errors.append(f"[pipeline].output_dir: {problem}")
    work = pipe.get("work_dir")
    return (base_dir / str(work)) if work else fs.cache_dir(uri) / "work", uri


def _required_str(pipe: Mapping[str, Any], key: str, errors: list[str]) -> str:
    """The stripped value of a required [pipeline] string; "" (and a problem) when absent."""
    value = pipe.get(key)
    if not isinstance(value, str) or not value.strip():
        errors.append(f"[pipeline].{key}: required, a non-empty string")
        return ""
    return value.strip()


def _date(pipe: Mapping[str, Any], key: str, required: bool, errors: list[str]) -> dt.date | None:
    """A [pipeline] date: a TOML date as is, a string parsed as ISO (environment values are
    strings); None (and a problem unless optional and absent) otherwise."""
    value = pipe.get(key)
    if value is None:
        if required:
            errors.append(f"[pipeline].{key}: required, a date like 2024-03-01")
        return None
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        errors.append(f"[pipeline].{key}: {value!r} is not a date like 2024-03-01")
        return None


def _int_in_range(
    pipe: Mapping[str, Any], key: str, default: int, lo: int, hi: int, errors: list[str]
) -> int:
    """A [pipeline] integer (environment strings converted); out of range is a problem but
    the number is kept, so the stride/size check still compares the values the user gave."""
    value = pipe.get(key, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        errors.append(f"[pipeline].{key}: {value!r} is not an integer")
        return default
    if not lo <= number <= hi:
        errors.append(f"[pipeline].{key}: {number} is outside {lo}..{hi}")
    return number


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


def _read_source(
    i: int,
    src: Mapping[str, Any],
    env: Mapping[str, str],
    base_dir: Path,
    owner: str,
    timezone: str,
    out: _Sources,
    errors: list[str],
) -> None:
    """Validate ``sources[i]`` and add it to ``out`` as a spec, a disabled name, or nothing.

    A disabled source's path is not checked: it may well point at data not present here.
    """
    where = f"sources[{i}]"
    name = src.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name or ""):
        errors.append(f"{where}.name: required, lowercase letters, digits and _")
        return
    where = f"sources[{i}] ({name})"
    if name in out.names:
        errors.append(f"{where}.name: duplicate source name")
    out.names.add(name)
    if "owner" in src:
        out.explicit_owner.add(name)
    kind = src.get("kind")
    if kind not in READERS:
        errors.append(f"{where}.kind: {kind!r} is not one of {sorted(READERS)}")
    path_value = env.get(f"{ENV_PREFIX}SOURCE_{_env_key(name)}_PATH", src.get("path"))
    if not path_value:
        errors.append(f"{where}.path: required")
        return
    if out.enabled_names is None:
        enabled = bool(src.get("enabled", True))
    else:
        enabled = name in out.enabled_names
    if not enabled:
        out.disabled.append(name)
        return
    path = (base_dir / str(path_value)).resolve()
    if not path.exists():
        errors.append(f"{where}.path: {path} does not exist")
    src_tz = src.get("timezone", timezone)
    if src_tz != timezone:
        try:
            zone(src_tz)
        except ValueError:
            errors.append(f"{where}.timezone: unknown IANA timezone {src_tz!r}")
    options = {
        k: v
        for k, v in src.items()
        if k not in {"name", "kind", "path", "enabled", "owner", "timezone"}
    }
    fan_out = FAN_OUT_OPTION in options
    if fan_out:
        _check_fan_out(where, str(kind), options, errors)
    out.specs.append(
        SourceSpec(
            name=name,
            kind=str(kind),
            path=path,
            timezone=str(src_tz),
            # a fan-out source is read once for everyone: no owner filters the read
            owner=None if fan_out else (src.get("owner", owner) or None),
            options=options,
        )
    )


def _fans_out(spec: SourceSpec) -> bool:
    return FAN_OUT_OPTION in spec.options


def _check_fan_out(where: str, kind: str, options: Mapping[str, Any], errors: list[str]) -> None:
    """``owners = "speakers"`` (optionally ``speakers = [...]``, ``owner_prefix = "..."``) on
    a corpus whose dialogues name their speakers."""
    if options[FAN_OUT_OPTION] != FAN_OUT_SPEAKERS:
        errors.append(f"{where}.{FAN_OUT_OPTION}: must be {FAN_OUT_SPEAKERS!r}")
    if kind not in FAN_OUT_KINDS:
        errors.append(f"{where}.{FAN_OUT_OPTION}: only for kinds {sorted(FAN_OUT_KINDS)}")
    speakers = options.get("speakers")
    if speakers is not None and not (
        isinstance(speakers, list) and speakers and all(isinstance(x, str) for x in speakers)
    ):
        errors.append(f"{where}.speakers: a non-empty list of speaker ids")
    prefix = options.get("owner_prefix", "")
    if not isinstance(prefix, str) or (prefix and not valid_owner_id(prefix + "x")):
        errors.append(f"{where}.owner_prefix: lowercase letters, digits, _ and -")


def fan_out_owner_id(spec: SourceSpec, speaker: str) -> str:
    """The owner id a speaker of a fan-out source gets (``owner_prefix`` + slug)."""
    return owner_slug(speaker, str(spec.options.get("owner_prefix", "")))


OWNER_KEYS = frozenset({"id", "owner", "sources"})


def _owners(
    raw: Mapping[str, Any],
    env: Mapping[str, str],
    base_dir: Path,
    timezone: str,
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
        unknown = set(entry) - OWNER_KEYS
        if unknown:
            errors.append(f"{where}: unknown keys {sorted(unknown)}")
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
                        errors.append(f"{where}.sources[{j}]: unknown source {item!r}")
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
                _read_source(at, item, env, base_dir, name, timezone, sources, errors)
                specs.extend(sources.specs[before:])
            else:
                errors.append(f"{where}.sources[{j}]: a source name or a source table")
        out.append(OwnerSpec(oid, name, tuple(specs)))
    if out or any(_fans_out(s) for s in top_level):
        rest = [s for s in top_level if s.name not in claimed and not _fans_out(s)]
        if rest:
            pipe = raw.get("pipeline", {})
            pid = str(env.get(ENV_PREFIX + "OWNER_ID", pipe.get("owner_id", DEFAULT_OWNER_ID)))
            pname = str(env.get(ENV_PREFIX + "OWNER", pipe.get("owner", ""))).strip()
            if pid in seen:
                names = ", ".join(s.name for s in rest)
                errors.append(f"[[owners]]: sources {names} belong to no listed owner")
            else:
                out.append(OwnerSpec(pid, pname, tuple(rest)))
    return out


def _dense_representations(
    raw: Mapping[str, Any], env: Mapping[str, str], errors: list[str]
) -> list[str]:
    """The representations to embed ($MEMORY_PIPELINE_DENSE_REPRESENTATIONS, comma separated,
    wins; unset: ``DEFAULT_DENSE``, the ones the default search reads); a problem when the
    value is not a subset of the representations."""
    reps = raw.get("representations", {})
    dense_value = env.get(ENV_PREFIX + "DENSE_REPRESENTATIONS")
    dense = (
        [v.strip() for v in dense_value.split(",") if v.strip()]
        if dense_value is not None
        else reps.get("dense", list(DEFAULT_DENSE))
    )
    if not isinstance(dense, list) or not set(dense) <= set(REPRESENTATIONS):
        errors.append(f"[representations].dense: {dense!r} must be a subset of {REPRESENTATIONS}")
        dense = list(DEFAULT_DENSE)
    return dense


def _retrieval(
    raw: Mapping[str, Any], env: Mapping[str, str], errors: list[str]
) -> tuple[str, int]:
    """(tokenizer, hnsw_threshold) of [retrieval]; the tokenizer is checked here, against the
    names the indexes know, so a typo fails at load time and not in the first index build."""
    retrieval = raw.get("retrieval", {})
    tokenizer = str(env.get(ENV_PREFIX + "TOKENIZER", retrieval.get("tokenizer", "auto")))
    if tokenizer not in TOKENIZERS:
        errors.append(f"[retrieval].tokenizer: {tokenizer!r} is not a known tokenizer")
    try:
        hnsw_threshold = int(retrieval.get("hnsw_threshold", 50_000))
    except (TypeError, ValueError):
        errors.append("[retrieval].hnsw_threshold: must be an integer")
        hnsw_threshold = 50_000
    return tokenizer, hnsw_threshold


def _evaluation_paths(
    raw: Mapping[str, Any], env: Mapping[str, str], base_dir: Path, errors: list[str]
) -> dict[str, Path | None]:
    """{"questions", "locomo"} -> resolved file path or None; a path that is not a file is a
    problem now rather than a failure at the end of a long run."""
    evaluation = raw.get("evaluation", {})
    eval_paths: dict[str, Path | None] = {}
    for key in ("questions", "locomo"):
        value = env.get(f"{ENV_PREFIX}EVAL_{key.upper()}", evaluation.get(key))
        eval_paths[key] = (base_dir / str(value)).resolve() if value else None
        if eval_paths[key] is not None and not eval_paths[key].is_file():
            errors.append(f"[evaluation].{key}: {eval_paths[key]} is not a file")
    return eval_paths


PRIVACY_KEYS = ("retain_days",)
MAX_RETAIN_DAYS = 365_000  # a thousand years: anything larger is a typo, not a policy


def _privacy(raw: Mapping[str, Any], env: Mapping[str, str], errors: list[str]) -> int | None:
    """``[privacy] retain_days`` (env ``MEMORY_PIPELINE_RETAIN_DAYS``): None when unset.

    Retention deletes data, so a value that is not a whole number of days >= 1 is a problem
    at load time, never silently "keep everything" or "keep nothing". An empty environment
    value switches retention off (how a user overrides a file that sets it).
    """
    privacy = raw.get("privacy", {})
    if not isinstance(privacy, Mapping):
        errors.append("[privacy]: must be a table")
        return None
    unknown = set(privacy) - set(PRIVACY_KEYS)
    if unknown:
        errors.append(f"[privacy]: unknown keys {sorted(unknown)}")
    value = env.get(ENV_PREFIX + "RETAIN_DAYS", privacy.get("retain_days"))
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        errors.append(f"[privacy].retain_days: {value!r} is not an integer")
        return None
    try:
        days = int(value)
    except (TypeError, ValueError):
        errors.append(f"[privacy].retain_days: {value!r} is not an integer")
        return None
    if not 1 <= days <= MAX_RETAIN_DAYS:
        errors.append(f"[privacy].retain_days: {days} is outside 1..{MAX_RETAIN_DAYS}")
        return None
    return days


def _check_sources_enabled(sources: _Sources, env: Mapping[str, str], errors: list[str]) -> None:
    """The checks over all sources, last: names in $MEMORY_PIPELINE_SOURCES that match no
    table, and (only when nothing else is wrong, as it is then the one real problem) no
    enabled source at all."""
    if sources.enabled_names is not None and (missing := sources.enabled_names - sources.names):
        errors.append(f"{ENV_PREFIX}SOURCES names unknown sources {sorted(missing)}")
    if not sources.specs and not errors:
        errors.append("[[sources]]: no source is enabled")


def with_overrides(cfg: PipelineConfig, **changes: Any) -> PipelineConfig:
    """A copy with some fields replaced (tests and benchmarks)."""
    return replace(cfg, **changes)


def with_output(
    cfg: PipelineConfig, output: str | os.PathLike[str], work_dir: str | None = None
) -> PipelineConfig:
    """A copy writing to another output: a local folder, or an ``s3://`` URI (whose local
    working folder is ``work_dir``, default a cache folder keyed by the URI)."""
    value = os.fspath(output)
    if fs.is_remote(value):
        uri = str(fs.normalize(value))
        if problem := fs.check_uri(uri):
            raise ConfigError(f"output_dir: {problem}")
        if work_dir:
            work = Path(work_dir).resolve()
        elif uri == cfg.output_uri:  # the configured bucket: keep its configured work_dir
            work = cfg.output_dir
        else:
            work = fs.cache_dir(uri) / "work"
        return replace(cfg, output_dir=work, output_uri=uri)
    return replace(cfg, output_dir=Path(value).resolve(), output_uri=None)


def object_store_options(env: Mapping[str, str] | None = None) -> fs.S3Options:
    """The S3 endpoint and credentials from the standard AWS variables (the CLI and the
    app API; Dagster reads the same variables through ``ObjectStoreResource``)."""
    env = os.environ if env is None else env
    return fs.S3Options(
        endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
        access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
        secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
    )
def owner_config(cfg: PipelineConfig, owner: str | None) -> PipelineConfig:
    """The configuration of ``owner`` (their folder for every output), or ``cfg`` itself in a
    single-owner deployment; raises ``OwnerError`` (a ValueError listing the owners) when
    ``owner`` is missing among several or unknown."""
    root = cfg.storage_root  # a local folder, or the s3:// prefix (its owners/ listed there)
    mine = cfg.owner_id if cfg.output_uri and not cfg.multi_owner else None
    folder = resolve_owner_dir(root, owner, owner_id=mine)
    if folder == root or owner is None:
        if owner is not None and cfg.multi_owner:  # no owner built yet
            raise OwnerError(f"unknown owner {owner!r} in {root}: no owner has outputs yet")
        return cfg
    spec = next((s for s in cfg.owner_specs() if s.id == owner), None)
    if spec is None:
        marker = read_marker(owner_dir(cfg.output_dir, owner)) or {}
        spec = OwnerSpec(owner, str(marker.get("owner") or owner))
    return cfg.for_owner(spec)
