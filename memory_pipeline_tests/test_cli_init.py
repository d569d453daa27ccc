"""``memory-pipeline init``: a personal configuration from a folder of exports.

The exports are written here (a WhatsApp and a LINE mobile export, one re-export, one file
that is no export), so every figure the command prints can be checked against what the test
wrote. The command runs in-process (``cli.main``): no Dagster, about a second each.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pytest
import yaml

from memory_pipeline.cli import main
from memory_pipeline.cli_init import machine_timezone
from memory_pipeline.config import OPEN_START, load_config
from memory_pipeline.core.ingest.stage import discover_dates
from memory_pipeline.defs.runner import CODE_LOCATION

WHATSAPP = """\
12.03.22, 09:15 - Hans: Hallo, ramen tonight at the harbour?
12.03.22, 09:16 - Yuki: Yes! The harbour ramen place again
14.03.22, 18:00 - Hans: The harbour ramen was closed, sushi instead
14.03.22, 18:05 - Yuki: Sushi is fine
"""
LINE = """\
[LINE] Chat history with Maria
Saved on: 3/6/2024, 11:00 PM

Tue, 3/5/2024
7:02 PM\tMaria\tAre you free next Saturday for the ramen festival?
7:05 PM\tYuki\tYes, let's go to the ramen festival
"""
LATER = """\
20.03.24, 10:00 - Hans: New export: the kayak trip is on
20.03.24, 10:02 - Yuki: Great, kayak trip it is
"""
SAMPLE_QUESTIONS = ("what did we plan?", "Which train do we take to Kyoto?")


@pytest.fixture
def exports(tmp_path: Path) -> Path:
    folder = tmp_path / "exports"
    (folder / "phone").mkdir(parents=True)
    (folder / "phone" / "WhatsApp Chat with Hans.txt").write_text(WHATSAPP, encoding="utf-8")
    (folder / "Maria.txt").write_text(LINE, encoding="utf-8")
    (folder / "Maria again.txt").write_text(LINE, encoding="utf-8")  # a re-export: duplicates
    (folder / "notes.txt").write_text("shopping list: milk\n", encoding="utf-8")
    (folder / "photo.jpg").write_bytes(b"\xff\xd8\xff")  # an attachment: not an export
    return folder


def _init(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["init", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_init_writes_a_live_personal_config_and_says_what_it_read(exports, tmp_path, capsys):
    target = tmp_path / "me"
    code, out, err = _init(
        capsys, str(exports), "--target", str(target), "--timezone", "Europe/Berlin"
    )
    assert code == 0, err
    cfg = load_config(target / "memory_pipeline.toml")
    # no sample sources: one auto source on the folder
    assert [(s.name, s.kind, s.path) for s in cfg.sources] == [("exports", "auto", exports)]
    assert cfg.disabled_sources == ()
    assert cfg.owner == "Yuki"  # the one person in both conversations
    assert cfg.timezone == "Europe/Berlin"
    assert cfg.end_date is None  # live: the nightly and the sensors are on
    assert cfg.start_date == OPEN_START  # open: an older export dropped in later is read too
    assert "(2022-03-12 today" in (target / "memory_pipeline.toml").read_text(encoding="utf-8")
    assert cfg.output_dir == target / "output"
    assert cfg.eval_questions is None
    # the Dagster instance beside it: no relative storage paths (they follow the cwd)
    instance = yaml.safe_load((target / "dagster.yaml").read_text(encoding="utf-8"))
    assert instance["concurrency"]["pools"]["default_limit"] == 1
    assert "storage" not in instance and instance["telemetry"] == {"enabled": False}
    # the code location the UI and the daemon load, named as the CLI's runs record it
    [where] = yaml.safe_load((target / "workspace.yaml").read_text(encoding="utf-8"))["load_from"]
    assert where["python_module"]["module_name"] == "memory_pipeline.definitions"
    assert where["python_module"]["location_name"] == CODE_LOCATION

    rows = {
        line.split()[0]: line
        for line in out.splitlines()
        if line.startswith(("Maria", "phone", "notes"))
    }
    assert "whatsapp" in rows["phone/WhatsApp"] and "2022-03-12" in rows["phone/WhatsApp"]
    assert "2022-03-14" in rows["phone/WhatsApp"] and "Hans, Yuki" in rows["phone/WhatsApp"]
    maria = [line for line in out.splitlines() if line.startswith("Maria")]
    assert len(maria) == 2 and all("line_txt" in line for line in maria)
    assert any("duplicate_export 2" in line for line in maria)  # the re-export's two messages
    assert "not_an_export 1" in rows["notes.txt"]
    assert "photo.jpg" not in out
    assert "owner: 'Yuki', in all 2 conversations" in out
    assert "4 files, 6 messages from 2022-03-12 to 2024-03-05, 3 records quarantined" in out

    # the next commands, with queries made from these chats (not the sample's questions)
    tail = out[out.index("next:") :]
    assert f"export MEMORY_PIPELINE_CONFIG={target / 'memory_pipeline.toml'}" in tail
    assert "memory-pipeline run" in tail
    assert "memory-pipeline search ramen --k 3" in tail
    assert "memory-pipeline context 'What did Hans and I talk about?'" in tail
    assert not any(q in out for q in SAMPLE_QUESTIONS)


def test_later_exports_dropped_in_the_folder_are_read_on_the_next_run(exports, tmp_path, capsys):
    target = tmp_path / "me"
    assert _init(capsys, str(exports), "--target", str(target))[0] == 0
    cfg = load_config(target / "memory_pipeline.toml")
    before = discover_dates(cfg.sources, cfg.start_date)
    (exports / "later").mkdir()
    (exports / "later" / "WhatsApp Chat with Hans (2).txt").write_text(LATER, encoding="utf-8")
    after = discover_dates(load_config(target / "memory_pipeline.toml").sources, cfg.start_date)
    assert set(after) - set(before) == {dt.date(2024, 3, 20)}


def test_an_owner_given_is_checked_against_the_conversations(exports, tmp_path, capsys):
    target = tmp_path / "me"
    code, out, err = _init(capsys, str(exports), "--target", str(target), "--owner", "Maria")
    assert code == 0, err
    assert load_config(target / "memory_pipeline.toml").owner == "Maria"
    assert "owner:" not in out  # nothing proposed when it is given
    code, _, err = _init(
        capsys, str(exports), "--target", str(tmp_path / "x"), "--owner", "Nobody"
    )
    assert code == 2 and len(err.splitlines()) == 1
    assert "'Nobody' sends in none of the 2 conversations" in err and "Yuki (2)" in err
    assert not (tmp_path / "x" / "memory_pipeline.toml").exists()


def test_an_alias_is_written_and_counts_for_the_owner(exports, tmp_path, capsys):
    target = tmp_path / "me"
    code, _, err = _init(
        capsys, str(exports), "--target", str(target), "--owner", "Me", "--alias", "Yuki"
    )
    assert code == 0, err
    [source] = load_config(target / "memory_pipeline.toml").sources
    assert source.options["owner_aliases"] == ["Yuki"]


def test_an_existing_config_is_refused_unless_forced(exports, tmp_path, capsys):
    target = tmp_path / "me"
    target.mkdir()
    mine = target / "memory_pipeline.toml"
    mine.write_text("# my own settings\n", encoding="utf-8")
    code, out, err = _init(capsys, str(exports), "--target", str(target))
    assert code == 2 and err == f"error: {mine} already exists (--force replaces it)\n"
    assert mine.read_text(encoding="utf-8") == "# my own settings\n" and out == ""
    assert _init(capsys, str(exports), "--target", str(target), "--force")[0] == 0
    assert load_config(mine).owner == "Yuki"


@pytest.mark.parametrize("case", ["empty", "missing", "attachments only", "no messages"])
def test_bad_input_is_one_line_naming_the_path(tmp_path, capsys, case):
    folder = tmp_path / "exports"
    if case != "missing":
        folder.mkdir()
    if case == "attachments only":
        (folder / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    if case == "no messages":
        (folder / "notes.txt").write_text("not a chat\n", encoding="utf-8")
    code, _, err = _init(capsys, str(folder), "--target", str(tmp_path / "me"))
    assert code == 2
    [line] = err.splitlines()[-1:]
    assert line.startswith("error: ") and str(folder) in line and "Traceback" not in err
    assert len([x for x in err.splitlines() if x.startswith("error")]) == 1
    assert not (tmp_path / "me" / "memory_pipeline.toml").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_is_one_line_naming_it(exports, tmp_path, capsys):
    lone = exports / "Maria.txt"
    lone.chmod(0)
    try:
        code, _, err = _init(capsys, str(lone), "--target", str(tmp_path / "me"))
    finally:
        lone.chmod(0o644)
    assert code == 2 and str(lone) in err and len(err.strip().splitlines()) == 1


def test_several_paths_become_one_auto_source_each(exports, tmp_path, capsys):
    lone = tmp_path / "WhatsApp Chat with Hans.txt"
    shutil.move(exports / "phone" / "WhatsApp Chat with Hans.txt", lone)
    target = tmp_path / "me"
    code, out, err = _init(capsys, str(exports), str(lone), "--target", str(target))
    assert code == 0, err
    cfg = load_config(target / "memory_pipeline.toml")
    assert [(s.kind, s.path) for s in cfg.sources] == [("auto", exports), ("auto", lone)]
    assert len({s.name for s in cfg.sources}) == 2
    assert "whatsapp_chat_with_hans: WhatsApp Chat with Hans.txt" in out


def test_exports_inside_the_target_are_written_relative_and_never_the_reverse(
    exports, tmp_path, capsys
):
    code, _, err = _init(capsys, str(exports), "--target", str(exports / "memory"))
    assert code == 2 and "holds the target folder" in err and len(err.splitlines()) == 1
    target = exports.parent
    code, _, err = _init(capsys, str(exports), "--target", str(target))
    assert code == 0, err
    text = (target / "memory_pipeline.toml").read_text(encoding="utf-8")
    assert 'path = "exports"' in text  # relative to the file: the folder can move
    assert load_config(target / "memory_pipeline.toml").sources[0].path == exports


def test_the_machine_time_zone_comes_from_tz_else_the_system(monkeypatch):
    assert machine_timezone({"TZ": "Asia/Tokyo"}) == "Asia/Tokyo"
    assert machine_timezone({"TZ": ":America/New_York"}) == "America/New_York"
    fallback = machine_timezone({"TZ": "Not/AZone"})
    assert fallback == machine_timezone({})  # a bad $TZ falls back to the system's setting
