"""A synthetic life: years of chats with several people over several apps, as real export files.

Writes the files a person would drop into their exports folder, in five formats the ``auto``
source recognises by content (docs/sources.md):

- WhatsApp (Android ``.txt``: ``dd/mm/yyyy, HH:MM - Name: text``), one file per contact;
- LINE (``.txt`` "save chat history": a header, ``YYYY/MM/DD(Ddd)`` date lines, tab-separated
  ``HH:MM<TAB>Name<TAB>text``);
- Telegram Desktop (``result.json`` of one personal chat, ``date_unixtime`` and ``from``);
- SMS Backup & Restore (``.xml``, ``type`` 1 received / 2 sent, epoch milliseconds);
- Discord (DiscordChatExporter ``.json`` of a DM channel, ISO timestamps with an offset).

The owner is ``Alex`` everywhere (the SMS export marks the owner's messages by ``type="2"``).
The days are like a life's: most calendar days are silent, some carry one exchange, a few are
bursts of hundreds of messages; sessions cross midnight now and then. Text is English, varied
(templates over a vocabulary of plans, places, people and things). Everything is
deterministic from ``seed``. Times are UTC (the configuration the benchmark writes uses
``timezone = "UTC"``), so a message's local date is the date written here.

Usage::

    python benchmarks/life_corpus.py OUT --messages 100000 --years 10 --apps 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

OWNER = "Alex"
CONTACTS = ["Sam Carter", "Priya Nair", "Jordan Lee", "Mei Chen", "Luis Ortega", "Hannah Berg"]
PHONES = {c: f"+4477009{i:05d}" for i, c in enumerate(CONTACTS)}
APPS = ("whatsapp", "line", "telegram", "sms", "discord")

_PLACES = ["Lisbon", "the lake house", "Kyoto", "the office", "Grandma's", "the climbing gym",
           "Porto", "the farmers market", "the dentist", "Edinburgh", "the new ramen place"]
_THINGS = ["train tickets", "the rental car", "a birthday cake", "the concert tickets",
           "new running shoes", "the passport", "a dog sitter", "the wifi router", "paint samples",
           "the tax forms", "a tent", "the wedding gift"]
_TIMES = ["tomorrow", "on Saturday", "next week", "tonight", "after work", "in March",
          "on the 14th", "this weekend", "before noon", "on Friday evening"]
_FEELINGS = ["exhausted", "really happy", "a bit nervous", "so relieved", "excited", "annoyed",
             "homesick", "proud of you", "ready for a holiday"]
_TEMPLATES = [
    "Did you book {thing} for {time}?",
    "I'm at {place}, see you {time}",
    "Can we move dinner to {time}? I'm {feeling}",
    "Remember {thing}! We need it {time}",
    "How was {place}?",
    "{place} was amazing, we should go back {time}",
    "I found {thing} cheaper online, ordering it {time}",
    "Running late, stuck near {place}",
    "Call me {time} about {thing}",
    "Honestly I'm {feeling} today",
    "Who is picking up {thing}?",
    "Let's meet at {place} {time}",
    "ok",
    "Haha yes",
    "Thanks!! That means a lot",
    "The meeting about {thing} got cancelled, I'm {feeling}",
    "My flight to {place} leaves {time}",
    "Did the doctor call back about the results?",
    "I'll bring {thing} to {place}",
    "Happy birthday!! Dinner at {place} {time}?",
]  # fmt: skip


@dataclass(frozen=True)
class Msg:
    """One message of the life: when, in which conversation, who, what."""

    ts: dt.datetime  # UTC
    app: str
    contact: str
    from_owner: bool
    text: str


def _one(rng: random.Random) -> str:
    return rng.choice(_TEMPLATES).format(
        thing=rng.choice(_THINGS),
        place=rng.choice(_PLACES),
        time=rng.choice(_TIMES),
        feeling=rng.choice(_FEELINGS),
    )


def _text(rng: random.Random) -> str:
    """One or two sentences; like real chat, nearly every message differs from the others
    (so no cache of encoded texts makes the benchmark cheaper than a real history)."""
    if rng.random() < 0.6:
        return _one(rng)
    return f"{_one(rng)} {_one(rng)}"


def life(
    messages: int,
    first: dt.date,
    last: dt.date,
    apps: Sequence[str] = APPS,
    seed: int = 0,
    active_share: float = 0.5,
) -> list[Msg]:
    """``messages`` messages between ``first`` and ``last``: on about ``active_share`` of the
    days (at least one), heavy-tailed per day (lognormal), in sessions of a few minutes to
    hours, some running past midnight; each day's talk with one or two of the contacts, each
    contact on one or two of the apps."""
    rng = random.Random(seed)
    span = (last - first).days + 1
    n_days = max(1, min(span, messages, round(span * active_share)))
    days = sorted(rng.sample(range(span), n_days))
    weights = [rng.lognormvariate(0, 1.2) for _ in days]
    total = sum(weights)
    counts = [max(1, int(messages * w / total)) for w in weights]
    # exactly ``messages``: trim or pad the busiest days
    diff = messages - sum(counts)
    order = sorted(range(len(days)), key=lambda i: -counts[i])
    i = 0
    while diff:
        j = order[i % len(order)]
        if diff > 0:
            counts[j] += 1
            diff -= 1
        elif counts[j] > 1:
            counts[j] -= 1
            diff += 1
        i += 1
    homes = {c: [apps[(k + h) % len(apps)] for h in range(1 + k % 2)] for k, c in
             enumerate(CONTACTS)}  # fmt: skip
    out: list[Msg] = []
    for offset, count in zip(days, counts, strict=True):
        day = first + dt.timedelta(days=offset)
        who = rng.sample(CONTACTS, 1 if count < 20 else 2)
        left = count
        while left:
            contact = rng.choice(who)
            app = rng.choice(homes[contact])
            size = min(left, max(1, int(rng.expovariate(1 / 25))))
            # a session starts in the day; late ones run past midnight
            start = dt.datetime.combine(day, dt.time()) + dt.timedelta(
                minutes=rng.randrange(7 * 60, 23 * 60 + 50)
            )
            t = start
            for _ in range(size):
                t += dt.timedelta(seconds=rng.randrange(5, 240))
                out.append(Msg(t, app, contact, rng.random() < 0.45, _text(rng)))
            left -= size
    # a session may have crossed into a day after ``last``: keep the life inside its dates
    end = dt.datetime.combine(last, dt.time(23, 59, 59))
    out = [m if m.ts <= end else Msg(end, m.app, m.contact, m.from_owner, m.text) for m in out]
    out.sort(key=lambda m: (m.app, m.contact, m.ts))
    return out


def _sender(m: Msg) -> str:
    return OWNER if m.from_owner else m.contact


def _write_whatsapp(folder: Path, contact: str, msgs: list[Msg]) -> Path:
    path = folder / f"WhatsApp Chat with {contact}.txt"
    with path.open("w", encoding="utf-8") as fh:
        for m in msgs:
            fh.write(f"{m.ts:%d/%m/%Y, %H:%M} - {_sender(m)}: {m.text}\n")
    return path


def _write_line(folder: Path, contact: str, msgs: list[Msg]) -> Path:
    path = folder / f"[LINE] Chat with {contact}.txt"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(f"[LINE] Chat history with {contact}\nSaved on: 2026/12/01 10:00\n\n")
        day = None
        for m in msgs:
            if m.ts.date() != day:
                day = m.ts.date()
                fh.write(f"{day:%Y/%m/%d}({day:%a})\n")
            fh.write(f"{m.ts:%H:%M}\t{_sender(m)}\t{m.text}\n")
    return path


def _epoch(ts: dt.datetime) -> int:
    return int(ts.replace(tzinfo=dt.UTC).timestamp())


def _write_telegram(folder: Path, contact: str, msgs: list[Msg]) -> Path:
    sub = folder / f"Telegram {contact}"
    sub.mkdir(exist_ok=True)
    rows = [
        {"id": i + 1, "type": "message", "date": f"{m.ts:%Y-%m-%dT%H:%M:%S}",
         "date_unixtime": str(_epoch(m.ts)), "from": _sender(m),
         "from_id": "user1" if m.from_owner else "user2", "text": m.text}
        for i, m in enumerate(msgs)
    ]  # fmt: skip
    path = sub / "result.json"
    body = {"name": contact, "type": "personal_chat", "id": 1000 + CONTACTS.index(contact)}
    path.write_text(json.dumps({**body, "messages": rows}), encoding="utf-8")
    return path


def _write_sms(folder: Path, msgs: list[Msg]) -> Path:
    path = folder / "sms-20261201000000.xml"
    with path.open("w", encoding="utf-8") as fh:
        fh.write("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>\n")
        fh.write(f'<smses count="{len(msgs)}">\n')
        for m in msgs:
            fh.write(
                f'  <sms protocol="0" address="{PHONES[m.contact]}" date="{_epoch(m.ts) * 1000}" '
                f'type="{2 if m.from_owner else 1}" subject="null" body={quoteattr(m.text)} '
                f'toa="null" read="1" status="-1" readable_date="x" '
                f'contact_name="{m.contact}" />\n'
            )
        fh.write("</smses>\n")
    return path


def _write_discord(folder: Path, contact: str, msgs: list[Msg]) -> Path:
    cid = str(900_000_000_000 + CONTACTS.index(contact))
    rows = [
        {"id": str(10**15 + i), "type": "Default",
         "timestamp": f"{m.ts:%Y-%m-%dT%H:%M:%S}+00:00", "content": m.text,
         "author": {"id": "1" if m.from_owner else "2", "name": _sender(m).lower().split()[0],
                    "nickname": _sender(m)},
         "attachments": [], "embeds": [], "stickers": []}
        for i, m in enumerate(msgs)
    ]  # fmt: skip
    body = {
        "guild": {"id": "0", "name": "Direct Messages"},
        "channel": {"id": cid, "type": "DirectTextChat", "category": "Private", "name": contact},
        "messages": rows,
    }
    path = folder / f"Direct Messages - {contact} [{cid}].json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def write_exports(folder: Path, msgs: Sequence[Msg]) -> list[Path]:
    """The export files of ``msgs`` under ``folder``: one per app and contact (SMS: one)."""
    folder.mkdir(parents=True, exist_ok=True)
    by: dict[tuple[str, str], list[Msg]] = {}
    for m in msgs:
        by.setdefault((m.app, m.contact), []).append(m)
    written = []
    sms = [m for m in msgs if m.app == "sms"]
    if sms:
        written.append(_write_sms(folder, sorted(sms, key=lambda m: m.ts)))
    writers = {"whatsapp": _write_whatsapp, "line": _write_line, "telegram": _write_telegram,
               "discord": _write_discord}  # fmt: skip
    for (app, contact), part in sorted(by.items()):
        if app in writers:
            written.append(writers[app](folder, contact, part))
    return written


def write_config(root: Path, exports: Path, output: Path) -> Path:
    """A personal configuration with open dates and one ``auto`` source on ``exports``."""
    path = root / "memory_pipeline.toml"
    path.write_text(
        f"""[pipeline]
owner = "{OWNER}"
timezone = "UTC"
output_dir = "{output}"

[[sources]]
name = "my_chats"
kind = "auto"
path = "{exports}"
""",
        encoding="utf-8",
    )
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--years", type=float, default=10)
    ap.add_argument("--apps", type=int, default=5, choices=range(1, len(APPS) + 1))
    ap.add_argument("--last", type=dt.date.fromisoformat, default=dt.date.today() - dt.timedelta(2))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    first = args.last - dt.timedelta(days=round(365.25 * args.years) - 1)
    msgs = life(args.messages, first, args.last, APPS[: args.apps], args.seed)
    files = write_exports(args.out / "exports", msgs)
    days = len({m.ts.date() for m in msgs})
    print(f"{len(msgs)} messages on {days} days {first}..{args.last} in {len(files)} files")


if __name__ == "__main__":
    main()
