"""Hostile settings: every key and variable refuses a value outside its documented set.

A refused value is one ``ConfigError`` line (the CLI: ``error: ...`` on stderr, exit 2) that
names the key or the variable and the allowed values; never a fallback, never a traceback.
The privacy cases matter most: a typo of "on" in ``MEMORY_PIPELINE_REDACT`` used to read as
"off" and send every PII item to a remote provider unredacted. The property tests at the end
throw random TOML values (every type TOML has, huge integers, odd Unicode) and random
environment values at the loader and at the CLI: load succeeds, or it is one line.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import io
import math
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_pipeline import cli
from memory_pipeline.config import (
    SETTINGS,
    ConfigError,
    PipelineConfig,
    load_config,
    provider_settings,
)
from memory_pipeline.defs.providers import provider_resources, query_rewriter_resource
from memory_pipeline_tests.paths import ROOT

GOOD = """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = 2024-03-01
output_dir = "out"

[[sources]]
name = "chats"
kind = "line_json"
path = "in"
"""

PROFILE = settings(
    deadline=None,
    derandomize=True,  # the same examples on every machine: CI never flakes on a new seed
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def write(folder: Path, text: str) -> Path:
    (folder / "in").mkdir(exist_ok=True)
    path = folder / "memory_pipeline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def one_line_error(text: str, *needles: str) -> str:
    assert len(text.splitlines()) == 1, text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


def refused(path: Path, env: dict[str, str], *needles: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(path, env=env)
    return one_line_error(str(err.value), *needles)


# -- privacy: redaction never falls back to off ------------------------------------------------
@pytest.mark.parametrize(
    "typo", ["of", "onn", "0n", "enabled", "redact", "tru", "ja", "-", "auto!"]
)
def test_a_redact_typo_is_refused_everywhere_and_never_reads_as_off(tmp_path, typo):
    env = {"MEMORY_PIPELINE_REDACT": typo}
    needles = ("MEMORY_PIPELINE_REDACT", repr(typo), "auto, on, off")
    with pytest.raises(ConfigError) as err:
        provider_resources(env)
    one_line_error(str(err.value), *needles)
    with pytest.raises(ConfigError):
        query_rewriter_resource(env)
    refused(write(tmp_path, GOOD), env, *needles)  # every command stops at load


@pytest.mark.parametrize(
    ("value", "flag"),
    [
        (None, None),
        ("", None),
        ("auto", None),
        (" AUTO ", None),
        ("on", True),
        ("ON", True),
        ("true", True),
        ("yes", True),
        ("1", True),
        ("off", False),
        ("Off", False),
        ("false", False),
        ("no", False),
        ("0", False),
    ],
)
def test_redact_values_of_the_documented_set(value, flag):
    env = {} if value is None else {"MEMORY_PIPELINE_REDACT": value}
    resources = provider_resources(env)
    assert {r.redact for k, r in resources.items() if hasattr(r, "redact")} == {flag}
    assert query_rewriter_resource(env).redact is flag


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        ("MEMORY_PIPELINE_EMBEDDER", "opnai", "local, openai, voyage"),
        ("MEMORY_PIPELINE_EMBEDDER", "local,openai", "local, openai, voyage"),
        ("MEMORY_PIPELINE_SUMMARIZER", "gpt", "extractive, openai"),
        ("MEMORY_PIPELINE_MEMORY_EXTRACTOR", "llm", "rules, openai"),
        ("MEMORY_PIPELINE_DOSSIER_WRITER", "rule", "rules, openai"),
        ("MEMORY_PIPELINE_QUERY_REWRITER", "yes", "rules, openai"),
        ("MEMORY_PIPELINE_EMBEDDING_DIMENSIONS", "512.0", "an integer in 1..100000"),
        ("MEMORY_PIPELINE_EMBEDDING_DIMENSIONS", "0", "outside 1..100000"),
        ("MEMORY_PIPELINE_EMBEDDING_DIMENSIONS", "١٢", "an integer"),  # Arabic-Indic digits
        ("MEMORY_PIPELINE_LLM_BASE_URL", "localhost:8000/v1", "http:// or https:// URL"),
        ("MEMORY_PIPELINE_DASK_WORKERS", "two", "an integer in 0..1024"),
        ("MEMORY_PIPELINE_DASK_WORKERS", "-1", "outside 0..1024"),
    ],
)
def test_provider_variables_refuse_values_outside_their_set(tmp_path, variable, value, allowed):
    env = {variable: value}
    with pytest.raises(ConfigError) as err:
        provider_resources(env)
    one_line_error(str(err.value), variable, allowed)
    refused(write(tmp_path, GOOD), env, variable, allowed)


def test_provider_variables_of_the_documented_set():
    s = provider_settings(
        {
            "MEMORY_PIPELINE_EMBEDDER": " OpenAI ",
            "MEMORY_PIPELINE_EMBEDDING_DIMENSIONS": "512",
            "MEMORY_PIPELINE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "MEMORY_PIPELINE_DASK_WORKERS": "",  # empty: the default
        }
    )
    assert (s.embedder, s.embedding_dimensions, s.dask_workers) == ("openai", 512, 0)
    assert s.llm_base_url == "http://127.0.0.1:9/v1" and s.redact_flag is None


def test_every_problem_of_the_environment_in_one_line():
    with pytest.raises(ConfigError) as err:
        provider_settings({"MEMORY_PIPELINE_REDACT": "of", "MEMORY_PIPELINE_EMBEDDER": "x"})
    one_line_error(str(err.value), "MEMORY_PIPELINE_REDACT", "MEMORY_PIPELINE_EMBEDDER")


# -- [pipeline] and [privacy] overrides from the environment ----------------------------------
@pytest.mark.parametrize(
    ("variable", "value", "needles"),
    [
        ("MEMORY_PIPELINE_RETAIN_DAYS", "1.5", ["[privacy].retain_days", "integer in 1..365000"]),
        ("MEMORY_PIPELINE_RETAIN_DAYS", "30d", ["[privacy].retain_days", "'30d'"]),
        ("MEMORY_PIPELINE_RETAIN_DAYS", "1_000", ["[privacy].retain_days"]),
        ("MEMORY_PIPELINE_RETAIN_DAYS", "0", ["[privacy].retain_days", "outside 1..365000"]),
        ("MEMORY_PIPELINE_SESSION_GAP_MINUTES", "true", ["session_gap_minutes", "1..1440"]),
        ("MEMORY_PIPELINE_CHUNK_SIZE", "4e1", ["chunk_size", "1..10000"]),
        ("MEMORY_PIPELINE_START_DATE", "2024-03-01T10:00", ["start_date", "2024-03-01"]),
        ("MEMORY_PIPELINE_START_DATE", "20240301", ["start_date", "a date like"]),
        ("MEMORY_PIPELINE_END_DATE", "2024-02-30", ["end_date", "a date like"]),
        ("MEMORY_PIPELINE_TOKENIZER", "Auto", ["[retrieval].tokenizer", "regex, sudachi"]),
        ("MEMORY_PIPELINE_DENSE_REPRESENTATIONS", "summary;raw", ["dense", "raw_text, summary"]),
        ("MEMORY_PIPELINE_OWNER_ID", "Yuki!", ["owner_id", "a slug"]),
        ("MEMORY_PIPELINE_TIMEZONE", "JST+9", ["timezone", "JST+9"]),
    ],
)
def test_environment_overrides_refuse_values_outside_their_set(tmp_path, variable, value, needles):
    refused(write(tmp_path, GOOD), {variable: value}, variable, *needles)


def test_environment_overrides_of_the_documented_set(tmp_path):
    env = {
        "MEMORY_PIPELINE_RETAIN_DAYS": " 30 ",
        "MEMORY_PIPELINE_SESSION_GAP_MINUTES": "+20",
        "MEMORY_PIPELINE_START_DATE": "2024-03-02",
    }
    cfg = load_config(write(tmp_path, GOOD + "[privacy]\nretain_days = 9\n"), env=env)
    assert (cfg.retain_days, cfg.session_gap_minutes) == (30, 20)
    assert cfg.start_date == dt.date(2024, 3, 2)
    # an empty variable: the setting's default, over the file (retention off)
    off = load_config(tmp_path / "memory_pipeline.toml", env={"MEMORY_PIPELINE_RETAIN_DAYS": ""})
    assert off.retain_days is None


# -- TOML values of the wrong type ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (
            '[privacy]\nretain_days = "1"',
            ["[privacy].retain_days: '1' is not an integer in 1..365000"],
        ),
        ("[privacy]\nretain_days = 1.5", ["[privacy].retain_days: 1.5 is not an integer"]),
        ("[privacy]\nretain_days = true", ["[privacy].retain_days: True is not an integer"]),
        ("[privacy]\nretain_days = 1e400", ["[privacy].retain_days: inf is not an integer"]),
        ("[privacy]\nretain_days = nan", ["[privacy].retain_days: nan is not an integer"]),
        ("[privacy]\nretain_days = 99999999999999999999999", ["retain_days", "outside"]),
        (
            "[privacy]\nretain_days = 7\nretain_dayz = 7",
            ["[privacy]: unknown keys ['retain_dayz']"],
        ),
        ('[retrieval]\nhnsw_threshold = "7"', ["[retrieval].hnsw_threshold: '7' is not"]),
        ('[retrieval]\ntokenizer = ["auto"]', ["[retrieval].tokenizer: ['auto'] is not one of"]),
        ('[representations]\ndense = "summary"', ["[representations].dense: 'summary'"]),
        ("[evaluation]\nquestions = 5", ["[evaluation].questions: 5 is not a path"]),
        ('[pipline]\nowner = "x"', ["unknown keys ['pipline']", "pipeline, sources"]),
    ],
)
def test_toml_values_of_the_wrong_type_are_refused(tmp_path, extra, needles):
    refused(write(tmp_path, GOOD + "\n" + extra + "\n"), {}, *needles)


@pytest.mark.parametrize("section", ["pipeline", "privacy", "retrieval", "representations"])
def test_a_section_that_is_not_a_table_is_refused(tmp_path, section):
    text = f"{section} = 5\n" + GOOD.replace(
        "[pipeline]", "[pipeline]" if section != "pipeline" else "[x]"
    )
    refused(write(tmp_path, text), {}, f"[{section}]: must be a table, not 5")


@pytest.mark.parametrize(
    ("line", "needles"),
    [
        ("session_gap_minutes = true", ["session_gap_minutes: True is not an integer in 1..1440"]),
        ("session_gap_minutes = 1.5", ["session_gap_minutes: 1.5 is not an integer"]),
        ('session_gap_minutes = "180"', ["session_gap_minutes: '180' is not an integer"]),
        ("chunk_size = 42.0", ["chunk_size: 42.0 is not an integer in 1..10000"]),
        ("chunk_stride = -inf", ["chunk_stride: -inf is not an integer"]),
        ("end_date = 2024-03-14T10:00:00", ["end_date: 2024-03-14T10:00:00 is a date and time"]),
        ("end_date = 2024-03-14T10:00:00+09:00", ["end_date: 2024-03-14T10:00:00+09:00 is a"]),
        ("end_date = 10:00:00", ["end_date: datetime.time(10, 0) is not a date like"]),
        ('end_date = "yesterday"', ["end_date: 'yesterday' is not a date like 2024-03-01"]),
        ("owner_id = 5", ["owner_id: 5 is not a slug"]),
        ('dossier_dir = ["a"]', ["dossier_dir: ['a'] is not a path"]),
        ("colour = 1", ["[pipeline]: unknown keys ['colour']", "known: owner, owner_id"]),
    ],
)
def test_pipeline_values_of_the_wrong_type_are_refused(tmp_path, line, needles):
    text = GOOD.replace('output_dir = "out"', f'output_dir = "out"\n{line}')
    refused(write(tmp_path, text), {}, *needles)


def test_a_toml_datetime_for_start_date_is_one_line_at_the_cli(tmp_path, capsys):
    text = GOOD.replace("start_date = 2024-03-01", "start_date = 2024-03-01T10:00:00")
    assert cli.main(["--config", str(write(tmp_path, text)), "status"]) == 2
    err = capsys.readouterr().err
    one_line_error(err.strip(), "error: ", "[pipeline].start_date", "2024-03-01T10:00:00")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("source_line", "needles"),
    [
        ('enabled = "false"', ["sources[0] (chats).enabled: 'false' is not true or false"]),
        ("enabled = 0", ["enabled: 0 is not true or false"]),
        ("enabeld = false", ["sources[0] (chats): unknown keys ['enabeld']", "enabled"]),
        ("timezone = 9", ["sources[0] (chats).timezone: 9 is not an IANA timezone"]),
        ('kind = ["line_json"]', ["kind: ['line_json'] is not one of auto, chatgpt"]),
        ("owner = 5", ["sources[0] (chats).owner: 5 is not a string"]),
        ("dialogue_limit = 3", ["unknown keys ['dialogue_limit']"]),  # not a line_json option
    ],
)
def test_source_values_of_the_wrong_type_are_refused(tmp_path, source_line, needles):
    if source_line.startswith("kind ="):
        text = GOOD.replace('kind = "line_json"', source_line)
    else:
        text = GOOD + source_line + "\n"
    refused(write(tmp_path, text), {}, *needles)


def test_a_disabled_source_that_says_false_as_text_is_refused_not_enabled(tmp_path):
    """``enabled = "false"`` was truthy: the source the user switched off was read."""
    text = GOOD + '\n[[sources]]\nname = "old"\nkind = "line_txt"\npath = "in"\nenabled = "no"\n'
    refused(write(tmp_path, text), {}, "sources[1] (old).enabled: 'no' is not true or false")


# -- output folders that cannot be folders ----------------------------------------------------
@pytest.mark.parametrize("key", ["output_dir", "dossier_dir"])
@pytest.mark.parametrize("under", ["", "/sub/deeper"])
def test_an_output_folder_that_is_a_file_is_refused_in_one_line(tmp_path, capsys, key, under):
    (tmp_path / "taken").write_text("a file\n", encoding="utf-8")
    text = GOOD.replace('output_dir = "out"', f'output_dir = "out"\n{key} = "taken{under}"')
    if key == "output_dir":
        text = GOOD.replace('output_dir = "out"', f'output_dir = "taken{under}"')
    path = write(tmp_path, text)
    refused(path, {}, f"[pipeline].{key}: {tmp_path / 'taken'} is a file, not a folder")
    assert cli.main(["--config", str(path), "status"]) == 2
    one_line_error(capsys.readouterr().err.strip(), "error: ", str(tmp_path / "taken"))


def test_an_output_dir_from_the_environment_that_is_a_file(tmp_path):
    (tmp_path / "taken").write_text("", encoding="utf-8")
    env = {"MEMORY_PIPELINE_OUTPUT_DIR": str(tmp_path / "taken")}
    refused(write(tmp_path, GOOD), env, "is a file, not a folder", "MEMORY_PIPELINE_OUTPUT_DIR")


# -- files that are not configs ---------------------------------------------------------------
@pytest.mark.parametrize(
    "data",
    [
        b"x = " + b"9" * 5000,  # beyond Python's int digit limit: ValueError inside tomllib
        b"x = " + b"[" * 5000 + b"]" * 5000,  # RecursionError inside tomllib
        b"[pipeline\nowner = 1",
        b'[pipeline]\nowner = "\xff\xfe"',
    ],
    ids=["huge-int", "deep-array", "syntax", "bad-utf8"],
)
def test_a_file_that_is_not_a_config_is_one_line(tmp_path, data):
    path = tmp_path / "memory_pipeline.toml"
    path.write_bytes(data)
    refused(path, {}, str(path), "cannot read config")


def test_a_config_path_that_is_not_a_path(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config("a\x00b", env={})
    one_line_error(str(err.value), "config file")


def test_a_line_break_in_a_value_cannot_break_the_line(tmp_path):
    env = {"MEMORY_PIPELINE_SOURCE_CHATS_PATH": "in\nerror: forged second line\u2028x"}
    refused(write(tmp_path, GOOD), env, "does not exist")


# -- disk full (and other OSErrors) at the CLI -------------------------------------------------
@pytest.fixture
def sample_config(tmp_path: Path, monkeypatch) -> Path:
    """The repository config beside a copy of the sample; output and instance in tmp."""
    shutil.copytree(ROOT / "data" / "sample", tmp_path / "data" / "sample")
    shutil.copy(ROOT / "memory_pipeline.toml", tmp_path / "memory_pipeline.toml")
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")  # the shipped instance
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv("MEMORY_PIPELINE_CONFIG", raising=False)
    for setting in SETTINGS:  # the runner's environment must not leak into these runs
        if setting.env:
            monkeypatch.delenv(setting.env, raising=False)
    return tmp_path / "memory_pipeline.toml"


def test_disk_full_during_run_is_one_line_naming_the_path(sample_config, monkeypatch, capsys):
    """The first Parquet write of the run meets ENOSPC, as ``write()`` reports it (no file
    name): the CLI prints one line naming the output folder and the reason, not Dagster's
    "Error occurred while executing op" wrapper nor a traceback."""
    from memory_pipeline.core.common import storage

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage.pq, "write_table", full)
    code = cli.main(["--config", str(sample_config), "run", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1, err
    output = sample_config.parent / "data" / "output"
    assert err == f"error in ingest: {output}: no space left on device\n"


def test_an_os_error_the_cli_meets_itself_is_one_line(sample_config, monkeypatch, capsys):
    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out/warehouse.duckdb")

    monkeypatch.setattr(cli, "cmd_status", full)
    assert cli.main(["--config", str(sample_config), "status"]) == 1
    err = capsys.readouterr().err
    assert err == "error: /data/out/warehouse.duckdb: no space left on device\n"


def test_failure_line_walks_dagster_s_wrapper_to_the_os_error():
    from dagster._utils.error import serializable_error_info_from_exc_info

    def info(exc: BaseException):
        """What Dagster records of ``exc`` (as raised, with its cause chain)."""
        return serializable_error_info_from_exc_info((type(exc), exc, exc.__traceback__))

    def raised(exc: BaseException, cause: BaseException | None = None) -> BaseException:
        try:
            raise exc from cause
        except BaseException as caught:
            return caught

    disk = raised(OSError(errno.ENOSPC, "No space left on device", "/o/parquet/x.parquet"))
    wrapped = raised(RuntimeError('Error occurred while executing op "ingest":'), disk)
    assert cli.failure_line(info(wrapped)) == "/o/parquet/x.parquet: no space left on device"
    denied = raised(OSError(errno.EACCES, "denied"))
    assert cli.failure_line(info(denied), "/o") == "/o: permission denied"
    assert cli.failure_line(info(raised(ValueError("bad\nsecond")))) == "ValueError: bad"


# -- property tests: random TOML and random environment values --------------------------------
def toml_string(text: str) -> str:
    """A TOML basic string for any text (control characters and quotes escaped)."""
    out = []
    for ch in text:
        if ch in '"\\' or not ch.isprintable() or ord(ch) < 0x20:
            out.append(f"\\U{ord(ch):08X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    return toml_string(key)


def toml_value(value: object) -> str:
    """A TOML inline value of any type TOML has."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


ODD_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    [
        "",
        " ",
        "on",
        "off",
        "auto",
        "1",
        "-1",
        "1.5",
        "true",
        "2024-03-01",
        "2024-03-01T10:00",
        "Asia/Tokyo",
        "../..",
        "s3://b/x",
        "s3://B_ad",
        "UTC",
        "١٢",
        "１２",
        "e\u0301",
        "\u202e",
        "line_json",
        "speakers",
        "summary",
        "auto,summary",
        "9" * 40,
    ]
)
SCALAR = st.one_of(
    ODD_TEXT,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=2000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.dates(),
    st.datetimes(),
    st.datetimes(timezones=st.just(dt.UTC)),
    st.times(),
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ODD_TEXT, inner, max_size=3),
    max_leaves=6,
)
BASE: dict[str, dict[str, object]] = {
    "pipeline": {
        "owner": "Yuki",
        "owner_id": "yuki",
        "timezone": "Asia/Tokyo",
        "start_date": dt.date(2024, 3, 1),
        "end_date": "2024-03-14",
        "output_dir": "out",
        "session_gap_minutes": 180,
        "chunk_size": 42,
        "chunk_stride": 36,
        "dossier_dir": "dossiers",
    },
    "privacy": {"retain_days": 30},
    "representations": {"dense": ["embedding_text"]},
    "retrieval": {"tokenizer": "auto", "hnsw_threshold": 50000},
    "evaluation": {},
}
SOURCE = {"name": "chats", "kind": "line_json", "path": "in", "enabled": True, "owner": "Yuki"}


SOURCE_OPTIONS = ["timezone", "turn_seconds", "owners", "speakers", "dialogue_limit", "enbled"]


@st.composite
def documents(draw) -> str:
    """The good config with a few values replaced by values of any TOML type, keys dropped
    or added, or a table that is not a table; a quarter of the examples are left valid, so
    the loader's every check is reached, not just its first."""
    doc: dict[str, object] = {k: dict(v) for k, v in BASE.items()}
    sources = [dict(SOURCE), {**SOURCE, "name": "more", "kind": "line_txt"}]
    doc["sources"] = sources[: draw(st.integers(1, 2))]
    slots = [(sec, key) for sec, keys in BASE.items() for key in keys]
    slots += [("sources", key) for key in [*SOURCE, *SOURCE_OPTIONS]]
    for _ in range(draw(st.integers(0, 3))):
        section, key = draw(st.sampled_from(slots))
        target = doc["sources"][0] if section == "sources" else doc[section]
        if not isinstance(target, dict):
            continue  # the table was already replaced by a value
        action = draw(st.integers(0, 9))
        if action == 0:
            target.pop(key, None)
        elif action == 1:
            target[draw(ODD_TEXT)] = draw(VALUE)
        elif action == 2 and section != "sources":
            doc[section] = draw(VALUE)
        else:
            target[key] = draw(VALUE)
    lines: list[str] = []
    for section, table in doc.items():
        if section == "sources":
            for source in table:
                lines.append("[[sources]]")
                lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in source.items()]
        elif isinstance(table, dict):
            lines.append(f"[{section}]")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items()]
        else:
            lines.insert(0, f"{section} = {toml_value(table)}")
    return "\n".join(lines) + "\n"


ENV_NAMES = sorted(
    {s.env for s in SETTINGS if s.env}
    | {"MEMORY_PIPELINE_SOURCES", "MEMORY_PIPELINE_SOURCE_CHATS_PATH"}
)
ENVIRONMENTS = st.dictionaries(
    st.sampled_from(ENV_NAMES),
    ODD_TEXT.filter(lambda t: "\x00" not in t),  # an environment cannot hold NUL
    max_size=3,
)


def _load_or_one_line(text: str, env: dict[str, str]) -> tuple[Path, bool]:
    folder = Path(tempfile.mkdtemp(prefix="cfg-fuzz-"))
    path = write(folder, text)
    try:
        assert isinstance(load_config(path, env=env), PipelineConfig)
        return path, True
    except ConfigError as exc:
        one_line_error(str(exc))
        return path, False


@settings(PROFILE, max_examples=250)
@given(text=documents(), env=ENVIRONMENTS)
def test_random_config_values_load_or_fail_in_one_line(text, env):
    path, _ = _load_or_one_line(text, env)
    shutil.rmtree(path.parent)


@settings(PROFILE, max_examples=40)
@given(text=documents(), env=ENVIRONMENTS)
def test_random_config_values_at_the_cli_exit_2_in_one_line(text, env):
    path, loaded = _load_or_one_line(text, env)
    try:
        if loaded:
            return  # a valid config: the loader's side is what this test is about
        with pytest.MonkeyPatch.context() as mp:
            for name in ENV_NAMES:
                mp.delenv(name, raising=False)
            for name, value in env.items():
                mp.setenv(name, value)
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(["--config", str(path), "status"])
        assert code == 2
        one_line_error(err.getvalue().rstrip("\n"), "error: ")
        assert "Traceback" not in err.getvalue()
    finally:
        shutil.rmtree(path.parent)


# -- the documentation lists every setting with the values the code accepts -------------------
def test_docs_configuration_lists_every_setting_and_its_allowed_values():
    from memory_pipeline.config import CONTACT_OPTIONS, FAN_OUT_OPTIONS, SOURCE_OPTIONS

    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for setting in SETTINGS:
        if setting.section:
            assert f"`{setting.key}`" in doc or f"{setting.section}] {setting.key}`" in doc
        if setting.env:
            assert f"`{setting.env}`" in doc, setting.env
        assert setting.kind.allowed in doc, (setting.where, setting.kind.allowed)
    for options in (FAN_OUT_OPTIONS, CONTACT_OPTIONS, *SOURCE_OPTIONS.values()):
        for key, kind in options.items():
            assert f"`{key}`" in doc and kind.allowed in doc, key
