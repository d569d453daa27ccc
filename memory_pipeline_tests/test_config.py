"""Config: validation lists every problem; environment overrides win; paths resolve."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from memory_pipeline.config import ConfigError, PipelineConfig, load_config, parse_config
from memory_pipeline.core.indexes.tokenize import TOKENIZER_CHOICES
from memory_pipeline.core.ingest.sources import READERS, SourceSpec
from memory_pipeline_tests.paths import ROOT

GOOD = """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
output_dir = "out"

[[sources]]
name = "chats"
kind = "line_json"
path = "in"

[[sources]]
name = "other"
kind = "line_txt"
path = "missing-but-disabled"
enabled = false
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "in").mkdir(exist_ok=True)
    p = tmp_path / "memory_pipeline.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_good_config_resolves_paths(tmp_path):
    cfg = load_config(write(tmp_path, GOOD), env={})
    assert cfg.output_dir == (tmp_path / "out").resolve()
    assert [s.name for s in cfg.sources] == ["chats"]
    assert cfg.sources[0].path == (tmp_path / "in").resolve()
    assert cfg.sources[0].owner == "Yuki"
    assert cfg.session_gap_minutes == 180 and cfg.chunk_size == 42 and cfg.chunk_stride == 36
    assert cfg.disabled_sources == ("other",)


def test_env_overrides(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    env = {
        "MEMORY_PIPELINE_SESSION_GAP_MINUTES": "20",
        "MEMORY_PIPELINE_TIMEZONE": "Europe/Madrid",
        "MEMORY_PIPELINE_SOURCE_CHATS_PATH": str(tmp_path / "elsewhere"),
    }
    cfg = load_config(write(tmp_path, GOOD), env=env)
    assert cfg.session_gap_minutes == 20
    assert cfg.timezone == "Europe/Madrid" and cfg.sources[0].timezone == "Europe/Madrid"
    assert cfg.sources[0].path == (tmp_path / "elsewhere").resolve()


def test_dates_may_be_open(tmp_path):
    """No start_date: the calendar starts at the open floor, so every dated record is in a
    partition (none quarantined as too early); no end_date: live."""
    from memory_pipeline.config import OPEN_START

    cfg = load_config(write(tmp_path, GOOD.replace('start_date = "2024-03-01"\n', "")), env={})
    assert cfg.start_date == OPEN_START and cfg.end_date is None
    # the environment may still close it
    cfg = load_config(
        write(tmp_path, GOOD.replace('start_date = "2024-03-01"\n', "")),
        env={"MEMORY_PIPELINE_START_DATE": "2020-01-01"},
    )
    assert cfg.start_date == dt.date(2020, 1, 1)


def test_env_selects_sources(tmp_path):
    with pytest.raises(ConfigError, match="other.*does not exist"):
        load_config(write(tmp_path, GOOD), env={"MEMORY_PIPELINE_SOURCES": "chats,other"})
    with pytest.raises(ConfigError, match="unknown sources"):
        load_config(write(tmp_path, GOOD), env={"MEMORY_PIPELINE_SOURCES": "nope"})


def test_all_problems_reported_at_once(tmp_path):
    bad = (
        GOOD.replace('"Asia/Tokyo"', '"Mars/Olympus"')
        .replace('"2024-03-01"', '"March first"')
        .replace('kind = "line_json"', 'kind = "lin_json"')
    ) + "session_gap_minutes = 5000\n"
    bad = bad.replace('output_dir = "out"', 'output_dir = "out"\nsession_gap_minutes = 5000')
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, bad), env={})
    text = str(err.value)
    for fragment in ("timezone", "start_date", "lin_json", "session_gap_minutes", str(tmp_path)):
        assert fragment in text


def test_missing_file_message(tmp_path):
    with pytest.raises(ConfigError, match="MEMORY_PIPELINE_CONFIG"):
        load_config(tmp_path / "nope.toml", env={})


def test_repository_config_is_valid():
    root = ROOT
    cfg = load_config(root / "memory_pipeline.toml", env={})
    assert {s.kind for s in cfg.sources} == {"line_json", "line_txt"}


# -- exact messages and every field: pins parse_config's output across refactors -------------

BAD_PIPELINE = {
    "pipeline": {
        "owner": " ",
        "timezone": "Mars/Olympus",
        "start_date": "March first",
        "end_date": 5,
        "session_gap_minutes": "x",
        "chunk_size": 0,
        "chunk_stride": 20000,
        "bogus": 1,
        "zz": 2,
    },
    "representations": {"dense": ["raw_text", "nope"]},
    "retrieval": {"tokenizer": "mecab", "hnsw_threshold": "many"},
    "evaluation": {"questions": "nope.jsonl", "locomo": "in"},
    "sources": {},
}
BAD_SOURCES = {
    "pipeline": {
        "owner": "Y",
        "timezone": "Asia/Tokyo",
        "start_date": "2024-03-02",
        "end_date": "2024-03-01",
        "chunk_size": 10,
        "chunk_stride": 11,
    },
    "sources": [
        {"name": "Bad-Name", "kind": "line_json", "path": "in"},
        {"kind": "line_json", "path": "in"},
        {"name": "a", "kind": "nope", "path": "in"},
        {"name": "a", "kind": "line_json"},
        {"name": "b", "kind": "line_json", "path": "missing", "timezone": "Nowhere/X"},
        {"name": "c", "kind": "line_txt", "path": "missing", "enabled": False},
    ],
}
NO_SOURCE = {
    "pipeline": {"owner": "Y", "timezone": "Asia/Tokyo", "start_date": "2024-03-02"},
    "sources": [{"name": "c", "kind": "line_txt", "path": "missing", "enabled": False}],
}


@pytest.mark.parametrize(
    ("raw", "env", "problems"),
    [
        (
            BAD_PIPELINE,
            {},
            [
                "[pipeline]: unknown keys ['bogus', 'zz'] (known: owner, owner_id, timezone, "
                "start_date, end_date, output_dir, session_gap_minutes, chunk_size, "
                "chunk_stride, dossier_dir, work_dir, state_dir)",
                "[pipeline].owner: required, a non-empty string",
                "[pipeline].timezone: unknown IANA timezone 'Mars/Olympus'",
                "[pipeline].start_date: 'March first' is not a date like 2024-03-01",
                "[pipeline].end_date: 5 is not a date like 2024-03-01",
                "[pipeline].session_gap_minutes: 'x' is not an integer in 1..1440",
                "[pipeline].chunk_size: 0 is outside 1..10000",
                "[pipeline].chunk_stride: 20000 is outside 1..10000",
                "[[sources]]: must be an array of tables",
                "[representations].dense: ['raw_text', 'nope'] is not a list drawn from "
                "raw_text, summary, embedding_text",
                "[retrieval].tokenizer: 'mecab' is not one of regex, sudachi, cjk_bigram, "
                "english, auto",
                "[retrieval].hnsw_threshold: 'many' is not an integer in 0..1000000000000",
                "[evaluation].questions: <base>/nope.jsonl is not a file",
                "[evaluation].locomo: <base>/in is not a file",
            ],
        ),
        (
            BAD_SOURCES,
            {"MEMORY_PIPELINE_SOURCES": "b,zz,yy"},
            [
                "[pipeline].end_date: 2024-03-01 is before start_date 2024-03-02",
                "[pipeline].chunk_stride: 11 > chunk_size 10 would skip messages",
                "sources[0].name: required, lowercase letters, digits and _",
                "sources[1].name: required, lowercase letters, digits and _",
                "sources[2] (a).kind: 'nope' is not one of " + ", ".join(sorted(READERS)),
                "sources[3] (a).name: duplicate source name",
                "sources[3] (a).path: required, a path (a string)",
                "sources[4] (b).timezone: unknown IANA timezone 'Nowhere/X'",
                "sources[4] (b).path: <base>/missing does not exist",
                "MEMORY_PIPELINE_SOURCES names unknown sources ['yy', 'zz']",
            ],
        ),
        (NO_SOURCE, {}, ["[[sources]]: no source is enabled"]),
        (
            {},
            {},
            [
                "[pipeline].owner: required, a non-empty string",
                "[pipeline].timezone: required, an IANA timezone like Asia/Tokyo",
            ],
        ),
    ],
    ids=["pipeline", "sources", "no-source", "empty"],
)
def test_every_problem_message_in_order(tmp_path, raw, env, problems):
    (tmp_path / "in").mkdir()
    with pytest.raises(ConfigError) as err:
        parse_config(raw, base_dir=tmp_path, env=env)
    text = str(err.value).replace(str(tmp_path), "<base>")
    assert text == "invalid configuration in <config>: " + "; ".join(problems)


def test_every_field_from_file_and_environment(tmp_path):
    for folder in ("in", "alt", "out"):
        (tmp_path / folder).mkdir()
    (tmp_path / "q.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "l.json").write_text("", encoding="utf-8")
    raw = {
        "pipeline": {
            "owner": "Yuki",
            "timezone": "Asia/Tokyo",
            "start_date": dt.date(2024, 3, 1),
            "output_dir": "ignored",
        },
        "sources": [
            {"name": "chats", "kind": "line_json", "path": "in", "owner": ""},
            {"name": "txt", "kind": "line_txt", "path": "in", "timezone": "Europe/Madrid"},
            {"name": "off", "kind": "line_txt", "path": "missing"},
        ],
        "representations": {"dense": ["summary"]},
        "retrieval": {"tokenizer": "regex", "hnsw_threshold": 7},
        "evaluation": {"questions": "q.jsonl"},
    }
    env = {
        "MEMORY_PIPELINE_END_DATE": "2024-03-09",
        "MEMORY_PIPELINE_OUTPUT_DIR": "out",
        "MEMORY_PIPELINE_DOSSIER_DIR": "dossiers_here",
        "MEMORY_PIPELINE_CHUNK_SIZE": "12",
        "MEMORY_PIPELINE_CHUNK_STRIDE": "6",
        "MEMORY_PIPELINE_SOURCES": "chats,txt",
        "MEMORY_PIPELINE_SOURCE_TXT_PATH": "alt",
        "MEMORY_PIPELINE_DENSE_REPRESENTATIONS": "embedding_text, raw_text,",
        "MEMORY_PIPELINE_TOKENIZER": "cjk_bigram",
        "MEMORY_PIPELINE_EVAL_LOCOMO": "l.json",
    }
    cfg = parse_config(raw, base_dir=tmp_path, env=env, origin=str(tmp_path / "x.toml"))
    assert cfg == PipelineConfig(
        owner="Yuki",
        timezone="Asia/Tokyo",
        start_date=dt.date(2024, 3, 1),
        end_date=dt.date(2024, 3, 9),
        output_dir=(tmp_path / "out").resolve(),
        sources=(
            SourceSpec(
                name="chats",
                kind="line_json",
                path=(tmp_path / "in").resolve(),
                timezone="Asia/Tokyo",
                owner=None,  # an empty owner means "nobody", not the pipeline owner
                options={},
            ),
            SourceSpec(
                name="txt",
                kind="line_txt",
                path=(tmp_path / "alt").resolve(),
                timezone="Europe/Madrid",
                owner="Yuki",
                options={},
            ),
        ),
        session_gap_minutes=180,
        chunk_size=12,
        chunk_stride=6,
        config_path=tmp_path / "x.toml",
        disabled_sources=("off",),
        dense_representations=("raw_text", "embedding_text"),  # REPRESENTATIONS order
        tokenizer="cjk_bigram",
        hnsw_threshold=7,
        eval_questions=(tmp_path / "q.jsonl").resolve(),
        eval_locomo=(tmp_path / "l.json").resolve(),
        dossier_dir=(tmp_path / "dossiers_here").resolve(),
    )


@pytest.mark.parametrize("name", TOKENIZER_CHOICES)
def test_every_index_tokenizer_is_a_valid_config_value(tmp_path, name):
    """The config accepts exactly the names the index builder knows (one list, in tokenize)."""
    cfg = load_config(write(tmp_path, GOOD), env={"MEMORY_PIPELINE_TOKENIZER": name})
    assert cfg.tokenizer == name


def test_retain_days_off_by_default_set_by_file_or_env_and_validated(tmp_path):
    assert load_config(write(tmp_path, GOOD), env={}).retain_days is None
    cfg = load_config(write(tmp_path, GOOD + "\n[privacy]\nretain_days = 30\n"), env={})
    assert cfg.retain_days == 30
    assert (
        load_config(write(tmp_path, GOOD), env={"MEMORY_PIPELINE_RETAIN_DAYS": "7"}).retain_days
        == 7
    )
    for bad, needle in (("0", "outside"), ('"x"', "not an integer"), ("true", "not an integer")):
        path = write(tmp_path, GOOD + f"\n[privacy]\nretain_days = {bad}\n")
        with pytest.raises(ConfigError, match=rf"\[privacy\]\.retain_days: .*{needle}"):
            load_config(path, env={})


def test_every_reader_kind_lists_its_options():
    """A kind missing from SOURCE_OPTIONS would refuse every option its reader reads."""
    from memory_pipeline.config import SOURCE_OPTIONS

    assert sorted(READERS) == sorted(SOURCE_OPTIONS)


def test_export_reader_options_are_typed(tmp_path):
    (tmp_path / "chats").mkdir()
    good = """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"

[[sources]]
name = "mine"
kind = "auto"
path = "chats"
owner_aliases = ["You", "あなた"]
date_order = "mdy"
"""
    (tmp_path / "a.toml").write_text(good, encoding="utf-8")
    [spec] = load_config(tmp_path / "a.toml", env={}).sources
    assert spec.options["owner_aliases"] == ["You", "あなた"]
    (tmp_path / "b.toml").write_text(good.replace('"mdy"', '"dym"'), encoding="utf-8")
    with pytest.raises(ConfigError, match="date_order"):
        load_config(tmp_path / "b.toml", env={})
