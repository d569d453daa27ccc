"""Config: validation lists every problem; environment overrides win; paths resolve."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_pipeline.config import ConfigError, load_config
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
