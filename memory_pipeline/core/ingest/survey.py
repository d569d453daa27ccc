"""What a folder of exports holds, before any configuration exists (``memory-pipeline init``).

The exports are read exactly as a run will read them: each path as one ``kind = "auto"``
source through the reader step (``read_batches``) and the one ingest step
(``ingest_tables``: validation, de-duplication), with no date bound. From that come a row per
file (detected kind, messages, first and last date, participants, quarantined records by
reason) and the owner's proposal: the person present in every conversation.

Why "present in every conversation": an export is the exporter's own history, so the owner
is the one sender all of its conversations share. Some formats already mark the exporter
(iMessage's ``is_from_me``, an SMS backup's sent box, a ChatGPT user turn); their rows carry
``is_owner`` and a placeholder name, so those conversations agree with any owner and are left
out of the vote. A conversation's own contact (the reader's ``contact_id``, from the file's
chat name) is not the owner, which breaks the tie of a single one-to-one chat; a
conversation where one person alone speaks does not vote (the owner never wrote in it).

No Dagster, no configuration: plain values in, plain values out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from memory_pipeline.core.common.records import QuarantineRecord
from memory_pipeline.core.ingest.batches import read_batches
from memory_pipeline.core.ingest.columnar import ingest_tables
from memory_pipeline.core.ingest.sources import SourceSpec
from memory_pipeline.core.ingest.sources.auto import LINE_TXT
from memory_pipeline.core.ingest.sources.exports import DETECTORS
from memory_pipeline.core.ingest.sources.exports_names import Owners, safe_id

# every record is kept whatever its date: the survey is what sets start_date
NO_START = dt.date.min
# The owner the survey reads with: formats that know their exporter (iMessage, an SMS backup,
# ChatGPT) name the exporter's rows by the configured owner and mark them ``is_owner``; no
# sender of a real chat has this name, so only those rows are marked.
EXPORTER = "\u2063memory-pipeline-exporter\u2063"


@dataclass(frozen=True)
class FileSurvey:
    """One export file: what was read from it, as the run will read it."""

    source: str  # the source (one per path given)
    file: str  # relative to the source path (zip members as zip/member)
    kind: str | None  # the detected format; None when no reader recognised it
    messages: int  # stored (a duplicate of an earlier file's message is quarantined)
    first: dt.date | None  # of every record read from it (duplicates of another file too)
    last: dt.date | None
    participants: tuple[str, ...]  # senders, most messages first (not the marked exporter)
    quarantined: tuple[tuple[str, int], ...]  # (reason, records), most first
    exporter_marked: bool = False  # the format marks the exporter's own messages


@dataclass(frozen=True)
class Candidate:
    """A sender who may be the owner: in how many conversations, with how many messages."""

    name: str
    conversations: int
    messages: int


@dataclass(frozen=True)
class OwnerProposal:
    """The proposed owner (None when the data names nobody), the candidates ranked, how many
    conversations voted, and those the proposed owner is absent from."""

    owner: str | None
    candidates: tuple[Candidate, ...]
    conversations: int
    tied: tuple[str, ...] = ()  # several people are in every conversation
    missing: tuple[str, ...] = ()  # conversations without the proposed owner

    @property
    def in_every(self) -> bool:
        return self.owner is not None and not self.missing and not self.tied


@dataclass
class Survey:
    """The files, and the messages and quarantine rows the run would store."""

    files: list[FileSurvey]
    messages: pa.Table
    quarantine: list[QuarantineRecord] = field(default_factory=list)

    @property
    def first(self) -> dt.date | None:
        """The earliest stored message's local date."""
        days = self.messages.column("local_date")
        return pc.min(days).as_py() if len(days) else None

    @property
    def last(self) -> dt.date | None:
        days = self.messages.column("local_date")
        return pc.max(days).as_py() if len(days) else None


def survey(specs: Sequence[SourceSpec]) -> Survey:
    """Read every source as a run would and describe it file by file.

    A source that cannot be read at all (an empty folder, no readable file) raises the
    reader's ``SourceError``, one line naming the path."""
    batches = [read_batches(dataclasses.replace(spec, owner=EXPORTER)) for spec in specs]
    result = ingest_tables(batches, start_date=NO_START)
    candidates = pa.concat_tables([b.messages.select(_FILE_COLUMNS) for b in batches])
    files = _files(candidates, result.messages, result.quarantine)
    return Survey(files, result.messages, result.quarantine)


def _kind(text: str) -> str | None:
    """The kind ``auto`` wrote in front of a source_ref or a quarantine detail."""
    kind = text.partition(":")[0]
    return kind if kind in DETECTORS or kind == LINE_TXT else None


_FILE_COLUMNS = ["source", "source_file", "source_ref", "local_ts", "sender", "type", "is_owner"]


def _files(
    candidates: pa.Table, stored: pa.Table, quarantine: list[QuarantineRecord]
) -> list[FileSurvey]:
    """One row per file: its kind, dates and participants from every record the reader
    gave (a re-export's duplicates included), its messages as stored, its quarantine."""
    cols = {c: candidates.column(c).to_pylist() for c in _FILE_COLUMNS}
    per: dict[tuple[str, str], dict] = {}

    def entry(source: str, file: str) -> dict:
        return per.setdefault(
            (source, file),
            {"kind": None, "n": 0, "days": [], "senders": Counter(), "q": Counter()}
            | {"exporter": False},
        )

    for i, file in enumerate(cols["source_file"]):
        e = entry(cols["source"][i], file)
        e["kind"] = e["kind"] or _kind(cols["source_ref"][i])
        if cols["local_ts"][i] is not None:
            e["days"].append(cols["local_ts"][i].date())
        if cols["is_owner"][i]:
            e["exporter"] = True
        elif cols["sender"][i] and cols["type"][i] != "system":
            e["senders"][cols["sender"][i]] += 1
    kept = Counter(
        zip(*(stored.column(c).to_pylist() for c in ("source", "source_file")), strict=True)
    )
    for key, n in kept.items():
        entry(*key)["n"] = n
    for q in quarantine:
        e = entry(q.source, q.source_file or "")
        e["q"][q.reason] += 1
        e["kind"] = e["kind"] or _kind(q.detail)
    out = []
    for (source, file), e in sorted(per.items()):
        senders: Counter = e["senders"]
        out.append(
            FileSurvey(
                source=source,
                file=file,
                kind=e["kind"],
                messages=e["n"],
                first=min(e["days"]) if e["days"] else None,
                last=max(e["days"]) if e["days"] else None,
                participants=tuple(sorted(senders, key=lambda s: (-senders[s], s))),
                quarantined=tuple(sorted(e["q"].items(), key=lambda kv: (-kv[1], kv[0]))),
                exporter_marked=e["exporter"],
            )
        )
    return out


def _conversations(messages: pa.Table) -> dict[tuple[str, str], dict]:
    """(source, conversation) -> its senders' message counts, contact and format mark."""
    cols = {
        c: messages.column(c).to_pylist()
        for c in ("source", "conversation_id", "contact_id", "sender", "is_owner", "type")
    }
    convs: dict[tuple[str, str], dict] = {}
    for i, conv in enumerate(cols["conversation_id"]):
        c = convs.setdefault(
            (cols["source"][i], conv),
            {"senders": Counter(), "contact": cols["contact_id"][i], "marked": False},
        )
        if cols["is_owner"][i]:
            c["marked"] = True  # the format names the exporter: any owner name fits
        elif cols["sender"][i] and cols["type"][i] != "system":
            c["senders"][cols["sender"][i]] += 1
    return convs


def propose_owner(messages: pa.Table) -> OwnerProposal:
    """The participant present in every conversation, with the candidates ranked by the
    conversations they are in, then by messages (see the module docstring)."""
    convs = _conversations(messages)
    # a conversation where one person alone speaks (a shop's texts, an unanswered chat) says
    # nothing about who the owner is: the owner never wrote in it
    voting = {k: c for k, c in convs.items() if not c["marked"] and len(c["senders"]) > 1}
    in_convs: Counter = Counter()
    sent: Counter = Counter()
    contacts = set()
    for c in voting.values():
        in_convs.update(c["senders"].keys())
        sent.update(c["senders"])
        contacts.add(safe_id(c["contact"] or ""))
    ranked = sorted(in_convs, key=lambda s: (-in_convs[s], -sent[s], s))
    candidates = tuple(Candidate(s, in_convs[s], sent[s]) for s in ranked)
    if not voting:  # no conversation names people, or the format names the owner everywhere
        return OwnerProposal(None, candidates, 0)
    every = [s for s in ranked if in_convs[s] == len(voting)]
    # a conversation's own contact is not its owner (a single chat: both are in "every" one)
    not_contact = [s for s in every if safe_id(s) not in contacts] or every
    if len(not_contact) > 1:
        return OwnerProposal(not_contact[0], candidates, len(voting), tied=tuple(not_contact))
    owner = not_contact[0] if not_contact else ranked[0]
    missing = tuple(sorted(k[1] for k, c in voting.items() if owner not in c["senders"]))
    return OwnerProposal(owner, candidates, len(voting), missing=missing)


def owner_found(messages: pa.Table, owner: str, aliases: Sequence[str] = ()) -> int:
    """In how many conversations that name their people ``owner`` (or an alias) sends, by
    the readers' own rule (case-insensitive names, phone numbers by their digits:
    ``Owners``). Conversations whose format marks the exporter are not counted: any name
    fits them."""
    spec = SourceSpec("survey", "auto", Path("."), "UTC", owner, {"owner_aliases": list(aliases)})
    me = Owners(spec)
    return sum(
        1
        for c in _conversations(messages).values()
        if not c["marked"] and any(s in me for s in c["senders"])
    )


def owner_missing(messages: pa.Table, owner: str, aliases: Sequence[str] = ()) -> list[str]:
    """The voting conversations (two or more people, no format mark) in which neither
    ``owner`` nor an alias sends: where the owner may appear under yet another name."""
    spec = SourceSpec("survey", "auto", Path("."), "UTC", owner, {"owner_aliases": list(aliases)})
    me = Owners(spec)
    return sorted(
        conv
        for (_, conv), c in _conversations(messages).items()
        if not c["marked"] and len(c["senders"]) > 1 and not any(s in me for s in c["senders"])
    )
