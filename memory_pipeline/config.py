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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.contacts import ContactSpec
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
    contacts: tuple[ContactSpec, ...] = ()  # [[contacts]]: one person's spellings across apps

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


def _env_key(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


# -- typed settings ---------------------------------------------------------------------------
# Every key and every variable is read through one ``Kind``: what a TOML value of that type is,
# how an environment string becomes one, and the allowed values a message names. A value
# outside the set is a problem, never a fallback: a typo of "on" must not switch redaction off,
# "1.5" must not become 1 day of retention, true must not become a 1-minute session gap.


class _Bad(ValueError):
    """A value outside its setting's set; ``reason`` replaces the generic "is not <allowed>"."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


def _show(value: Any) -> str:
    """A value as a message shows it: its repr, at most 60 characters (a pasted paragraph or a
    200-digit number must not become the message)."""
    try:
        text = repr(value)
    except ValueError:  # an int beyond str()'s digit limit
        return "<an integer of thousands of digits>"
    return text if len(text) <= 60 else text[:57] + "..."


def _stripped(text: str) -> str:
    return text.strip()


@dataclass(frozen=True)
class Kind:
    """The type of a setting. ``allowed`` names its documented values (every message says
    them); ``check`` takes a TOML value, returns it (converted) or raises ``_Bad``; ``parse``
    turns an environment string (always text) into a TOML-like value for ``check``."""

    allowed: str
    check: Callable[[Any], Any]
    parse: Callable[[str], Any] = _stripped

    def accept(self, value: Any) -> Any:
        """``check``; a ``_Bad`` without a reason reads "<value> is not <allowed>"."""
        try:
            return self.check(value)
        except _Bad as bad:
            raise _Bad(bad.reason or f"{_show(value)} is not {self.allowed}") from None


def int_kind(lo: int, hi: int) -> Kind:
    """A whole number in ``lo..hi``. A TOML value must be an integer (not a bool, a float or a
    string); an environment value is ASCII digits with an optional sign."""

    def check(value: Any) -> int:
        if type(value) is not int:
            raise _Bad()
        if not lo <= value <= hi:
            raise _Bad(f"{_show(value)} is outside {lo}..{hi}")
        return value

    def parse(text: str) -> Any:
        text = text.strip()
        return int(text) if re.fullmatch(r"[+-]?[0-9]{1,30}", text) else text

    return Kind(f"an integer in {lo}..{hi}", check, parse)


TRUE_WORDS = ("true", "on", "yes", "1")
FALSE_WORDS = ("false", "off", "no", "0")


def _parse_bool(text: str) -> Any:
    word = text.strip().lower()
    return True if word in TRUE_WORDS else False if word in FALSE_WORDS else text


def _check_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _Bad()
    return value


BOOL = Kind("true or false", _check_bool, _parse_bool)


def _check_date(value: Any) -> dt.date:
    """A TOML date, or text ``YYYY-MM-DD`` (environment values, quoted dates). A TOML
    date-time is a date (a subclass) to Python: refused by name, as it is a common slip."""
    if isinstance(value, dt.datetime):
        raise _Bad(f"{value.isoformat()} is a date and time, not a date like 2024-03-01")
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value.strip()):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise _Bad()


DATE = Kind("a date like 2024-03-01", _check_date)


def _check_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad()
    return value.strip()


TEXT = Kind("a non-empty string", _check_text)


def _check_path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise _Bad()
    return value


PATH = Kind("a path (a string)", _check_path, parse=lambda text: text)


def _check_timezone(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad()
    try:
        zone(value.strip())
    except (ValueError, OSError, TypeError):
        raise _Bad(f"unknown IANA timezone {_show(value)}") from None
    return value.strip()


TIMEZONE = Kind("an IANA timezone like Asia/Tokyo", _check_timezone)


def _check_slug(value: Any) -> str:
    if not isinstance(value, str) or not valid_owner_id(value.strip()):
        raise _Bad()
    return value.strip()


SLUG = Kind("a slug like 'yuki' ([a-z0-9][a-z0-9_-]{0,63})", _check_slug)


def _check_url(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"https?://[^\s/]+\S*", value.strip()):
        raise _Bad()
    return value.strip()


URL = Kind("an http:// or https:// URL", _check_url)


def enum_kind(choices: tuple[str, ...], *, fold_case: bool = False) -> Kind:
    """One of ``choices`` (exactly; an environment value case-folded when ``fold_case``)."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            raise _Bad()
        return value

    def parse(text: str) -> str:
        return text.strip().lower() if fold_case else text.strip()

    return Kind("one of " + ", ".join(choices), check, parse)


def subset_kind(choices: tuple[str, ...]) -> Kind:
    """A list drawn from ``choices`` (the environment: comma separated)."""

    def check(value: Any) -> list[str]:
        if not isinstance(value, list) or not all(
            isinstance(v, str) and v in choices for v in value
        ):
            raise _Bad()
        return value

    def parse(text: str) -> list[str]:
        return [v.strip() for v in text.split(",") if v.strip()]

    return Kind("a list drawn from " + ", ".join(choices), check, parse)


def _check_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad()
    if not (0 <= value <= 10**9):  # also nan and inf
        raise _Bad(f"{_show(value)} is outside 0..1000000000")
    return value


NON_NEGATIVE_NUMBER = Kind("a number in 0..1000000000", _check_number)


def _check_names(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
        raise _Bad()
    return value


NAMES = Kind("a non-empty list of strings", _check_names)


def _check_prefix(value: Any) -> str:
    if not isinstance(value, str) or (value and not valid_owner_id(value + "x")):
        raise _Bad()
    return value


OWNER_PREFIX = Kind("a prefix of lowercase letters, digits, _ and -", _check_prefix)


@dataclass(frozen=True)
class Setting:
    """One documented setting: its TOML ``[section] key`` (None: environment only), its
    ``MEMORY_PIPELINE_*`` variable (None: file only), type, default and whether required.
    ``docs/configuration.md`` lists every one (a test checks that)."""

    section: str | None
    key: str
    kind: Kind
    default: Any = None
    env: str | None = None
    required: bool = False

    @property
    def where(self) -> str:
        """How a message names the setting: the TOML key, else the variable."""
        return f"[{self.section}].{self.key}" if self.section else str(self.env)


def _pipeline(key: str, kind: Kind, default: Any = None, required: bool = False) -> Setting:
    return Setting("pipeline", key, kind, default, ENV_PREFIX + key.upper(), required)


def _provider(key: str, kind: Kind, default: Any = None) -> Setting:
    return Setting(None, key, kind, default, ENV_PREFIX + key.upper())


MAX_RETAIN_DAYS = 365_000  # a thousand years: anything larger is a typo, not a policy
# MEMORY_PIPELINE_REDACT: auto | on | off, and the words for on and off it always took.
# Anything else is refused: a typo of "on" must never read as "off".
REDACT_WORDS = {
    "auto": "auto",
    **dict.fromkeys(TRUE_WORDS, "on"),
    **dict.fromkeys(FALSE_WORDS, "off"),
}
REDACT = Kind(
    "one of auto, on, off (also true/false, yes/no, 1/0)",
    enum_kind(("auto", "on", "off")).check,
    parse=lambda text: REDACT_WORDS.get(text.strip().lower(), text.strip()),
)
SETTINGS: tuple[Setting, ...] = (
    _pipeline("owner", TEXT, required=True),
    _pipeline("owner_id", SLUG, DEFAULT_OWNER_ID),
    _pipeline("timezone", TIMEZONE, required=True),
    _pipeline("start_date", DATE, required=True),
    _pipeline("end_date", DATE),
    _pipeline("output_dir", PATH, "data/output"),
    _pipeline("session_gap_minutes", int_kind(1, MAX_GAP_MINUTES), 180),
    _pipeline("chunk_size", int_kind(1, 10_000), DEFAULT_SIZE),
    _pipeline("chunk_stride", int_kind(1, 10_000), DEFAULT_STRIDE),
    _pipeline("dossier_dir", PATH),
    _pipeline("work_dir", PATH),
    Setting(
        "representations",
        "dense",
        subset_kind(REPRESENTATIONS),
        list(DEFAULT_DENSE),
        ENV_PREFIX + "DENSE_REPRESENTATIONS",
    ),
    Setting(
        "retrieval", "tokenizer", enum_kind(TOKENIZER_CHOICES), "auto", ENV_PREFIX + "TOKENIZER"
    ),
    Setting("retrieval", "hnsw_threshold", int_kind(0, 10**12), 50_000),
    Setting("evaluation", "questions", PATH, None, ENV_PREFIX + "EVAL_QUESTIONS"),
    Setting("evaluation", "locomo", PATH, None, ENV_PREFIX + "EVAL_LOCOMO"),
    Setting(
        "privacy", "retain_days", int_kind(1, MAX_RETAIN_DAYS), None, ENV_PREFIX + "RETAIN_DAYS"
    ),
    # providers: environment only (see README, "Providers"); a remote one sends chat text out
    _provider("embedder", enum_kind(("local", "openai", "voyage"), fold_case=True), "local"),
    _provider("embedding_model", TEXT),
    _provider("embedding_dimensions", int_kind(1, 100_000)),
    _provider("summarizer", enum_kind(("extractive", "openai"), fold_case=True), "extractive"),
    _provider("llm_model", TEXT),
    _provider("llm_base_url", URL),
    _provider("memory_extractor", enum_kind(("rules", "openai"), fold_case=True), "rules"),
    _provider("dossier_writer", enum_kind(("rules", "openai"), fold_case=True), "rules"),
    _provider("dossier_model", TEXT),
    _provider("query_rewriter", enum_kind(("rules", "openai"), fold_case=True), "rules"),
    _provider("redact", REDACT, "auto"),
    _provider("dask_scheduler", TEXT),
    _provider("dask_workers", int_kind(0, 1024), 0),
)
_BY_NAME = {(s.section, s.key): s for s in SETTINGS}
SECTIONS = (
    "pipeline",
    "sources",
    "owners",
    "contacts",
    "representations",
    "retrieval",
    "evaluation",
    "privacy",
)
PIPELINE_KEYS = tuple(s.key for s in SETTINGS if s.section == "pipeline")
# a tokenizer name as [retrieval].tokenizer accepts it: one of the indexes' tokenizers, or auto
TOKENIZERS = frozenset(TOKENIZER_CHOICES)


def _read(
    setting: Setting,
    table: Mapping[str, Any],
    env: Mapping[str, str],
    errors: list[str],
    where: str | None = None,
) -> Any:
    """The value of ``setting``: its variable when set, else the table's key, else the default.

    Blank text (in the file or the environment) means "not set": the default, or a
    "required" problem; a set variable wins over the file, so an empty one switches an
    optional setting off. A value outside the kind's set is a problem naming the key
    (``where``, default ``setting.where``), the variable it came from and the allowed values,
    and reads as the default so the other checks still run.
    """
    where = where or setting.where
    origin = ""
    value: Any = table.get(setting.key)
    if setting.env and (text := env.get(setting.env)) is not None:
        origin = f" (from {setting.env})"
        value = setting.kind.parse(text) if text.strip() else None
    if value is None or (isinstance(value, str) and not value.strip()):
        if setting.required:
            errors.append(f"{where}: required, {setting.kind.allowed}{origin}")
        return setting.default
    try:
        return setting.kind.accept(value)
    except _Bad as bad:
        errors.append(f"{where}: {bad.reason}{origin}")
        return setting.default


def _origin(section: str, key: str, env: Mapping[str, str]) -> str:
    """The suffix naming the variable that set ``[section].key`` (" (from ...)"), else ""."""
    name = _BY_NAME[section, key].env
    return f" (from {name})" if name and (env.get(name) or "").strip() else ""


def _table(raw: Mapping[str, Any], name: str, errors: list[str]) -> Mapping[str, Any]:
    """``[name]`` of the file, its unknown keys a problem that names the known ones; {} (and a
    problem) when it is not a table."""
    table = raw.get(name, {})
    if not isinstance(table, Mapping):
        errors.append(f"[{name}]: must be a table, not {_show(table)}")
        return {}
    known = [s.key for s in SETTINGS if s.section == name]
    _unknown_keys(f"[{name}]", table, known, errors)
    return table


def _unknown_keys(
    where: str, table: Mapping[str, Any], known: Iterable[str], errors: list[str]
) -> None:
    known = list(known)
    unknown = sorted(str(k) for k in table if k not in known)
    if unknown:
        errors.append(f"{where}: unknown keys {unknown} (known: {', '.join(known)})")


def _local_folder_problem(path: Path) -> str | None:
    """Why ``path`` cannot be (or become) a folder: it, or the nearest existing folder above
    it, is a file; None when it can. Checked at load so a run never dies on mkdir."""
    for candidate in (path, *path.parents):
        try:
            if candidate.exists():
                return None if candidate.is_dir() else f"{candidate} is a file, not a folder"
        except (OSError, ValueError) as exc:
            return f"{candidate} is not a usable path ({exc})"
    return None


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
    if errors:
        raise ConfigError(f"invalid configuration in {origin}: " + "; ".join(errors))
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
        contacts=tuple(contacts),
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
    pipe = _table(raw, "pipeline", errors)
    before = len(errors)
    value = {s.key: _read(s, pipe, env, errors) for s in SETTINGS if s.section == "pipeline"}
    # the keys refused just now: a check between two values runs only on values that passed
    bad = {e.split(":", 1)[0] for e in errors[before:]}
    start, end = value["start_date"], value["end_date"]
    if start and end and end < start:
        errors.append(f"[pipeline].end_date: {end} is before start_date {start}")
    output_dir, output_uri = _output(value["output_dir"], value["work_dir"], base_dir, env, errors)
    dossier_dir = None
    if value["dossier_dir"]:
        if fs.is_remote(value["dossier_dir"]):
            errors.append(
                "[pipeline].dossier_dir: an s3:// dossier folder is the default "
                "(<output_dir>/dossiers) when output_dir is on object storage"
            )
        else:
            dossier_dir = (base_dir / value["dossier_dir"]).resolve()
            if problem := _local_folder_problem(dossier_dir):
                where = _origin("pipeline", "dossier_dir", env)
                errors.append(f"[pipeline].dossier_dir: {problem}{where}")
    size, stride = value["chunk_size"], value["chunk_stride"]
    if stride > size and not {"[pipeline].chunk_size", "[pipeline].chunk_stride"} & bad:
        errors.append(f"[pipeline].chunk_stride: {stride} > chunk_size {size} would skip messages")
    return _PipelineValues(
        value["owner"] or "",
        value["owner_id"],
        value["timezone"] or "",
        start,
        end,
        output_dir,
        output_uri,
        dossier_dir,
        value["session_gap_minutes"],
        size,
        stride,
    )


def _output(
    value: str, work: str | None, base_dir: Path, env: Mapping[str, str], errors: list[str]
) -> tuple[Path, str | None]:
    """(local folder, object-storage URI or None) of ``output_dir``.

    A local output is its own working folder (unchanged behaviour; ``work_dir`` is not
    used). An ``s3://bucket/prefix`` output keeps its derived state in ``work_dir``
    (relative to the config file), by default a cache folder keyed by the URI. A local
    folder that is a file (or lies under one) is a problem now, not a crash mid-run."""
    if not fs.is_remote(value):
        folder = base_dir / value
        if problem := _local_folder_problem(folder.resolve()):
            errors.append(
                f"[pipeline].output_dir: {problem}{_origin('pipeline', 'output_dir', env)}"
            )
        return folder, None
    uri = str(fs.normalize(value))
    if problem := fs.check_uri(uri):
        errors.append(f"[pipeline].output_dir: {problem}{_origin('pipeline', 'output_dir', env)}")
    folder = (base_dir / work) if work else fs.cache_dir(uri) / "work"
    if problem := _local_folder_problem(folder.resolve()):
        errors.append(f"[pipeline].work_dir: {problem}{_origin('pipeline', 'work_dir', env)}")
    return folder, uri


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
