"""Reader benchmark: messages/s and peak RSS per chat-export reader on a generated file.

Usage (from the repository root)::

    python benchmarks/bench_readers.py                        # 200k messages per format
    python benchmarks/bench_readers.py --messages 200000,1000000
    python benchmarks/bench_readers.py --only whatsapp_android --messages 1000000

For each format (LINE PC, LINE mobile, WhatsApp Android, WhatsApp iOS, Telegram JSON, SMS
Backup & Restore XML, KakaoTalk Android) and each size, one file of N messages is generated
in a temporary folder (three senders, 1-3 line texts, one message a minute), then read in a
fresh subprocess by ``read_source`` (every record counted and dropped, none kept), so each
peak RSS is that reader's alone: flat across sizes means the reader streams. Figures: wall
and CPU seconds of the read, messages/s on both (on a shared machine the CPU rate is what
the reader does on one free core), peak RSS (VmHWM, MiB) of the child, file size.
Results: ``benchmarks/results/readers.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SENDERS = ["Maria Silva", "Yuki", "健太"]
T0 = dt.datetime(2021, 1, 1, 8, 0)


def _text(i: int) -> str:
    base = f"message number {i} about the trip and the weather 天気 {i % 97}"
    return base + ("\nsecond line" if i % 7 == 0 else "")


def gen_line_pc(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        day = None
        for i in range(n):
            t = T0 + dt.timedelta(minutes=i)
            if t.date() != day:
                day = t.date()
                fh.write(f"{day.year}.{day.month}.{day.day} Friday\n")
            fh.write(f"{t:%H:%M} {SENDERS[i % 3]} {_text(i)}\n")


def gen_line_txt(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[LINE] Chat history with Maria\nSaved on: 2024/01/01 10:00\n\n")
        day = None
        for i in range(n):
            t = T0 + dt.timedelta(minutes=i)
            if t.date() != day:
                day = t.date()
                fh.write(f"{day:%Y/%m/%d}(Fri)\n")
            text = _text(i)
            text = f'"{text}"' if "\n" in text else text
            fh.write(f"{t:%H:%M}\t{SENDERS[i % 3]}\t{text}\n")


def gen_whatsapp(path: Path, n: int, ios: bool = False) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            t = T0 + dt.timedelta(minutes=i)
            stamp = f"[{t:%d/%m/%Y, %H:%M:%S}] " if ios else f"{t:%d/%m/%Y, %H:%M} - "
            fh.write(f"{stamp}{SENDERS[i % 3]}: {_text(i)}\n")


def gen_telegram(path: Path, n: int) -> None:
    base = int(T0.replace(tzinfo=dt.UTC).timestamp())
    msgs = [
        {"id": i + 1, "type": "message", "date": "2021-01-01T08:00:00",
         "date_unixtime": str(base + 60 * i), "from": SENDERS[i % 3],
         "from_id": f"user{i % 3}", "text": _text(i)}
        for i in range(n)
    ]  # fmt: skip
    path.write_text(
        json.dumps({"name": "Maria", "type": "personal_chat", "id": 1, "messages": msgs}),
        encoding="utf-8",
    )


def gen_sms_backup(path: Path, n: int) -> None:
    from xml.sax.saxutils import quoteattr

    base = int(T0.replace(tzinfo=dt.UTC).timestamp() * 1000)
    with path.open("w", encoding="utf-8") as fh:
        fh.write(
            f"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>\n<smses count=\"{n}\">\n"
        )
        for i in range(n):
            who = ["+819012345678", "+14155550123", "+447700900123"][i % 3]
            fh.write(
                f'  <sms protocol="0" address="{who}" date="{base + 60_000 * i}" '
                f'type="{1 + i % 2}" subject="null" body={quoteattr(_text(i))} toa="null" '
                f'read="1" status="-1" readable_date="x" contact_name="{SENDERS[i % 3]}" />\n'
            )
        fh.write("</smses>\n")


def gen_kakaotalk(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write("민지 님과 카카오톡 대화\n저장한 날짜 : 2024-03-05 14:22:33\n\n")
        for i in range(n):
            t = T0 + dt.timedelta(minutes=i)
            ap, h = ("오후", t.hour - 12) if t.hour >= 12 else ("오전", t.hour)
            stamp = f"{t.year}년 {t.month}월 {t.day}일 {ap} {h or 12}:{t.minute:02d}"
            fh.write(f"{stamp}, {SENDERS[i % 3]} : {_text(i)}\n")


FORMATS = {
    "line_pc": ("line_pc", "[LINE] Maria.txt", gen_line_pc),
    "line_txt": ("line_txt", "Maria.txt", gen_line_txt),
    "whatsapp_android": ("whatsapp", "WhatsApp Chat with Maria.txt", gen_whatsapp),
    "whatsapp_ios": ("whatsapp", "_chat.txt", lambda p, n: gen_whatsapp(p, n, ios=True)),
    "telegram": ("telegram", "result.json", gen_telegram),
    "sms_backup": ("sms_backup", "sms-20240301.xml", gen_sms_backup),
    "kakaotalk": ("kakaotalk", "KakaoTalk_민지.txt", gen_kakaotalk),
}


def child(kind: str, path: str) -> None:
    from memory_pipeline.core.common.records import Message
    from memory_pipeline.core.ingest.sources import SourceSpec, read_source

    spec = SourceSpec("bench", kind, Path(path), "Asia/Tokyo", "Yuki")
    c0, t0 = time.process_time(), time.perf_counter()
    n_msg = n_q = 0
    for rec in read_source(spec):
        if isinstance(rec, Message):
            n_msg += 1
        else:
            n_q += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    from _common import peak_rss_mib  # here: the generators are imported by the tests too

    out = {"messages": n_msg, "quarantine": n_q, "wall": wall, "cpu": cpu, "rss": peak_rss_mib()}
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", default="200000", help="comma-separated sizes")
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--only", help="comma-separated format names (default: all)")
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    sizes = [int(x) for x in args.messages.split(",")]
    wanted = set(args.only.split(",")) if args.only else set(FORMATS)
    print(f"load before: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kind, fname, gen) in FORMATS.items():
            if name not in wanted:
                continue
            for n in sizes:
                path = Path(tmp) / f"{name}_{n}" / fname
                path.parent.mkdir()
                gen(path, n)
                out = subprocess.run(
                    [sys.executable, __file__, "--child", kind, str(path)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                r = json.loads(out.stdout)
                assert r["messages"] == n and r["quarantine"] == 0, (name, r)
                rows.append((name, r, path.stat().st_size / 2**20))
                path.unlink()
                print(name, n, r, file=sys.stderr)
    print(f"load after: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print("| format | messages | wall s | CPU s | messages/s wall | messages/s CPU "
          "| peak RSS MiB | file MiB |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r, size in rows:
        print(
            f"| {name} | {r['messages']:,} | {r['wall']:.2f} | {r['cpu']:.2f} | "
            f"{r['messages'] / r['wall']:,.0f} | {r['messages'] / r['cpu']:,.0f} | "
            f"{r['rss']:.0f} | {size:.1f} |"
        )


if __name__ == "__main__":
    main()
