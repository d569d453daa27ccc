"""Hostile files through the export readers (``kind = "auto"``): one file only ever costs its
own records, each accounted in quarantine with a reason; nothing raises but a setup error.

The same classes the LINE and corpus readers were hardened against (deep JSON, numbers
beyond any column, duplicated keys, empty files, links out of the source folder, line ends)
apply to every format the one-folder setup reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_pipeline.core.common import records as R
from memory_pipeline.core.common.records import Message
from memory_pipeline_tests.core.ingest.sources._helpers import merged, read, reasons, reconciles


def _telegram(messages: list[dict], **extra: object) -> dict:
    return {"name": "Anna", "type": "personal_chat", "id": 4242, "messages": messages, **extra}


def _msg(i: int, text: str, unix: int | str = 1709251260) -> dict:
    return {
        "id": i,
        "type": "message",
        "date": "2024-03-01T09:01:00",
        "date_unixtime": str(unix),
        "from": "Anna",
        "from_id": "user222",
        "text": text,
        "text_entities": [],
    }


def _good(folder: Path) -> None:
    """A neighbour that must be read whatever its hostile siblings hold."""
    (folder / "good").mkdir(parents=True, exist_ok=True)
    doc = _telegram([_msg(1, "hello"), _msg(2, "how are you?")])
    (folder / "good" / "result.json").write_text(json.dumps(doc), encoding="utf-8")


def _texts(recs) -> list[str]:
    return sorted(r.text for r in recs if isinstance(r, Message))


@pytest.mark.parametrize("depth", [101, 5_000, 200_000])
def test_deeply_nested_json_costs_its_file_only(tmp_path: Path, depth: int) -> None:
    _good(tmp_path)
    nested = "[" * depth + "]" * depth
    text = json.dumps(_telegram([_msg(3, "x")])).replace('"text_entities": []', f'"x": {nested}')
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "result.json").write_text(text, encoding="utf-8")
    recs = read("auto", tmp_path)
    assert _texts(recs) == ["hello", "how are you?"]
    assert reasons(recs)[R.R_TOO_DEEP] == 1


@pytest.mark.parametrize(
    "unix", [10**30, -(10**30), "9" * 5000, 253402300800 * 10, "nan"], ids=str
)
def test_out_of_range_times_cost_their_record(tmp_path: Path, unix: object) -> None:
    _good(tmp_path)
    doc = _telegram([_msg(1, "kept"), _msg(2, "bad time", unix)])
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "result.json").write_text(
        json.dumps(doc).replace(f'"{unix}"', str(unix)) if unix != "nan" else json.dumps(doc),
        encoding="utf-8",
    )
    recs = read("auto", tmp_path)
    assert "hello" in _texts(recs)
    n = len(recs)
    result = merged("auto", tmp_path)
    reconciles(result, n)


def test_a_huge_message_id_costs_nothing_else(tmp_path: Path) -> None:
    _good(tmp_path)
    doc = _telegram([_msg(10**40, "big id"), _msg(2, "small id")])
    (tmp_path / "ids").mkdir()
    (tmp_path / "ids" / "result.json").write_text(json.dumps(doc), encoding="utf-8")
    recs = read("auto", tmp_path)
    result = merged("auto", tmp_path)
    reconciles(result, len(recs))
    assert {"hello", "small id"} <= set(_texts(recs))


def test_two_messages_arrays_are_both_read(tmp_path: Path) -> None:
    """JSON keeps the last of a duplicated key: the first array's records must not vanish."""
    first = json.dumps([_msg(1, "from the first array"), _msg(2, "also first")])
    second = json.dumps([_msg(3, "from the second array")])
    text = (
        '{"name": "Anna", "type": "personal_chat", "id": 4242, '
        f'"messages": {first}, "messages": {second}}}'
    )
    (tmp_path / "result.json").write_text(text, encoding="utf-8")
    recs = read("auto", tmp_path)
    assert _texts(recs) == ["also first", "from the first array", "from the second array"]


def test_an_empty_file_is_one_row_not_silence(tmp_path: Path) -> None:
    _good(tmp_path)
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "empty.json").write_bytes(b"")
    recs = read("auto", tmp_path)
    rows = [r for r in recs if not isinstance(r, Message)]
    assert {r.source_file for r in rows} == {"empty.txt", "empty.json"}


def test_a_link_out_of_the_source_folder_is_not_followed(tmp_path: Path) -> None:
    source = tmp_path / "exports"
    _good(source)
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    doc = _telegram([_msg(9, "a secret from outside")])
    (secret / "result.json").write_text(json.dumps(doc), encoding="utf-8")
    (source / "linked").symlink_to(secret / "result.json")
    recs = read("auto", source)
    assert "a secret from outside" not in _texts(recs)
    [row] = [r for r in recs if not isinstance(r, Message)]
    assert row.reason == R.R_SYMLINK_OUTSIDE and row.source_file == "linked"


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_whatsapp_line_ends_all_read(tmp_path: Path, newline: str) -> None:
    lines = [
        "01/03/2024, 09:00 - Anna: good morning",
        "01/03/2024, 09:01 - Yuki: morning!",
        "01/03/2024, 09:02 - Anna: two lines",
        "of one message",
    ]
    (tmp_path / "WhatsApp Chat with Anna.txt").write_text(newline.join(lines), newline="")
    recs = read("auto", tmp_path)
    assert len([r for r in recs if isinstance(r, Message)]) == 3, reasons(recs)
