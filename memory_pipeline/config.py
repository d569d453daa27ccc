"""One validated configuration: a TOML file plus ``MEMORY_PIPELINE_*`` environment overrides.

Every problem is reported at once, naming the file and the key, so a user fixes their
config in one pass instead of one traceback at a time. No Dagster import: the CLI, the
Dagster definitions and the benchmarks all load the same object.

This module holds ``PipelineConfig``, loading and parsing; the typed settings and their
readers are in ``config_settings`` and the sources, owners and contacts tables in
``config_sources``. The names other code uses are re-exported here.
"""

from __future__ import annotations

import datetime as dt
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_pipeline.config_settings import (
    _BY_NAME,
    BOOL,
    DATE,
    DEFAULT_DENSE,
    ENV_PREFIX,
    FALSE_WORDS,
    MAX_RETAIN_DAYS,
    NAMES,
    NON_NEGATIVE_NUMBER,
    OPEN_START,
    OWNER_PREFIX,
    PATH,
    PIPELINE_KEYS,
    REDACT,
    REDACT_WORDS,
    SECTIONS,
    SETTINGS,
    SLUG,
    TEXT,
    TIMEZONE,
    TOKENIZERS,
    TRUE_WORDS,
    URL,
    Kind,
    Setting,
    _pipeline_values,
    _read,
    _table,
    _unknown_keys,
    enum_kind,
    int_kind,
    subset_kind,
)
from memory_pipeline.config_sources import (
    CONTACT_OPTIONS,
    FAN_OUT_KINDS,
    FAN_OUT_OPTION,
    FAN_OUT_OPTIONS,
    FAN_OUT_SPEAKERS,
    OWNER_KEYS,
    SOURCE_KEYS,
    SOURCE_OPTIONS,
    OwnerSpec,
    _check_sources_enabled,
    _contacts,
    _evaluation_paths,
    _fans_out,
    _owners,
    _sources,
    fan_out_owner_id,
)
from memory_pipeline.core.common import fs
from memory_pipeline.core.common.contacts import ContactSpec
from memory_pipeline.core.common.owners import (
    DEFAULT_OWNER_ID,
    OwnerError,
    owner_dir,
    read_marker,
    resolve_owner_dir,
)
from memory_pipeline.core.common.owners import discover_owner_ids as _discover_owner_ids
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.ingest.inbox import configured_inbox, inbox_dir, with_inbox
from memory_pipeline.core.ingest.sources import SourceSpec
from memory_pipeline.core.sessions.chunking import DEFAULT_SIZE, DEFAULT_STRIDE

__all__ = [
    "BOOL",
    "CONFIG_ENV",
    "CONTACT_OPTIONS",
    "ConfigError",
    "DATE",
    "DEFAULT_CONFIG_NAME",
    "DEFAULT_DENSE",
    "ENV_PREFIX",
    "FALSE_WORDS",
    "FAN_OUT_KINDS",
    "FAN_OUT_OPTION",
    "FAN_OUT_OPTIONS",
    "FAN_OUT_SPEAKERS",
    "Kind",
    "MAX_RETAIN_DAYS",
    "NAMES",
    "NON_NEGATIVE_NUMBER",
    "OPEN_START",
    "OWNER_KEYS",
    "OWNER_PREFIX",
    "OwnerSpec",
    "PATH",
    "PIPELINE_KEYS",
    "PipelineConfig",
    "ProviderSettings",
    "REDACT",
    "REDACT_WORDS",
    "SECTIONS",
    "SETTINGS",
    "SLUG",
    "SOURCE_KEYS",
    "SOURCE_OPTIONS",
    "Setting",
    "SourceSpec",
    "TEXT",
    "TIMEZONE",
    "TOKENIZERS",
    "TRUE_WORDS",
    "URL",
    "enum_kind",
    "fan_out_owner_id",
    "find_config_file",
    "int_kind",
    "load_config",
    "object_store_options",
    "owner_config",
    "parse_config",
    "provider_settings",
    "subset_kind",
    "with_output",
    "with_overrides",
]

CONFIG_ENV = "MEMORY_PIPELINE_CONFIG"
DEFAULT_CONFIG_NAME = "memory_pipeline.toml"


class ConfigError(ValueError):
    """The configuration is invalid; the message lists every problem found, on one line.

    One line because the CLI prints it as ``error: <message>`` and a log or a terminal shows
    the line that names the key; a value quoted from the file or the environment (a path with
    a newline in it, say) is escaped rather than allowed to break it."""

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


def _one_line(text: str) -> str:
    """``text`` with every line break (as ``str.splitlines`` sees them) escaped."""
    if len(text.splitlines()) <= 1 and not text.endswith(("\n", "\r")):
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if len(f"a{ch}b".splitlines()) > 1 else ch
        for ch in text
    )


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
    start_date: dt.date  # the first calendar partition (OPEN_START when the config leaves it out)
    end_date: dt.date | None  # None: live, the calendar runs on to yesterday
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
    contacts: tuple[ContactSpec, ...] = ()  # [[contacts]]: one person's spellings across apps
    # [pipeline] state_dir as configured (None: ``state/`` beside the output, see state_root)
    state_dir: Path | str | None = None
    local_state: Path | None = None  # an owner's config: the deployment's local state folder

    def __post_init__(self) -> None:
        # the owner's inbox (apps post messages: core/ingest/inbox.py) is one more source
        # once it exists; recomputed on every copy, so a changed output folder follows
        # (in the owner's local state; an older release's <output>/inbox counts until the
        # state helper moves it: memory_pipeline/state.py)
        if not (self.owners or self.fan_out_sources):
            try:
                home = self.owner_state_dir
            except ConfigError:  # a whole bucket without state_dir: load_config refuses it
                return
            sources = with_inbox(
                self.sources, home, self.timezone, self.owner, legacy=self.output_dir
            )
            object.__setattr__(self, "sources", sources)

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
            # each owner's forget list and salt: <state>/owners/<id>, as their outputs
            state_dir=fs.join(self.state_root, "owners", spec.id),
            local_state=self.local_state_dir,
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
    def state_root(self) -> Path | str:
        """Where what cannot be rebuilt lives (docs/state-and-backup.md): the configured
        ``state_dir``, else a ``state`` folder beside the output (``data/state`` for
        ``data/output``); for an ``s3://bucket/prefix`` output ``s3://bucket/state``, on the
        same store, so every worker honours one forget list."""
        if self.state_dir is not None:
            return self.state_dir
        return default_state_dir(self.storage_root)

    @property
    def local_state_dir(self) -> Path:
        """The local part of the state (the service's key file, the Dagster instance): the
        state folder itself when it is local, else ``state/`` beside the config file."""
        if self.local_state is not None:
            return self.local_state
        root = self.state_root
        if not fs.is_remote(root):
            return Path(root)
        base = self.config_path.parent if self.config_path else Path.cwd()
        return base / "state"

    @property
    def owner_state_dir(self) -> Path:
        """This owner's local state folder (the inbox's home): the state folder when it is
        local (``<state>/owners/<id>`` for one owner of several), else the local state
        folder (``<local state>/owners/<id>``)."""
        root = self.state_root
        if not fs.is_remote(root):
            return Path(root)
        base = self.local_state_dir
        return base / "owners" / self.owner_id if self.root_dir is not None else base

    @property
    def inbox_path(self) -> Path:
        """The owner's inbox: a configured ``kind = "inbox"`` source's folder, else
        ``<owner's local state>/inbox`` (core/ingest/inbox.py; it may not exist yet)."""
        spec = configured_inbox(self.sources)
        return Path(spec.path) if spec is not None else inbox_dir(self.owner_state_dir)

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


def default_state_dir(output: Path | str) -> Path | str:
    """``state`` beside ``output``: ``<parent>/state`` (a local folder or an ``s3://`` prefix).
    A bucket's root has no parent: there the state folder must be configured."""
    if fs.is_remote(output):
        text = str(output).rstrip("/")
        head, _, tail = text[len("s3://") :].rpartition("/")
        if not head:
            raise ConfigError(
                f"[pipeline].state_dir: the output {text} is a whole bucket; set state_dir to "
                "a prefix outside it (the state must survive deleting the output)"
            )
        return f"s3://{head}/state"
    return Path(output).parent / "state"


def find_config_file(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """Explicit path, else $MEMORY_PIPELINE_CONFIG, else ./memory_pipeline.toml."""
    env = os.environ if env is None else env
    candidate = os.fspath(explicit or env.get(CONFIG_ENV) or DEFAULT_CONFIG_NAME)
    try:
        if "\x00" in candidate:
            raise ValueError("a NUL character")
        path = Path(candidate).expanduser().resolve()
        found = path.is_file()
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: ~ without a home
        raise ConfigError(f"config file {candidate!r} is not a usable path: {exc}") from None
    if not found:
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
    # ValueError: tomllib's int() of an integer beyond Python's digit limit; RecursionError:
    # arrays nested thousands deep. Both are a file that is not a config, not a crash.
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{file}: cannot read config: {exc}") from None
    return parse_config(raw, base_dir=file.parent, env=env, origin=str(file))


@dataclass(frozen=True)
class ProviderSettings:
    """The provider variables, validated (``defs.providers`` builds its resources from it)."""

    embedder: str = "local"
    embedding_model: str | None = None
    embedding_dimensions: int | None = None
    summarizer: str = "extractive"
    llm_model: str | None = None
    llm_base_url: str | None = None
    memory_extractor: str = "rules"
    dossier_writer: str = "rules"
    dossier_model: str | None = None
    query_rewriter: str = "rules"
    redact: str = "auto"  # auto | on | off
    dask_scheduler: str | None = None
    dask_workers: int = 0

    @property
    def redact_flag(self) -> bool | None:
        """None for auto (on for remote providers), else on/off as a bool."""
        return None if self.redact == "auto" else self.redact == "on"


def _provider_values(env: Mapping[str, str], errors: list[str]) -> ProviderSettings:
    """Every environment-only setting (the providers and the Dask cluster), read."""
    values = {s.key: _read(s, {}, env, errors) for s in SETTINGS if s.section is None}
    return ProviderSettings(**values)


def provider_settings(env: Mapping[str, str] | None = None) -> ProviderSettings:
    """The provider variables of ``env`` (default: the process environment); a ConfigError in
    one line naming every variable whose value is outside its documented set."""
    env = os.environ if env is None else env
    errors: list[str] = []
    settings = _provider_values(env, errors)
    if errors:
        raise ConfigError("invalid environment: " + "; ".join(errors))
    return settings


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
    one message (one line); only then is the config built. The provider variables are
    checked here too, so a bad one stops every command before anything runs.
    """
    env = {} if env is None else env
    errors: list[str] = []
    _unknown_keys("config", raw, SECTIONS, errors)
    pipe = _pipeline_values(raw, env, base_dir, errors)
    sources = _sources(raw, env, base_dir, pipe.owner, pipe.timezone, errors)
    owners = _owners(raw, env, base_dir, pipe, sources, errors)
    contacts = _contacts(raw, env, errors)
    dense = _read(
        _BY_NAME["representations", "dense"], _table(raw, "representations", errors), env, errors
    )
    retrieval = _table(raw, "retrieval", errors)
    tokenizer = _read(_BY_NAME["retrieval", "tokenizer"], retrieval, env, errors)
    hnsw_threshold = _read(_BY_NAME["retrieval", "hnsw_threshold"], retrieval, env, errors)
    eval_paths = _evaluation_paths(raw, env, base_dir, errors)
    retain_days = _read(
        _BY_NAME["privacy", "retain_days"], _table(raw, "privacy", errors), env, errors
    )
    _check_sources_enabled(sources, env, errors)
    _provider_values(env, errors)
    _check_state_dir(pipe.state_dir, pipe.output_uri or pipe.output_dir.resolve(), errors)
    if errors:
        raise ConfigError(f"invalid configuration in {origin}: " + "; ".join(errors))
    assert pipe.start is not None
    fs.private_umask()  # before anything of this deployment is written
    for folder in (pipe.output_dir, pipe.dossier_dir):
        fs.make_private(folder)
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
        contacts=tuple(contacts),
        state_dir=pipe.state_dir,
    )


def _check_state_dir(state: Path | str | None, output: Path | str, errors: list[str]) -> None:
    """The state folder must lie outside the output: deleting the output keeps it."""
    if state is None:
        try:
            default_state_dir(output)  # a whole bucket has no folder beside it
        except ConfigError as exc:
            errors.append(str(exc))
        return
    inside = str(state).rstrip("/") + "/"
    if inside.startswith(str(output).rstrip("/") + "/"):
        errors.append(
            f"[pipeline].state_dir: {state} is inside the output {output}; the state must "
            "survive deleting the output"
        )


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
