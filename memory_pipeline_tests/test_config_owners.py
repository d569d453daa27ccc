"""Config of a multi-owner deployment: [[owners]], fan-out sources, owner_id; one-owner default."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_pipeline.config import ConfigError, OwnerSpec, load_config, owner_config

BASE = """
[pipeline]
owner = "Yuki"
timezone = "Asia/Tokyo"
start_date = "2024-03-01"
output_dir = "out"
"""


def write(tmp_path: Path, text: str) -> Path:
    for sub in ("a", "b", "c", "rpc"):
        (tmp_path / sub).mkdir(exist_ok=True)
    p = tmp_path / "memory_pipeline.toml"
    p.write_text(BASE + text, encoding="utf-8")
    return p


def test_a_single_owner_config_is_unchanged(tmp_path: Path):
    cfg = load_config(write(tmp_path, '[[sources]]\nname = "a"\nkind = "line_json"\npath = "a"\n'),
                      env={})
    assert not cfg.multi_owner
    assert cfg.owner_id == "default" and cfg.owners == () and cfg.owner_specs() == []
    assert owner_config(cfg, None) is cfg
    assert owner_config(cfg, "default") is cfg


def test_listed_owners_by_name_and_nested(tmp_path: Path):
    cfg = load_config(
        write(
            tmp_path,
            """
[[sources]]
name = "a"
kind = "line_json"
path = "a"

[[sources]]
name = "c"
kind = "line_json"
path = "c"
owner = "Carol in the export"

[[sources]]
name = "mine"
kind = "line_json"
path = "b"

[[owners]]
id = "alice"
owner = "Alice"
sources = ["a"]

[[owners]]
id = "bob"
owner = "Bob"
[[owners.sources]]
name = "bob_chats"
kind = "line_json"
path = "b"

[[owners]]
id = "carol"
owner = "Carol"
sources = ["c"]
""",
        ),
        env={},
    )
    assert cfg.multi_owner
    by_id = {o.id: o for o in cfg.owners}
    # the unlisted source "mine" belongs to the [pipeline] owner, one more owner
    assert list(by_id) == ["alice", "bob", "carol", "default"]
    assert [s.owner for s in by_id["alice"].sources] == ["Alice"]
    assert [s.name for s in by_id["bob"].sources] == ["bob_chats"]
    assert [s.owner for s in by_id["carol"].sources] == ["Carol in the export"]  # its own
    assert [s.name for s in by_id["default"].sources] == ["mine"]
    assert "bob_chats" in {s.name for s in cfg.sources}  # planning sees every source
    bob = cfg.for_owner(by_id["bob"])
    assert bob.output_dir == cfg.output_dir / "owners" / "bob"
    assert bob.dossiers_path == bob.output_dir / "dossiers"
    assert bob.cache_path.is_relative_to(bob.output_dir)
    assert bob.warehouse_path == bob.output_dir / "warehouse.duckdb"
    assert bob.owner == "Bob" and bob.owner_id == "bob" and not bob.multi_owner


def test_owner_problems_are_listed_together(tmp_path: Path):
    with pytest.raises(ConfigError) as exc:
        load_config(
            write(
                tmp_path,
                """
[[sources]]
name = "a"
kind = "line_json"
path = "a"

[[owners]]
id = "Alice"
owner = "Alice"

[[owners]]
id = "bob"
sources = ["a"]

[[owners]]
id = "carol"
owner = "Carol"
sources = ["nope"]
colour = "red"

[[owners]]
id = "carol"
owner = "Carol"
""",
            ),
            env={},
        )
    text = str(exc.value)
    assert "owners[0].id: required, a slug" in text
    assert "owners[1] (bob).owner: required" in text
    assert "owners[2] (carol).sources[0]: unknown source 'nope'" in text
    assert "owners[2]: unknown keys ['colour']" in text
    assert "owners[3] (carol).id: duplicate owner id" in text


def test_owner_id_of_the_pipeline(tmp_path: Path):
    src = '[[sources]]\nname = "a"\nkind = "line_json"\npath = "a"\n'
    cfg = load_config(write(tmp_path, src), env={"MEMORY_PIPELINE_OWNER_ID": "yuki"})
    assert cfg.owner_id == "yuki"
    with pytest.raises(ConfigError, match=r"\[pipeline\].owner_id: 'Yuki!' is not a slug"):
        load_config(write(tmp_path, src), env={"MEMORY_PIPELINE_OWNER_ID": "Yuki!"})


def test_a_fan_out_source(tmp_path: Path):
    cfg = load_config(
        write(
            tmp_path,
            """
[[sources]]
name = "rpc"
kind = "realpersonachat"
path = "rpc"
owner = "AA"
owners = "speakers"
owner_prefix = "rpc-"
""",
        ),
        env={},
    )
    assert cfg.multi_owner and cfg.owners == ()
    [spec] = cfg.fan_out_sources
    assert spec.owner is None  # read once for everyone: no owner filters the read
    assert cfg.owner_specs() == []  # fanned-out owners are data: none until ingest ran


def test_fan_out_problems(tmp_path: Path):
    with pytest.raises(ConfigError) as exc:
        load_config(
            write(
                tmp_path,
                """
[[sources]]
name = "chats"
kind = "line_json"
path = "a"
owners = "everyone"
speakers = "AA"
owner_prefix = "R-"
""",
            ),
            env={},
        )
    text = str(exc.value)
    assert "sources[0] (chats).owners: 'everyone' is not one of speakers" in text
    assert "only for kinds ['realpersonachat']" in text
    assert "sources[0] (chats).speakers: 'AA' is not a non-empty list" in text
    assert "owner_prefix: 'R-' is not a prefix of lowercase letters" in text


def test_owner_spec_is_a_value():
    assert OwnerSpec("a", "A") == OwnerSpec("a", "A", (), ())
