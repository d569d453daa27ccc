"""The typed settings of the configuration: their kinds, the table of every key, the readers.

Every key and every variable is read through one ``Kind``, so a TOML value and an
environment string are checked alike and a problem names the key and where it came from;
the [pipeline] section is read here too (``_pipeline_values``)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_pipeline.core.common import fs
from memory_pipeline.core.common.owners import DEFAULT_OWNER_ID, valid_owner_id
from memory_pipeline.core.common.representations import REPRESENTATIONS
from memory_pipeline.core.common.timeutil import zone
from memory_pipeline.core.indexes.tokenize import TOKENIZER_CHOICES
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


# The first calendar partition when [pipeline] start_date is left out (open dates): the first
# partition with data comes from the data, whatever its date, and an older export added later
# is read on the next run, not quarantined. The calendar before the data costs nothing: a run
# builds only days with data (defs/partitions.py). The Unix epoch is where a missing or zero
# timestamp lands, so even that is a date of the calendar.
OPEN_START = dt.date(1970, 1, 1)
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
    _pipeline("start_date", DATE),
    _pipeline("end_date", DATE),
    _pipeline("output_dir", PATH, "data/output"),
    _pipeline("session_gap_minutes", int_kind(1, MAX_GAP_MINUTES), 180),
    _pipeline("chunk_size", int_kind(1, 10_000), DEFAULT_SIZE),
    _pipeline("chunk_stride", int_kind(1, 10_000), DEFAULT_STRIDE),
    _pipeline("dossier_dir", PATH),
    _pipeline("work_dir", PATH),
    _pipeline("state_dir", PATH),
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
    state_dir: Path | str | None  # None: the default (``state/`` beside the output)
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
    if start is None and "[pipeline].start_date" not in bad:
        start = OPEN_START  # open: the data says where the memory begins
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
    state_dir = _state_dir(value["state_dir"], base_dir, env, errors)
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
        state_dir,
        value["session_gap_minutes"],
        size,
        stride,
    )


def _state_dir(
    value: str | None, base_dir: Path, env: Mapping[str, str], errors: list[str]
) -> Path | str | None:
    """``[pipeline] state_dir`` as given (a local folder relative to the config file, or an
    ``s3://`` prefix); None when it is not set (``PipelineConfig`` derives the default)."""
    if not value:
        return None
    if fs.is_remote(value):
        uri = str(fs.normalize(value))
        if problem := fs.check_uri(uri):
            errors.append(f"[pipeline].state_dir: {problem}{_origin('pipeline', 'state_dir', env)}")
        return uri
    folder = (base_dir / value).resolve()
    if problem := _local_folder_problem(folder):
        errors.append(f"[pipeline].state_dir: {problem}{_origin('pipeline', 'state_dir', env)}")
    return folder


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
