"""The export readers stream: files are read in bounded chunks while records are yielded,
and the fast paths (chunked decoding, cached UTC offsets, key-word prefilters) give exactly
what the whole-file, per-message versions give."""

from __future__ import annotations

import codecs
import datetime as dt
from pathlib import Path

import pytest

from benchmarks.bench_readers import gen_kakaotalk, gen_line_pc, gen_sms_backup, gen_whatsapp
from memory_pipeline.core.common.records import Message, QuarantineRecord
from memory_pipeline.core.ingest.sources import exports, read_source, whatsapp
from memory_pipeline.core.ingest.sources.exports import (
    EpochClock,
    ExportFile,
    Rejected,
    WallClock,
    _local_and_utc,
    decode_text,
    line_batches,
)
from memory_pipeline_tests.core.ingest.sources._helpers import spec


class _Counting:
    """A binary file that records how much each read asked for and how far it got."""

    def __init__(self, path: Path, log: list[_Counting]) -> None:
        self.inner = path.open("rb")
        self.max_read, self.pos = 0, 0
        log.append(self)

    def read(self, size: int = -1) -> bytes:
        self.max_read = max(self.max_read, size if size >= 0 else 1 << 62)
        data = self.inner.read(size)
        self.pos += len(data)
        return data

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> _Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.mark.parametrize(
    ("kind", "write", "name", "n"),
    [
        ("whatsapp", gen_whatsapp, "WhatsApp Chat with Maria.txt", 8_000),
        ("line_pc", gen_line_pc, "[LINE] Maria.txt", 8_000),
        ("kakaotalk", gen_kakaotalk, "KakaoTalk_민지.txt", 6_000),
        ("sms_backup", gen_sms_backup, "sms-20240301.xml", 5_000),
    ],
)
def test_reader_streams_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, write, name: str, n: int
) -> None:
    """The first message is yielded while the file is still mostly unread, every read asks
    for one bounded chunk, and the whole file is never asked for at once."""
    monkeypatch.setattr(exports, "CHUNK_BYTES", 1 << 16)  # the sms reader's own chunk
    path = tmp_path / name
    write(path, n)
    size = path.stat().st_size
    assert size > 6 * exports.CHUNK_BYTES
    opened: list[_Counting] = []

    def counting_open(self: ExportFile) -> _Counting:
        assert self.path is not None
        return _Counting(self.path, opened)

    monkeypatch.setattr(ExportFile, "open", counting_open)
    records = read_source(spec(kind, path))
    first = next(records)
    assert isinstance(first, Message)
    assert opened[-1].pos < size / 2  # the pass that yields records has read little so far
    count = 1 + sum(1 for _ in records)
    assert count == n
    assert all(f.max_read <= exports.CHUNK_BYTES for f in opened)
    assert max(f.pos for f in opened) == size


_ZONES = [
    "America/New_York", "Europe/Berlin", "Europe/Dublin", "Australia/Lord_Howe",
    "America/St_Johns", "Pacific/Apia", "Asia/Kolkata", "Asia/Tokyo", "America/Santiago",
]  # fmt: skip


@pytest.mark.parametrize("tz", _ZONES)
def test_cached_offsets_equal_the_exact_conversion(tz: str) -> None:
    """Minute by minute over 2.5 hours either side of every offset change of 2011 (Samoa
    skipped a day) and 2021, and across a calm day: the cached local->UTC and UTC->local
    conversions equal the exact ones, DST gaps and repeated hours included."""
    wall, epoch = WallClock(tz), EpochClock(tz)
    z = exports.zone(tz)
    changes = [dt.datetime(2021, 6, 15)]
    for y in (2011, 2021):
        t = dt.datetime(y, 1, 1)
        while t.year == y:
            t += dt.timedelta(hours=3)
            if z.utcoffset(t) != z.utcoffset(t - dt.timedelta(hours=3)):
                changes.append(t)
    assert len(changes) > 1 or tz in ("Asia/Kolkata", "Asia/Tokyo")
    for t in changes:
        for k in range(-180, 180):
            local = t + dt.timedelta(minutes=k, seconds=59 * (k % 2))
            assert wall(local) == _local_and_utc(local, tz)
            utc = local.replace(tzinfo=dt.UTC)
            exact = utc.astimezone(z).replace(tzinfo=None)
            got = epoch.local(utc)
            assert (got, got.fold) == (exact, exact.fold)


_SAMPLES = [
    b"",
    b"\n",
    b"one line",
    b"a\nb\n",
    b"a\r\nb\r\n\r\nc",
    b"\r\r\n\n\r",
    "héllo 天気\nżółw\r\n🙂 end".encode(),
    codecs.BOM_UTF8 + "bom 天気\nx".encode(),
    "utf16 天気\r\nline 🙂\n".encode("utf-16"),
    "utf16be 天気\n".encode("utf-16-be").join([codecs.BOM_UTF16_BE, b""]),
    b"bad \xff byte\nok \xe5\xa4\xa9\ncut \xe5\xa4",
    "2021.1.1 金曜日\n08:00 健太 こんにちは\n".encode("cp932"),
    "cp932 first 金曜日\n".encode("cp932") + "then utf-8 天気\n".encode(),
    b"ascii only\nstill ascii\n" + "天気".encode("cp932"),
    b"\x81\x00 not cp932 either \xff\n",
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("legacy", [(), ("cp932",)])
def test_line_batches_equal_whole_file_decoding(
    monkeypatch: pytest.MonkeyPatch, chunk: int, legacy: tuple[str, ...]
) -> None:
    """Chunks cut anywhere (inside a UTF-8 or UTF-16 sequence, between \\r and \\n) give the
    lines of ``decode_text(data).split("\\n")``; the legacy-encoding choice is the same."""
    monkeypatch.setattr(exports, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(exports, "HEAD_BYTES", max(chunk, 4))
    for data in _SAMPLES:
        f = ExportFile.of_bytes("x.txt", data, "x")
        want = [s[:-1] if s.endswith("\r") else s for s in decode_text(data, legacy).split("\n")]
        got = [line for batch, _ in line_batches(f, legacy) for line in batch]
        assert got == want, data


def test_broken_utf16_is_rejected_before_any_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """As decode_text: same reason and byte offset, found before the first batch."""
    monkeypatch.setattr(exports, "CHUNK_BYTES", 5)
    for data in ("ab\ncd".encode("utf-16") + b"\x00", "ab".encode("utf-16-le").join(
        [codecs.BOM_UTF16_LE, b"\x00\xd8\x41\x00"]
    )):  # fmt: skip
        with pytest.raises(Rejected) as whole:
            decode_text(data)
        with pytest.raises(Rejected) as streamed:
            next(line_batches(ExportFile.of_bytes("x.txt", data, "x")))
        assert streamed.value.detail == whole.value.detail


_EVENT_LINES = [
    "Messages and calls are end-to-end encrypted. No one outside of this chat can read them.",
    "MESSAGES ARE END-TO-END ENCRYPTED",
    "This message was deleted",
    "this message was deleted.",
    "You deleted this message",
    "Waiting for this message. This may take a while.",
    "Maria created group “Trip”",
    "Maria changed the subject to “Trip”",
    "Your security code with Maria changed. Tap to learn more.",
    "security code changed",
    "メッセージとグループ通話はエンドツーエンド暗号化されています。",
    "このメッセージは削除されました",
    "Nachrichten sind Ende-zu-Ende-verschlüsselt",
    "ENDE-ZU-ENDE-VERSCHLÜSSELT",
    "Los mensajes están cifrados de extremo a extremo",
    "Сообщения защищены сквозным шифрованием",
    "СКВОЗНЫМ ШИФРОВАНИЕМ",
    "це повідомлення",
    "plain text about the trip",
    "changed my mind",
    "CREATED",
    "end-to-end",
    "ſecurity code changed",
    "Maria changed thiſ group's icon",
    "created group",
    "CıFRADOS DE EXTREMO A EXTREMO",
    "\u212aeys changed",
    "İ changed",
    "С\u1c83квозным шифрованием",
    "",
]


@pytest.mark.parametrize("line", _EVENT_LINES)
def test_sender_event_prefilter_is_exact(line: str) -> None:
    assert whatsapp._sender_event(line) == (whatsapp._SENDER_EVENT.fullmatch(line) is not None)


def test_whole_file_records_unchanged_by_chunking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny chunk size (lines cut everywhere) reads the same records as the default."""
    path = tmp_path / "WhatsApp Chat with Maria.txt"
    gen_whatsapp(path, 300)
    data = path.read_bytes()
    path.write_bytes(data[:4000] + b"\xff" + data[4000:])
    want = list(read_source(spec("whatsapp", path)))
    monkeypatch.setattr(exports, "CHUNK_BYTES", 13)
    got = list(read_source(spec("whatsapp", path)))
    assert got == want
    assert sum(isinstance(r, QuarantineRecord) for r in got) == 1
